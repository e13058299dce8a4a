/**
 * Schemas shared by every route group. TypeBox builds plain JSON Schema
 * objects, so one definition is the validator (ajv), the TypeScript type
 * (Static<>) and the OpenAPI description.
 */
import { Type, type Static } from '@sinclair/typebox'

/** the contract, "Error body". */
export const ErrorBodySchema = Type.Object(
  {
    error: Type.String({ description: 'Machine-readable error code (see the error table in the API description).' }),
    message: Type.String({ description: 'Human-readable explanation of what to fix.' }),
    code: Type.Optional(Type.String({ description: 'Extra code on printer-event routes.' })),
    requestId: Type.Optional(Type.String({ description: 'Id of the request, also in the x-request-id header.' })),
  },
  { additionalProperties: true, title: 'ErrorBody' },
)
export type ErrorBodyShape = Static<typeof ErrorBodySchema>

export const HealthSchema = Type.Object(
  {
    status: Type.Literal('ok'),
    uptimeSeconds: Type.Number(),
    version: Type.String(),
  },
  { additionalProperties: false, title: 'Health' },
)
export type Health = Static<typeof HealthSchema>

export const ReadinessSchema = Type.Object(
  {
    ready: Type.Boolean(),
    checks: Type.Object(
      {
        store: Type.Object({
          ok: Type.Boolean(),
          kind: Type.Union([Type.Literal('postgres'), Type.Literal('pglite')]),
          latencyMs: Type.Optional(Type.Number()),
          error: Type.Optional(Type.String()),
        }),
        migrations: Type.Object({ ok: Type.Boolean(), version: Type.Integer() }),
        accepting: Type.Object({ ok: Type.Boolean() }),
        broker: Type.Object(
          { ok: Type.Boolean(), kind: Type.Union([Type.Literal('embedded'), Type.Literal('external')]) },
          { description: 'Reported, not required: a broker outage affects displays, not the REST API.' },
        ),
        shards: Type.Object(
          {
            ok: Type.Boolean(),
            kind: Type.Union([Type.Literal('local'), Type.Literal('redis')]),
            nodeId: Type.String(),
            owned: Type.Integer({ minimum: 0 }),
          },
          { description: 'The shard directory: with Redis, not ok while this node holds no current lease table (its last round with Redis is older than a lease).' },
        ),
      },
      { additionalProperties: true },
    ),
  },
  { title: 'Readiness' },
)
export type Readiness = Static<typeof ReadinessSchema>
