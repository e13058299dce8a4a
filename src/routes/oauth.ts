/**
 * The OAuth 2.0 authorization server's endpoints (docs/oauth.md).
 * Their errors are RFC 6749 / RFC 7591 bodies: `error` and
 * `error_description`, with our `message` and `requestId` beside them.
 * Failed requests are counted per address (OAUTH_FAILURES_PER_ADDRESS in
 * 15 minutes, then 429): guessing codes, refresh tokens or secrets stays
 * hopeless, while a client's normal use is never counted.
 */
import { ServiceError, type ErrorBody } from '../../protocol/errors.js'
import { RegisterClientBody, RegisteredClientSchema } from '../../protocol/schemas/oauth-clients.js'
import { AuthorizeQuery, grantTypes, HandoffSchema, RevokeBody, SessionHandoffBody, TokenBody, TokenSchema } from '../../protocol/schemas/oauth.js'
import { addressGroup, rateLimited } from '../auth/failure-limiter.js'
import { userOf } from '../auth/principal.js'
import { defineRoute, type Reply, type Route, type RouteRequest, type RouteSchemas } from '../http/route.js'
import { consentPage, errorPage, pageSecurity } from '../oauth/pages.js'
import type { Services } from './route-context.js'
import { withinFailureBudget, type OAuthFailuresContext } from './oauth-failures.js'
import { publicFile } from './public-files.js'

/** What the OAuth endpoints use of the node. */
export type OAuthContext = Pick<Services, 'oauthClients' | 'oauthRegistrations' | 'oauthServer'>

const noStore = { 'cache-control': 'no-store', pragma: 'no-cache' }
/** Outcomes of a well-formed request that are not an attacker's guess (an agent polling on after its claim expired, too): never counted as failures. */
const notFailures = new Set(['authorization_pending', 'expired_token', 'slow_down', 'invalid_scope', 'invalid_target', 'unsupported_grant_type'])

/**
 * HTTP Basic client credentials (RFC 6749 §2.3.1: each part form-encoded, then base64), read into the
 * body's fields. Discovery offers only client_secret_post, but a client library falling back to Basic
 * is understood rather than told its client_id is missing. Both at once is ambiguous: refused.
 */
function withBasicCredentials<B extends { client_id?: string | undefined; client_secret?: string | undefined }>(body: B, authorization: string | undefined): { body: B; basic: boolean } {
  const match = authorization === undefined ? null : /^Basic\s+([A-Za-z0-9+/=]{1,1000})\s*$/i.exec(authorization)
  if (match === null) return { body, basic: false }
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  if (colon < 0) throw new ServiceError('invalid_request', 'the Basic credentials are not client_id:client_secret')
  let clientId: string
  let secret: string
  try {
    clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '))
    secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '))
  } catch {
    throw new ServiceError('invalid_request', 'the Basic credentials are not form-encoded (RFC 6749 §2.3.1)')
  }
  if (body.client_secret !== undefined) throw new ServiceError('invalid_request', 'client credentials sent twice (Authorization header and body): use one')
  if (body.client_id !== undefined && body.client_id !== clientId) throw new ServiceError('invalid_request', 'client_id in the body differs from the Authorization header')
  return { body: { ...body, client_id: clientId, client_secret: secret }, basic: true }
}

/** RFC 6749 §5.2: a client that tried to authenticate with the Authorization header gets 401 and a challenge. */
function basicRefusal(error: unknown, basic: boolean, requestId: string): Reply & { body: ErrorBody } {
  if (!basic || !(error instanceof ServiceError) || error.code !== 'invalid_client') throw error
  return {
    status: 401,
    body: { error: 'invalid_client', error_description: error.message, message: error.message, requestId },
    headers: { 'www-authenticate': 'Basic realm="printfarm", charset="UTF-8"', ...noStore },
  }
}

/** Runs `attempt` within the address's failure budget; success (and a pending poll) gives the count back. */
function counted<T>(svc: OAuthFailuresContext, req: RouteRequest, attempt: () => Promise<T>): Promise<T> {
  return withinFailureBudget(svc, req, attempt, (error) => !(error instanceof ServiceError && notFailures.has(error.code)))
}

export const registerClientRoute = defineRoute({
  method: 'POST',
  path: '/v1/oauth/register',
  operationId: 'registerOAuthClient',
  summary: 'Dynamic client registration (RFC 7591): an application registers itself and gets a client_id.',
  description:
    '`token_endpoint_auth_method` none (the default: a public client, PKCE) or client_secret_post (a `client_secret` is answered once, ' +
    '`client_secret_expires_at` 0). Redirect URIs as for organization clients: https, http on a loopback host (any port), or a private-use ' +
    'scheme with a dot. Besides the fields below, the other RFC 7591 §2 metadata (contacts, tos_uri, policy_uri, jwks_uri, jwks, software_id, ' +
    'software_version, software_statement) and application_type are accepted and echoed; any other field is refused. Errors: ' +
    '`invalid_redirect_uri`, `invalid_client_metadata` (RFC 7591 §3.2.2). OAUTH_REGISTRATIONS_PER_ADDRESS registrations per address in 15 minutes. ' +
    '`scope` may name any of the 19 consent scopes (the 17 client scopes when absent): a bridge application asks for host:pair and print:launch.',
  tags: ['oauth'],
  auth: { kind: 'public', reason: 'an application registers itself before anyone signs in through it (RFC 7591); rate-limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_client_metadata',
  schemas: { body: RegisterClientBody },
  responses: { 201: { description: 'The registration (RFC 7591 §3.2.1).', schema: RegisteredClientSchema } },
  errors: ['invalid_client_metadata', 'invalid_redirect_uri', 'rate_limited'],
  handler: async (req, svc: OAuthContext) => {
    const from = addressGroup(req.remoteAddress)
    const wait = svc.oauthRegistrations.acquire(from)
    if (wait !== undefined) throw rateLimited('client registrations from this address', wait)
    return { status: 201, body: await svc.oauthClients.register(req.body, from) }
  },
})

export const sessionHandoffRoute = defineRoute({
  method: 'POST',
  path: '/v1/oauth/session-handoff',
  operationId: 'createOAuthSessionHandoff',
  summary: "A signed-in person's consent, as a single-use value the authorize endpoint turns into an authorization code.",
  description:
    'The consent page calls it after signing in. The handoff binds the client, the redirect URI, the scopes (kept: those the client may have), ' +
    'the resource ("" for the API, or the MCP endpoint) and the PKCE code challenge (required for public clients); GET /v1/oauth/authorize must ' +
    'repeat them exactly. The organization is x-organization-id, else the client\'s own organization, else your first. Valid 300 s, single use. ' +
    'host:pair and print:launch (a bridge application\'s) are granted only for the API and only by an admin of the organization: a member\'s code ' +
    'leaves them out, and a member asked for nothing else gets invalid_scope. A grant holding them speaks for one host, like a paired key.',
  tags: ['oauth'],
  auth: { kind: 'user' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  schemas: { body: SessionHandoffBody },
  responses: { 200: { description: 'The handoff.', schema: HandoffSchema } },
  errors: ['invalid_client', 'invalid_request', 'invalid_scope', 'invalid_target', 'organization_not_found', 'rate_limited'],
  handler: async (req, svc: OAuthContext) => {
    const body = await counted(svc, req, () => svc.oauthServer.authorization.createHandoff(userOf(req.principal), req.body, req.headers['x-organization-id']))
    return { body, headers: noStore }
  },
})

export const authorizeRoute = defineRoute({
  method: 'GET',
  path: '/v1/oauth/authorize',
  operationId: 'oauthAuthorize',
  summary: 'The authorization endpoint (RFC 6749 §4.1, PKCE S256): the sign-in and consent page, or a redirect back to the application.',
  description:
    'Without `handoff`: 200 with the sign-in and consent page (email, password, Allow, Deny). With a handoff from POST /v1/oauth/session-handoff ' +
    'that matches the request: 302 to redirect_uri with `code`, `state` and `iss` (RFC 9207). `decision=deny`: 302 with `error=access_denied`. ' +
    "An unknown client or a redirect_uri the client did not register: 400 and no redirect (an HTML page for browsers, JSON otherwise). Other errors " +
    'go back on the redirect URI as RFC 6749 §4.1.2.1 says. A public client must send code_challenge with code_challenge_method=S256. ' +
    '`organization_id` picks which of your organizations the token is for.',
  tags: ['oauth'],
  auth: { kind: 'public', reason: 'the browser arrives here before anyone signs in; the page signs in, and codes need a handoff of a signed-in person' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  schemas: { query: AuthorizeQuery },
  responses: {
    200: { description: 'The sign-in and consent page.', contentType: 'text/html' },
    302: { description: 'Back to the application: `code`, `state`, `iss`, or `error`, `error_description`, `state`, `iss`.' },
  },
  errors: ['invalid_client', 'invalid_request', 'rate_limited'],
  handler: async (req, svc: OAuthContext) => {
    try {
      // Only a request with a handoff can be a guess (of a handoff); the page itself is not counted.
      const outcome = req.query.handoff === undefined ? await svc.oauthServer.authorization.authorize(req.query) : await counted(svc, req, () => svc.oauthServer.authorization.authorize(req.query))
      if (outcome.kind === 'redirect') return { status: 302, headers: { location: outcome.location, ...noStore } }
      const resourceName = outcome.request.resource === '' ? 'the printfarm API' : 'AI agent tools (MCP)'
      return { raw: consentPage(outcome.request, resourceName), contentType: 'text/html; charset=utf-8', headers: pageSecurity }
    } catch (error) {
      if (error instanceof ServiceError && /text\/html/i.test(req.headers['accept'] ?? '')) {
        return { status: error.status, raw: errorPage(error.code, error.message), contentType: 'text/html; charset=utf-8', headers: { ...pageSecurity, ...error.headers } }
      }
      throw error
    }
  },
})

export const consentScriptRoute = defineRoute({
  method: 'GET',
  path: '/oauth/consent.js',
  operationId: 'oauthConsentScript',
  summary: "The consent page's script.",
  tags: ['oauth'],
  auth: { kind: 'public', reason: 'the static script of the consent page' },
  schemas: {},
  responses: { 200: { description: 'JavaScript.', contentType: 'text/javascript' } },
  handler: () => ({ raw: consentScript, contentType: 'text/javascript; charset=utf-8', headers: { ...pageSecurity, 'cache-control': 'no-cache' } }),
})
const consentScript = publicFile('consent.js')

export const tokenRoute = defineRoute({
  method: 'POST',
  path: '/v1/oauth/token',
  operationId: 'oauthToken',
  summary: `The token endpoint (RFC 6749 §3.2): grant_type ${grantTypes.join(', ')}.`,
  description:
    'Form (application/x-www-form-urlencoded) or JSON body. Clients authenticate with client_secret_post (HTTP Basic is understood too; its ' +
    'failures answer 401 with WWW-Authenticate), or are public (client_id only, PKCE). ' +
    'authorization_code: code, redirect_uri, code_verifier (S256), optional resource (must equal the authorized one). refresh_token: rotates; a ' +
    'refresh token used twice revokes every token of that sign-in. jwt-bearer (RFC 7523): `assertion` is an identity assertion of this service, ' +
    'each usable once (a replay revokes the agent). Agent claim: `claim_token` and client_id = the agent_id; answers authorization_pending until a ' +
    'person confirms, expired_token when the claim ran out. ' +
    '`scope` narrows what is granted. Access tokens are RFC 9068 JWTs for the resource (the API when none; MCP needs {PUBLIC_BASE_URL}/v1/mcp), ' +
    'valid OAUTH_ACCESS_TTL_S; refresh tokens OAUTH_REFRESH_TTL_S. Errors are RFC 6749 §5.2 bodies.',
  tags: ['oauth'],
  auth: { kind: 'public', reason: 'the grant is the credential (RFC 6749 §3.2); failures are limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  formBody: true,
  schemas: { body: TokenBody },
  responses: { 200: { description: 'Tokens.', schema: TokenSchema } },
  errors: [
    'invalid_request',
    'invalid_client',
    'invalid_grant',
    'unauthorized_client',
    'unsupported_grant_type',
    'invalid_scope',
    'invalid_target',
    'authorization_pending',
    'expired_token',
    'rate_limited',
  ],
  handler: async (req, svc: OAuthContext) => {
    const { body, basic } = withBasicCredentials(req.body, req.headers['authorization'])
    try {
      return { body: await counted(svc, req, () => svc.oauthServer.tokens.grant(body)), headers: noStore }
    } catch (error) {
      return basicRefusal(error, basic, req.requestId)
    }
  },
})

export const revokeRoute = defineRoute({
  method: 'POST',
  path: '/v1/oauth/revoke',
  operationId: 'oauthRevoke',
  summary: 'Token revocation (RFC 7009): a refresh token ends its whole sign-in; an access token is refused from now on.',
  description:
    'Form or JSON body. A confidential client authenticates (client_id, client_secret); a public one sends its client_id; without a client_id, ' +
    'holding the token is enough. Unknown, expired or another client\'s tokens answer 200 too and change nothing (RFC 7009 §2.2).',
  tags: ['oauth'],
  auth: { kind: 'public', reason: 'holding a token is the right to revoke it (RFC 7009); failures are limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  formBody: true,
  schemas: { body: RevokeBody },
  responses: { 200: { description: 'Revoked, or nothing to revoke.' } },
  errors: ['invalid_request', 'invalid_client', 'rate_limited'],
  handler: async (req, svc: OAuthContext) => {
    const { body, basic } = withBasicCredentials(req.body, req.headers['authorization'])
    try {
      await counted(svc, req, () => svc.oauthServer.tokens.revoke(body))
      return { body: {}, headers: noStore }
    } catch (error) {
      return basicRefusal(error, basic, req.requestId)
    }
  },
})

export const oauthRoutes: readonly Route<RouteSchemas, OAuthContext>[] = [
  registerClientRoute,
  sessionHandoffRoute,
  authorizeRoute,
  consentScriptRoute,
  tokenRoute,
  revokeRoute,
] as Route<RouteSchemas, OAuthContext>[]
