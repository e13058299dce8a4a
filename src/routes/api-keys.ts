/**
 * API keys (docs/authentication.md). Members of the organization may list keys
 * and read their usage; only admins create, change and delete them. API keys
 * cannot manage API keys: these routes are for signed-in people.
 */
import { ServiceError } from '../../protocol/errors.js'
import {
  ApiKeyListQuery,
  ApiKeyListSchema,
  ApiKeyParams,
  ApiKeySchema,
  CreateApiKeyBody,
  CreatedApiKeySchema,
  DeleteApiKeyQuery,
  UpdateApiKeyBody,
  UsageLogQuery,
  UsageLogSchema,
} from '../../protocol/schemas/api-keys.js'
import { createApiKey, deleteApiKey, getApiKey, listApiKeys, updateApiKey } from '../auth/api-keys.js'
import { organizationOf, userIdOrNull } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the API key routes use of the node. */
export type ApiKeysContext = Pick<Services, 'apiKeyCache' | 'apiKeyUsage' | 'clock' | 'db'>

const read = { kind: 'organization', scope: null } as const
const write = { kind: 'organization', scope: null, admin: true } as const

export const createApiKeyRoute = defineRoute({
  method: 'POST',
  path: '/v1/api-keys',
  operationId: 'createApiKey',
  summary: 'Create an API key (admins). The secret `key` is in this response only; the service keeps a hash.',
  tags: ['api-keys'],
  auth: write,
  schemas: { body: CreateApiKeyBody },
  responses: { 200: { description: 'The key, with its secret.', schema: CreatedApiKeySchema } },
  handler: async (req, svc: ApiKeysContext) => {
    const expiresAt = req.body.expires_at ?? null
    if (expiresAt !== null && Date.parse(expiresAt) <= svc.clock.now()) {
      throw new ServiceError('validation_failed', 'body.expires_at must be in the future')
    }
    const { record, key } = await createApiKey(svc.db.sql, {
      organizationId: organizationOf(req.principal),
      name: req.body.name,
      scopes: req.body.scopes,
      expiresAt,
      createdBy: userIdOrNull(req.principal),
    })
    return { body: { ...record, key } }
  },
})

export const listApiKeysRoute = defineRoute({
  method: 'GET',
  path: '/v1/api-keys',
  operationId: 'listApiKeys',
  summary: "The organization's API keys, without their secrets.",
  description: 'The organization is `organizationId` (or x-organization-id), else the caller\'s only one. Error bodies carry `requestId`.',
  tags: ['api-keys'],
  auth: read,
  schemas: { query: ApiKeyListQuery },
  responses: { 200: { description: 'Keys.', schema: ApiKeyListSchema } },
  handler: async (req, svc: ApiKeysContext) => ({ body: { apiKeys: await listApiKeys(svc.db.sql, organizationOf(req.principal)) } }),
})

export const updateApiKeyRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/api-keys/{id}',
  operationId: 'updateApiKey',
  summary: 'Rename, enable or disable, re-scope or change the expiry of an API key (admins).',
  description: 'Takes effect at once on this node and within 5 seconds on every node. `expires_at: null` removes the expiry.',
  tags: ['api-keys'],
  auth: write,
  schemas: { params: ApiKeyParams, body: UpdateApiKeyBody },
  responses: { 200: { description: 'The key.', schema: ApiKeySchema } },
  errors: ['api_key_not_found'],
  handler: async (req, svc: ApiKeysContext) => {
    const { record, prefix } = await updateApiKey(svc.db.sql, organizationOf(req.principal), req.params.id, {
      ...(req.body.name !== undefined && { name: req.body.name }),
      ...(req.body.enabled !== undefined && { enabled: req.body.enabled }),
      ...(req.body.expires_at !== undefined && { expiresAt: req.body.expires_at }),
      ...(req.body.scopes !== undefined && { scopes: req.body.scopes }),
    })
    svc.apiKeyCache.invalidate(prefix)
    return { body: record }
  },
})

export const deleteApiKeyRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/api-keys/{id}',
  operationId: 'deleteApiKey',
  summary: 'Delete an API key (admins); it stops working at once on this node, within 5 s everywhere.',
  description: 'The `organizationId` query parameter is required and must name the key\'s organization (a guard against deleting a key of the wrong organization).',
  tags: ['api-keys'],
  auth: write,
  schemas: { params: ApiKeyParams, query: DeleteApiKeyQuery },
  responses: { 204: { description: 'Deleted.' } },
  errors: ['api_key_not_found'],
  handler: async (req, svc: ApiKeysContext) => {
    svc.apiKeyCache.invalidate(await deleteApiKey(svc.db.sql, organizationOf(req.principal), req.params.id))
    return { status: 204 }
  },
})

export const apiKeyLogsRoute = defineRoute({
  method: 'GET',
  path: '/v1/api-keys/{id}/logs',
  operationId: 'listApiKeyUsage',
  summary: 'Usage of an API key, newest first: time, route, method, status, remote address, request id.',
  description: 'Paginated with `limit` and `before` (the previous page\'s `nextCursor`). Uses reach the log within about a second.',
  tags: ['api-keys'],
  auth: read,
  schemas: { params: ApiKeyParams, query: UsageLogQuery },
  responses: { 200: { description: 'Usage entries.', schema: UsageLogSchema } },
  errors: ['api_key_not_found'],
  handler: async (req, svc: ApiKeysContext) => {
    await getApiKey(svc.db.sql, organizationOf(req.principal), req.params.id)
    // What this node has seen is written first, so a reader here sees its own uses.
    await svc.apiKeyUsage.flush()
    const rows = await svc.db.sql<{ id: number; used_at: Date; method: string; route: string; status: number; remote_address: string; request_id: string }[]>`
      select id, used_at, method, route, status, remote_address, request_id from api_key_usage
      where api_key_id = ${req.params.id} ${req.query.before === undefined ? svc.db.sql`` : svc.db.sql`and id < ${req.query.before}`}
      order by id desc limit ${req.query.limit}`
    return {
      body: {
        logs: rows.map((r) => ({
          usedAt: r.used_at.toISOString(),
          method: r.method,
          route: r.route,
          status: r.status,
          remoteAddress: r.remote_address,
          requestId: r.request_id,
        })),
        nextCursor: rows.length === req.query.limit ? rows[rows.length - 1]!.id : null,
      },
    }
  },
})

export const apiKeyRoutes: readonly Route<RouteSchemas, ApiKeysContext>[] = [createApiKeyRoute, listApiKeysRoute, updateApiKeyRoute, deleteApiKeyRoute, apiKeyLogsRoute]
