/**
 * OAuth clients an organization manages (SPEC part 4 group D) in the store.
 * A confidential client's secret (`pfcs_` + 256 random bits) is shown once
 * and kept as its SHA-256; checking one compares hashes in constant time.
 * Every change is written to the log (who, which client, what), as the
 * grants and revocations of the authorization server will be.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import { redirectUriProblem } from '../../protocol/redirect-uris.js'
import type { CreateOAuthClientBody, OAuthClient, UpdateOAuthClientBody } from '../../protocol/schemas/oauth-clients.js'
import type { Logger } from '../log.js'

interface ClientRow {
  id: string
  client_id: string
  organization_id: string
  name: string
  description: string | null
  redirect_uris: string[]
  scopes: string[]
  is_public: boolean
  is_enabled: boolean
  secret_hash: Buffer | null
  created_at: Date
  updated_at: Date
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest()
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const clientNotFound = (): ServiceError => new ServiceError('oauth_client_not_found', 'no OAuth client with that id in your organizations')

export function clientOf(row: ClientRow): OAuthClient {
  return {
    id: row.id,
    client_id: row.client_id,
    organization_id: row.organization_id,
    name: row.name,
    description: row.description,
    redirect_uris: row.redirect_uris,
    scopes: row.scopes,
    is_public: row.is_public,
    is_enabled: row.is_enabled,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  }
}

/** Refuses the first redirect URI a client may not use, naming it and why. */
function assertRedirectUris(uris: readonly string[]): void {
  for (const [i, uri] of uris.entries()) {
    const problem = redirectUriProblem(uri)
    if (problem !== undefined) throw new ServiceError('validation_failed', `body.redirect_uris[${i}] ${problem}`)
  }
}

export class OAuthClientStore {
  readonly #sql: Sql
  readonly #logger: Logger

  constructor(sql: Sql, logger: Logger) {
    this.#sql = sql
    this.#logger = logger
  }

  async create(organizationId: string, body: CreateOAuthClientBody, createdBy: string): Promise<{ client: OAuthClient; secret: string | null }> {
    assertRedirectUris(body.redirect_uris)
    const isPublic = body.is_public ?? true
    const secret = isPublic ? null : `pfcs_${randomBytes(32).toString('base64url')}`
    const [row] = await this.#sql<ClientRow[]>`
      insert into oauth_clients (id, client_id, organization_id, name, description, redirect_uris, scopes, is_public, secret_hash, created_by)
      values (${randomUUID()}, ${`pfc_${randomBytes(16).toString('base64url')}`}, ${organizationId}, ${body.name}, ${body.description ?? null},
              ${this.#sql.json(body.redirect_uris)}, ${body.scopes as string[]}, ${isPublic}, ${secret === null ? null : sha256(secret)}, ${createdBy})
      returning *`
    this.#logger.info('oauth client created', { organizationId, clientId: row!.client_id, isPublic, by: createdBy })
    return { client: clientOf(row!), secret }
  }

  async list(organizationId: string): Promise<OAuthClient[]> {
    const rows = await this.#sql<ClientRow[]>`select * from oauth_clients where organization_id = ${organizationId} order by created_at, id`
    return rows.map(clientOf)
  }

  /** The client by its id or client_id, whichever organization it belongs to (the caller checks membership). */
  async find(idOrClientId: string): Promise<OAuthClient | undefined> {
    const [row] = uuidPattern.test(idOrClientId)
      ? await this.#sql<ClientRow[]>`select * from oauth_clients where id = ${idOrClientId}`
      : await this.#sql<ClientRow[]>`select * from oauth_clients where client_id = ${idOrClientId}`
    return row === undefined ? undefined : clientOf(row)
  }

  async update(id: string, body: UpdateOAuthClientBody, by: string): Promise<OAuthClient> {
    if (body.redirect_uris !== undefined) assertRedirectUris(body.redirect_uris)
    const sql = this.#sql
    const [row] = await sql<ClientRow[]>`
      update oauth_clients set
        name = coalesce(${body.name ?? null}, name),
        description = ${body.description === undefined ? sql`description` : body.description},
        redirect_uris = ${body.redirect_uris === undefined ? sql`redirect_uris` : sql.json(body.redirect_uris)},
        scopes = ${body.scopes === undefined ? sql`scopes` : (body.scopes as string[])},
        is_enabled = coalesce(${body.is_enabled ?? null}, is_enabled),
        updated_at = now()
      where id = ${id} returning *`
    if (row === undefined) throw clientNotFound()
    this.#logger.info('oauth client changed', { organizationId: row.organization_id, clientId: row.client_id, fields: Object.keys(body), by })
    return clientOf(row)
  }

  async delete(id: string, by: string): Promise<void> {
    const [row] = await this.#sql<{ organization_id: string; client_id: string }[]>`delete from oauth_clients where id = ${id} returning organization_id, client_id`
    if (row === undefined) throw clientNotFound()
    this.#logger.info('oauth client deleted', { organizationId: row.organization_id, clientId: row.client_id, by })
  }

  /** Whether `secret` is the confidential client's secret (constant-time; false for public or unknown clients). */
  async secretMatches(clientId: string, secret: string): Promise<boolean> {
    const [row] = await this.#sql<{ secret_hash: Buffer | null }[]>`select secret_hash from oauth_clients where client_id = ${clientId}`
    const presented = sha256(secret)
    const stored = row?.secret_hash ?? sha256(`unknown:${randomUUID()}`)
    return timingSafeEqual(presented, stored) && row?.secret_hash !== null && row !== undefined
  }
}
