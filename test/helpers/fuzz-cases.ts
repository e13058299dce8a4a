/**
 * Turns one OpenAPI operation into a bounded list of hostile requests (path,
 * query and body cases), for test/src/fuzz.test.ts. Inputs come from
 * fuzz-inputs.ts; this module decides which combinations are sent.
 */
import {
  hostilePathSegments,
  hostileQueryValues,
  instanceOf,
  isObject,
  loneHigh,
  loneLow,
  mutationsOf,
  objectPaths,
  propertyPaths,
  randomUuid,
  RawJson,
  shuffled,
  valueAt,
  withValue,
  wrongTypeText,
  type InstanceHints,
  type Json,
  type JsonObject,
} from './fuzz-inputs.js'

export interface Parameter {
  name: string
  in: 'path' | 'query'
  required: boolean
  schema: JsonObject
}

export interface Operation {
  method: string
  /** The path template, e.g. /v1/printer-config/{id}. */
  path: string
  operationId: string
  parameters: Parameter[]
  bodySchema: JsonObject | undefined
  /** Whether its body is a multipart/form-data form (an upload). */
  multipart: boolean
  /** Whether an API key may call it (its security names apiKey). */
  acceptsApiKey: boolean
  public: boolean
}

export interface FuzzCase {
  kind: string
  /** Path with the query string, percent-encoded junk left as is. */
  url: string
  body?: string | Buffer
  contentType?: string
  /** Which path id it uses, so outbound routes can re-check the fixture first. */
  pathIds: string[]
}

/** Reads the operations of a served OpenAPI document. */
export function operationsOf(doc: unknown): Operation[] {
  if (!isObject(doc) || !isObject(doc['paths'])) throw new Error('the OpenAPI document has no paths')
  const out: Operation[] = []
  for (const [path, item] of Object.entries(doc['paths'])) {
    if (!isObject(item)) continue
    for (const [method, op] of Object.entries(item)) {
      if (!isObject(op)) continue
      const parameters = (Array.isArray(op['parameters']) ? op['parameters'] : []).filter(isObject).map(
        (p): Parameter => ({
          name: String(p['name']),
          in: p['in'] === 'path' ? 'path' : 'query',
          required: p['required'] === true,
          schema: isObject(p['schema']) ? p['schema'] : {},
        }),
      )
      const content = isObject(op['requestBody']) && isObject(op['requestBody']['content']) ? op['requestBody']['content'] : undefined
      const json = content !== undefined && isObject(content['application/json']) ? content['application/json'] : undefined
      const security = Array.isArray(op['security']) ? op['security'].filter(isObject) : []
      out.push({
        method: method.toUpperCase(),
        path,
        operationId: String(op['operationId']),
        parameters,
        bodySchema: json !== undefined && isObject(json['schema']) ? json['schema'] : undefined,
        multipart: content !== undefined && isObject(content['multipart/form-data']),
        acceptsApiKey: security.some((s) => 'apiKey' in s),
        public: security.length === 0,
      })
    }
  }
  return out
}

export interface CaseContext {
  random: () => number
  hints: InstanceHints
  /** Ids known to exist for a path parameter (the fixture printer, ids the fuzz created). */
  knownIds: (op: Operation, param: Parameter) => string[]
  /** Requests per operation and credential. */
  budget: number
}

function bestPathValue(op: Operation, param: Parameter, ctx: CaseContext): string {
  const known = ctx.knownIds(op, param)[0]
  if (known !== undefined) return known
  const value = instanceOf(param.schema, ctx.hints, param.name)
  return encodeURIComponent(typeof value === 'string' ? value : JSON.stringify(value))
}

/** The resource a request names: its path cut after the last path parameter (/v1/mqtt/profiles/<id>/draft → /v1/mqtt/profiles/<id>). */
export function resourceOf(op: Operation, url: string): string | undefined {
  const template = op.path.split('/')
  const last = template.findLastIndex((segment) => segment.startsWith('{'))
  if (last < 0) return undefined
  return (url.split('?')[0] ?? '').split('/').slice(0, last + 1).join('/')
}

function buildUrl(op: Operation, pathValues: Map<string, string>, query: string): string {
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => pathValues.get(name) ?? 'missing')
  return query === '' ? path : `${path}?${query}`
}

function validQuery(op: Operation, ctx: CaseContext, except?: string): string[] {
  return op.parameters
    .filter((p) => p.in === 'query' && p.required && p.name !== except)
    .map((p) => {
      const value = instanceOf(p.schema, ctx.hints, p.name)
      return `${encodeURIComponent(p.name)}=${encodeURIComponent(typeof value === 'string' ? value : JSON.stringify(value))}`
    })
}

type Tiered = FuzzCase & { tier: 0 | 1 | 2; depth: number }

/**
 * Every case for one credential, cut to the budget: tier 0 (framing, path
 * variants, the valid-ish body) always; then tier 1 (the inputs likeliest to
 * reach storage: huge numbers, lone surrogates in strings), shallow
 * properties first; then the rest, in seeded random order.
 */
export function casesFor(op: Operation, ctx: CaseContext): FuzzCase[] {
  const pathParams = op.parameters.filter((p) => p.in === 'path')
  const queryParams = op.parameters.filter((p) => p.in === 'query')
  const best = new Map(pathParams.map((p) => [p.name, bestPathValue(op, p, ctx)]))
  const bestIds = [...best.values()]
  const body = op.bodySchema === undefined ? undefined : instanceOf(op.bodySchema, ctx.hints)
  const bodyText = body === undefined ? undefined : RawJson.stringify(body)
  const url = (query = '', values = best) => buildUrl(op, values, query)
  const withBody = (c: Omit<Tiered, 'body' | 'pathIds'> & { pathIds?: string[] }): Tiered =>
    ({ ...c, pathIds: c.pathIds ?? bestIds, ...(bodyText === undefined ? {} : { body: bodyText, contentType: 'application/json' }) })
  // The baseline: every parameter valid (with a body, 'body: valid-ish' below is the baseline).
  const cases: Tiered[] = body === undefined ? [withBody({ kind: 'valid request', url: url(validQuery(op, ctx).join('&')), tier: 0, depth: 0 })] : []

  // Path parameters, one at a time; the others keep their best value.
  for (const param of pathParams) {
    const variants = [
      { kind: 'random-uuid', text: randomUuid(ctx.random) },
      ...hostilePathSegments,
      ...ctx.knownIds(op, param).slice(0, 2).map((id) => ({ kind: 'known-id', text: id })),
    ]
    for (const v of variants) {
      const values = new Map(best).set(param.name, v.text)
      cases.push(withBody({ kind: `path ${param.name}: ${v.kind}`, url: url(validQuery(op, ctx).join('&'), values), tier: 0, depth: 0, pathIds: [...values.values()] }))
    }
  }

  // Query parameters, one at a time; required ones keep a valid value.
  const base = (name?: string) => validQuery(op, ctx, name)
  for (const param of queryParams) {
    const hostile = [{ kind: 'wrong-type', tier: 2 as const, text: wrongTypeText(param.schema) }, ...hostileQueryValues]
    for (const v of hostile) {
      cases.push(withBody({ kind: `query ${param.name}: ${v.kind}`, url: url([...base(param.name), `${param.name}=${v.text}`].join('&')), tier: v.tier, depth: 1 }))
    }
    const valid = instanceOf(param.schema, ctx.hints, param.name)
    const text = encodeURIComponent(typeof valid === 'string' ? valid : JSON.stringify(valid))
    cases.push(withBody({ kind: `query ${param.name}: repeated`, url: url([...base(param.name), `${param.name}=${text}`, `${param.name}=${text}`].join('&')), tier: 1, depth: 1 }))
  }
  cases.push(withBody({ kind: 'query: unknown parameter', url: url([...base(), 'fuzz_unknown=1'].join('&')), tier: 0, depth: 0 }))
  cases.push(withBody({ kind: 'query: invalid UTF-8 in a parameter name', url: url([...base(), '%ED%A0%80=1'].join('&')), tier: 2, depth: 0 }))

  if (op.bodySchema !== undefined && body !== undefined && bodyText !== undefined) {
    cases.push(...bodyCases(body, bodyText, url(base().join('&')), bestIds), ...optionalFieldCases(op.bodySchema, body, url(base().join('&')), bestIds, ctx))
  }
  return budgeted(cases, ctx)
}

function bodyCases(body: Json, bodyText: string, url: string, pathIds: string[]): Tiered[] {
  const framing = (kind: string, text: string | Buffer, contentType = 'application/json'): Tiered => ({ kind: `body: ${kind}`, url, body: text, contentType, tier: 0, depth: 0, pathIds })
  const asText = (value: Json) => RawJson.stringify(value)
  const cases: Tiered[] = [
    framing('valid-ish', bodyText),
    framing('malformed JSON', '{"fz": tru'),
    framing('truncated JSON', bodyText.slice(0, Math.max(1, Math.floor(bodyText.length / 2)))),
    framing('JSON array', '[]'),
    framing('JSON string', '"fz"'),
    framing('JSON number', '42'),
    framing('JSON null', 'null'),
    framing('empty', ''),
    framing('text/plain content type', bodyText, 'text/plain'),
    framing('100-level nested array', '['.repeat(100) + ']'.repeat(100)),
    framing('extra unknown field', isObject(body) ? asText({ ...body, fuzz_unknown: 1 }) : bodyText),
    framing('raw invalid UTF-8 bytes', Buffer.concat([Buffer.from('{"fz":"'), Buffer.from([0xed, 0xa0, 0x80, 0xff]), Buffer.from('"}')])),
  ]
  for (const path of propertyPaths(body, 3)) {
    const name = String(path.filter((s) => typeof s === 'string').at(-1) ?? '')
    const current = valueAt(body, path)
    if (current === undefined) continue
    for (const m of mutationsOf(current, name)) {
      cases.push({ kind: `body ${path.join('.')}: ${m.kind}`, url, body: asText(withValue(body, path, m.value)), contentType: 'application/json', tier: m.tier, depth: path.length, pathIds })
    }
  }
  for (const path of objectPaths(body, 2)) {
    const where = path.length === 0 ? '(root)' : path.join('.')
    const at = valueAt(body, path)
    if (!isObject(at)) continue
    // Keys are JSON text too: a placeholder key is swapped for the escape after stringify.
    const keyed = (escape: string, value: Json) => asText(withValue(body, path, value, placeholderKey)).replace(JSON.stringify(placeholderKey), escape)
    cases.push({ kind: `body ${where}: lone surrogate key d800`, url, body: keyed('"\\ud800"', 1), contentType: 'application/json', tier: 1, depth: path.length + 1, pathIds })
    cases.push({ kind: `body ${where}: lone surrogate key dc00, value nested arrays`, url, body: keyed('"\\udc00"', [[loneHigh], [[loneLow]]]), contentType: 'application/json', tier: 2, depth: path.length + 1, pathIds })
    cases.push({ kind: `body ${where}: extra unknown field`, url, body: asText(withValue(body, path, 1, 'fuzz_unknown')), contentType: 'application/json', tier: 2, depth: path.length + 1, pathIds })
  }
  return cases
}

/** The body's optional top-level fields, each added with a hostile value (the minimal body leaves them out). */
function optionalFieldCases(schema: JsonObject, body: Json, url: string, pathIds: string[], ctx: CaseContext): Tiered[] {
  if (!isObject(body) || !isObject(schema['properties'])) return []
  const cases: Tiered[] = []
  for (const [key, property] of Object.entries(schema['properties'])) {
    if (key in body || !isObject(property)) continue
    for (const m of mutationsOf(instanceOf(property, ctx.hints, key, 1), key)) {
      cases.push({ kind: `body ${key} (optional): ${m.kind}`, url, body: RawJson.stringify({ ...body, [key]: m.value }), contentType: 'application/json', tier: m.tier, depth: 1, pathIds })
    }
  }
  return cases
}

const placeholderKey = 'fz\u0001key'

function budgeted(cases: Tiered[], ctx: CaseContext): FuzzCase[] {
  const fixed = cases.filter((c) => c.tier === 0)
  const likely = shuffled(cases.filter((c) => c.tier === 1), ctx.random).sort((a, b) => a.depth - b.depth)
  const rest = shuffled(cases.filter((c) => c.tier === 2), ctx.random)
  const chosen = [...fixed, ...likely, ...rest].slice(0, Math.max(ctx.budget, fixed.length))
  return chosen.map(({ tier: _tier, depth: _depth, ...c }) => c)
}
