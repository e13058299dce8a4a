/**
 * OAuth clients an organization manages (docs/authentication.md, part 2 "OAuth
 * client"): the applications its people may sign in to the farm with.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - `client_secret` exists only for confidential clients (`is_public: false`)
 *   and is in the create answer only; public clients (native and browser
 *   apps, which cannot keep a secret) get null and must use PKCE.
 * - redirect_uris: 1-10 unique (as dynamic registration allows), each an
 *   https URI, http on a loopback host, or a private-use scheme with a dot;
 *   scopes: 1-17 unique client scopes.
 * - `{clientId}` in paths is the record's `id` or its `client_id`.
 * - A client is the organization's: its members read it, its admins change it.
 */
import { Type, type Static } from '@sinclair/typebox'
import { clientScopes } from '../scopes.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const Time = Type.String({ format: 'date-time' })

const ClientScopes = Type.Array(
  Type.Union(
    clientScopes.map((s) => Type.Literal(s)),
    { description: 'One of the 17 client scopes (the scopes without host:pair and print:launch).' },
  ),
  { minItems: 1, maxItems: clientScopes.length, uniqueItems: true },
)
const RedirectUris = Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), {
  minItems: 1,
  maxItems: 10,
  uniqueItems: true,
  description: 'https URIs, http on a loopback host (any port then matches), or private-use schemes (com.example.app:/callback); no fragments.',
})
const Name = Type.String({ minLength: 1, maxLength: 255 })
const Description = Type.String({ maxLength: 1000 })

export const CreateOAuthClientBody = Type.Object(
  {
    organization_id: Uuid,
    name: Name,
    redirect_uris: RedirectUris,
    scopes: ClientScopes,
    description: Type.Optional(Description),
    is_public: Type.Optional(Type.Boolean({ default: true, description: 'true: a public client (no secret, PKCE); false: a confidential client with a secret.' })),
  },
  { ...strict, title: 'CreateOAuthClient' },
)
export type CreateOAuthClientBody = Static<typeof CreateOAuthClientBody>

export const UpdateOAuthClientBody = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Type.Union([Description, Type.Null()])),
    redirect_uris: Type.Optional(RedirectUris),
    scopes: Type.Optional(ClientScopes),
    is_enabled: Type.Optional(Type.Boolean({ description: 'false: the client can no longer start a sign-in or use its tokens.' })),
  },
  { ...strict, minProperties: 1, title: 'UpdateOAuthClient' },
)
export type UpdateOAuthClientBody = Static<typeof UpdateOAuthClientBody>

export const OAuthClientSchema = Type.Object(
  {
    id: Uuid,
    client_id: Type.String({ description: 'What the client sends as client_id.' }),
    organization_id: Uuid,
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    redirect_uris: Type.Array(Type.String()),
    scopes: Type.Array(Type.String()),
    is_public: Type.Boolean(),
    is_enabled: Type.Boolean(),
    created_at: Time,
    updated_at: Time,
  },
  { ...strict, title: 'OAuthClient' },
)
export type OAuthClient = Static<typeof OAuthClientSchema>

export const CreatedOAuthClientSchema = Type.Object(
  {
    ...OAuthClientSchema.properties,
    client_secret: Type.Union([Type.String(), Type.Null()], { description: 'A confidential client\'s secret, in this answer only (the service keeps a hash); null for a public client.' }),
  },
  { ...strict, title: 'CreatedOAuthClient' },
)

export const OAuthClientListQuery = Type.Object({ organization_id: Type.Optional(Uuid) }, strict)
export const OAuthClientListSchema = Type.Object({ clients: Type.Array(OAuthClientSchema) }, { ...strict, title: 'OAuthClientList' })
export const OAuthClientParams = Type.Object({ clientId: Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$', description: "The client's id or client_id." }) }, strict)

/**
 * Dynamic client registration (RFC 7591; docs/oauth.md). The documented fields
 * and limits, plus the other RFC 7591 §2 client metadata names and
 * `application_type`, which real clients send (the MCP client always does);
 * anything else is refused. `scope` is space-separated client scopes (all 17
 * when absent).
 */
const HttpsUri = Type.String({ minLength: 1, maxLength: 2048 })
export const RegisterClientBody = Type.Object(
  {
    redirect_uris: Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { minItems: 1, maxItems: 10, uniqueItems: true }),
    client_name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    grant_types: Type.Optional(Type.Array(Type.Union([Type.Literal('authorization_code'), Type.Literal('refresh_token')]), { minItems: 1, maxItems: 2, uniqueItems: true })),
    response_types: Type.Optional(Type.Array(Type.Literal('code'), { minItems: 1, maxItems: 1 })),
    token_endpoint_auth_method: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('client_secret_post')], { description: 'none (default): a public client with PKCE; client_secret_post: a secret is issued.' })),
    scope: Type.Optional(Type.String({ maxLength: 1000, description: 'Space-separated scopes, any of the 19 consent scopes; the 17 client scopes when absent. host:pair and print:launch make the application a bridge: only an admin of the organization can grant them, and a grant of them speaks for one host.' })),
    client_uri: Type.Optional(HttpsUri),
    logo_uri: Type.Optional(HttpsUri),
    tos_uri: Type.Optional(HttpsUri),
    policy_uri: Type.Optional(HttpsUri),
    jwks_uri: Type.Optional(HttpsUri),
    jwks: Type.Optional(Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true }), { maxItems: 10 }) }, { additionalProperties: true })),
    contacts: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 320 }), { maxItems: 10 })),
    software_id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    software_version: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    software_statement: Type.Optional(Type.String({ minLength: 1, maxLength: 8192, description: 'Accepted and kept; not verified.' })),
    application_type: Type.Optional(Type.Union([Type.Literal('web'), Type.Literal('native')])),
  },
  { ...strict, title: 'RegisterClient' },
)
export type RegisterClientBody = Static<typeof RegisterClientBody>

export const RegisteredClientSchema = Type.Object(
  {
    client_id: Type.String(),
    client_secret: Type.Optional(Type.String({ description: 'client_secret_post clients only, in this answer only.' })),
    client_secret_expires_at: Type.Optional(Type.Integer({ description: '0: the secret does not expire.' })),
    client_id_issued_at: Type.Integer({ description: 'Unix seconds.' }),
    client_name: Type.Union([Type.String(), Type.Null()]),
    redirect_uris: Type.Array(Type.String()),
    grant_types: Type.Array(Type.String()),
    response_types: Type.Array(Type.String()),
    token_endpoint_auth_method: Type.String(),
    scope: Type.String(),
  },
  { additionalProperties: true, title: 'RegisteredClient', description: 'The registration, with the other metadata sent echoed back (RFC 7591 §3.2.1).' },
)
export type RegisteredClient = Static<typeof RegisteredClientSchema>
