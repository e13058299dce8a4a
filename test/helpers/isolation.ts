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
import { instanceOf, seededRandom } from './fuzz-inputs.js'
import { request, type HttpResult } from './http.js'

export interface Org {
  farm: Farm
  headers: Record<string, string>
  material: string
  printer: string
  model: string
  file: string
  make: string
  sku: string
  spool: string
  job: number
}

export async function created(res: HttpResult, what: string): Promise<any> {
  if (res.status !== 200 && res.status !== 201) throw new Error(`${what}: ${res.status} ${res.text}`)
  return res.json
}

export async function seed(url: string, farm: Farm, tag: string): Promise<Org> {
  const headers = farm.admin
  const material = (await created(await request(url, '/v1/materials', { method: 'POST', headers, body: { name: `PLA ${tag}`, type: 'PLA', color_hex: '#FF0000' } }), 'material')).id
  const printer = await addPrinter(farm, `host-${tag}`)
  const model = await createModel(url, headers, { name: `Model ${tag}` })
  const uploaded = await upload(url, headers, model, { name: `plate-${tag}.gcode.3mf`, bytes: bambuThreeMf() })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
  const file = (uploaded.json as any).id as string
  const make = (await created(await request(url, `/v1/model-files/${file}/full-workshop/makes`, { method: 'POST', headers, body: { name: `Make ${tag}`, materials: [] } }), 'make')).id
  const sku = (await created(await request(url, '/v1/skus', { method: 'POST', headers, body: { sku: `SKU-${tag}`, name: `Sku ${tag}`, makes: [{ make_id: make, quantity: 1 }] } }), 'sku')).id
  const spool = (await created(await request(url, '/v1/inventory', { method: 'POST', headers, body: { material_id: material, initial_g: 1000 } }), 'spool')).id
  const job = (await created(await request(url, '/v1/print-jobs/create', { method: 'POST', headers, body: { name: `Job ${tag}`, model_file_id: file } }), 'job')).id
  return { farm, headers, material, printer, model, file, make, sku, spool, job }
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
 * own request is accepted, A's must answer 404.
 */
export async function crossOrganizationIds(t: Test, url: string, a: Org, b: Org): Promise<void> {
  const doc = (await request(url, '/openapi.json')).json
  const operations = operationsOf(doc).filter((op) => !op.public && !op.multipart && op.method !== 'DELETE')
  const kindOf = (name: string): keyof Pick<Org, 'material' | 'printer' | 'file' | 'make' | 'sku' | 'model' | 'job' | 'spool'> | undefined => {
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
  let checked = 0
  const fields = new Set<string>()
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
    const hints = { random, byName: (name: string) => { const kind = kindOf(name); return kind === undefined ? undefined : kind === 'job' ? b.job : b[kind] } }
    const body = op.bodySchema === undefined ? undefined : (instanceOf(op.bodySchema, hints) as Record<string, unknown>)
    const query = op.parameters.filter((p) => p.in === 'query' && kindOf(p.name) !== undefined)
    const targets: { where: 'body' | 'query'; name: string; kind: NonNullable<ReturnType<typeof kindOf>> }[] = [
      ...Object.keys((op.bodySchema?.['properties'] as Record<string, unknown> | undefined) ?? {}).flatMap((name) => {
        const kind = kindOf(name)
        return kind === undefined ? [] : [{ where: 'body' as const, name, kind }]
      }),
      ...query.map((p) => ({ where: 'query' as const, name: p.name, kind: kindOf(p.name)! })),
    ]
    for (const target of targets) {
      const send = (org: Org) => {
        const value = org[target.kind]
        const search = new URLSearchParams()
        for (const p of op.parameters.filter((q) => q.in === 'query' && q.required)) search.set(p.name, String(instanceOf(p.schema, hints, p.name)))
        if (target.where === 'query') search.set(target.name, String(value))
        const qs = search.toString() === '' ? '' : `?${search}`
        return request(url, `${path}${qs}`, { method: op.method, headers: b.headers, ...(body === undefined ? {} : { body: target.where === 'body' ? { ...body, [target.name]: value } : body }) })
      }
      const own = await send(b)
      if (own.status >= 300) continue
      const foreign = await send(a)
      fields.add(`${op.method} ${op.path} ${target.where}.${target.name}`)
      checked++
      t.equal(foreign.status, 404, `${op.method} ${op.path}: ${target.where}.${target.name} = A's ${target.kind}`, { body: foreign.text })
    }
  }
  t.ok(checked >= 8, `fields checked against the served document (${[...fields].join('; ')})`)
}
