/**
 * Status displays in the store (docs/displays.md): registration, pixels,
 * bindings and credentials, advertised capabilities, and the activation
 * target that the display actors persist (actors/display-persistence.ts).
 *
 * Every target write is conditional on the binding epoch and the generation
 * the writer read, in the statement itself: a writer that lost a race
 * changes nothing.
 */
import type { Fence } from '../../actors/shard-directory.js'
import { checkFence } from '../storage/fencing.js'
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import type { Sql, TransactionSql } from 'postgres'
import { baseTopic, configTopic, credentialTopic, feedTopic, type DisplayCredential, type SignalProfileCapability } from '../../protocol/display-mqtt.js'
import { ServiceError } from '../../protocol/errors.js'
import type { DesiredActivation, DisplayView } from '../../protocol/schemas/signal-profiles.js'
import type { CapabilityRequirements } from '../../protocol/signal-profile/compiler.js'
import { storedStatus, type ActivationProgress, type AssignRequest, type DisplayPersistence, type ReceiptSession, type StoredActivation } from '../../actors/display-persistence.js'
import type { ActivationIdentity } from '../../machines/display-activation.js'
import { perTurn } from '../async/per-turn.js'
import { sha256 } from '../secrets/digest.js'

interface DisplayRow {
  id: string
  organization_id: string
  name: string
  pixels: string[]
  binding_epoch: number
  capabilities: SignalProfileCapability | null
  capabilities_at: Date | null
  activation_generation: number
  desired_revision_id: string | null
  desired_sha256: string | null
  applied: ActivationIdentity | null
  error_code: string | null
  publish_error: string | null
  publish_attempts: number
  receipt_session: ReceiptSession | null
  activation_updated_at: Date | null
  created_at: Date
  updated_at: Date
  credential_id: string
  username: string
  payload_data: string | null
  payload_length: number | null
}

/** The columns of a display with its current credential and the desired revision's bytes. */
const selectDisplay = `
  select d.*, c.id as credential_id, c.username, r.data as payload_data, r.byte_length as payload_length
  from displays d
  join display_credentials c on c.display_id = d.id and c.binding_epoch = d.binding_epoch and c.revoked_at is null
  left join signal_profile_revisions r on r.id = d.desired_revision_id`

export interface DisplayCredentialIdentity {
  organizationId: string
  displayId: string
  bindingEpoch: number
  credentialId: string
}

/** Makes the broker accept a credential the store is about to commit. */
/** A display as the live feed shows it. */
export type DisplayLive = DisplayView & { target: DesiredActivation | null }

export type GrantCredential = (credential: DisplayCredential) => Promise<void>

export const displayUsername = (credentialId: string): string => `display-${credentialId}`

function newCredential(): { id: string; username: string; password: string; hash: Buffer } {
  const id = randomUUID()
  const password = randomBytes(32).toString('base64url')
  return { id, username: displayUsername(id), password, hash: sha256(password) }
}

/** The columns a stored activation is made of. */
type ActivationRow = Pick<
  DisplayRow,
  | 'id' | 'organization_id' | 'binding_epoch' | 'activation_generation' | 'desired_revision_id' | 'desired_sha256' | 'applied' | 'error_code'
  | 'publish_error' | 'publish_attempts' | 'receipt_session' | 'activation_updated_at' | 'updated_at' | 'credential_id' | 'payload_data' | 'payload_length'
>

function stored(row: ActivationRow): StoredActivation {
  const desired =
    row.desired_revision_id === null || row.desired_sha256 === null
      ? null
      : { activation_generation: row.activation_generation, profile_revision_id: row.desired_revision_id, sha256: row.desired_sha256 }
  return {
    displayId: row.id,
    organizationId: row.organization_id,
    bindingEpoch: row.binding_epoch,
    credentialId: row.credential_id,
    generation: row.activation_generation,
    desired,
    payload: row.payload_data === null || row.payload_length === null ? null : { data: row.payload_data, byteLength: row.payload_length },
    applied: row.applied,
    errorCode: row.error_code,
    publishError: row.publish_error,
    publishAttempts: row.publish_attempts,
    session: row.receipt_session,
    updatedAt: row.activation_updated_at ?? row.updated_at,
  }
}

/** The target as the API shows it (DesiredSignalProfileActivation); errored = publish_failed. */
export function activationView(s: StoredActivation): DesiredActivation {
  if (s.desired === null) throw new ServiceError('signal_profile_target_not_found', 'nothing is assigned to this display in its current binding')
  const errorCode = s.errorCode ?? (s.publishError !== null ? 'publish_failed' : null)
  return {
    displayId: s.displayId,
    bindingEpoch: s.bindingEpoch,
    desired: s.desired,
    applied: s.applied,
    status: storedStatus(s) as DesiredActivation['status'],
    errorCode,
    updatedAt: s.updatedAt.toISOString(),
  }
}

function view(row: DisplayRow): DisplayView {
  const address = { organizationId: row.organization_id, displayId: row.id, bindingEpoch: row.binding_epoch }
  return {
    id: row.id,
    name: row.name,
    pixels: row.pixels,
    bindingEpoch: row.binding_epoch,
    credentialId: row.credential_id,
    username: row.username,
    capabilities: row.capabilities,
    capabilitiesReportedAt: row.capabilities_at?.toISOString() ?? null,
    activationGeneration: row.activation_generation,
    topics: {
      base: baseTopic(address),
      profileConfig: configTopic(address),
      statusFeed: feedTopic(address),
      receipts: credentialTopic(address, row.credential_id, 'receipt'),
      capabilities: credentialTopic(address, row.credential_id, 'capabilities'),
      health: credentialTopic(address, row.credential_id, 'health'),
      resync: credentialTopic(address, row.credential_id, 'resync'),
    },
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }
}

/** docs/displays.md: what the revision needs against what the controller advertised. */
export function capabilityShortfall(requirements: CapabilityRequirements, capability: SignalProfileCapability): string | undefined {
  if (capability.format_version !== 1) return `the display speaks format_version ${capability.format_version}, the revision is format 1`
  if (requirements.decodedBytes > capability.max_decoded_bytes) return `the revision is ${requirements.decodedBytes} bytes, the display takes at most ${capability.max_decoded_bytes}`
  if (requirements.maxPhases > capability.max_phases) return `the revision has a pattern of ${requirements.maxPhases} phases, the display runs at most ${capability.max_phases}`
  if (requirements.usesWhite && !capability.supports_white_output) return 'the revision uses white output, which the display does not support'
  if (requirements.usesCct && !capability.supports_cct) return 'the revision uses CCT, which the display does not support'
  return undefined
}

/** A write waiting for its turn's statement (src/async/per-turn.ts): settled with its own row's outcome. */
interface Waiting<T> {
  resolve: (value: T) => void
  reject: (error: unknown) => void
}

interface ProgressWrite extends Waiting<Date | undefined> {
  displayId: string
  bindingEpoch: number
  generation: number
  progress: ActivationProgress
}

/** An assignment whose checks pass on what this node remembers, waiting for its turn's statement. */
interface AssignWrite extends Waiting<StoredActivation | undefined> {
  displayId: string
  request: AssignRequest
  shard: number
  token: number
  /** The capability the checks passed on, as JSON text the statement requires to be still stored. */
  capability: string
}

interface RevisionFacts {
  organizationId: string
  requirements: CapabilityRequirements
}

/** A display's advertised capability as last read: the value the checks take, the JSON text the statement compares. */
interface KnownCapability {
  value: SignalProfileCapability
  json: string
}

/** At most this many entries in each of the assignment's memories; a full one is emptied (it only saves work). */
const rememberedLimit = 10_000

export class DisplayStore implements DisplayPersistence {
  readonly #sql: Sql
  /**
   * What an assignment checks, as this node last read it: a published revision's facts (never
   * updated) and each display's advertised capability. With both at hand and the
   * checks passing on them, an assignment is one conditional UPDATE that requires the stored
   * capability to equal the one checked; otherwise it runs the transaction that reads and
   * classifies (bench/displays: five statements per assignment were most of the driver's work).
   */
  readonly #revisions = new Map<string, RevisionFacts>()
  readonly #capabilities = new Map<string, KnownCapability>()
  readonly #progressLater = perTurn<ProgressWrite>((writes) => void this.#saveProgressTogether(writes))
  readonly #assignLater = perTurn<AssignWrite>((writes) => void this.#assignTogether(writes))

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  async list(organizationId: string): Promise<DisplayView[]> {
    const rows = await this.#sql<DisplayRow[]>`${this.#sql.unsafe(selectDisplay)} where d.organization_id = ${organizationId} order by d.created_at, d.id`
    return rows.map(view)
  }

  async get(organizationId: string, id: string): Promise<DisplayView> {
    const row = await this.#row(this.#sql, id)
    if (row === undefined || row.organization_id !== organizationId) throw displayNotFound()
    return view(row)
  }

  /**
   * `grant` tells the broker the new credential before the transaction
   * commits (BrokerCredentials); if it fails, nothing is stored.
   */
  async create(organizationId: string, name: string, pixels: readonly string[], grant: GrantCredential): Promise<{ display: DisplayView; password: string }> {
    const id = randomUUID()
    const credential = newCredential()
    const display = await this.#sql.begin(async (tx) => {
      await checkPixels(tx, organizationId, pixels)
      await tx`insert into displays (id, organization_id, name, pixels) values (${id}, ${organizationId}, ${name}, ${pixels as string[]}::uuid[])`
      await tx`insert into display_credentials (id, display_id, binding_epoch, username, secret_hash) values (${credential.id}, ${id}, 1, ${credential.username}, ${credential.hash})`
      await grant({ organizationId, displayId: id, bindingEpoch: 1, credentialId: credential.id, username: credential.username, password: credential.password })
      return view((await this.#row(tx, id))!)
    })
    return { display, password: credential.password }
  }

  async patch(organizationId: string, id: string, change: { name?: string | undefined; pixels?: readonly string[] | undefined }): Promise<DisplayView> {
    if (change.name === undefined && change.pixels === undefined) throw new ServiceError('MQTT_DISPLAY_REQUEST_INVALID', 'body must change name or pixels (or both)')
    return this.#sql.begin(async (tx) => {
      if (change.pixels !== undefined) await checkPixels(tx, organizationId, change.pixels)
      const updated = await tx`
        update displays set
          name = coalesce(${change.name ?? null}::text, name),
          pixels = coalesce(${change.pixels === undefined ? null : (change.pixels as string[])}::uuid[], pixels),
          updated_at = ${new Date(this.#now())}
        where id = ${id} and organization_id = ${organizationId} returning id`
      if (updated.length === 0) throw displayNotFound()
      return view((await this.#row(tx, id))!)
    })
  }

  async remove(organizationId: string, id: string): Promise<StoredActivation> {
    return this.#sql.begin(async (tx) => {
      const row = await this.#row(tx, id, true)
      if (row === undefined || row.organization_id !== organizationId) throw displayNotFound()
      await tx`delete from displays where id = ${id}`
      return stored(row)
    })
  }

  /**
   * What the live feed's `displays` topic shows: each display with its
   * target (null before the first assignment of its binding). With `id`,
   * that display only (an empty list when it is gone).
   */
  async live(organizationId: string, id?: string): Promise<DisplayLive[]> {
    const rows = await this.#sql<DisplayRow[]>`
      ${this.#sql.unsafe(selectDisplay)} where d.organization_id = ${organizationId} ${id === undefined ? this.#sql`` : this.#sql`and d.id = ${id}`}
      order by d.created_at, d.id`
    return rows.map((r) => ({ ...view(r), target: r.desired_revision_id === null ? null : activationView(stored(r)) }))
  }

  async targetsOf(organizationId: string): Promise<DesiredActivation[]> {
    const rows = await this.#sql<DisplayRow[]>`
      ${this.#sql.unsafe(selectDisplay)} where d.organization_id = ${organizationId} and d.desired_revision_id is not null order by d.created_at, d.id`
    return rows.map((r) => activationView(stored(r)))
  }

  async target(organizationId: string, id: string): Promise<DesiredActivation> {
    const row = await this.#row(this.#sql, id)
    if (row === undefined || row.organization_id !== organizationId) throw displayNotFound()
    return activationView(stored(row))
  }

  /** The pixels of a display, for its status feed. */
  async pixelsOf(displayId: string): Promise<{ address: { organizationId: string; displayId: string; bindingEpoch: number }; pixels: string[] } | undefined> {
    const [row] = await this.#sql<{ organization_id: string; binding_epoch: number; pixels: string[] }[]>`
      select organization_id, binding_epoch, pixels from displays where id = ${displayId}`
    return row && { address: { organizationId: row.organization_id, displayId, bindingEpoch: row.binding_epoch }, pixels: row.pixels }
  }

  /** Every display with its pixels (the status feed's map from printers to displays). */
  async allPixels(): Promise<{ displayId: string; pixels: string[] }[]> {
    const rows = await this.#sql<{ id: string; pixels: string[] }[]>`select id, pixels from displays`
    return rows.map((r) => ({ displayId: r.id, pixels: r.pixels }))
  }

  /**
   * The broker's check of a display's MQTT login: a current, unrevoked
   * credential of the display's current binding, the password compared in
   * constant time. Unknown user names cost the same hash as known ones.
   */
  async verifyCredential(username: string, password: Buffer): Promise<DisplayCredentialIdentity | undefined> {
    const [row] = await this.#sql<{ id: string; display_id: string; binding_epoch: number; secret_hash: Buffer; organization_id: string; current_epoch: number }[]>`
      select c.id, c.display_id, c.binding_epoch, c.secret_hash, d.organization_id, d.binding_epoch as current_epoch
      from display_credentials c join displays d on d.id = c.display_id
      where c.username = ${username} and c.revoked_at is null`
    const presented = createHash('sha256').update(password).digest()
    const expected = row?.secret_hash ?? Buffer.alloc(32)
    const match = timingSafeEqual(presented, expected)
    if (row === undefined || !match || row.binding_epoch !== row.current_epoch) return undefined
    return { organizationId: row.organization_id, displayId: row.display_id, bindingEpoch: row.binding_epoch, credentialId: row.id }
  }

  /** A capabilities report of the current credential; a report of an ended binding changes nothing. */
  async recordCapabilities(identity: DisplayCredentialIdentity, capability: SignalProfileCapability | null): Promise<boolean> {
    const updated = await this.#sql`
      update displays d set capabilities = ${capability === null ? null : JSON.stringify(capability)}::text::jsonb, capabilities_at = ${new Date(this.#now())}
      where d.id = ${identity.displayId} and d.organization_id = ${identity.organizationId} and d.binding_epoch = ${identity.bindingEpoch}
        and exists (select 1 from display_credentials c where c.id = ${identity.credentialId} and c.display_id = d.id and c.revoked_at is null)
      returning d.id`
    if (updated.length > 0) this.#rememberCapability(identity.displayId, capability)
    return updated.length > 0
  }

  // DisplayPersistence

  async load(displayId: string): Promise<StoredActivation | undefined> {
    const row = await this.#row(this.#sql, displayId)
    return row && stored(row)
  }

  async assign(displayId: string, request: AssignRequest, fence?: Fence): Promise<StoredActivation> {
    return (await this.#assignAtOnce(displayId, request, fence)) ?? this.#assignChecked(displayId, request, fence)
  }

  /**
   * The assignment as one statement when this node's memory says every check passes: the same
   * checks as #assignChecked, made in the statement's conditions (organization, binding epoch,
   * generation, a current credential, the revision in the organization, the fence) or on the
   * remembered capability that the statement requires to be still stored. Undefined when the
   * memory lacks something, a check fails, or the statement matched nothing: the transaction
   * then reads the row and answers with the precise refusal.
   */
  async #assignAtOnce(displayId: string, request: AssignRequest, fence: Fence | undefined): Promise<StoredActivation | undefined> {
    const revision = this.#revisions.get(request.revisionId)
    const capability = this.#capabilities.get(displayId)
    if (revision === undefined || capability === undefined || revision.organizationId !== request.organizationId) return undefined
    if (capabilityShortfall(revision.requirements, capability.value) !== undefined) return undefined
    const write = { displayId, request, shard: fence?.shard ?? -1, token: fence === undefined ? 0 : fence.token, capability: capability.json }
    return new Promise((resolve, reject) => this.#assignLater({ ...write, resolve, reject }))
  }

  /**
   * The one-statement assignments asked for in one turn of the event loop (an operator's or a
   * script's concurrent POSTs) as one statement, each row with its own conditions; a row that
   * matches nothing answers undefined. Should the statement fail for several, each is written
   * alone, so one row's fault stays its own. A display's assignments never share a turn (its
   * actor's mailbox runs them one after another); were one to, each goes alone.
   */
  async #assignTogether(writes: readonly AssignWrite[]): Promise<void> {
    const ids = new Set(writes.map((w) => w.displayId.toLowerCase()))
    if (ids.size !== writes.length) return this.#assignAlone(writes)
    let rows: ActivationRow[]
    try {
      rows = await this.#assignRows(writes)
    } catch (error) {
      if (writes.length === 1) return writes[0]!.reject(error)
      return this.#assignAlone(writes)
    }
    const written = new Map(rows.map((r) => [r.id, r]))
    for (const w of writes) {
      const row = written.get(w.displayId.toLowerCase())
      w.resolve(row && stored(row))
    }
  }

  async #assignAlone(writes: readonly AssignWrite[]): Promise<void> {
    await Promise.all(writes.map((w) => this.#assignTogether([w])))
  }

  /**
   * The assignment statement for one or more displays: the rows it wrote, with the credential and
   * the revision's bytes; only what a stored activation is made of (the pixels, capabilities and
   * dates of every display parsed for nothing were a few percent of an activation's CPU).
   */
  #assignRows(writes: readonly AssignWrite[]) {
    const values = writes.map((w) => ({
      id: w.displayId,
      o: w.request.organizationId,
      be: w.request.expectedBindingEpoch,
      g: w.request.expectedActivationGeneration,
      rv: w.request.revisionId,
      cap: w.capability,
      sh: w.shard,
      tk: w.token,
    }))
    const fenced = [...new Set(writes.filter((w) => w.token > 0).map((w) => w.shard))]
    // The ids as an array the primary key answers, and the display's organization compared as text: on
    // a table not yet analyzed the planner otherwise took the organization's displays by its index and
    // filtered them (900 rows per assignment in bench/displays).
    return this.#sql<ActivationRow[]>`
      with v as (
        select * from json_to_recordset(${JSON.stringify(values)}::text::json) as v(id uuid, o uuid, be integer, g integer, rv uuid, cap text, sh integer, tk bigint)
      ), tok as (
        select shard, token from shard_tokens where shard = any(${fenced}::int[]) for share
      )
      update displays d set activation_generation = d.activation_generation + 1, desired_revision_id = r.id, desired_sha256 = r.sha256,
        error_code = null, publish_error = null, publish_attempts = 0, activation_updated_at = ${new Date(this.#now())}
      from v, signal_profile_revisions r, display_credentials c
      where d.id = any(${writes.map((w) => w.displayId)}::uuid[]) and d.id = v.id and d.organization_id::text = v.o::text and d.binding_epoch = v.be
        and d.activation_generation = v.g and d.capabilities = v.cap::jsonb
        and r.id = v.rv and r.organization_id = v.o
        and c.display_id = d.id and c.binding_epoch = d.binding_epoch and c.revoked_at is null
        and not exists (select 1 from tok where tok.shard = v.sh and v.tk > 0 and tok.token > v.tk)
      returning d.id, d.organization_id, d.binding_epoch, d.activation_generation, d.desired_revision_id, d.desired_sha256, d.applied, d.error_code,
        d.publish_error, d.publish_attempts, d.receipt_session, d.activation_updated_at, d.updated_at, c.id as credential_id,
        r.data as payload_data, r.byte_length as payload_length`
  }

  /** Reads the display and the revision under a lock, refuses with the first check that fails, else writes the next generation. */
  async #assignChecked(displayId: string, request: AssignRequest, fence: Fence | undefined): Promise<StoredActivation> {
    return this.#sql.begin(async (tx) => {
      await checkFence(tx, fence)
      // Both sent at once (postgres.js pipelines a transaction's queries): one round trip, not two.
      const [row, [revision]] = await Promise.all([
        this.#row(tx, displayId, true),
        tx<{ id: string; sha256: string; capability_requirements: CapabilityRequirements; data: string; byte_length: number }[]>`
          select id, sha256, capability_requirements, data, byte_length from signal_profile_revisions where id = ${request.revisionId} and organization_id = ${request.organizationId}`,
      ])
      if (row === undefined || row.organization_id !== request.organizationId) throw displayNotFound()
      if (revision === undefined) throw new ServiceError('signal_profile_revision_not_found', 'no published revision with that id in this organization')
      this.#rememberRevision(revision.id, { organizationId: request.organizationId, requirements: revision.capability_requirements })
      this.#rememberCapability(displayId, row.capabilities)
      if (row.binding_epoch !== request.expectedBindingEpoch) {
        throw new ServiceError('display_binding_epoch_conflict', `expectedBindingEpoch ${request.expectedBindingEpoch} is not the display's binding epoch ${row.binding_epoch}`, {
          extra: { bindingEpoch: row.binding_epoch },
        })
      }
      if (row.activation_generation !== request.expectedActivationGeneration) {
        throw new ServiceError(
          'signal_profile_activation_conflict',
          `expectedActivationGeneration ${request.expectedActivationGeneration} is not the current generation ${row.activation_generation}`,
          { extra: { activationGeneration: row.activation_generation } },
        )
      }
      if (row.capabilities === null) {
        throw new ServiceError('signal_profile_capability_missing', 'the display has not advertised the signal_profile capability in this binding; nothing was published')
      }
      const shortfall = capabilityShortfall(revision.capability_requirements, row.capabilities)
      if (shortfall !== undefined) throw new ServiceError('signal_profile_capability_insufficient', `${shortfall}; nothing was published`)
      const [updated] = await tx<{ activation_generation: number; activation_updated_at: Date }[]>`
        update displays set activation_generation = activation_generation + 1, desired_revision_id = ${revision.id}, desired_sha256 = ${revision.sha256},
          error_code = null, publish_error = null, publish_attempts = 0, activation_updated_at = ${new Date(this.#now())}
        where id = ${displayId} and binding_epoch = ${request.expectedBindingEpoch} and activation_generation = ${request.expectedActivationGeneration}
        returning activation_generation, activation_updated_at`
      // The locked row plus what the update changed, rather than a read of it again.
      if (updated === undefined) return stored((await this.#row(tx, displayId))!)
      return stored({
        ...row,
        activation_generation: updated.activation_generation,
        desired_revision_id: revision.id,
        desired_sha256: revision.sha256,
        error_code: null,
        publish_error: null,
        publish_attempts: 0,
        activation_updated_at: updated.activation_updated_at,
        payload_data: revision.data,
        payload_length: revision.byte_length,
      })
    })
  }

  async saveProgress(displayId: string, bindingEpoch: number, generation: number, p: ActivationProgress, fence?: Fence): Promise<Date | undefined> {
    if (fence !== undefined && fence.token > 0) return this.#sql.begin(async (tx) => {
      await checkFence(tx, fence)
      return this.#saveProgress(tx, displayId, bindingEpoch, generation, p)
    })
    return new Promise((resolve, reject) => this.#progressLater({ displayId, bindingEpoch, generation, progress: p, resolve, reject }))
  }

  /**
   * The unfenced progress writes asked for in one turn of the event loop (receipts that arrived
   * together) as one statement, each row with its own binding and generation condition. Should
   * the statement fail, each is written alone, so one row's fault stays its own.
   */
  async #saveProgressTogether(writes: ProgressWrite[]): Promise<void> {
    const ids = new Set(writes.map((w) => w.displayId.toLowerCase()))
    if (writes.length === 1 || ids.size !== writes.length) return this.#saveProgressAlone(writes)
    let rows: { id: string; activation_updated_at: Date }[]
    try {
      const values = writes.map((w) => ({
        id: w.displayId,
        be: w.bindingEpoch,
        g: w.generation,
        ap: w.progress.applied,
        ec: w.progress.errorCode,
        pe: w.progress.publishError,
        pa: w.progress.publishAttempts,
        rs: w.progress.session,
      }))
      rows = await this.#sql<{ id: string; activation_updated_at: Date }[]>`
        update displays d set applied = v.ap, error_code = v.ec, publish_error = v.pe, publish_attempts = v.pa, receipt_session = v.rs, activation_updated_at = ${new Date(this.#now())}
        from json_to_recordset(${JSON.stringify(values)}::text::json) as v(id uuid, be integer, g integer, ap jsonb, ec text, pe text, pa integer, rs jsonb)
        where d.id = any(${writes.map((w) => w.displayId)}::uuid[]) and d.id = v.id and d.binding_epoch = v.be and d.activation_generation = v.g
        returning d.id::text as id, d.activation_updated_at`
    } catch {
      return this.#saveProgressAlone(writes)
    }
    const written = new Map(rows.map((r) => [r.id, r.activation_updated_at]))
    for (const w of writes) w.resolve(written.get(w.displayId.toLowerCase()))
  }

  async #saveProgressAlone(writes: readonly ProgressWrite[]): Promise<void> {
    await Promise.all(
      writes.map((w) => this.#saveProgress(this.#sql, w.displayId, w.bindingEpoch, w.generation, w.progress).then(w.resolve, w.reject)),
    )
  }

  async #saveProgress(sql: Sql | TransactionSql, displayId: string, bindingEpoch: number, generation: number, p: ActivationProgress): Promise<Date | undefined> {
    const [updated] = await sql<{ activation_updated_at: Date }[]>`
      update displays set applied = ${p.applied === null ? null : JSON.stringify(p.applied)}::text::jsonb, error_code = ${p.errorCode},
        publish_error = ${p.publishError}, publish_attempts = ${p.publishAttempts},
        receipt_session = ${p.session === null ? null : JSON.stringify(p.session)}::text::jsonb, activation_updated_at = ${new Date(this.#now())}
      where id = ${displayId} and binding_epoch = ${bindingEpoch} and activation_generation = ${generation}
      returning activation_updated_at`
    return updated?.activation_updated_at
  }

  async rebind(displayId: string, organizationId: string, grant: GrantCredential, fence?: Fence): Promise<{ previous: StoredActivation; current: StoredActivation; password: string; username: string }> {
    const credential = newCredential()
    return this.#sql.begin(async (tx) => {
      await checkFence(tx, fence)
      const row = await this.#row(tx, displayId, true)
      if (row === undefined || row.organization_id !== organizationId) throw displayNotFound()
      const epoch = row.binding_epoch + 1
      const now = new Date(this.#now())
      await tx`update display_credentials set revoked_at = ${now} where display_id = ${displayId} and revoked_at is null`
      await tx`
        update displays set binding_epoch = ${epoch}, capabilities = null, capabilities_at = null, activation_generation = 0,
          desired_revision_id = null, desired_sha256 = null, applied = null, error_code = null, publish_error = null, publish_attempts = 0,
          receipt_session = null, activation_updated_at = ${now}, updated_at = ${now}
        where id = ${displayId}`
      await tx`insert into display_credentials (id, display_id, binding_epoch, username, secret_hash) values (${credential.id}, ${displayId}, ${epoch}, ${credential.username}, ${credential.hash})`
      await grant({ organizationId, displayId, bindingEpoch: epoch, credentialId: credential.id, username: credential.username, password: credential.password })
      const current = stored((await this.#row(tx, displayId))!)
      return { previous: stored(row), current, password: credential.password, username: credential.username }
    })
  }

  /** Every credential of a current binding: credential id → display id. */
  async currentCredentials(): Promise<Map<string, string>> {
    const rows = await this.#sql<{ id: string; display_id: string }[]>`select id, display_id from display_credentials where revoked_at is null`
    return new Map(rows.map((r) => [r.id, r.display_id]))
  }

  /** Which of these credentials are revoked (a revocation is final). */
  async revokedCredentials(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const rows = await this.#sql<{ id: string }[]>`select id from display_credentials where id = any(${ids as string[]}::uuid[]) and revoked_at is not null`
    return new Set(rows.map((r) => r.id))
  }

  async targets(): Promise<string[]> {
    const rows = await this.#sql<{ id: string }[]>`select id from displays where desired_revision_id is not null order by id`
    return rows.map((r) => r.id)
  }

  #rememberRevision(id: string, facts: RevisionFacts): void {
    if (this.#revisions.size >= rememberedLimit) this.#revisions.clear()
    this.#revisions.set(id, facts)
  }

  #rememberCapability(displayId: string, capability: SignalProfileCapability | null): void {
    if (capability === null) {
      this.#capabilities.delete(displayId)
      return
    }
    if (this.#capabilities.size >= rememberedLimit) this.#capabilities.clear()
    this.#capabilities.set(displayId, { value: capability, json: JSON.stringify(capability) })
  }

  async #row(sql: Sql | TransactionSql, id: string, lock = false): Promise<DisplayRow | undefined> {
    const [row] = await sql<DisplayRow[]>`${sql.unsafe(selectDisplay)} where d.id = ${id} ${lock ? sql`for update of d` : sql``}`
    return row
  }
}

/** Every pixel names a printer of this organization; the message names the first that does not. */
async function checkPixels(tx: TransactionSql, organizationId: string, pixels: readonly string[]): Promise<void> {
  if (pixels.length === 0) return
  const rows = await tx<{ id: string }[]>`select id from printers where organization_id = ${organizationId} and id = any(${pixels as string[]}::uuid[])`
  const known = new Set(rows.map((r) => r.id))
  const missing = pixels.findIndex((p) => !known.has(p.toLowerCase()))
  if (missing >= 0) throw new ServiceError('MQTT_DISPLAY_REQUEST_INVALID', `body.pixels[${missing}] is not a printer of this organization`)
}

const displayNotFound = () => new ServiceError('display_not_found', 'no display with that id in this organization')
