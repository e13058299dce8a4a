/**
 * Agent identity (docs/oauth.md): an AI agent starts a claim, a
 * signed-in person confirms it on the claim page, and the agent polls the
 * token endpoint with the claim grant. The agent's routes are public and
 * limited per address; confirming needs a signed-in person.
 */
import { ServiceError } from '../../protocol/errors.js'
import {
  AgentIdentityBody,
  AgentIdentitySchema,
  ClaimSummarySchema,
  ConfirmClaimBody,
  ConfirmedClaimSchema,
  InspectClaimQuery,
  RenewClaimBody,
  RenewedClaimSchema,
} from '../../protocol/schemas/oauth.js'
import { clientScopes } from '../../protocol/scopes.js'
import { addressGroup, rateLimited } from '../auth/failure-limiter.js'
import { userOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteRequest, type RouteSchemas } from '../http/route.js'
import { claimPage, pageSecurity } from '../oauth/pages.js'
import type { Services } from './route-context.js'
import { withinFailureBudget, type OAuthFailuresContext } from './oauth-failures.js'
import { publicFile } from './public-files.js'

/** What the agent identity routes use of the node. */
export type AgentIdentityContext = Pick<Services, 'oauthServer'>

function startLimited(svc: AgentIdentityContext, req: RouteRequest): void {
  const wait = svc.oauthServer.agentStarts.acquire(addressGroup(req.remoteAddress))
  if (wait !== undefined) throw rateLimited('agent identities started from this address', wait)
}

/** A lookup by claim token counts as a failure unless it found the claim (guessing stays hopeless). */
function lookupLimited<T>(svc: OAuthFailuresContext, req: RouteRequest, lookup: () => Promise<T>): Promise<T> {
  return withinFailureBudget(svc, req, lookup, (error) => error instanceof ServiceError && error.code === 'agent_claim_not_found')
}

export const createAgentIdentityRoute = defineRoute({
  method: 'POST',
  path: '/agent/identity',
  operationId: 'createAgentIdentity',
  summary: 'An AI agent asks for an identity: a person confirms it at claim_url, and the agent polls the token endpoint with the claim grant.',
  description:
    'Answers the claim_token (the agent keeps it secret), the claim_url to show the person (the token rides in its #fragment, never sent to a ' +
    'server), when the claim expires (AGENT_CLAIM_TTL_S) and the poll interval in seconds. Poll POST /v1/oauth/token with ' +
    'grant_type=urn:printfarm:agent-auth:grant-type:claim&claim_token=…&client_id={agent_id} until it answers tokens. AGENT_IDENTITIES_PER_ADDRESS per address in 15 minutes.',
  tags: ['agent-identity'],
  auth: { kind: 'public', reason: 'an agent has no credential yet: this is how it gets one, once a person confirms; rate-limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  schemas: { body: AgentIdentityBody },
  responses: { 201: { description: 'The claim.', schema: AgentIdentitySchema } },
  errors: ['invalid_request', 'rate_limited'],
  handler: async (req, svc: AgentIdentityContext) => {
    startLimited(svc, req)
    return { status: 201, body: await svc.oauthServer.agents.create(req.body, addressGroup(req.remoteAddress)), headers: { 'cache-control': 'no-store' } }
  },
})

export const renewAgentClaimRoute = defineRoute({
  method: 'POST',
  path: '/agent/identity/claim',
  operationId: 'renewAgentClaim',
  summary: 'Renews an expired claim with a new claim_token; from then on only the person with `email` may confirm it.',
  description: '409 claim_attempt_active while the claim has not expired, 409 claim_already_confirmed once confirmed, 404 for an unknown claim_token.',
  tags: ['agent-identity'],
  auth: { kind: 'public', reason: 'the agent holds no credential but its claim token; rate-limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  schemas: { body: RenewClaimBody },
  responses: { 200: { description: 'The renewed claim.', schema: RenewedClaimSchema } },
  errors: ['invalid_request', 'agent_claim_not_found', 'claim_attempt_active', 'claim_already_confirmed', 'rate_limited'],
  handler: async (req, svc: AgentIdentityContext) => {
    startLimited(svc, req)
    return { body: await lookupLimited(svc, req, () => svc.oauthServer.agents.renew(req.body)), headers: { 'cache-control': 'no-store' } }
  },
})

export const inspectAgentClaimRoute = defineRoute({
  method: 'GET',
  path: '/v1/agent/identity/claim/inspect',
  operationId: 'inspectAgentClaim',
  summary: "What the claim page shows: the agent's type and login hint, the claim's status (pending, expired, confirmed) and expiry.",
  tags: ['agent-identity'],
  auth: { kind: 'public', reason: 'read by the claim page before sign-in, by the secret claim token; shows nothing else; failures limited per address' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  schemas: { query: InspectClaimQuery },
  responses: { 200: { description: 'The claim.', schema: ClaimSummarySchema } },
  errors: ['invalid_request', 'agent_claim_not_found', 'rate_limited'],
  handler: async (req, svc: AgentIdentityContext) => ({ body: await lookupLimited(svc, req, () => svc.oauthServer.agents.inspect(req.query.claim_token)), headers: { 'cache-control': 'no-store' } }),
})

export const confirmAgentClaimRoute = defineRoute({
  method: 'POST',
  path: '/v1/agent/identity/claim/confirm',
  operationId: 'confirmAgentClaim',
  summary: 'A signed-in person lets the agent act for them in one of their organizations, with the scopes given.',
  description:
    "The agent's tokens act for you: bounded by these scopes and by your role, and refused once you leave the organization. 400 expired_token " +
    'when the claim expired (the agent renews it), 403 claim_email_mismatch when it was renewed for another email, 409 when already confirmed.',
  tags: ['agent-identity'],
  auth: { kind: 'user' },
  errorBody: 'oauth',
  invalidRequestCode: 'invalid_request',
  schemas: { body: ConfirmClaimBody },
  responses: { 200: { description: 'Confirmed.', schema: ConfirmedClaimSchema } },
  errors: ['invalid_request', 'agent_claim_not_found', 'claim_already_confirmed', 'expired_token', 'claim_email_mismatch', 'organization_not_found'],
  handler: async (req, svc: AgentIdentityContext) => ({ body: await svc.oauthServer.agents.confirm(userOf(req.principal), req.body) }),
})

const claimHtml = claimPage(clientScopes)
const claimScript = publicFile('claim.js')

export const claimPageRoute = defineRoute({
  method: 'GET',
  path: '/agent/claim',
  operationId: 'agentClaimPage',
  summary: 'The claim page an agent sends a person to (claim_url): sign in, choose what the agent may do, confirm.',
  tags: ['agent-identity'],
  auth: { kind: 'public', reason: 'a static page; it signs in through POST /v1/auth/login and reads the claim from the URL fragment' },
  schemas: {},
  responses: { 200: { description: 'HTML.', contentType: 'text/html' } },
  handler: () => ({ raw: claimHtml, contentType: 'text/html; charset=utf-8', headers: pageSecurity }),
})

export const claimScriptRoute = defineRoute({
  method: 'GET',
  path: '/agent/claim.js',
  operationId: 'agentClaimScript',
  summary: "The claim page's script.",
  tags: ['agent-identity'],
  auth: { kind: 'public', reason: 'the static script of the claim page' },
  schemas: {},
  responses: { 200: { description: 'JavaScript.', contentType: 'text/javascript' } },
  handler: () => ({ raw: claimScript, contentType: 'text/javascript; charset=utf-8', headers: { ...pageSecurity, 'cache-control': 'no-cache' } }),
})

export const agentIdentityRoutes: readonly Route<RouteSchemas, AgentIdentityContext>[] = [
  createAgentIdentityRoute,
  renewAgentClaimRoute,
  inspectAgentClaimRoute,
  confirmAgentClaimRoute,
  claimPageRoute,
  claimScriptRoute,
] as Route<RouteSchemas, AgentIdentityContext>[]
