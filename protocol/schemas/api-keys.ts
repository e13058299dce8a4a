/**
 * API keys and bridge pairing (docs/authentication.md, part 2 "API key" and
 * "Auth code"). API key records use camelCase; the auth-code exchange answers
 * with the same record in snake_case, as documented.
 */
import { Type, type Static } from '@sinclair/typebox'
import { consentScopes } from '../scopes.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const DateTime = Type.String({ format: 'date-time' })
const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()])

export const ScopeSchema = Type.Union(
  consentScopes.map((s) => Type.Literal(s)),
  { description: 'One of the 19 scope values (docs/authentication.md, "Scopes").' },
)
export const ScopesSchema = Type.Array(ScopeSchema, { minItems: 1, maxItems: consentScopes.length, uniqueItems: true })

export const ApiKeySchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    organizationId: Uuid,
    createdAt: DateTime,
    expiresAt: Nullable(DateTime),
    lastUsedAt: Nullable(DateTime),
    enabled: Type.Boolean(),
    scopes: Type.Array(Type.String()),
  },
  { title: 'ApiKey' },
)
export type ApiKeyRecord = Static<typeof ApiKeySchema>

export const CreatedApiKeySchema = Type.Intersect([ApiKeySchema, Type.Object({ key: Type.String({ description: 'The secret: shown in this response only.' }) })], {
  title: 'CreatedApiKey',
})

export const CreateApiKeyBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200 }), scopes: ScopesSchema, expires_at: Type.Optional(DateTime) },
  { ...strict, title: 'CreateApiKeyRequest' },
)
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>

export const UpdateApiKeyBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    enabled: Type.Optional(Type.Boolean()),
    expires_at: Type.Optional(Nullable(DateTime)),
    scopes: Type.Optional(ScopesSchema),
  },
  { ...strict, minProperties: 1, title: 'UpdateApiKeyRequest' },
)
export type UpdateApiKeyBody = Static<typeof UpdateApiKeyBody>

export const ApiKeyListQuery = Type.Object({ organizationId: Type.Optional(Uuid) }, strict)
export const ApiKeyListSchema = Type.Object({ apiKeys: Type.Array(ApiKeySchema) }, { title: 'ApiKeyList' })
export const ApiKeyParams = Type.Object({ id: Uuid })
export const DeleteApiKeyQuery = Type.Object({ organizationId: Uuid }, strict)

export const UsageLogQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
    before: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'nextCursor of the previous page.' })),
  },
  strict,
)
export const UsageLogSchema = Type.Object(
  {
    logs: Type.Array(
      Type.Object({
        usedAt: DateTime,
        method: Type.String(),
        route: Type.String({ description: 'Route template, e.g. /v1/printer-events/batch.' }),
        status: Type.Integer(),
        remoteAddress: Type.String(),
        requestId: Type.String(),
      }),
    ),
    nextCursor: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `before` for older entries; null at the end.' }),
  },
  { title: 'ApiKeyUsageLog' },
)

export const AuthCodeCreatedSchema = Type.Object(
  { code: Type.String({ description: 'Ten characters, shown as XXXXX-XXXXX.' }), expires_at: DateTime },
  { title: 'AuthCodeCreated' },
)
export const CreateAuthCodeBody = Type.Object({}, { ...strict, title: 'CreateAuthCodeRequest' })

export const AuthCodeText = Type.String({ minLength: 1, maxLength: 32, description: 'The code as typed: case, spaces and hyphens do not matter.' })
export const VerifyAuthCodeBody = Type.Object({ code: AuthCodeText, organizationId: Type.Optional(Uuid) }, { ...strict, title: 'VerifyAuthCodeRequest' })
export type VerifyAuthCodeBody = Static<typeof VerifyAuthCodeBody>
export const AuthCodeParams = Type.Object({ code: AuthCodeText })

export const AuthCodeSchema = Type.Object(
  {
    id: Uuid,
    code: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('used'), Type.Literal('expired')]),
    verified_at: Nullable(DateTime),
    verified_by: Nullable(Type.String()),
    used_at: Nullable(DateTime),
    used_by: Nullable(Type.String()),
    expires_at: DateTime,
  },
  { title: 'AuthCode' },
)

export const PairedApiKeySchema = Type.Object(
  {
    id: Uuid,
    key: Type.String({ description: 'The API key secret: shown in this response only.' }),
    name: Type.String(),
    organization_id: Uuid,
    created_at: DateTime,
    expires_at: Nullable(DateTime),
    enabled: Type.Boolean(),
    scopes: Type.Array(Type.String()),
    verified: Type.Boolean(),
  },
  { title: 'PairedApiKey' },
)

export const ErrorOnlySchema = Type.Object({ error: Type.String() }, { title: 'ErrorOnly' })
