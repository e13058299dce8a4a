/**
 * Two organizations for isolation tests: A and B, each with one of every
 * resource a request can name by id (material, printer, model, file, make,
 * SKU, spool, print job), created over HTTP; and the check, driven by the
 * served OpenAPI document, that a field naming a resource answers 404 when it
 * names A's instead of B's.
 */
import type { Test } from 'tap'
import { addPrinter, openFarm, type Farm } from './bridge.js'
import { bambuThreeMf, createModel, upload } from './files.js'
import { operationsOf, type Operation } from './fuzz-cases.js'
import { instanceOf, isObject, seededRandom, valueAt, withValue, type InstanceHints, type Json, type JsonObject, type PropertyPath } from './fuzz-inputs.js'
import { request, type HttpResult } from './http.js'

export interface Org {
  farm: Farm
  headers: Record<string, string>
  material: string
  printer: string
  host: string
  model: string
  file: string
  make: string
  sku: string
  spool: string
  job: number
}

type Kind = keyof Pick<Org, 'material' | 'printer' | 'file' | 'make' | 'sku' | 'model' | 'job' | 'spool'>

export async function created(res: HttpResult, what: string): Promise<any> {
  if (res.status !== 200 && res.status !== 201) throw new Error(`${what}: ${res.status} ${res.text}`)
  return res.json
}

export async function seed(url: string, farm: Farm, tag: string): Promise<Org> {
  const headers = farm.admin
  const material = (await created(await request(url, '/v1/materials', { method: 'POST', headers, body: { name: `PLA ${tag}`, type: 'PLA', color_hex: '#FF0000' } }), 'material')).id
  const host = `host-${tag}`
  const printer = await addPrinter(farm, host)
  const model = await createModel(url, headers, { name: `Model ${tag}` })
  const uploaded = await upload(url, headers, model, { name: `plate-${tag}.gcode.3mf`, bytes: bambuThreeMf() })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
  const file = (uploaded.json as any).id as string
  const make = (await created(await request(url, `/v1/model-files/${file}/full-workshop/makes`, { method: 'POST', headers, body: { name: `Make ${tag}`, materials: [] } }), 'make')).id
  const sku = (await created(await request(url, '/v1/skus', { method: 'POST', headers, body: { sku: `SKU-${tag}`, name: `Sku ${tag}`, makes: [{ make_id: make, quantity: 1 }] } }), 'sku')).id
  const spool = (await created(await request(url, '/v1/inventory', { method: 'POST', headers, body: { material_id: material, initial_g: 1000 } }), 'spool')).id
  const job = (await created(await request(url, '/v1/print-jobs/create', { method: 'POST', headers, body: { name: `Job ${tag}`, model_file_id: file } }), 'job')).id
  return { farm, headers, material, printer, host, model, file, make, sku, spool, job }
}


/** A (the first admin's organization) and B (a second one the same person administers, with its own bridge key), seeded. */
export async function twoOrganizations(url: string): Promise<{ a: Org; b: Org; farmA: Farm }> {
  const farmA = await openFarm(url)
  const a = await seed(url, farmA, 'a')
  const orgB = (await created(await request(url, '/v1/organizations', { method: 'POST', headers: farmA.admin, body: { name: 'Farm B' } }), 'organization B')).id as string
  const adminB = { ...farmA.admin, 'x-organization-id': orgB }
  const keyB = await created(await request(url, '/v1/api-keys', { method: 'POST', headers: adminB, body: { name: 'b bridge', scopes: ['printers:read', 'printers:write'] } }), 'key B')
  const b = await seed(url, { url, orgId: orgB, admin: adminB, bridge: { 'x-api-key': keyB.key } }, 'b')
  return { a, b, farmA }
}

/**
 * The same rule for every operation of the served OpenAPI document, so a route added later is held to
 * it without a test of its own: each body or query field whose name says which kind of resource it
 * names is first filled with B's own resource (and every path id with B's), then with A's. When B's
 * own request is accepted (or refused only by a state, 409), A's must answer 404.
 */
export async function crossOrganizationIds(t: Test, url: string, a: Org, b: Org): Promise<void> {
  const doc = (await request(url, '/openapi.json')).json
  const operations = operationsOf(doc).filter((op) => !op.public && !op.multipart && op.method !== 'DELETE')
  const kindOf = (name: string): Kind | undefined => {
    if (/^organization/i.test(name)) return undefined
    if (/material_?id/i.test(name)) return 'material'
    if (/printer_?id/i.test(name)) return 'printer'
    if (/model_file_id|^file_?id$/i.test(name)) return 'file'
    if (/make_?id/i.test(name)) return 'make'
    if (/sku_?id/i.test(name)) return 'sku'
    if (/^model_?id$/i.test(name)) return 'model'
    if (/^job_?id$/i.test(name)) return 'job'
    if (/spool_?id/i.test(name)) return 'spool'
    return undefined
  }
  /** B's resource for a path parameter, by the collection it follows; undefined when the test has none of that kind. */
  const pathId = (op: Operation, name: string): string | undefined => {
    const kind = kindOf(name)
    if (kind !== undefined) return String(b[kind])
    if (name !== 'id') return name === 'sku' ? 'SKU-b' : undefined
    if (/^\/v1\/(printers|printer-config)\//.test(op.path)) return b.printer
    if (op.path.startsWith('/v1/inventory/')) return b.spool
    if (op.path.startsWith('/v1/print-jobs/')) return String(b.job)
    return undefined
  }
  const fields = new Set<string>()
  const unchecked: string[] = []
  const before = await snapshot(url, a)
  t.ok(before.every((list) => typeof list === 'object' && list !== null && !('error' in list && typeof list.error === 'string')), "A's lists are readable", { before })
  for (const op of operations) {
    let path = op.path
    let usable = true
    for (const param of op.parameters.filter((p) => p.in === 'path')) {
      const id = pathId(op, param.name)
      if (id === undefined) usable = false
      else path = path.replace(`{${param.name}}`, id)
    }
    if (!usable) continue
    const random = seededRandom(47)
    const hints = {
      random,
      byName: (name: string) => {
        if (/^organization_?id$/i.test(name)) return b.farm.orgId
        if (/^host_?id$/i.test(name)) return b.host
        // The fixture file has one project filament.
        if (name === 'filament_index') return 0
        const kind = kindOf(name)
        return kind === undefined ? undefined : b[kind]
      },
    }
    const minimal = op.bodySchema === undefined ? undefined : (instanceOf(op.bodySchema, hints) as JsonObject)
    const required = new Set((op.bodySchema?.['required'] as string[] | undefined) ?? [])
    const query = op.parameters.filter((p) => p.in === 'query' && kindOf(p.name) !== undefined)
    const targets: { where: 'body' | 'query'; path: PropertyPath; kind: Kind }[] = [
      ...(op.bodySchema === undefined ? [] : idFields(op.bodySchema, kindOf)).map((f) => ({ where: 'body' as const, ...f })),
      ...query.map((p) => ({ where: 'query' as const, path: [p.name], kind: kindOf(p.name)! })),
    ]
    for (const target of targets) {
      const name = target.path.map((step) => (typeof step === 'number' ? `[${step}]` : `.${step}`)).join('').slice(1)
      const field = `${op.method} ${op.path} ${target.where}.${name}`
      // Each field on its own: the other optional id fields of the minimal body are left out.
      const body = minimal === undefined ? undefined : Object.fromEntries(Object.entries(minimal).filter(([key]) => required.has(key) || kindOf(key) === undefined || key === target.path[0]))
      const send = async (org: Org, headers: Record<string, string>) => {
        const value = org[target.kind]
        const search = new URLSearchParams()
        for (const p of op.parameters.filter((q) => q.in === 'query' && q.required)) search.set(p.name, String(instanceOf(p.schema, hints, p.name)))
        if (target.where === 'query') search.set(name, String(value))
        const qs = search.toString() === '' ? '' : `?${search}`
        let sent: Json | undefined = body
        if (body !== undefined && target.where === 'body') sent = { ...(withValue(reaching(body, op.bodySchema!, target.path, hints), target.path, value) as JsonObject), ...(await companions(url, op, name, b)) }
        return request(url, `${path}${qs}`, { method: op.method, headers, ...(sent === undefined ? {} : { body: sent }) })
      }
      // Events are the bridge's to send: when the admin's request is refused, B's bridge key sends both.
      let headers = b.headers
      let own = op.path.startsWith('/v1/printer-events') ? undefined : await send(b, headers)
      if (own === undefined) own = await send(b, (headers = b.farm.bridge))
      // A 409 means the request was read and its ids resolved before a state refused it (a slot taken, a
      // printer that cannot take a job): A's id must still be refused first, as not found.
      if (own.status >= 300 && own.status !== 409) {
        unchecked.push(`${field}: B's own request answered ${own.status} ${own.text.slice(0, 160)}`)
        continue
      }
      const foreign = await send(a, headers)
      fields.add(field)
      t.equal(foreign.status, 404, `${op.method} ${op.path}: ${target.where}.${name} = A's ${target.kind}`, { body: foreign.text })
    }
  }
  t.same(await snapshot(url, a), before, "A's materials, spools, printers, makes, SKUs and jobs are as they were")
  t.same(unchecked, [], 'every id field of the served document was checked (B\'s own request accepted, then A\'s refused)')
  t.ok(fields.size >= 18, `fields checked against the served document (${[...fields].join('; ')})`)
}

/** The schema's own branch to walk: the first non-null alternative of an anyOf/oneOf, else the schema. */
function concrete(schema: JsonObject): JsonObject {
  const options = [schema['anyOf'], schema['oneOf']].find(Array.isArray) as JsonObject[] | undefined
  return options?.find((o) => isObject(o) && o['type'] !== 'null') ?? schema
}

/** Every field of a body schema whose name says which kind of resource it names, through objects and arrays (an array's first element). */
function idFields(schema: JsonObject, kindOf: (name: string) => Kind | undefined, prefix: PropertyPath = []): { path: PropertyPath; kind: Kind }[] {
  if (prefix.length > 8) return []
  const here = concrete(schema)
  if (isObject(here['items'])) return idFields(here['items'], kindOf, [...prefix, 0])
  const properties = isObject(here['properties']) ? here['properties'] : {}
  return Object.entries(properties).flatMap(([name, property]) => {
    if (!isObject(property)) return []
    const kind = kindOf(name)
    return kind !== undefined ? [{ path: [...prefix, name], kind }] : idFields(property, kindOf, [...prefix, name])
  })
}

/** `body` with every object and array on `path` present (an empty array gets one minimal element), so the field at its end can be set. */
function reaching(body: Json, schema: JsonObject, path: PropertyPath, hints: InstanceHints): Json {
  let out = body
  let at = concrete(schema)
  for (let i = 0; i < path.length - 1; i++) {
    const step = path[i]!
    const child = typeof step === 'number' ? at['items'] : isObject(at['properties']) ? at['properties'][step] : undefined
    if (!isObject(child)) return out
    at = concrete(child)
    if (valueAt(out, path.slice(0, i + 1)) === undefined) out = withValue(out, path.slice(0, i + 1), instanceOf(at, hints, '', 1))
    if (Array.isArray(valueAt(out, path.slice(0, i + 1))) && (valueAt(out, path.slice(0, i + 1)) as Json[]).length === 0) {
      out = withValue(out, [...path.slice(0, i + 1), 0], instanceOf(concrete(isObject(at['items']) ? at['items'] : {}), hints, '', 2))
    }
  }
  return out
}

/**
 * What a field cannot be sent without, so that B's own request is accepted and only the id makes the
 * difference: a spool goes into a printer's slot, and saving over a make names the revision read.
 */
async function companions(url: string, op: Operation, field: string, b: Org): Promise<JsonObject> {
  if (field === 'printer_id' && op.path.startsWith('/v1/inventory')) return { slot: 0 }
  if (field === 'make_id' && op.path.endsWith('/makes') && op.method === 'POST') {
    return { expected_revision: (await request(url, `/v1/makes/${b.make}`, { headers: b.headers })).json.revision }
  }
  return {}
}

/** What A has, read by A: every list a refused request of B could have written to. */
async function snapshot(url: string, a: Org): Promise<unknown[]> {
  const read = async (path: string, method = 'GET') => (await request(url, path, { method, headers: a.headers, ...(method === 'POST' ? { body: {} } : {}) })).json
  return [
    await read('/v1/materials'),
    await read('/v1/inventory'),
    await read(`/v1/printers/${a.printer}`),
    await read('/v1/makes'),
    await read('/v1/skus'),
    await read('/v1/print-jobs', 'POST'),
  ]
}
