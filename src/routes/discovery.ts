/**
 * Discovery documents (docs/oauth.md): RFC 8414 authorization server
 * metadata, RFC 9728 protected resource metadata for the API and for the
 * MCP endpoint, the MCP server card, integrations.json (every way in, in
 * one document) and an app directory's domain challenge. All are built from
 * PUBLIC_BASE_URL, which is therefore the issuer: set it to the address
 * clients use.
 */
import { Type } from '@sinclair/typebox'
import { ServiceError } from '../../protocol/errors.js'
import { agentClaimGrant, grantTypes } from '../../protocol/schemas/oauth.js'
import { clientScopes, consentScopes } from '../../protocol/scopes.js'
import { signingAlgorithm } from '../auth/keyring.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { claimPollInterval } from '../oauth/agent-identity.js'
import type { Services } from './route-context.js'
import { serviceVersion } from '../node/version.js'

/** What the discovery (well-known metadata) routes use of the node. */
export type DiscoveryContext = Pick<Services, 'config' | 'oauthServer'>

const cached = { 'cache-control': 'public, max-age=300' }
const Document = (title: string) => Type.Object({}, { additionalProperties: true, title })

/**
 * scopes_supported lists the 19 consent scopes: host:pair and print:launch are granted by an admin's
 * consent to a bridge application (for the API; the MCP resource lists the 17 client scopes, which
 * are all its tools use).
 */
function authorizationServer(base: string): Record<string, unknown> {
  const resources = protectedResource(base, base, 'printfarm API')
  return {
    issuer: base,
    authorization_endpoint: `${base}/v1/oauth/authorize`,
    token_endpoint: `${base}/v1/oauth/token`,
    revocation_endpoint: `${base}/v1/oauth/revoke`,
    registration_endpoint: `${base}/v1/oauth/register`,
    jwks_uri: `${base}/.well-known/jwks.json`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: [...grantTypes],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_post'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post'],
    scopes_supported: [...consentScopes],
    service_documentation: `${base}/openapi.json`,
    authorization_response_iss_parameter_supported: true,
    agent_auth: {
      identity_endpoint: `${base}/agent/identity`,
      claim_renewal_endpoint: `${base}/agent/identity/claim`,
      claim_page: `${base}/agent/claim`,
      grant_type: agentClaimGrant,
      assertion_grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
      interval: claimPollInterval,
    },
    resource: resources['resource'],
    authorization_servers: resources['authorization_servers'],
    bearer_methods_supported: resources['bearer_methods_supported'],
  }
}

function protectedResource(base: string, resource: string, name: string): Record<string, unknown> {
  return {
    resource,
    resource_name: name,
    resource_logo_uri: `${base}/logo.svg`,
    authorization_servers: [base],
    bearer_methods_supported: ['header'],
    resource_signing_alg_values_supported: [signingAlgorithm],
    scopes_supported: resource === base ? [...consentScopes] : [...clientScopes],
    resource_documentation: `${base}/openapi.json`,
  }
}

export const authorizationServerMetadataRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/oauth-authorization-server',
  operationId: 'oauthAuthorizationServerMetadata',
  summary: 'Authorization server metadata (RFC 8414): endpoints, grants, PKCE, scopes; `agent_auth` describes agent identity.',
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'discovery metadata is public by design (RFC 8414)' },
  schemas: {},
  responses: { 200: { description: 'The metadata.', schema: Document('AuthorizationServerMetadata') } },
  handler: (_req, svc: DiscoveryContext) => ({ body: authorizationServer(svc.oauthServer.resources.api), headers: cached }),
})

export const protectedResourceMetadataRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/oauth-protected-resource',
  operationId: 'oauthProtectedResourceMetadata',
  summary: 'Protected resource metadata of the API (RFC 9728): which authorization server issues its tokens and the scopes it knows.',
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'discovery metadata is public by design (RFC 9728)' },
  schemas: {},
  responses: { 200: { description: 'The metadata.', schema: Document('ProtectedResourceMetadata') } },
  handler: (_req, svc: DiscoveryContext) => {
    const { api } = svc.oauthServer.resources
    return { body: protectedResource(api, api, 'printfarm API'), headers: cached }
  },
})

export const mcpResourceMetadataRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/oauth-protected-resource/v1/mcp',
  operationId: 'mcpProtectedResourceMetadata',
  summary: 'Protected resource metadata of the MCP endpoint (RFC 9728): tokens for it are asked for with resource={PUBLIC_BASE_URL}/v1/mcp.',
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'discovery metadata is public by design (RFC 9728)' },
  schemas: {},
  responses: { 200: { description: 'The metadata.', schema: Document('McpProtectedResourceMetadata') } },
  handler: (_req, svc: DiscoveryContext) => {
    const { api, mcp } = svc.oauthServer.resources
    return { body: protectedResource(api, mcp, 'printfarm MCP'), headers: cached }
  },
})

export const mcpServerCardRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/mcp/server-card.json',
  operationId: 'mcpServerCard',
  summary: 'The MCP server card: what the server is and where its streamable HTTP endpoint is (OAuth-protected).',
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'discovery metadata is public by design' },
  schemas: {},
  responses: { 200: { description: 'The card.', schema: Document('McpServerCard') } },
  handler: (_req, svc: DiscoveryContext) => {
    const { api, mcp } = svc.oauthServer.resources
    const host = new URL(api).hostname.split('.').reverse().join('.')
    return {
      body: {
        $schema: 'https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json',
        name: `${host}/printfarm`,
        title: 'printfarm',
        description: "Run a 3D print farm: printers and their state, print jobs and the queue, models and files, materials and inventory.",
        version: serviceVersion,
        remotes: [{ type: 'streamable-http', url: mcp, headers: [{ name: 'Authorization', isRequired: true, isSecret: true }] }],
        authorization: { protected_resource_metadata: `${api}/.well-known/oauth-protected-resource/v1/mcp` },
      },
      headers: cached,
    }
  },
})

export const integrationsRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/integrations.json',
  operationId: 'integrations',
  summary: 'Every way into the service in one document: REST (OpenAPI), the live WebSocket feed, OAuth, MCP and agent identity.',
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'discovery metadata is public by design' },
  schemas: {},
  responses: { 200: { description: 'The integrations.', schema: Document('Integrations') } },
  handler: (_req, svc: DiscoveryContext) => {
    const { api, mcp } = svc.oauthServer.resources
    const ws = api.replace(/^http/, 'ws')
    return {
      body: {
        name: 'printfarm',
        version: serviceVersion,
        rest: { base_url: api, openapi: `${api}/openapi.json`, auth: ['Authorization: Bearer <access token>', 'x-api-key: <API key>'] },
        live: { url: `${ws}/v1/live`, protocol: 'WebSocket; JSON frames' },
        oauth: {
          authorization_server: `${api}/.well-known/oauth-authorization-server`,
          protected_resource: `${api}/.well-known/oauth-protected-resource`,
          registration_endpoint: `${api}/v1/oauth/register`,
        },
        mcp: { url: mcp, transport: 'streamable-http', server_card: `${api}/.well-known/mcp/server-card.json`, protected_resource: `${api}/.well-known/oauth-protected-resource/v1/mcp` },
        agent_identity: { identity_endpoint: `${api}/agent/identity`, grant_type: agentClaimGrant },
      },
      headers: cached,
    }
  },
})

export const appsChallengeRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/{document}',
  operationId: 'appsChallenge',
  summary: "An app directory's domain challenge: /.well-known/{vendor}-apps-challenge answers APPS_CHALLENGE_TOKEN as text (404 when not configured).",
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'a domain-ownership check an app directory reads without credentials' },
  schemas: { params: Type.Object({ document: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }) },
  responses: { 200: { description: 'The challenge token.', contentType: 'text/plain' } },
  errors: ['route_not_found'],
  handler: (req, svc: DiscoveryContext) => {
    const challenge = svc.config.appsChallenge
    if (challenge === undefined || req.params.document !== `${challenge.vendor}-apps-challenge`) {
      throw new ServiceError('route_not_found', `no document /.well-known/${req.params.document.slice(0, 100)}`)
    }
    return { raw: challenge.token, contentType: 'text/plain; charset=utf-8', headers: { 'cache-control': 'no-cache' } }
  },
})

const logo = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#171a21"/><path d="M16 44h32v6H16zM20 14h24l-4 8H24zM30 22h4v16h-4z" fill="#3b82f6"/></svg>`

export const logoRoute = defineRoute({
  method: 'GET',
  path: '/logo.svg',
  operationId: 'logo',
  summary: "The service's logo (resource_logo_uri of the resource metadata).",
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'a static image' },
  schemas: {},
  responses: { 200: { description: 'SVG.', contentType: 'image/svg+xml' } },
  handler: () => ({ raw: logo, contentType: 'image/svg+xml', headers: { ...cached, 'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'", 'x-content-type-options': 'nosniff' } }),
})

export const discoveryRoutes: readonly Route<RouteSchemas, DiscoveryContext>[] = [
  authorizationServerMetadataRoute,
  protectedResourceMetadataRoute,
  mcpResourceMetadataRoute,
  mcpServerCardRoute,
  integrationsRoute,
  appsChallengeRoute,
  logoRoute,
] as Route<RouteSchemas, DiscoveryContext>[]
