/**
 * OAuth clients an organization manages (docs/authentication.md) in the store.
 * A confidential client's secret (`pfcs_` + 256 random bits) is shown once
 * and kept as its SHA-256; checking one compares hashes in constant time.
 * Every change is written to the log (who, which client, what), as the
 * grants and revocations of the authorization server will be.
 */
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import { redirectUriProblem } from '../../protocol/redirect-uris.js'
import type { CreateOAuthClientBody, OAuthClient, RegisterClientBody, RegisteredClient, UpdateOAuthClientBody } from '../../protocol/schemas/oauth-clients.js'
import { clientScopes, consentScopes, isScope } from '../../protocol/scopes.js'
import type { Logger } from '../observability/log.js'
import { sha256 } from '../secrets/digest.js'

interface ClientRow {
  id: string
  client_id: string
  source: 'organization' | 'registration'
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

/** A client as the authorization server sees it. */
export interface GrantClient {
  clientId: string
  /** Shown on the consent page (its client_id when it registered without a name). */
  name: string
  /** An organization's own client; null for one that registered itself. */
  organizationId: string | null
  redirectUris: string[]
  scopes: string[]
  grantTypes: string[]
  isPublic: boolean
  isEnabled: boolean
  clientUri: string | null
}

const newClientId = (): string => `pfc_${randomBytes(16).toString('base64url')}`
const newSecret = (): string => `pfcs_${randomBytes(32).toString('base64url')}`

/** Pages and logos a consent screen may link or show: https only, no credentials. */
function isPlainHttpsUrl(value: string): boolean {
  try {
    const url = new URL(value)
    return url.protocol === 'https:' && url.hostname !== '' && url.username === '' && url.password === ''
  } catch {
    return false
  }
}

/**
 * The scopes a self-registered client may ask for: any of the 19 consent scopes, so a bridge application
 * can be granted host:pair and print:launch by an admin's consent; absent means the 17 client scopes
 * (a bridge asks for its scopes by name). An unknown value is refused.
 */
function scopesOf(scope: string | undefined): string[] {
  if (scope === undefined || scope.trim() === '') return [...clientScopes]
  const asked = [...new Set(scope.trim().split(/\s+/))]
  const unknown = asked.filter((s) => !isScope(s))
  if (unknown.length > 0) throw new ServiceError('invalid_client_metadata', `scope: ${unknown.slice(0, 5).join(', ')} is not a scope of this service (${consentScopes.join(' ')})`)
  return asked
}
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

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, logger: Logger, now: () => number) {
    this.#now = now
    this.#sql = sql
    this.#logger = logger
  }

  async create(organizationId: string, body: CreateOAuthClientBody, createdBy: string): Promise<{ client: OAuthClient; secret: string | null }> {
    assertRedirectUris(body.redirect_uris)
    const isPublic = body.is_public ?? true
    const secret = isPublic ? null : newSecret()
    const [row] = await this.#sql<ClientRow[]>`
      insert into oauth_clients (id, client_id, source, organization_id, name, description, redirect_uris, scopes, is_public, secret_hash, created_by)
      values (${randomUUID()}, ${newClientId()}, 'organization', ${organizationId}, ${body.name}, ${body.description ?? null},
              ${this.#sql.json(body.redirect_uris)}, ${body.scopes as string[]}, ${isPublic}, ${secret === null ? null : sha256(secret)}, ${createdBy})
      returning *`
    this.#logger.info('oauth client created', { organizationId, clientId: row!.client_id, isPublic, by: createdBy })
    return { client: clientOf(row!), secret }
  }

  async list(organizationId: string): Promise<OAuthClient[]> {
    const rows = await this.#sql<ClientRow[]>`select * from oauth_clients where organization_id = ${organizationId} and source = 'organization' order by created_at, id`
    return rows.map(clientOf)
  }

  /** An organization's client by its id or client_id, whichever organization it belongs to (the caller checks membership). */
  async find(idOrClientId: string): Promise<OAuthClient | undefined> {
    const [row] = uuidPattern.test(idOrClientId)
      ? await this.#sql<ClientRow[]>`select * from oauth_clients where id = ${idOrClientId} and source = 'organization'`
      : await this.#sql<ClientRow[]>`select * from oauth_clients where client_id = ${idOrClientId} and source = 'organization'`
    return row === undefined ? undefined : clientOf(row)
  }

  /**
   * A client that registered itself (RFC 7591). Public (`none`) clients get no secret; a
   * `client_secret_post` client gets one that never expires (`client_secret_expires_at: 0`).
   */
  async register(body: RegisterClientBody, from: string): Promise<RegisteredClient> {
    for (const [i, uri] of body.redirect_uris.entries()) {
      const problem = redirectUriProblem(uri)
      if (problem !== undefined) throw new ServiceError('invalid_redirect_uri', `redirect_uris[${i}] ${problem}`)
    }
    for (const field of ['client_uri', 'logo_uri', 'tos_uri', 'policy_uri', 'jwks_uri'] as const) {
      const value = body[field]
      if (value !== undefined && !isPlainHttpsUrl(value)) throw new ServiceError('invalid_client_metadata', `${field} must be an https URL without a user name or password`)
    }
    const method = body.token_endpoint_auth_method ?? 'none'
    const grants = body.grant_types ?? ['authorization_code', 'refresh_token']
    const responses = body.response_types ?? ['code']
    if (!grants.includes('authorization_code') && responses.includes('code')) {
      throw new ServiceError('invalid_client_metadata', 'response_types code needs grant_types authorization_code (RFC 7591 §2.1)')
    }
    const scopes = scopesOf(body.scope)
    const secret = method === 'client_secret_post' ? newSecret() : null
    const { redirect_uris: _r, token_endpoint_auth_method: _m, grant_types: _g, response_types: _t, client_name: _n, client_uri: _c, logo_uri: _l, scope: _s, ...metadata } = body
    const [row] = await this.#sql<(ClientRow & { client_uri: string | null; logo_uri: string | null; metadata: Record<string, unknown>; grant_types: string[]; response_types: string[] })[]>`
      insert into oauth_clients (id, client_id, source, name, redirect_uris, scopes, grant_types, response_types, is_public, secret_hash, client_uri, logo_uri, metadata, registered_from)
      values (${randomUUID()}, ${newClientId()}, 'registration', ${body.client_name ?? null}, ${this.#sql.json(body.redirect_uris)}, ${scopes}, ${grants}, ${responses},
              ${secret === null}, ${secret === null ? null : sha256(secret)}, ${body.client_uri ?? null}, ${body.logo_uri ?? null}, ${this.#sql.json(metadata as never)}, ${from})
      returning *`
    this.#logger.info('oauth client registered', { clientId: row!.client_id, method, from })
    return {
      client_id: row!.client_id,
      ...(secret === null ? {} : { client_secret: secret, client_secret_expires_at: 0 }),
      client_id_issued_at: Math.floor(row!.created_at.getTime() / 1000),
      client_name: row!.name,
      redirect_uris: row!.redirect_uris,
      grant_types: row!.grant_types,
      response_types: row!.response_types,
      token_endpoint_auth_method: method,
      scope: row!.scopes.join(' '),
      ...(row!.client_uri === null ? {} : { client_uri: row!.client_uri }),
      ...(row!.logo_uri === null ? {} : { logo_uri: row!.logo_uri }),
      ...metadata,
    }
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
        updated_at = ${new Date(this.#now())}
      where id = ${id} and source = 'organization' returning *`
    if (row === undefined) throw clientNotFound()
    this.#logger.info('oauth client changed', { organizationId: row.organization_id, clientId: row.client_id, fields: Object.keys(body), by })
    return clientOf(row)
  }

  async delete(id: string, by: string): Promise<void> {
    const [row] = await this.#sql<{ organization_id: string; client_id: string }[]>`delete from oauth_clients where id = ${id} and source = 'organization' returning organization_id, client_id`
    if (row === undefined) throw clientNotFound()
    this.#logger.info('oauth client deleted', { organizationId: row.organization_id, clientId: row.client_id, by })
  }

  /**
   * The client behind a `client_id` at the authorization and token endpoints, whichever kind it is,
   * enabled or not (the caller decides); undefined when there is none.
   */
  async forGrant(clientId: string): Promise<GrantClient | undefined> {
    const [row] = await this.#sql<(ClientRow & { grant_types: string[]; client_uri: string | null })[]>`
      select * from oauth_clients where client_id = ${clientId}`
    if (row === undefined) return undefined
    return {
      clientId: row.client_id,
      name: row.name ?? row.client_id,
      organizationId: row.organization_id ?? null,
      redirectUris: row.redirect_uris,
      scopes: row.scopes,
      grantTypes: row.grant_types,
      isPublic: row.is_public,
      isEnabled: row.is_enabled,
      clientUri: row.client_uri,
    }
  }

  /**
   * Client authentication at the token and revocation endpoints (client_secret_post, or none for a
   * public client): the enabled client, else 400 invalid_client. A public client sending a secret is
   * refused too: it has none, so the secret is someone's mistake.
   */
  async authenticate(clientId: string | undefined, secret: string | undefined): Promise<GrantClient> {
    if (clientId === undefined || clientId === '') throw new ServiceError('invalid_client', 'client_id is required (client_secret_post or a public client)')
    const client = await this.forGrant(clientId)
    if (client === undefined || !client.isEnabled) {
      // The same hash work as a real check, so timing does not tell registered ids from others.
      if (secret !== undefined) await this.secretMatches(`unknown:${clientId}`, secret)
      throw new ServiceError('invalid_client', 'unknown or disabled client_id')
    }
    if (client.isPublic) {
      if (secret !== undefined && secret !== '') throw new ServiceError('invalid_client', 'this client is public: it has no client_secret (use PKCE)')
      return client
    }
    if (secret === undefined || secret === '') throw new ServiceError('invalid_client', 'this client is confidential: send its client_secret in the body (client_secret_post)')
    if (!(await this.secretMatches(clientId, secret))) throw new ServiceError('invalid_client', 'the client_secret is wrong')
    return client
  }

  /** Whether `secret` is the confidential client's secret (constant-time; false for public or unknown clients). */
  async secretMatches(clientId: string, secret: string): Promise<boolean> {
    const [row] = await this.#sql<{ secret_hash: Buffer | null }[]>`select secret_hash from oauth_clients where client_id = ${clientId}`
    const presented = sha256(secret)
    const stored = row?.secret_hash ?? sha256(`unknown:${randomUUID()}`)
    return timingSafeEqual(presented, stored) && row?.secret_hash !== null && row !== undefined
  }
}
