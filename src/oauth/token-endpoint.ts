/**
 * POST /v1/oauth/token and POST /v1/oauth/revoke (RFC 6749 §4.1.3 and §6,
 * RFC 7523, RFC 7009).
 *
 * - authorization_code: the code is single use, lives OAUTH_CODE_TTL_S,
 *   and must come back with its client, redirect URI and PKCE verifier; a
 *   code presented twice revokes everything issued for it (RFC 6749 §4.1.2).
 * - refresh_token: each use rotates the token within its family; a rotated
 *   token presented again is a copy in someone else's hands, so the whole
 *   family and the access tokens it issued are revoked (OAuth 2.0 Security
 *   BCP §4.14).
 * - jwt-bearer and the agent claim grant: src/oauth/agent-identity.ts.
 * Every grant re-checks that the person is still a member of the
 * organization and narrows the scopes to what the client may have today.
 * Grants and revocations are logged (who, which client, what).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import { agentClaimGrant, jwtBearerGrant, type RevokeBody, type Token, type TokenBody } from '../../protocol/schemas/oauth.js'
import type { Logger } from '../observability/log.js'
import type { Queryable } from '../storage/database.js'
import type { OAuthAccessTokens } from './access-tokens.js'
import type { AgentIdentities } from './agent-identity.js'
import { adminOnly, narrowScopes, verifierMatches } from './authorization.js'
import { holdsBridgeScope, scopesForRole } from '../../protocol/scopes.js'
import { revokeFamily } from './families.js'
import type { GrantClient, OAuthClientStore } from './client-store.js'
import { pruneExpiredGrants } from './prune.js'
import type { Resources } from './resources.js'
import { sha256 } from '../secrets/digest.js'

const refreshPrefix = 'pfor_'

interface Grant {
  clientId: string
  userId: string
  organizationId: string
  scopes: string[]
  resource: string
}

export class TokenEndpoint {
  readonly #sql: Sql
  readonly #clients: OAuthClientStore
  readonly #tokens: OAuthAccessTokens
  readonly #resources: Resources
  readonly #agents: AgentIdentities
  readonly #refreshTtlSeconds: number
  readonly #logger: Logger
  /** The node's clock: codes and refresh tokens expire on its time. */
  readonly #now: () => number

  constructor(
    sql: Sql,
    deps: { clients: OAuthClientStore; tokens: OAuthAccessTokens; resources: Resources; agents: AgentIdentities },
    refreshTtlSeconds: number,
    logger: Logger,
    now: () => number,
  ) {
    this.#now = now
    this.#sql = sql
    this.#clients = deps.clients
    this.#tokens = deps.tokens
    this.#resources = deps.resources
    this.#agents = deps.agents
    this.#refreshTtlSeconds = refreshTtlSeconds
    this.#logger = logger
  }

  async grant(body: TokenBody): Promise<Token> {
    pruneExpiredGrants(this.#sql, this.#logger, this.#now())
    switch (body.grant_type) {
      case 'authorization_code':
        return this.#authorizationCode(body)
      case 'refresh_token':
        return this.#refresh(body)
      case jwtBearerGrant:
        return this.#agents.exchangeAssertion(body, await this.#optionalClient(body))
      case agentClaimGrant:
        return this.#agents.collect(body, await this.#optionalClient(body))
      default:
        throw new ServiceError('unsupported_grant_type', `grant_type ${body.grant_type.slice(0, 100)} is not supported`)
    }
  }

  /**
   * RFC 7523 §3.1: these grants need no client authentication; credentials sent are still checked. An
   * agent may send its own agent_id as client_id (a public client): the grant checks it is the agent's.
   */
  async #optionalClient(body: TokenBody): Promise<GrantClient | string | undefined> {
    if (body.client_id === undefined) return undefined
    if (body.client_id.startsWith('pfa_')) {
      if (body.client_secret !== undefined && body.client_secret !== '') throw new ServiceError('invalid_client', 'an agent is a public client: it has no client_secret')
      return body.client_id
    }
    return this.#clients.authenticate(body.client_id, body.client_secret)
  }

  async #authorizationCode(body: TokenBody): Promise<Token> {
    const client = await this.#clients.authenticate(body.client_id, body.client_secret)
    if (!client.grantTypes.includes('authorization_code')) throw new ServiceError('unauthorized_client', 'this client is not registered for authorization_code')
    if (body.code === undefined || body.code === '') throw new ServiceError('invalid_request', 'code is required')
    if (body.redirect_uri === undefined) throw new ServiceError('invalid_request', 'redirect_uri is required: the one of the authorization request')
    const outcome = await this.#sql.begin(async (tx) => {
      const [code] = await tx<(Grant & { redirect_uri: string; code_challenge: string | null; used: boolean; expired: boolean; family_id: string | null })[]>`
        select client_id as "clientId", user_id as "userId", organization_id as "organizationId", scopes, resource, redirect_uri, code_challenge,
               used_at is not null as used, expires_at <= ${new Date(this.#now())} as expired, family_id
        from oauth_codes where code_hash = ${sha256(body.code!)} for update`
      if (code === undefined) return { error: 'the authorization code is unknown' }
      if (code.used) {
        // A code used twice was intercepted: whatever the first use got is revoked (RFC 6749 §4.1.2),
        // its access token too when the client has no refresh tokens to carry its id.
        if (code.family_id !== null) await revokeFamily(tx, code.family_id, new Date(this.#now()))
        await tx`
          insert into oauth_revoked_tokens (jti, expires_at)
          select access_jti, access_expires_at from oauth_codes
          where code_hash = ${sha256(body.code!)} and access_jti is not null and access_expires_at > ${new Date(this.#now())}
          on conflict (jti) do nothing`
        this.#logger.warn('oauth authorization code reused: its tokens are revoked', { clientId: code.clientId, userId: code.userId })
        return { error: 'the authorization code was already used; the tokens issued for it are revoked' }
      }
      if (code.expired) return { error: 'the authorization code has expired; start the sign-in again' }
      if (code.clientId !== client.clientId) return { error: 'the authorization code was issued to another client' }
      if (code.redirect_uri !== body.redirect_uri) return { error: 'redirect_uri differs from the one of the authorization request' }
      if (code.code_challenge !== null) {
        if (body.code_verifier === undefined || !verifierMatches(body.code_verifier, code.code_challenge)) return { error: 'code_verifier does not match the code_challenge' }
      } else if (body.code_verifier !== undefined) {
        return { error: 'code_verifier sent for an authorization request without code_challenge' }
      }
      if (body.resource !== undefined && this.#resources.stored(body.resource) !== code.resource) {
        throw new ServiceError('invalid_target', 'resource differs from the one the authorization was given for')
      }
      const familyId = randomUUID()
      await tx`update oauth_codes set used_at = ${new Date(this.#now())}, family_id = ${familyId} where code_hash = ${sha256(body.code!)}`
      const current = await this.#current(tx, client, code)
      const issued = await this.#issue(tx, client, current, familyId, body.scope)
      await tx`update oauth_codes set access_jti = ${issued.tokenId}, access_expires_at = ${new Date(this.#now())}::timestamptz + make_interval(secs => ${issued.token.expires_in})
        where code_hash = ${sha256(body.code!)}`
      return { token: issued.token, grant: current.grant }
    })
    if ('error' in outcome) throw new ServiceError('invalid_grant', outcome.error!)
    const { userId, organizationId } = outcome.grant
    this.#logger.info('oauth grant', { grant: 'authorization_code', clientId: client.clientId, userId, organizationId, scope: outcome.token.scope })
    return outcome.token
  }

  async #refresh(body: TokenBody): Promise<Token> {
    const client = await this.#clients.authenticate(body.client_id, body.client_secret)
    if (!client.grantTypes.includes('refresh_token')) throw new ServiceError('unauthorized_client', 'this client is not registered for refresh_token')
    if (body.refresh_token === undefined || body.refresh_token === '') throw new ServiceError('invalid_request', 'refresh_token is required')
    const outcome = await this.#sql.begin(async (tx) => {
      const [row] = await tx<(Grant & { id: string; family_id: string; rotated: boolean; revoked: boolean; expired: boolean })[]>`
        select id, family_id, client_id as "clientId", user_id as "userId", organization_id as "organizationId", scopes, resource,
               rotated_at is not null as rotated, revoked_at is not null as revoked, expires_at <= ${new Date(this.#now())} as expired
        from oauth_refresh_tokens where token_hash = ${sha256(body.refresh_token!)} for update`
      if (row === undefined || row.clientId !== client.clientId) return { error: 'the refresh token is unknown or was issued to another client' }
      if (row.revoked) return { error: 'the refresh token was revoked; sign in again' }
      if (row.rotated) {
        await revokeFamily(tx, row.family_id, new Date(this.#now()))
        this.#logger.warn('oauth refresh token reused: its family is revoked', { clientId: row.clientId, userId: row.userId })
        return { error: 'the refresh token was already used; every token of this sign-in is revoked, sign in again' }
      }
      if (row.expired) return { error: 'the refresh token has expired; sign in again' }
      if (body.resource !== undefined && this.#resources.stored(body.resource) !== row.resource) {
        throw new ServiceError('invalid_target', 'resource differs from the one the authorization was given for')
      }
      await tx`update oauth_refresh_tokens set rotated_at = ${new Date(this.#now())} where id = ${row.id}`
      const current = await this.#current(tx, client, row)
      return { token: (await this.#issue(tx, client, current, row.family_id, body.scope)).token, grant: current.grant }
    })
    if ('error' in outcome) throw new ServiceError('invalid_grant', outcome.error!)
    const { userId, organizationId } = outcome.grant
    this.#logger.info('oauth grant', { grant: 'refresh_token', clientId: client.clientId, userId, organizationId, scope: outcome.token.scope })
    return outcome.token
  }

  /**
   * The grant as it stands today: the person still a member, the scopes the client still has (kept by
   * the refresh token), and of those what the person's role allows now (the bridge-only scopes while
   * they are an admin), which is what the access token gets.
   */
  async #current(tx: Queryable, client: GrantClient, grant: Grant): Promise<{ grant: Grant; allowed: string[] }> {
    const [member] = await tx<{ role: 'admin' | 'member' }[]>`select role from memberships where user_id = ${grant.userId} and organization_id = ${grant.organizationId}`
    if (member === undefined) throw new ServiceError('invalid_grant', 'the person who signed in is no longer a member of the organization')
    const scopes = grant.scopes.filter((s) => client.scopes.includes(s))
    if (scopes.length === 0) throw new ServiceError('invalid_scope', 'the client may no longer have any of the scopes granted')
    const allowed = scopesForRole(scopes, member.role)
    if (allowed.length === 0) throw new ServiceError('invalid_scope', `${adminOnly}, and nothing else was granted`)
    return { grant: { ...grant, scopes }, allowed }
  }

  /**
   * An access token (narrowed to `asked` when given) and, for clients that refresh, the family's next
   * refresh token. A grant holding a bridge-only scope is a bridge's: every token of it names the grant
   * (`bridge_grant`), by which it is bound to one host, whatever its own narrowed scopes.
   */
  async #issue(tx: Queryable, client: GrantClient, current: { grant: Grant; allowed: string[] }, familyId: string, asked: string | undefined): Promise<{ token: Token; tokenId: string }> {
    const { grant } = current
    const scopes = narrowScopes(asked, current.allowed)
    const access = await this.#tokens.issue({ ...grant, scopes, audience: this.#resources.audience(grant.resource), ...(holdsBridgeScope(grant.scopes) ? { bridgeGrant: familyId } : {}) })
    const token: Token = { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn, scope: scopes.join(' ') }
    if (client.grantTypes.includes('refresh_token')) {
      const refresh = refreshPrefix + randomBytes(32).toString('base64url')
      const now = new Date(this.#now())
      // The refresh token keeps the whole grant: narrowing one access token does not shrink later ones (RFC 6749 §6).
      await tx`
        insert into oauth_refresh_tokens (id, family_id, token_hash, client_id, user_id, organization_id, scopes, resource, access_jti, access_expires_at, expires_at)
        values (${randomUUID()}, ${familyId}, ${sha256(refresh)}, ${grant.clientId}, ${grant.userId}, ${grant.organizationId}, ${grant.scopes}, ${grant.resource},
                ${access.tokenId}, ${now}::timestamptz + make_interval(secs => ${access.expiresIn}), ${now}::timestamptz + make_interval(secs => ${this.#refreshTtlSeconds}))`
      token.refresh_token = refresh
    }
    return { token, tokenId: access.tokenId }
  }

  /**
   * RFC 7009: a refresh token revokes its family; an access token is refused from now until it
   * expires; an agent's identity assertion ends the agent (its tokens refused, no more renewals). A
   * token that is unknown, expired, or another client's answers 200 the same way and changes nothing
   * (§2.2): the answer tells nobody what a token is. An agent names itself by its agent_id.
   */
  async revoke(body: RevokeBody): Promise<void> {
    pruneExpiredGrants(this.#sql, this.#logger, this.#now())
    const clientId =
      body.client_id === undefined ? undefined : body.client_id.startsWith('pfa_') ? body.client_id : (await this.#clients.authenticate(body.client_id, body.client_secret)).clientId
    const token = body.token
    if (token.startsWith(refreshPrefix)) {
      const [row] = await this.#sql<{ family_id: string; client_id: string }[]>`select family_id, client_id from oauth_refresh_tokens where token_hash = ${sha256(token)}`
      if (row === undefined || (clientId !== undefined && row.client_id !== clientId)) return
      if (clientId === undefined) await this.#assertPublicIssuer(row.client_id)
      await this.#sql.begin((tx) => revokeFamily(tx, row.family_id, new Date(this.#now())))
      this.#logger.info('oauth revocation', { kind: 'refresh_token', clientId: row.client_id })
      return
    }
    const agentId = await this.#agents.assertionAgent(token)
    if (agentId !== undefined) {
      if (clientId === undefined || clientId === agentId) await this.#agents.revoke(agentId, 'its identity assertion was revoked')
      return
    }
    const access = await this.#tokens.inspect(token)
    if (access === undefined || (clientId !== undefined && access.clientId !== clientId)) return
    if (clientId === undefined && access.clientId !== null) await this.#assertPublicIssuer(access.clientId)
    await this.#sql`insert into oauth_revoked_tokens (jti, expires_at) values (${access.tokenId}, to_timestamp(${access.expiresAt})) on conflict (jti) do nothing`
    this.#logger.info('oauth revocation', { kind: 'access_token', clientId: access.clientId, userId: access.userId })
  }

  /**
   * RFC 7009 section 2.1: a confidential client's token is revoked only by that client, authenticated.
   * A public client has no credential to show, so its tokens may be revoked by whoever holds them.
   */
  async #assertPublicIssuer(clientId: string): Promise<void> {
    if (clientId.startsWith('pfa_')) return
    const client = await this.#clients.forGrant(clientId)
    if (client !== undefined && !client.isPublic) {
      throw new ServiceError('invalid_client', 'this token was issued to a confidential client: revoke it with that client_id and its client_secret')
    }
  }
}
