/**
 * Turns a request's credential into a Principal for the route's auth kind,
 * before the handler runs, so no handler can forget the check. Organization
 * isolation starts here: a member principal only ever names an organization
 * the caller belongs to.
 */
import { ServiceError } from '../../protocol/errors.js'
import type { Principal, RouteAuth } from '../http/route.js'
import type { Queryable } from '../storage/database.js'
import { membershipsOf } from './accounts.js'
import type { Sessions } from './sessions.js'

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function bearerToken(headers: Readonly<Record<string, string>>): string | undefined {
  const value = headers['authorization']
  if (value === undefined) return undefined
  const match = /^Bearer[ ]+([A-Za-z0-9._~+/=-]{1,4096})\s*$/i.exec(value)
  if (!match) throw new ServiceError('unauthorized', 'the Authorization header must be "Bearer <token>"')
  return match[1]
}

export function createAuthenticator(sql: Queryable, sessions: Sessions) {
  return async function authenticate(auth: RouteAuth, headers: Readonly<Record<string, string>>): Promise<Principal> {
    if (auth.kind === 'public') return { kind: 'anonymous' }
    const token = bearerToken(headers)
    if (token === undefined) {
      const hint = headers['x-api-key'] !== undefined ? 'API keys are not accepted on this route yet; ' : ''
      throw new ServiceError('unauthorized', `${hint}sign in and send Authorization: Bearer <access token>`)
    }
    const { userId } = await sessions.verifyAccessToken(token)
    if (auth.kind === 'user') return { kind: 'user', userId }

    const memberships = await membershipsOf(sql, userId)
    const requested = headers['x-organization-id']
    let chosen
    if (requested !== undefined) {
      // Another organization's id, a malformed one and a missing one all answer the same 404: nothing leaks.
      chosen = uuidPattern.test(requested) ? memberships.find((m) => m.organizationId === requested.toLowerCase()) : undefined
      if (chosen === undefined) throw new ServiceError('organization_not_found', 'x-organization-id names no organization of yours')
    } else if (memberships.length === 1) {
      chosen = memberships[0]!
    } else if (memberships.length === 0) {
      throw new ServiceError('organization_not_found', 'you belong to no organization')
    } else {
      throw new ServiceError('organization_required', 'you belong to several organizations: name one with the x-organization-id header')
    }
    if (auth.admin === true && chosen.role !== 'admin') {
      throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may do this')
    }
    return { kind: 'member', userId, organizationId: chosen.organizationId, role: chosen.role }
  }
}

export type Authenticate = ReturnType<typeof createAuthenticator>
