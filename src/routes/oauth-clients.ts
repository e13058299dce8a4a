/**
 * OAuth clients an organization manages (docs/authentication.md): for
 * signed-in people only (a bearer token; API keys cannot manage clients).
 * Members of the client's organization read it; its admins create, change and
 * delete clients. A client of an organization the caller is not in answers
 * 404, as if it did not exist.
 */
import { ServiceError } from '../../protocol/errors.js'
import {
  CreatedOAuthClientSchema,
  CreateOAuthClientBody,
  OAuthClientListQuery,
  OAuthClientListSchema,
  OAuthClientParams,
  OAuthClientSchema,
  UpdateOAuthClientBody,
  type OAuthClient,
} from '../../protocol/schemas/oauth-clients.js'
import { SuccessSchema } from '../../protocol/schemas/models.js'
import { membershipsOf, roleIn } from '../auth/accounts.js'
import { chooseOrganization } from '../auth/authenticate.js'
import { userOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { clientNotFound } from '../oauth/client-store.js'
import type { Services } from './route-context.js'

/** What the OAuth client routes use of the node. */
export type OAuthClientsContext = Pick<Services, 'db' | 'oauthClients'>

/** The client, when the caller is a member (or, for `admin`, an admin) of its organization. */
async function clientFor(svc: OAuthClientsContext, userId: string, idOrClientId: string, admin: boolean): Promise<OAuthClient> {
  const client = await svc.oauthClients.find(idOrClientId)
  const role = client === undefined ? undefined : await roleIn(svc.db.sql, userId, client.organization_id)
  if (client === undefined || role === undefined) throw clientNotFound()
  if (admin && role !== 'admin') throw new ServiceError('ORG_ADMIN_REQUIRED', "only an admin of the client's organization may change it")
  return client
}

export const createOAuthClientRoute = defineRoute({
  method: 'POST',
  path: '/v1/oauth-clients',
  operationId: 'createOAuthClient',
  summary: 'Register an application your people may sign in to the farm with (admins of organization_id).',
  description:
    'A confidential client (`is_public: false`) gets a `client_secret`, in this answer only (the service keeps a hash); a public client (the default: ' +
    'native and browser apps) gets null and signs in with PKCE. Redirect URIs: https, http on a loopback host, or a private-use scheme with a dot.',
  tags: ['oauth-clients'],
  auth: { kind: 'user' },
  access: 'admin of organization_id',
  schemas: { body: CreateOAuthClientBody },
  responses: { 201: { description: 'The client, with its secret when confidential.', schema: CreatedOAuthClientSchema } },
  errors: ['organization_not_found', 'ORG_ADMIN_REQUIRED'],
  handler: async (req, svc: OAuthClientsContext) => {
    const userId = userOf(req.principal)
    const organization = chooseOrganization(await membershipsOf(svc.db.sql, userId), req.body.organization_id)
    if (organization.role !== 'admin') throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may register OAuth clients')
    const { client, secret } = await svc.oauthClients.create(organization.organizationId, req.body, userId)
    return { status: 201, body: { ...client, client_secret: secret } }
  },
})

export const listOAuthClientsRoute = defineRoute({
  method: 'GET',
  path: '/v1/oauth-clients',
  operationId: 'listOAuthClients',
  summary: "An organization's OAuth clients, without secrets (organization_id, else x-organization-id, else your only organization).",
  tags: ['oauth-clients'],
  auth: { kind: 'user' },
  access: 'member of the organization',
  schemas: { query: OAuthClientListQuery },
  responses: { 200: { description: 'The clients, oldest first.', schema: OAuthClientListSchema } },
  errors: ['organization_not_found', 'organization_required'],
  handler: async (req, svc: OAuthClientsContext) => {
    const userId = userOf(req.principal)
    const organization = chooseOrganization(await membershipsOf(svc.db.sql, userId), req.query.organization_id ?? req.headers['x-organization-id'])
    return { body: { clients: await svc.oauthClients.list(organization.organizationId) } }
  },
})

export const getOAuthClientRoute = defineRoute({
  method: 'GET',
  path: '/v1/oauth-clients/{clientId}',
  operationId: 'getOAuthClient',
  summary: 'One OAuth client, by its id or client_id (never its secret).',
  tags: ['oauth-clients'],
  auth: { kind: 'user' },
  access: "member of the client's organization",
  schemas: { params: OAuthClientParams },
  responses: { 200: { description: 'The client.', schema: OAuthClientSchema } },
  errors: ['oauth_client_not_found'],
  handler: async (req, svc: OAuthClientsContext) => ({ body: await clientFor(svc, userOf(req.principal), req.params.clientId, false) }),
})

export const updateOAuthClientRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/oauth-clients/{clientId}',
  operationId: 'updateOAuthClient',
  summary: 'Change a client: name, description, redirect URIs, scopes, or disable it (is_enabled: false).',
  description: 'The fields sent replace the stored ones. Whether a client is public, and its secret, do not change: register a new client instead.',
  tags: ['oauth-clients'],
  auth: { kind: 'user' },
  access: "admin of the client's organization",
  schemas: { params: OAuthClientParams, body: UpdateOAuthClientBody },
  responses: { 200: { description: 'The client as stored now.', schema: OAuthClientSchema } },
  errors: ['oauth_client_not_found', 'ORG_ADMIN_REQUIRED'],
  handler: async (req, svc: OAuthClientsContext) => {
    const userId = userOf(req.principal)
    const client = await clientFor(svc, userId, req.params.clientId, true)
    return { body: await svc.oauthClients.update(client.id, req.body, userId) }
  },
})

export const deleteOAuthClientRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/oauth-clients/{clientId}',
  operationId: 'deleteOAuthClient',
  summary: 'Delete a client: it can no longer sign anyone in.',
  tags: ['oauth-clients'],
  auth: { kind: 'user' },
  access: "admin of the client's organization",
  schemas: { params: OAuthClientParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['oauth_client_not_found', 'ORG_ADMIN_REQUIRED'],
  handler: async (req, svc: OAuthClientsContext) => {
    const userId = userOf(req.principal)
    const client = await clientFor(svc, userId, req.params.clientId, true)
    await svc.oauthClients.delete(client.id, userId)
    return { body: { success: true } }
  },
})

export const oauthClientRoutes: readonly Route<RouteSchemas, OAuthClientsContext>[] = [
  createOAuthClientRoute,
  listOAuthClientsRoute,
  getOAuthClientRoute,
  updateOAuthClientRoute,
  deleteOAuthClientRoute,
] as Route<RouteSchemas, OAuthClientsContext>[]
