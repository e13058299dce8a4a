/**
 * The applications and agents acting in an organization (a decision of this
 * service; the contract names no such routes): without them nobody could end an
 * application's access short of removing the person, since self-registered
 * applications belong to no organization. For signed-in people only: each
 * sees and ends what acts for them; admins see and end everything in the
 * organization.
 */
import { AuthorizationListSchema, AuthorizationParams } from '../../protocol/schemas/oauth.js'
import { SuccessSchema } from '../../protocol/schemas/models.js'
import { defineRoute, type Principal, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the OAuth authorization routes use of the node. */
export type OAuthAuthorizationsContext = Pick<Services, 'oauthServer'>

/** An admin acts on the whole organization; a member only on what acts for them. */
function scopeOf(principal: Principal): { organizationId: string; onlyFor: string | undefined; userId: string } {
  if (principal.kind !== 'member') throw new TypeError('people-only route without a member principal')
  return { organizationId: principal.organizationId, onlyFor: principal.role === 'admin' ? undefined : principal.userId, userId: principal.userId }
}

export const listAuthorizationsRoute = defineRoute({
  method: 'GET',
  path: '/v1/oauth/authorizations',
  operationId: 'listOAuthAuthorizations',
  summary: 'The applications you signed in to and the agents you confirmed in this organization (admins: everyone\'s).',
  description:
    'A sign-in through an application lasts while its refresh token is used (OAUTH_REFRESH_TTL_S); applications without refresh tokens hold only ' +
    'access tokens, which expire within OAUTH_ACCESS_TTL_S, and are not listed. Agents last until revoked.',
  tags: ['oauth'],
  auth: { kind: 'organization', scope: null },
  access: 'signed-in person: their own; organization admin: all',
  schemas: {},
  responses: { 200: { description: 'Newest first.', schema: AuthorizationListSchema } },
  handler: async (req, svc: OAuthAuthorizationsContext) => {
    const { organizationId, onlyFor } = scopeOf(req.principal)
    return { body: { authorizations: await svc.oauthServer.authorizations.list(organizationId, onlyFor) } }
  },
})

export const revokeAuthorizationRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/oauth/authorizations/{authorizationId}',
  operationId: 'revokeOAuthAuthorization',
  summary: "Ends an application's sign-in (its refresh tokens and the access tokens they gave) or an agent, at once.",
  description: 'Open live-feed sockets of its tokens close within seconds. The application or agent must be allowed again to come back.',
  tags: ['oauth'],
  auth: { kind: 'organization', scope: null },
  access: 'signed-in person: their own; organization admin: any in the organization',
  schemas: { params: AuthorizationParams },
  responses: { 200: { description: 'Ended.', schema: SuccessSchema } },
  errors: ['oauth_authorization_not_found'],
  handler: async (req, svc: OAuthAuthorizationsContext) => {
    const { organizationId, onlyFor, userId } = scopeOf(req.principal)
    await svc.oauthServer.authorizations.revoke(organizationId, req.params.authorizationId, onlyFor, userId)
    return { body: { success: true } }
  },
})

export const oauthAuthorizationRoutes: readonly Route<RouteSchemas, OAuthAuthorizationsContext>[] = [listAuthorizationsRoute, revokeAuthorizationRoute] as Route<RouteSchemas, OAuthAuthorizationsContext>[]
