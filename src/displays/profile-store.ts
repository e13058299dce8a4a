/**
 * Signal profiles and their published revisions in the store (docs/displays.md). Every change is one conditional statement or one transaction, so
 * two admins racing on the same draftRevision cannot both win.
 *
 * Decided here:
 * - A draft is saved only when it compiles: an invalid draft is refused with
 *   400 MQTT_DISPLAY_REQUEST_INVALID at save time, so publish cannot fail on
 *   it later. Patterns no binding references are not compiled, so a work in
 *   progress can sit in the library.
 * - Publishing does not change draftRevision (it changes no draft). Publishing
 *   a draft revision that is already published returns that revision, so a
 *   retried publish never makes a duplicate.
 */
import { randomUUID } from 'node:crypto'
import { ServiceError } from '../../protocol/errors.js'
import type { SignalProfileDetail, SignalProfileRevision, SignalProfileSummary } from '../../protocol/schemas/signal-profiles.js'
import { compileDraft, compilerVersion, type CapabilityRequirements } from '../../protocol/signal-profile/compiler.js'
import { defaultDraft, type Draft } from '../../protocol/signal-profile/draft.js'
import type { Sql } from 'postgres'

interface ProfileRow {
  id: string
  name: string
  draft: Draft
  draft_revision: number
  archived: boolean
  updated_at: Date
  latest_revision: number | null
  latest_revision_id: string | null
}

interface RevisionRow {
  id: string
  profile_id: string
  revision: number
  authoring_snapshot: Draft
  compiler_version: string
  byte_length: number
  sha256: string
  data: string
  capability_requirements: CapabilityRequirements
  published_by: string
  published_at: Date
}

const summary = (row: ProfileRow): SignalProfileSummary => ({
  id: row.id,
  name: row.name,
  draftRevision: row.draft_revision,
  latestPublishedRevision: row.latest_revision,
  latestPublishedRevisionId: row.latest_revision_id,
  archived: row.archived,
  updatedAt: row.updated_at.toISOString(),
})

const detail = (row: ProfileRow): SignalProfileDetail => ({ ...summary(row), draft: row.draft })

export const revisionView = (row: RevisionRow): SignalProfileRevision => ({
  id: row.id,
  profileId: row.profile_id,
  revision: row.revision,
  authoringSnapshot: row.authoring_snapshot,
  compilerVersion: row.compiler_version,
  byteLength: row.byte_length,
  sha256: row.sha256,
  data: row.data,
  capabilityRequirements: row.capability_requirements,
  publishedBy: row.published_by,
  publishedAt: row.published_at.toISOString(),
})

const revisionColumns = 'id, profile_id, revision, authoring_snapshot, compiler_version, byte_length, sha256, data, capability_requirements, published_by, published_at'

/** Who published: a person's user id, or `api_key:<id>`. */
export type Publisher = string

export class ProfileStore {
  readonly #sql: Sql

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  async list(organizationId: string): Promise<SignalProfileSummary[]> {
    const rows = await this.#select(this.#sql`p.organization_id = ${organizationId}`)
    return rows.map(summary)
  }

  async get(organizationId: string, id: string): Promise<SignalProfileDetail> {
    return detail(await this.#one(organizationId, id))
  }

  async create(organizationId: string, name: string): Promise<SignalProfileDetail> {
    const id = randomUUID()
    const draft = defaultDraft(name)
    await this.#sql`
      insert into signal_profiles (id, organization_id, name, draft)
      values (${id}, ${organizationId}, ${name}, ${JSON.stringify(draft)}::text::jsonb)`
    return this.get(organizationId, id)
  }

  async patch(organizationId: string, id: string, change: { name?: string | undefined; archived?: boolean | undefined; expectedRevision: number }): Promise<SignalProfileDetail> {
    if (change.name === undefined && change.archived === undefined) {
      throw new ServiceError('MQTT_DISPLAY_REQUEST_INVALID', 'body must change name or archived (or both) besides expectedRevision')
    }
    const sql = this.#sql
    const updated = await sql`
      update signal_profiles set
        name = coalesce(${change.name ?? null}::text, name),
        archived = coalesce(${change.archived ?? null}::boolean, archived),
        draft_revision = draft_revision + 1,
        updated_at = ${new Date(this.#now())}
      where id = ${id} and organization_id = ${organizationId} and draft_revision = ${change.expectedRevision}
      returning id`
    if (updated.length === 0) await this.#explainRefusal(organizationId, id, change.expectedRevision, false)
    return this.get(organizationId, id)
  }

  async saveDraft(organizationId: string, id: string, draft: Draft, expectedRevision: number): Promise<SignalProfileDetail> {
    // Compiles or throws 400 naming the field: only drafts that publish are kept.
    compileDraft(draft)
    const updated = await this.#sql`
      update signal_profiles set draft = ${JSON.stringify(draft)}::text::jsonb, draft_revision = draft_revision + 1, updated_at = ${new Date(this.#now())}
      where id = ${id} and organization_id = ${organizationId} and draft_revision = ${expectedRevision} and not archived
      returning id`
    if (updated.length === 0) await this.#explainRefusal(organizationId, id, expectedRevision, true)
    return this.get(organizationId, id)
  }

  async publish(organizationId: string, id: string, expectedRevision: number, publishedBy: Publisher): Promise<SignalProfileRevision> {
    return this.#sql.begin(async (tx) => {
      // The row lock orders concurrent publishes of one profile: revision numbers never collide.
      const [profile] = await tx<{ draft: Draft; draft_revision: number; archived: boolean }[]>`
        select draft, draft_revision, archived from signal_profiles
        where id = ${id} and organization_id = ${organizationId} for update`
      if (profile === undefined) throw notFound()
      if (profile.draft_revision !== expectedRevision) throw revisionConflict(expectedRevision, profile.draft_revision)
      if (profile.archived) throw archived()
      const [already] = await tx<RevisionRow[]>`
        select ${tx.unsafe(revisionColumns)} from signal_profile_revisions
        where profile_id = ${id} and draft_revision = ${profile.draft_revision}`
      if (already !== undefined) return revisionView(already)
      const compiled = compileDraft(profile.draft)
      const [row] = await tx<RevisionRow[]>`
        insert into signal_profile_revisions
          (id, profile_id, organization_id, revision, draft_revision, authoring_snapshot, compiler_version, byte_length, sha256, data, capability_requirements, published_by)
        values (
          ${randomUUID()}, ${id}, ${organizationId},
          (select coalesce(max(revision), 0) + 1 from signal_profile_revisions where profile_id = ${id}),
          ${profile.draft_revision}, ${JSON.stringify(profile.draft)}::text::jsonb, ${compilerVersion}, ${compiled.byteLength},
          ${compiled.sha256}, ${compiled.base64}, ${JSON.stringify(compiled.requirements)}::text::jsonb, ${publishedBy})
        returning ${tx.unsafe(revisionColumns)}`
      return revisionView(row!)
    })
  }

  async revisions(organizationId: string, id: string): Promise<SignalProfileRevision[]> {
    await this.#one(organizationId, id)
    const rows = await this.#sql<RevisionRow[]>`
      select ${this.#sql.unsafe(revisionColumns)} from signal_profile_revisions
      where profile_id = ${id} and organization_id = ${organizationId} order by revision desc`
    return rows.map(revisionView)
  }

  async revision(organizationId: string, revisionId: string): Promise<SignalProfileRevision> {
    const [row] = await this.#sql<RevisionRow[]>`
      select ${this.#sql.unsafe(revisionColumns)} from signal_profile_revisions
      where id = ${revisionId} and organization_id = ${organizationId}`
    if (row === undefined) throw new ServiceError('signal_profile_revision_not_found', 'no published revision with that id in this organization')
    return revisionView(row)
  }

  async #explainRefusal(organizationId: string, id: string, expected: number, draftChange: boolean): Promise<never> {
    const [row] = await this.#sql<{ draft_revision: number; archived: boolean }[]>`
      select draft_revision, archived from signal_profiles where id = ${id} and organization_id = ${organizationId}`
    if (row === undefined) throw notFound()
    if (row.draft_revision !== expected) throw revisionConflict(expected, row.draft_revision)
    if (draftChange && row.archived) throw archived()
    throw new Error('signal profile update refused for no known reason')
  }

  async #one(organizationId: string, id: string): Promise<ProfileRow> {
    const [row] = await this.#select(this.#sql`p.organization_id = ${organizationId} and p.id = ${id}`)
    if (row === undefined) throw notFound()
    return row
  }

  #select(where: ReturnType<Sql>): Promise<ProfileRow[]> {
    const sql = this.#sql
    return sql<ProfileRow[]>`
      select p.id, p.name, p.draft, p.draft_revision, p.archived, p.updated_at, r.revision as latest_revision, r.id as latest_revision_id
      from signal_profiles p
      left join lateral (
        select id, revision from signal_profile_revisions where profile_id = p.id order by revision desc limit 1
      ) r on true
      where ${where}
      order by p.created_at, p.id`
  }
}

const notFound = () => new ServiceError('signal_profile_not_found', 'no signal profile with that id in this organization')
const archived = () => new ServiceError('signal_profile_archived', 'the profile is archived; unarchive it (PATCH {archived: false}) first')
const revisionConflict = (expected: number, current: number) =>
  new ServiceError('signal_profile_revision_conflict', `expectedRevision ${expected} is not the current draftRevision ${current}; read the profile again`, {
    extra: { draftRevision: current },
  })
