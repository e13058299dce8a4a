/**
 * The authorization server's requests and answers (docs/oauth.md
 * and C): session handoff, authorize, token, revocation and agent identity.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - The token and revocation endpoints take form bodies (RFC 6749 §4.1.3)
 *   or JSON; unknown parameters there and at authorize are ignored, as
 *   RFC 6749 §3.1 and §3.2 require, while each known one is bounded.
 * - The agent claim grant's type is `urn:printfarm:agent-auth:grant-type:claim`.
 */
import { Type, type Static } from '@sinclair/typebox'
import { clientScopes, consentScopes } from '../scopes.js'

const strict = { additionalProperties: false } as const
const lenient = { additionalProperties: true } as const

export const agentClaimGrant = 'urn:printfarm:agent-auth:grant-type:claim'
export const jwtBearerGrant = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
export const grantTypes = ['authorization_code', 'refresh_token', jwtBearerGrant, agentClaimGrant] as const

const ConsentScope = Type.Union(
  consentScopes.map((s) => Type.Literal(s)),
  { description: 'One of the 19 consent scopes.' },
)

export const SessionHandoffBody = Type.Object(
  {
    clientId: Type.String({ minLength: 1, maxLength: 200 }),
    redirectUri: Type.String({ minLength: 1, maxLength: 2048 }),
    scopes: Type.Array(ConsentScope, {
      minItems: 1,
      maxItems: consentScopes.length,
      uniqueItems: true,
      description:
        "Scopes the client may not have are dropped. host:pair and print:launch are granted only by an admin of the organization and only for the API (not MCP); a member's consent leaves them out. invalid_scope when nothing is left.",
    }),
    resource: Type.String({ maxLength: 2048, description: 'The resource the token is for (RFC 8707); "" for the API itself.' }),
    codeChallenge: Type.Optional(Type.String({ minLength: 43, maxLength: 128, pattern: '^[A-Za-z0-9._~-]+$', description: 'The PKCE S256 challenge the authorization request carries.' })),
  },
  { ...strict, title: 'SessionHandoff' },
)
export type SessionHandoffBody = Static<typeof SessionHandoffBody>

export const HandoffSchema = Type.Object(
  {
    handoff: Type.String({ description: 'Single use: pass it to GET /v1/oauth/authorize as `handoff`, with the same client, redirect URI, scopes, resource and code challenge.' }),
    expires_in: Type.Integer({ description: 'Seconds it stays usable.' }),
  },
  { ...strict, title: 'Handoff' },
)

export const AuthorizeQuery = Type.Object(
  {
    response_type: Type.String({ maxLength: 100 }),
    client_id: Type.String({ minLength: 1, maxLength: 200 }),
    redirect_uri: Type.String({ minLength: 1, maxLength: 2048 }),
    scope: Type.Optional(Type.String({ maxLength: 1000, description: 'Space-separated scopes; the client\'s scopes when absent. Scopes the client may not have are dropped; host:pair and print:launch only for the API, and granted only when the person is an admin of the organization.' })),
    state: Type.Optional(Type.String({ maxLength: 2048 })),
    code_challenge: Type.Optional(Type.String({ maxLength: 200 })),
    code_challenge_method: Type.Optional(Type.String({ maxLength: 20 })),
    resource: Type.Optional(Type.String({ maxLength: 2048 })),
    handoff: Type.Optional(Type.String({ maxLength: 200 })),
    organization_id: Type.Optional(Type.String({ maxLength: 100 })),
    decision: Type.Optional(Type.String({ maxLength: 20, description: '`deny`: the person declined; the client gets error=access_denied.' })),
    consent: Type.Optional(
      Type.String({ maxLength: 200, description: "Set by the consent page on Deny and Allow: proof the person saw it, without which an application that registered itself gets no error on its redirect URI." }),
    ),
  },
  { ...lenient, title: 'AuthorizeQuery' },
)
export type AuthorizeQuery = Static<typeof AuthorizeQuery>

const Param = (max: number, description?: string) => Type.Optional(Type.String({ maxLength: max, ...(description === undefined ? {} : { description }) }))

export const TokenBody = Type.Object(
  {
    grant_type: Type.String({ minLength: 1, maxLength: 200, description: grantTypes.join(', ') }),
    code: Param(200),
    redirect_uri: Param(2048),
    client_id: Param(200),
    client_secret: Param(200),
    code_verifier: Param(200),
    resource: Param(2048),
    refresh_token: Param(200),
    claim_token: Param(200),
    assertion: Param(8192),
    scope: Param(1000, 'Space-separated: narrows what the grant allows.'),
  },
  { ...lenient, title: 'TokenRequest' },
)
export type TokenBody = Static<typeof TokenBody>

export const TokenSchema = Type.Object(
  {
    access_token: Type.String({ description: 'An RFC 9068 JWT for the resource asked for (the API when none).' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer(),
    scope: Type.String(),
    refresh_token: Type.Optional(Type.String({ description: 'authorization_code and refresh_token grants of clients registered for refresh_token; single use (each use answers a new one).' })),
    identity_assertion: Type.Optional(Type.String({ description: 'Claim and jwt-bearer grants: a JWT the agent exchanges for new tokens with the jwt-bearer grant (single use).' })),
    assertion_expires: Type.Optional(Type.Integer({ description: 'Unix seconds when identity_assertion expires.' })),
  },
  { ...strict, title: 'Token' },
)
export type Token = Static<typeof TokenSchema>

export const RevokeBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 8192 }),
    token_type_hint: Type.Optional(Type.String({ maxLength: 100, description: 'access_token or refresh_token; a hint only.' })),
    client_id: Param(200),
    client_secret: Param(200),
  },
  { ...lenient, title: 'RevokeRequest' },
)
export type RevokeBody = Static<typeof RevokeBody>

export const AgentIdentityBody = Type.Object(
  {
    type: Type.String({ minLength: 1, maxLength: 100, description: 'What kind of agent this is (free text, shown on the claim page), e.g. "claude-code".' }),
    login_hint: Type.Optional(Type.String({ minLength: 3, maxLength: 320, description: 'Shown on the claim page, nothing more.' })),
  },
  { ...strict, title: 'AgentIdentityRequest' },
)
export type AgentIdentityBody = Static<typeof AgentIdentityBody>

const ClaimToken = Type.String({ minLength: 20, maxLength: 200 })

export const AgentIdentitySchema = Type.Object(
  {
    agent_id: Type.String(),
    claim_token: Type.String({ description: 'Secret: the agent polls the token endpoint with it.' }),
    claim_url: Type.String({ description: 'The page a person opens to confirm the claim.' }),
    expires_at: Type.String({ format: 'date-time' }),
    interval: Type.Integer({ description: 'Seconds between polls of the token endpoint.' }),
  },
  { ...strict, title: 'AgentIdentity' },
)
export type AgentIdentity = Static<typeof AgentIdentitySchema>

export const RenewClaimBody = Type.Object(
  {
    claim_token: ClaimToken,
    email: Type.String({ minLength: 3, maxLength: 320, format: 'email', description: 'Only the person signed in with this email may confirm the renewed claim.' }),
  },
  { ...strict, title: 'RenewAgentClaim' },
)
export type RenewClaimBody = Static<typeof RenewClaimBody>

export const RenewedClaimSchema = Type.Object(
  {
    agent_id: Type.String(),
    claim_token: Type.String(),
    claim_url: Type.String(),
    expires_at: Type.String({ format: 'date-time' }),
    interval: Type.Integer(),
  },
  { ...strict, title: 'RenewedAgentClaim' },
)

export const InspectClaimQuery = Type.Object({ claim_token: ClaimToken }, strict)
export const ClaimSummarySchema = Type.Object(
  {
    type: Type.String(),
    login_hint: Type.Union([Type.String(), Type.Null()]),
    status: Type.Union([Type.Literal('pending'), Type.Literal('expired'), Type.Literal('confirmed')]),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { ...strict, title: 'AgentClaimSummary' },
)
export type ClaimSummary = Static<typeof ClaimSummarySchema>

export const ConfirmClaimBody = Type.Object(
  {
    claim_token: ClaimToken,
    organization_id: Type.String({ format: 'uuid' }),
    scopes: Type.Array(
      Type.Union(clientScopes.map((s) => Type.Literal(s))),
      { minItems: 1, maxItems: clientScopes.length, uniqueItems: true, description: 'What the agent may do (client scopes); bounded by your role.' },
    ),
  },
  { ...strict, title: 'ConfirmAgentClaim' },
)
export type ConfirmClaimBody = Static<typeof ConfirmClaimBody>

export const ConfirmedClaimSchema = Type.Object(
  {
    agent_id: Type.String(),
    organization_id: Type.String({ format: 'uuid' }),
    scopes: Type.Array(Type.String()),
    status: Type.Literal('confirmed'),
  },
  { ...strict, title: 'ConfirmedAgentClaim' },
)

/**
 * What applications and agents hold in an organization: a sign-in through an
 * application (its refresh tokens) or a confirmed agent. Listed and revoked by
 * the person it acts for and by the organization's admins.
 */
export const AuthorizationSchema = Type.Object(
  {
    id: Type.String({ description: 'A sign-in through an application: a uuid; an agent: its agent_id (pfa_…).' }),
    kind: Type.Union([Type.Literal('application'), Type.Literal('agent')]),
    client_id: Type.String({ description: "The application's client_id, or the agent_id." }),
    name: Type.String({ description: "The application's name (its client_id when it has none), or the agent's type." }),
    user_id: Type.String({ format: 'uuid', description: 'The person it acts for.' }),
    user_email: Type.String(),
    scopes: Type.Array(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.String({ format: 'date-time', description: 'The last refresh (applications) or renewal (agents).' }),
    expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When its refresh token runs out unless used; null for agents (they renew).' }),
  },
  { ...strict, title: 'OAuthAuthorization' },
)
export type Authorization = Static<typeof AuthorizationSchema>
export const AuthorizationListSchema = Type.Object({ authorizations: Type.Array(AuthorizationSchema) }, { ...strict, title: 'OAuthAuthorizationList' })
export const AuthorizationParams = Type.Object(
  { authorizationId: Type.String({ minLength: 1, maxLength: 100, pattern: '^([0-9a-fA-F-]{36}|pfa_[A-Za-z0-9_-]{1,60})$', description: 'A uuid or an agent_id.' }) },
  strict,
)
