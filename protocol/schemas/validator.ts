/**
 * The one place schemas become validators. Compiled once when a route is
 * registered, never per request (STYLE practice 3).
 *
 * JSON bodies are typed by the client, so they are checked as sent (no
 * coercion: "1" is not 1). Query strings and path parameters are text by
 * nature: textConverter converts them by each property's declared type ("25" to
 * 25, "true" to true, a single value to a one-item array), strictly, before
 * the same kind of check. (ajv's own coercion was used before: it reads
 * "0x10" as 16 and " 5" as 5, and let "Infinity" past a `maximum`, which
 * reached PostgreSQL as a bigint and came back a 500.)
 * Node-to-node calls (protocol/node-calls.ts) arrive as MessagePack, which
 * carries values JSON cannot: their instance, otherwise the same, knows
 * `instanceof`.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { TSchema, Static } from '@sinclair/typebox'

// ajv-formats is CommonJS with a default export; under NodeNext it arrives as .default.
const addFormats = addFormatsModule.default

function makeAjv(useDefaults = true): Ajv {
  const ajv = new Ajv({
    strict: true,
    allErrors: false,
    coerceTypes: false,
    useDefaults,
    removeAdditional: false,
    // TypeBox keeps its metadata under symbol keys; these string keywords are
    // informational only and must not fail strict mode.
    keywords: ['x-error-codes'],
  })
  addFormats(ajv)
  // ajv-formats' uuid also takes a `urn:uuid:` prefix, which PostgreSQL's uuid type does not: a
  // path or body id in that form would pass validation and fail in the store. The plain form only.
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i)
  return ajv
}

const ajv = makeAjv()
const nodeCallAjv = makeAjv()
/** Answers are checked as they are, never filled in: a default the handler left out is a mismatch. */
const responseAjv = makeAjv(false)

/** The classes MessagePack decodes to: its timestamp extension to a Date, bin to a Uint8Array. */
const decodedClasses = { Date, Uint8Array } as const

type DecodedClass = keyof typeof decodedClasses

function isInstance(name: DecodedClass, data: unknown): boolean {
  const ok = data instanceof decodedClasses[name] && !(data instanceof Date && Number.isNaN(data.getTime()))
  isInstance.errors = ok ? undefined : [{ keyword: 'instanceof', message: `must be a ${name}`, params: { instanceof: name } }]
  return ok
}
isInstance.errors = undefined as Partial<ErrorObject>[] | undefined

// `{ instanceof: 'Date' }`: a name outside decodedClasses fails when the schema is compiled (at start), not on a call.
nodeCallAjv.addKeyword({ keyword: 'instanceof', schemaType: 'string', metaSchema: { enum: Object.keys(decodedClasses) }, validate: isInstance })

export interface Validator<T> {
  /** Returns the typed value, or a one-line reason naming the offending field. */
  (value: unknown): { ok: true; value: T } | { ok: false; reason: string }
}

function wrap<T>(fn: ValidateFunction, where: string): Validator<T> {
  return (value: unknown) => {
    if (fn(value)) return { ok: true, value: value as T }
    return { ok: false, reason: describeErrors(fn.errors ?? [], where) }
  }
}

export function compileBodyValidator<S extends TSchema>(schema: S): Validator<Static<S>> {
  return wrap(ajv.compile(schema), 'body')
}

/** An answer's JSON (as the client will parse it) against its route's response schema (src/http/response-check.ts). */
export function compileResponseValidator<S extends TSchema>(schema: S): Validator<Static<S>> {
  return wrap(responseAjv.compile(schema), 'response')
}

/** A node-to-node call's arguments or result, as MessagePack decoded them; `where` names it in the reason. */
export function compileNodeCallValidator<S extends TSchema>(schema: S, where: 'args' | 'result' | 'frame'): Validator<Static<S>> {
  return wrap(nodeCallAjv.compile(schema), where)
}

/** A table of calls (protocol/node-calls.ts), each compiled once: its args and result validators, typed by the table. */
export type CompiledCalls<Table extends Readonly<Record<string, { readonly args: TSchema; readonly result: TSchema }>>> = {
  readonly [Op in keyof Table]: { readonly args: Validator<Static<Table[Op]['args']>>; readonly result: Validator<Static<Table[Op]['result']>> }
}

export function compileCalls<Table extends Readonly<Record<string, { readonly args: TSchema; readonly result: TSchema }>>>(table: Table): CompiledCalls<Table> {
  const compiled: Record<string, { args: Validator<unknown>; result: Validator<unknown> }> = {}
  for (const [op, call] of Object.entries(table)) compiled[op] = { args: compileNodeCallValidator(call.args, 'args'), result: compileNodeCallValidator(call.result, 'result') }
  // Each entry was compiled from the table's own schemas, so its validators check exactly Static<> of them.
  return compiled as CompiledCalls<Table>
}

export function compileTextValidator<S extends TSchema>(schema: S, where: 'query' | 'path'): Validator<Static<S>> {
  const check = wrap<Static<S>>(ajv.compile(schema), where)
  const convert = textConverter(isObjectSchema(schema) ? schema.properties : {})
  return (value: unknown) => check(convert(value))
}

/** A decimal number as people write one: no hex, no blanks, no Infinity or NaN. */
const decimal = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/

interface SchemaNode {
  readonly type?: unknown
  readonly anyOf?: readonly unknown[]
  readonly const?: unknown
  readonly items?: unknown
  readonly properties?: Readonly<Record<string, unknown>>
}

function isSchemaNode(schema: unknown): schema is SchemaNode {
  return schema !== null && typeof schema === 'object'
}

function isObjectSchema(schema: unknown): schema is SchemaNode & { properties: Readonly<Record<string, unknown>> } {
  return isSchemaNode(schema) && schema.properties !== null && typeof schema.properties === 'object'
}

/** The JSON types a (TypeBox) property schema accepts: its `type`, or its union's, or its constants'. */
function acceptedTypes(schema: unknown): Set<string> {
  const types = new Set<string>()
  if (!isSchemaNode(schema)) return types
  if (typeof schema.type === 'string') types.add(schema.type)
  if (Array.isArray(schema.type)) for (const t of schema.type) types.add(String(t))
  if (schema.const !== undefined) types.add(typeof schema.const)
  for (const branch of schema.anyOf ?? []) for (const t of acceptedTypes(branch)) types.add(t)
  return types
}

/** How one text value becomes the value its schema declares (decided once, when the route is compiled). */
function scalarConverter(schema: unknown): (text: string) => unknown {
  const types = acceptedTypes(schema)
  if (types.has('string')) return (text) => text
  const numeric = types.has('integer') || types.has('number')
  const boolean = types.has('boolean')
  return (text) => {
    if (numeric && decimal.test(text)) {
      const number = Number(text)
      // Out of double range (1e309) stays text, and fails as "must be integer".
      return Number.isFinite(number) ? number : text
    }
    if (boolean && (text === 'true' || text === 'false')) return text === 'true'
    return text
  }
}

/**
 * Converts the text values of a flat object (a query or a path) by their properties' declared
 * types: numbers, booleans, and a single value of an array property to a one-item list.
 */
export function textConverter(properties: Readonly<Record<string, unknown>>): (value: unknown) => unknown {
  const converters = new Map<string, (raw: unknown) => unknown>()
  for (const [key, schema] of Object.entries(properties)) {
    if (acceptedTypes(schema).has('array')) {
      const item = scalarConverter(isSchemaNode(schema) ? schema.items : undefined)
      converters.set(key, (raw) => (Array.isArray(raw) ? raw : [raw]).map((each) => (typeof each === 'string' ? item(each) : each)))
    } else {
      const scalar = scalarConverter(schema)
      // A repeated parameter (?a=1&a=2) for a single value stays a list, and fails as such.
      converters.set(key, (raw) => (typeof raw === 'string' ? scalar(raw) : raw))
    }
  }
  return (value) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
    const out: Record<string, unknown> = {}
    for (const [key, raw] of Object.entries(value)) out[key] = converters.get(key)?.(raw) ?? raw
    return out
  }
}

/**
 * One line for the whole failure. A union of literals (TypeBox's enums) fails
 * as one `const` error per branch then an `anyOf`; the client needs every
 * allowed value, not the first branch's.
 */
export function describeErrors(errors: readonly ErrorObject[], where: string): string {
  const union = errors.find((e) => e.keyword === 'anyOf')
  if (union !== undefined) {
    const branches = errors.filter((e) => e.instancePath === union.instancePath && e !== union)
    if (branches.length > 0 && branches.every((e) => e.keyword === 'const')) {
      const allowed = branches.map((e) => String((e.params as { allowedValue: unknown }).allowedValue))
      return `${where + pointerToPath(union.instancePath)} must be one of: ${allowed.join(', ')}`
    }
  }
  return describeError(errors[0], where)
}

/** "body.events[3].eventId must NOT have more than 200 characters" */
export function describeError(error: ErrorObject | undefined, where: string): string {
  if (error === undefined) return `${where} is invalid`
  const field = where + pointerToPath(error.instancePath)
  const params = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'additionalProperties':
      return `${field} has an unknown field '${String(params['additionalProperty'])}'`
    case 'required':
      return `${field} is missing the required field '${String(params['missingProperty'])}'`
    case 'enum':
      return `${field} must be one of: ${(params['allowedValues'] as unknown[]).map(String).join(', ')}`
    case 'const':
      return `${field} must be ${JSON.stringify(params['allowedValue'])}`
    case 'instanceof':
      return `${field} must be a ${String(params['instanceof'])}`
    default:
      return `${field} ${error.message ?? 'is invalid'}`
  }
}

function pointerToPath(pointer: string): string {
  if (pointer === '') return ''
  return pointer
    .split('/')
    .slice(1)
    .map((raw) => {
      const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
      return /^\d+$/.test(part) ? `[${part}]` : /^[A-Za-z_$][\w$]*$/.test(part) ? `.${part}` : `[${JSON.stringify(part)}]`
    })
    .join('')
}
