/**
 * Turns a request's credential into a Principal for the route's auth kind,
 * before the handler runs, so no handler can forget the check. Organization
 * isolation starts here: a member principal only ever names an organization
 * the caller belongs to.
 */
import { ServiceError } from '../../protocol/errors.js'
import { scopesForRole } from '../../protocol/scopes.js'
import type { Principal, RouteAuth } from '../http/route.js'
import type { Queryable } from '../storage/database.js'
import { membershipReader, type Membership } from './accounts.js'
import type { ApiKeyCache } from './api-keys.js'
import type { Sessions } from './sessions.js'
import { tokenUse, type OAuthAccessTokens } from '../oauth/access-tokens.js'

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function bearerToken(headers: Readonly<Record<string, string>>): string | undefined {
  const value = headers['authorization']
  if (value === undefined) return undefined
  const match = /^Bearer[ ]+([A-Za-z0-9._~+/=-]{1,4096})\s*$/i.exec(value)
  if (!match) throw new ServiceError('unauthorized', 'the Authorization header must be "Bearer <token>"')
  // An API key is not a bearer token; say where it goes instead of only "not valid".
  if (match[1]!.startsWith('pfk_')) throw new ServiceError('unauthorized', 'that is an API key: send it in the x-api-key header, not as Authorization: Bearer')
  return match[1]
}

export function createAuthenticator(sql: Queryable, sessions: Sessions, apiKeys: ApiKeyCache, oauthTokens: OAuthAccessTokens, now: () => number) {
  const membershipsOf = membershipReader(sql)
  /**
   * An OAuth access token follows the API key rules (the route's scope, its own organization, never
   * the routes for people) and the person's: they must still be a member, and an admin route needs
   * them to be an admin. A disabled or deleted client's tokens stop working.
   */
  async function withOAuthToken(auth: RouteAuth, token: string, requested: string | undefined): Promise<Principal> {
    if (auth.kind !== 'organization' || auth.scope === null) {
      throw new ServiceError('session_required', 'this route is for signed-in people only; OAuth access tokens cannot use it')
    }
    const claims = await oauthTokens.verify(token, oauthTokens.apiAudience)
    if (requested !== undefined && requested.toLowerCase() !== claims.organizationId) {
      throw new ServiceError('organization_not_found', 'the access token is for another organization')
    }
    const standing = await oauthStanding(sql, claims)
    // The client's scopes today bound what its older tokens may still do.
    const scopes = new Set([...claims.scopes].filter((s) => standing.allowedScopes.includes(s)))
    const accepted = typeof auth.scope === 'string' ? [auth.scope] : auth.scope
    if (!accepted.some((s) => scopes.has(s))) {
      throw new ServiceError('insufficient_scope', `this route needs the scope ${accepted.join(' or ')}`)
    }
    if (auth.admin === true && standing.role !== 'admin') throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may do this')
    return { kind: 'oauth', userId: claims.userId, clientId: claims.clientId, organizationId: claims.organizationId, role: standing.role, scopes, tokenId: claims.tokenId, bridgeGrant: claims.bridgeGrant }
  }

  async function withApiKey(auth: RouteAuth, presented: string, requested: string | undefined): Promise<Principal> {
    if (auth.kind !== 'organization' || auth.scope === null) {
      // Checked before the key, so the answer does not depend on whether the key is valid.
      throw new ServiceError('session_required', 'this route is for signed-in people only; API keys cannot use it')
    }
    const key = await apiKeys.resolve(presented)
    if (key === undefined) throw new ServiceError('unauthorized', 'the API key is not valid')
    if (!key.enabled) throw new ServiceError('api_key_disabled', 'the API key has been disabled')
    if (key.expiresAt !== null && key.expiresAt <= now()) throw new ServiceError('api_key_expired', 'the API key has expired')
    // A key acts for its own organization only; naming another answers as if it did not exist.
    if (requested !== undefined && requested.toLowerCase() !== key.organizationId) {
      throw new ServiceError('organization_not_found', 'the API key belongs to another organization')
    }
    const accepted = typeof auth.scope === 'string' ? [auth.scope] : auth.scope
    if (!accepted.some((s) => key.scopes.has(s))) {
      throw new ServiceError('insufficient_scope', `this route needs the scope ${accepted.join(' or ')}`)
    }
    return { kind: 'api_key', keyId: key.id, organizationId: key.organizationId, scopes: key.scopes }
  }

  return async function authenticate(
    auth: RouteAuth,
    headers: Readonly<Record<string, string>>,
    query: Readonly<Record<string, string | string[]>> = {},
  ): Promise<Principal> {
    if (auth.kind === 'public') return { kind: 'anonymous' }
    const fromQuery = typeof query['organizationId'] === 'string' ? query['organizationId'] : undefined
    const fromHeader = headers['x-organization-id']
    if (fromHeader !== undefined && fromQuery !== undefined && fromHeader.toLowerCase() !== fromQuery.toLowerCase()) {
      // Two different answers to "which organization": acting on either could be the wrong one.
      throw new ServiceError('validation_failed', 'x-organization-id and organizationId name different organizations')
    }
    const requested = fromHeader ?? fromQuery
    const token = bearerToken(headers)
    if (token === undefined) {
      const apiKey = headers['x-api-key']
      if (apiKey !== undefined) return withApiKey(auth, apiKey, requested)
      throw new ServiceError('unauthorized', 'send Authorization: Bearer <access token> (sign in at POST /v1/auth/login) or x-api-key')
    }
    if (tokenUse(token) === 'oauth') return withOAuthToken(auth, token, requested)
    const { userId } = await sessions.verifyAccessToken(token)
    if (auth.kind === 'user') return { kind: 'user', userId }

    const chosen = chooseOrganization(await membershipsOf(userId), requested)
    if (auth.admin === true && chosen.role !== 'admin') {
      throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may do this')
    }
    return { kind: 'member', userId, organizationId: chosen.organizationId, role: chosen.role }
  }
}

/**
 * Whether an OAuth token still stands: not revoked (RFC 7009), its person a member of its organization
 * (with which role), its client enabled (or its agent identity not revoked), an organization's client
 * used only for that organization. Read on every request and by the live feed's sweep, so a change
 * takes effect at once. `allowedScopes`: what the client may have today and the person's role allows
 * (host:pair and print:launch only while they are an admin). Clients whose id starts with `pfa_` are agent identities.
 */
export async function oauthStanding(
  sql: Queryable,
  claims: { userId: string; clientId: string; organizationId: string; tokenId?: string },
): Promise<{ role: 'admin' | 'member'; allowedScopes: readonly string[] }> {
  const client = claims.clientId.startsWith('pfa_')
    ? sql<{ is_enabled: boolean; scopes: string[]; organization_id: string | null }[]>`
        select (status <> 'pending' and revoked_at is null) as is_enabled, coalesce(scopes, '{}') as scopes, organization_id
        from agent_identities where agent_id = ${claims.clientId}`
    : sql<{ is_enabled: boolean; scopes: string[]; organization_id: string | null }[]>`
        select is_enabled, scopes, organization_id from oauth_clients where client_id = ${claims.clientId}`
  const [[row], [person]] = await Promise.all([
    client,
    sql<{ role: 'admin' | 'member' | null; revoked: boolean }[]>`
      select (select m.role from memberships m where m.user_id = ${claims.userId} and m.organization_id = ${claims.organizationId}) as role,
             exists (select 1 from oauth_revoked_tokens where jti = ${claims.tokenId ?? '00000000-0000-0000-0000-000000000000'}) as revoked`,
  ])
  if (person!.revoked) throw new ServiceError('unauthorized', 'the access token was revoked')
  if (row === undefined || !row.is_enabled) throw new ServiceError('unauthorized', "the access token's OAuth client is disabled or deleted")
  if (row.organization_id !== null && row.organization_id !== claims.organizationId) throw new ServiceError('unauthorized', "the access token's OAuth client belongs to another organization")
  if (person!.role === null) throw new ServiceError('unauthorized', "the access token's person is no longer a member of its organization")
  return { role: person!.role, allowedScopes: scopesForRole(row.scopes, person!.role) }
}

/**
 * The organization a signed-in person acts in: the one they named (it must be
 * theirs), else their only one. Another organization's id, a malformed one
 * and a missing one all answer the same 404: nothing leaks.
 */
export function chooseOrganization(memberships: readonly Membership[], requested: string | undefined): Membership {
  if (requested !== undefined) {
    const chosen = uuidPattern.test(requested) ? memberships.find((m) => m.organizationId === requested.toLowerCase()) : undefined
    if (chosen === undefined) throw new ServiceError('organization_not_found', 'no organization of yours has that id')
    return chosen
  }
  if (memberships.length === 1) return memberships[0]!
  if (memberships.length === 0) throw new ServiceError('organization_not_found', 'you belong to no organization')
  throw new ServiceError('organization_required', 'you belong to several organizations: name one with the x-organization-id header')
}

export type Authenticate = ReturnType<typeof createAuthenticator>
