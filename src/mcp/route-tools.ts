/**
 * MCP tools made from REST routes: a tool's arguments are the route's path,
 * query and body fields in one object, validated by the route's own
 * compiled schemas; its result is the route's answer, described by the
 * route's response schema; it needs the route's scope; its errors carry the
 * route's error codes. The tool runs the route's handler in-process, as the
 * person behind the OAuth token, so a tool can never do what the REST route
 * would refuse.
 */
import type { TSchema } from '@sinclair/typebox'
import { ServiceError, type ErrorCode } from '../../protocol/errors.js'
import { compileBodyValidator, compileTextValidator, type Validator } from '../../protocol/schemas/validator.js'
import type { Principal, Responses, Route, RouteRequest, RouteSchemas } from '../http/route.js'
import { translateStoreError } from '../storage/errors.js'

export interface RouteToolSpec<Svc> {
  name: string
  title: string
  description: string
  route: Route<RouteSchemas, Svc>
  /** Fields the tool sets itself (not arguments), e.g. `{ body: { status: 'cancelled' } }` for cancel. */
  fixed?: { body?: Record<string, unknown> }
  /** Arguments the route reads from a header (e.g. `idempotency_key` → Idempotency-Key): the header's name and the argument's JSON Schema. */
  headers?: Record<string, { header: string; schema: Record<string, unknown> & { maxLength: number } }>
  /** Route fields an agent has no use for (a bridge's task credentials, signed-URL parts): not offered. */
  omit?: readonly string[]
  /** The tool changes nothing (annotations.readOnlyHint). */
  readOnly: boolean
}

export interface ToolResult {
  ok: boolean
  /** The route's answer, or `{error, message}` with our error code. */
  body: Record<string, unknown>
}

type Part = 'params' | 'query' | 'body'
type ArgumentPart = Part | 'headers'

/** A JSON Schema object's property names (TypeBox objects; anything else has none we can merge). */
function propertiesOf(schema: TSchema | undefined): Record<string, TSchema> {
  return schema !== undefined && schema['type'] === 'object' && typeof schema['properties'] === 'object' ? (schema['properties'] as Record<string, TSchema>) : {}
}

function requiredOf(schema: TSchema | undefined): string[] {
  return schema !== undefined && Array.isArray(schema['required']) ? (schema['required'] as string[]) : []
}

/** Strips TypeBox's symbol keys by a JSON round trip: what a client sees in tools/list. */
function plain(schema: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>
}

export class RouteTool<Svc> {
  readonly spec: RouteToolSpec<Svc>
  /** The arguments' JSON Schema: the route's path, query and body fields (less the fixed ones) as one object. */
  readonly inputSchema: Record<string, unknown>
  /** The answer's JSON Schema (the route's first 2xx response schema). */
  readonly outputSchema: Record<string, unknown> | undefined
  /** Scopes of which the caller needs one (the route's). */
  readonly scopes: readonly string[]
  readonly #partOf = new Map<string, ArgumentPart>()
  readonly #validators: Partial<Record<Part, Validator<unknown>>> = {}

  constructor(spec: RouteToolSpec<Svc>) {
    this.spec = spec
    const { route } = spec
    if (route.auth.kind !== 'organization' || route.auth.scope === null) throw new TypeError(`tool ${spec.name}: route ${route.path} is not open to OAuth tokens`)
    this.scopes = typeof route.auth.scope === 'string' ? [route.auth.scope] : route.auth.scope
    const fixedBody = new Set(Object.keys(spec.fixed?.body ?? {}))
    // The organization is the token's: a field naming it would only be a way to be refused.
    const hidden = new Set(['organizationId', ...(spec.omit ?? [])])
    const properties: Record<string, unknown> = {}
    const required: string[] = []
    for (const part of ['params', 'query', 'body'] as const) {
      const schema = route.schemas[part]
      if (schema === undefined) continue
      this.#validators[part] = part === 'body' ? compileBodyValidator(schema) : compileTextValidator(schema, part === 'params' ? 'path' : 'query')
      for (const [name, property] of Object.entries(propertiesOf(schema))) {
        if ((part === 'body' && fixedBody.has(name)) || hidden.has(name)) continue
        if (this.#partOf.has(name)) throw new TypeError(`tool ${spec.name}: field ${name} is in two parts of ${route.path}`)
        this.#partOf.set(name, part)
        properties[name] = plain(property)
      }
      // A field with a default is filled in when left out: the agent need not send it.
      for (const name of requiredOf(schema)) {
        if ((part === 'body' && fixedBody.has(name)) || hidden.has(name)) continue
        if ('default' in (propertiesOf(schema)[name] ?? {})) continue
        required.push(name)
      }
    }
    for (const [name, { schema }] of Object.entries(spec.headers ?? {})) {
      if (this.#partOf.has(name)) throw new TypeError(`tool ${spec.name}: header argument ${name} is also a field of ${route.path}`)
      this.#partOf.set(name, 'headers')
      properties[name] = schema
    }
    this.inputSchema = { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false }
    const ok = Object.entries(route.responses as Responses).find(([status]) => Number(status) >= 200 && Number(status) < 300)
    this.outputSchema = ok?.[1].schema === undefined ? undefined : plain(ok[1].schema)
  }

  /** The arguments split into the route's parts and validated by its schemas; a ServiceError names what is wrong. */
  parse(args: unknown): { params: Record<string, string>; query: Record<string, unknown>; body: unknown; headers: Record<string, string> } {
    const input = args === undefined || args === null ? {} : args
    if (typeof input !== 'object' || Array.isArray(input)) throw new ServiceError('validation_failed', 'the arguments must be an object')
    const parts: Record<Part, Record<string, unknown>> = { params: {}, query: {}, body: {} }
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(input)) {
      const part = this.#partOf.get(name)
      if (part === undefined) throw new ServiceError('validation_failed', `unknown argument '${name.slice(0, 60)}'; this tool takes ${[...this.#partOf.keys()].join(', ') || 'no arguments'}`)
      if (part === 'headers') {
        const { header, schema } = this.spec.headers![name]!
        // The route checks the header's content as it would a request's; here only its type and bound.
        if (typeof value !== 'string' || value.length > schema.maxLength) throw new ServiceError('validation_failed', `${name} must be text of at most ${schema.maxLength} characters`)
        headers[header] = value
        continue
      }
      // Path fields are text on the wire; an agent may well send an id as a number.
      parts[part][name] = part === 'params' && (typeof value === 'number' || typeof value === 'boolean') ? String(value) : value
    }
    const body = this.spec.route.schemas.body === undefined ? undefined : { ...parts.body, ...this.spec.fixed?.body }
    return {
      params: this.#check('params', parts.params) as Record<string, string>,
      query: this.#check('query', parts.query) as Record<string, unknown>,
      body: body === undefined ? undefined : this.#check('body', body),
      headers,
    }
  }

  /** Runs the route's handler for `principal`; any refusal becomes an error result with our code. */
  async call(args: unknown, principal: Principal, services: Svc, requestId: string): Promise<ToolResult> {
    try {
      this.#allow(principal)
      const { params, query, body, headers } = this.parse(args)
      const request: RouteRequest = {
        method: this.spec.route.method,
        path: this.spec.route.path,
        body: body as undefined,
        query: query as Record<string, string>,
        params,
        headers,
        requestId,
        remoteAddress: '',
        principal,
      }
      const reply = await this.spec.route.handler(request, services)
      const answer = reply.body
      return { ok: true, body: answer !== null && typeof answer === 'object' && !Array.isArray(answer) ? (answer as Record<string, unknown>) : { result: answer } }
    } catch (error) {
      const coded = error instanceof ServiceError ? error : translateStoreError(error)
      if (coded === undefined) throw error
      return { ok: false, body: { error: coded.code as ErrorCode, message: coded.message, ...coded.extra } }
    }
  }

  /** The route's own rules for an OAuth token: one of its scopes, and the admin role where the route needs it. */
  #allow(principal: Principal): void {
    if (principal.kind !== 'oauth') return
    if (!this.scopes.some((s) => principal.scopes.has(s))) throw new ServiceError('insufficient_scope', `this tool needs the scope ${this.scopes.join(' or ')}`)
    const auth = this.spec.route.auth
    if (auth.kind === 'organization' && auth.admin === true && principal.role !== 'admin') {
      throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may do this')
    }
  }

  #check(part: Part, value: Record<string, unknown>): unknown {
    const validator = this.#validators[part]
    if (validator === undefined) return value
    const result = validator(value)
    if (!result.ok) throw new ServiceError('validation_failed', result.reason)
    return result.value
  }
}
