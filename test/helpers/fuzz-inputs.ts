/**
 * Hostile inputs for the HTTP fuzz test (test/src/fuzz.test.ts), derived
 * from the served OpenAPI document so routes added later are fuzzed too.
 *
 * Everything is deterministic: one seeded PRNG drives every choice, so a
 * failure reproduces from the seed. Safety (the test machine may only reach
 * loopback): no generated string contains a dot, and every property that can
 * name a network address only ever gets 127.0.0.1 or a non-string.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
export type JsonObject = { [key: string]: Json }

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** mulberry32: small, fast, good enough to pick inputs. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), a | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

/** FNV-1a: a seed per operation, so a route added later does not change the inputs of the others. */
export function seedFor(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ seed
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193)
  return h >>> 0
}

export function randomUuid(random: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(random() * 16).toString(16))
  hex[12] = '4'
  hex[16] = '89ab'[Math.floor(random() * 4)]!
  const s = hex.join('')
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`
}

export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

/** A property that may end up as a host the service connects to: only loopback is ever sent. */
export const addressLike = /ip|host|addr|url|uri|domain|endpoint/i
export const loopback = '127.0.0.1'

/**
 * Raw JSON text that JSON.stringify cannot produce (a 20-digit integer kept
 * exact, a 100-level nested array written out): placed as a marker string,
 * swapped for the text after stringify.
 */
export class RawJson {
  static readonly #texts = new Map<string, string>()
  static #next = 0
  static of(text: string): string {
    const marker = `\u0000raw${RawJson.#next++}\u0000`
    RawJson.#texts.set(marker, text)
    return marker
  }
  static stringify(value: Json): string {
    return JSON.stringify(value).replace(/"\\u0000raw\d+\\u0000"/g, (quoted) => RawJson.#texts.get(JSON.parse(quoted) as string) ?? quoted)
  }
}

/**
 * Optimistic-concurrency fields (expectedRevision, expectedBindingEpoch) must
 * carry the resource's current value for a request to get past the check; a
 * token stands for it until the request is sent (see freshValues).
 */
const freshPattern = /"\\u0000fresh:(\w+)\\u0000"/g
export const isFreshField = (name: string): boolean => /^expected[A-Z]/.test(name)
const freshToken = (name: string): string => `\u0000fresh:${name}\u0000`

export function hasFreshFields(text: string): boolean {
  return new RegExp(freshPattern.source).test(text)
}

/**
 * Replaces each token with the number the resource holds under the matching
 * name (expectedRevision → draftRevision, expectedBindingEpoch → bindingEpoch),
 * else 1.
 */
export function fillFreshFields(text: string, resource: Json): string {
  return text.replace(freshPattern, (_, name: string) => {
    const wanted = name.replace(/^expected/, '').toLowerCase()
    let found: number | undefined
    const walk = (value: Json, depth: number): void => {
      if (found !== undefined || depth > 2 || !isObject(value)) return
      for (const [key, child] of Object.entries(value)) if (typeof child === 'number' && key.toLowerCase().endsWith(wanted)) found = child
      for (const child of Object.values(value)) walk(child, depth + 1)
    }
    walk(resource, 0)
    return String(found ?? 1)
  })
}

/** What the instance builder may draw on besides the schema. */
export interface InstanceHints {
  random: () => number
  /** Values by property name (the fixture printer's id for printerId). */
  byName: (name: string) => Json | undefined
}

function schemaType(schema: JsonObject): string | undefined {
  const type = schema['type']
  if (typeof type === 'string') return type
  if (Array.isArray(type)) return type.find((t): t is string => typeof t === 'string' && t !== 'null')
  return undefined
}

function alternatives(schema: JsonObject): JsonObject[] {
  const list = schema['anyOf'] ?? schema['oneOf']
  return Array.isArray(list) ? list.filter(isObject) : []
}

function stringFor(schema: JsonObject, hints: InstanceHints, name: string): string {
  if (addressLike.test(name)) return loopback
  const format = schema['format']
  if (format === 'uuid') return randomUuid(hints.random)
  if (format === 'date-time') return /expir|until|deadline/i.test(name) ? '2099-01-02T03:04:05Z' : '2024-01-02T03:04:05Z'
  if (format === 'date') return '2024-01-02'
  // The validator wants a dotted domain; .invalid never resolves (RFC 6761), and no route connects to an email address.
  if (format === 'email') return `fz${Math.floor(hints.random() * 1e6)}@fuzz.invalid`
  const min = typeof schema['minLength'] === 'number' ? schema['minLength'] : 1
  const max = typeof schema['maxLength'] === 'number' ? schema['maxLength'] : 64
  const pattern = typeof schema['pattern'] === 'string' ? new RegExp(schema['pattern'], 'u') : undefined
  const base = `fz${Math.floor(hints.random() * 1e6)}`
  const candidates = [base, 'fz_1', 'x', '1', 'A', 'fz-a', base.padEnd(Math.max(min, 1), 'z')]
  const fits = (s: string) => s.length >= min && s.length <= max && (pattern === undefined || pattern.test(s))
  return candidates.find(fits) ?? base.padEnd(min, 'z').slice(0, Math.max(min, Math.min(max, base.length)))
}

/** A minimal instance of `schema`: required properties only, each the simplest value the schema allows. */
export function instanceOf(schema: JsonObject, hints: InstanceHints, name = '', depth = 0): Json {
  const named = name === '' ? undefined : hints.byName(name)
  if (named !== undefined) return named
  if (isFreshField(name) && (schemaType(schema) === 'integer' || schemaType(schema) === 'number')) return freshToken(name)
  if ('const' in schema) return schema['const'] ?? null
  if (Array.isArray(schema['enum']) && schema['enum'].length > 0) return schema['enum'][0] ?? null
  if ('default' in schema && depth > 0) return schema['default'] ?? null
  const options = alternatives(schema)
  if (options.length > 0) {
    const concrete = options.find((o) => schemaType(o) !== 'null') ?? options[0]!
    return instanceOf(concrete, hints, name, depth)
  }
  switch (schemaType(schema)) {
    case 'object': {
      const properties = isObject(schema['properties']) ? schema['properties'] : {}
      const required = Array.isArray(schema['required']) ? schema['required'].filter((r): r is string => typeof r === 'string') : []
      const keys = [...required]
      // A body of optional fields only (a PATCH) is empty when minimal, and refused for it: give it its first field.
      const first = Object.keys(properties).find((k) => !required.includes(k))
      if (depth === 0 && first !== undefined) keys.push(first)
      const out: JsonObject = {}
      for (const key of keys) {
        const property = properties[key]
        out[key] = isObject(property) && depth < 12 ? instanceOf(property, hints, key, depth + 1) : 'fz'
      }
      return out
    }
    case 'array': {
      const items = isObject(schema['items']) ? schema['items'] : {}
      const count = typeof schema['minItems'] === 'number' ? schema['minItems'] : 0
      return Array.from({ length: count }, () => instanceOf(items, hints, '', depth + 1))
    }
    case 'string':
      return stringFor(schema, hints, name)
    case 'integer':
    case 'number': {
      const min = typeof schema['minimum'] === 'number' ? schema['minimum'] : 0
      const step = typeof schema['multipleOf'] === 'number' ? schema['multipleOf'] : 1
      return Math.ceil(Math.max(min, 1) / step) * step
    }
    case 'boolean':
      return true
    case 'null':
      return null
    default:
      return 'fz'
  }
}

export const loneHigh = RawJson.of('"\\ud800"')
export const loneLow = RawJson.of('"\\udc00"')
const nested100 = RawJson.of('['.repeat(100) + ']'.repeat(100))
const twentyDigits = RawJson.of('12345678901234567890')

/** A mutation of one property of a valid-ish body. `tier` 1 are the likeliest to reach storage. */
export interface Mutation {
  kind: string
  tier: 1 | 2
  value: Json
}

export function mutationsOf(current: Json, name: string): Mutation[] {
  const value = typeof current === 'string' && current === freshToken(name) ? 1 : current
  const wrongType: Json = typeof value === 'string' ? 12345 : typeof value === 'number' || typeof value === 'boolean' ? 'fz' : Array.isArray(value) ? { fz: 1 } : 'fz'
  const address = addressLike.test(name)
  const strings = typeof value === 'string'
  const numbers = typeof value === 'number'
  return [
    { kind: 'wrong-type', tier: 2, value: wrongType },
    { kind: 'null', tier: 2, value: null },
    { kind: 'huge-number', tier: numbers ? 1 : 2, value: 1e308 },
    { kind: 'negative-huge-number', tier: 2, value: -1e308 },
    { kind: '20-digit-integer', tier: numbers ? 1 : 2, value: twentyDigits },
    // An address-like property gets no string but loopback (see the module header).
    ...(address ? [] : stringMutations(strings)),
    { kind: 'nested-array-100', tier: 2, value: nested100 },
  ]
}

function stringMutations(strings: boolean): Mutation[] {
  return [
    { kind: 'lone-surrogate-d800', tier: strings ? 1 : 2, value: loneHigh },
    { kind: 'lone-surrogate-dc00', tier: 2, value: loneLow },
    { kind: 'surrogates-in-nested-arrays', tier: 2, value: [loneHigh, [loneLow, [loneHigh]]] },
    { kind: 'long-string', tier: 2, value: 'z'.repeat(5_000) },
  ]
}

/** Where a mutation applies: a property path through objects (and the first array element). */
export type PropertyPath = readonly (string | number)[]

export function propertyPaths(value: Json, maxDepth: number, prefix: PropertyPath = []): PropertyPath[] {
  if (prefix.length >= maxDepth) return []
  if (Array.isArray(value)) return value.length > 0 ? [[...prefix, 0], ...propertyPaths(value[0]!, maxDepth, [...prefix, 0])] : []
  if (!isObject(value)) return []
  return Object.entries(value).flatMap(([key, child]) => [[...prefix, key], ...propertyPaths(child, maxDepth, [...prefix, key])])
}

/** The objects inside `value` (the root included), where a hostile key can be added. */
export function objectPaths(value: Json, maxDepth: number, prefix: PropertyPath = []): PropertyPath[] {
  if (prefix.length > maxDepth) return []
  if (Array.isArray(value)) return value.length > 0 ? objectPaths(value[0]!, maxDepth, [...prefix, 0]) : []
  if (!isObject(value)) return []
  return [prefix, ...Object.entries(value).flatMap(([key, child]) => objectPaths(child, maxDepth, [...prefix, key]))]
}

export function valueAt(root: Json, path: PropertyPath): Json | undefined {
  let at: Json | undefined = root
  for (const step of path) {
    if (typeof step === 'number') at = Array.isArray(at) ? at[step] : undefined
    else at = isObject(at) ? at[step] : undefined
  }
  return at
}

/** A copy of `root` with the value at `path` replaced (or, with `key`, one key added to the object there). */
export function withValue(root: Json, path: PropertyPath, value: Json, key?: string): Json {
  const copy = structuredClone(root)
  if (key !== undefined) {
    const target = valueAt(copy, path)
    if (isObject(target)) target[key] = value
    return copy
  }
  const parent = valueAt(copy, path.slice(0, -1))
  const last = path[path.length - 1]
  if (typeof last === 'number' && Array.isArray(parent)) parent[last] = value
  else if (typeof last === 'string' && isObject(parent)) parent[last] = value
  return copy
}

/** Query values that are hostile whatever the parameter's type (percent-encoded text is sent as is). */
export const hostileQueryValues: readonly { kind: string; tier: 1 | 2; text: string }[] = [
  { kind: '1e308', tier: 1, text: '1e308' },
  { kind: '-1e308', tier: 1, text: '-1e308' },
  { kind: '20-digit-integer', tier: 1, text: '12345678901234567890' },
  { kind: 'NaN', tier: 2, text: 'NaN' },
  { kind: 'Infinity', tier: 2, text: 'Infinity' },
  { kind: '-0', tier: 2, text: '-0' },
  { kind: 'empty', tier: 2, text: '' },
  { kind: 'long-string', tier: 2, text: 'q'.repeat(3_000) },
  { kind: 'invalid-utf8-%ED%A0%80', tier: 1, text: '%ED%A0%80' },
  { kind: 'invalid-utf8-%FF', tier: 2, text: '%FF' },
  { kind: 'nul-%00', tier: 2, text: '%00' },
  { kind: 'bare-percent', tier: 2, text: '%' },
]

/** A value of the wrong type for a parameter schema (text for numbers and booleans, a non-uuid for uuids). */
export function wrongTypeText(schema: JsonObject): string {
  const type = schemaType(schema)
  if (type === 'integer' || type === 'number' || type === 'boolean') return 'fz'
  if (schema['format'] === 'uuid') return 'not-a-uuid'
  return '%5B%5D'
}

/** Path segments that are hostile for any parameter; percent-encoded junk is inserted without re-encoding. */
export const hostilePathSegments: readonly { kind: string; text: string }[] = [
  { kind: 'not-a-uuid', text: 'not-a-uuid' },
  { kind: 'long-string', text: 'p'.repeat(3_000) },
  { kind: 'invalid-utf8-%ED%A0%80', text: '%ED%A0%80' },
  { kind: 'nul-%00', text: '%00' },
  { kind: 'invalid-utf8-%FF', text: '%FF' },
]
