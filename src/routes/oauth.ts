/**
 * The OAuth 2.0 authorization server's endpoints (SPEC part 4 group C).
 * Their errors are RFC 6749 / RFC 7591 bodies: `error` and
 * `error_description`, with our `message` and `requestId` beside them.
 */
import { ServiceError } from '../../protocol/errors.js'
import { RegisterClientBody, RegisteredClientSchema } from '../../protocol/schemas/oauth-clients.js'
import { addressGroup } from '../auth/failure-limiter.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from '../services.js'

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
    '`invalid_redirect_uri`, `invalid_client_metadata` (RFC 7591 §3.2.2). OAUTH_REGISTRATIONS_PER_ADDRESS registrations per address in 15 minutes.',
  tags: ['oauth'],
  auth: { kind: 'public', reason: 'an application registers itself before anyone signs in through it (RFC 7591); rate-limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_client_metadata',
  schemas: { body: RegisterClientBody },
  responses: { 201: { description: 'The registration (RFC 7591 §3.2.1).', schema: RegisteredClientSchema } },
  errors: ['invalid_client_metadata', 'invalid_redirect_uri', 'rate_limited'],
  handler: async (req, svc: Services) => {
    const from = addressGroup(req.remoteAddress)
    const wait = svc.oauthRegistrations.acquire(from)
    if (wait !== undefined) throw new ServiceError('rate_limited', `too many client registrations from this address; try again in ${wait} s`, { headers: { 'retry-after': String(wait) } })
    return { status: 201, body: await svc.oauthClients.register(req.body, from) }
  },
})

export const oauthRoutes: readonly Route<RouteSchemas, Services>[] = [registerClientRoute] as Route<RouteSchemas, Services>[]
