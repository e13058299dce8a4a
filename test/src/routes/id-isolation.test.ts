/**
 * Every id a request names must belong to the caller's organization: B naming
 * one of A's resources in a body, query or path is refused with 404 (the
 * field named in the message) and nothing is stored — even when the person
 * calling is a member of both organizations (the request's organization is
 * what counts, not the person's reach).
 */
import t, { type Test } from 'tap'
import { addPrinter, openFarm, type Farm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { operationsOf, type Operation } from '../../helpers/fuzz-cases.js'
import { instanceOf, seededRandom } from '../../helpers/fuzz-inputs.js'
import { request, type HttpResult } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url

interface Org {
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

async function created(res: HttpResult, what: string): Promise<any> {
  if (res.status !== 200 && res.status !== 201) throw new Error(`${what}: ${res.status} ${res.text}`)
  return res.json
}

async function seed(farm: Farm, tag: string): Promise<Org> {
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

const farmA = await openFarm(url)
const a = await seed(farmA, 'a')
const orgB = (await created(await request(url, '/v1/organizations', { method: 'POST', headers: farmA.admin, body: { name: 'Farm B' } }), 'organization B')).id as string
const adminB = { ...farmA.admin, 'x-organization-id': orgB }
const keyB = await created(await request(url, '/v1/api-keys', { method: 'POST', headers: adminB, body: { name: 'b bridge', scopes: ['printers:read', 'printers:write'] } }), 'key B')
const b = await seed({ url, orgId: orgB, admin: adminB, bridge: { 'x-api-key': keyB.key } }, 'b')

function refused(t: Test, res: HttpResult, field: string, what: string): void {
  t.equal(res.status, 404, `${what}: 404`, { body: res.text })
  t.match(res.json?.error, /_not_found$/, `${what}: a not-found code`)
  t.match(String(res.json?.message), field, `${what}: the message names ${field}`)
}

t.test("id isolation - a printer's filament slots: B cannot point a slot at A's material or a job at A's job", async (t) => {
  const assign = (body: Record<string, unknown>) => request(url, `/v1/printers/${b.printer}/filaments/assign`, { method: 'POST', headers: b.headers, body })
  refused(t, await assign({ slots: [{ position: 0, materialId: a.material }] }), 'materialId', "A's material in slots[0].materialId")
  refused(t, await assign({ slots: [{ position: 0, materialType: 'PLA' }], jobId: a.job }), 'jobId', "A's job in jobId")
  const printer = (await request(url, `/v1/printers/${b.printer}`, { headers: b.headers })).json.printer
  t.notOk(JSON.stringify(printer).includes(a.material), "nothing of A's reached B's printer")
  t.equal((await assign({ slots: [{ position: 0, materialId: b.material }] })).status, 200, 'its own material is fine')
})

t.test("id isolation - spools: B cannot make a spool of A's material or load one in A's printer", async (t) => {
  refused(t, await request(url, '/v1/inventory', { method: 'POST', headers: b.headers, body: { material_id: a.material, initial_g: 500 } }), 'material', "A's material_id on create")
  refused(t, await request(url, '/v1/inventory', { method: 'POST', headers: b.headers, body: { material_id: b.material, initial_g: 500, printer_id: a.printer, slot: 0 } }), 'printer', "A's printer_id on create")
  refused(t, await request(url, `/v1/inventory/${b.spool}`, { method: 'PATCH', headers: b.headers, body: { material_id: a.material } }), 'material', "A's material_id on update")
  refused(t, await request(url, `/v1/inventory/${b.spool}`, { method: 'PATCH', headers: b.headers, body: { printer_id: a.printer, slot: 0 } }), 'printer', "A's printer_id on update")
  const spool = (await request(url, `/v1/inventory/${b.spool}`, { headers: b.headers })).json
  t.equal(spool.material_id, b.material, 'the spool is unchanged')
  t.equal(spool.printer_id, null)
})

t.test("id isolation - makes and SKUs: B cannot use A's materials, SKUs, makes or files", async (t) => {
  const save = (file: string, body: Record<string, unknown>) => request(url, `/v1/model-files/${file}/full-workshop/makes`, { method: 'POST', headers: b.headers, body: { name: 'x', materials: [], ...body } })
  refused(t, await save(b.file, { materials: [{ filament_index: 0, material_id: a.material }] }), 'material', "A's material in materials[0].material_id")
  refused(t, await save(b.file, { sku_id: a.sku }), 'sku', "A's sku_id")
  refused(t, await save(b.file, { make_id: a.make, expected_revision: 1 }), 'make', "A's make_id")
  refused(t, await save(a.file, {}), 'file', "A's file in the path")
  refused(t, await request(url, '/v1/skus', { method: 'POST', headers: b.headers, body: { sku: 'SKU-X', name: 'x', makes: [{ make_id: a.make, quantity: 1 }] } }), 'make', "A's make in makes[0].make_id")
  refused(t, await request(url, '/v1/skus/SKU-b', { method: 'PATCH', headers: b.headers, body: { makes: [{ make_id: a.make, quantity: 1 }] } }), 'make', "A's make on a SKU update")
  const makes = (await request(url, '/v1/makes', { headers: b.headers })).json.makes as { id: string }[]
  t.equal(makes.length, 1, 'B still has its one make')
  t.equal((await request(url, `/v1/makes/${a.make}`, { headers: farmA.admin })).json.sku_id, a.sku, "A's make is untouched")
})

t.test("id isolation - print jobs: B cannot create from A's file or make, nor assign to A's printer", async (t) => {
  refused(t, await request(url, '/v1/print-jobs/create', { method: 'POST', headers: b.headers, body: { name: 'x', model_file_id: a.file } }), 'file', "A's model_file_id")
  refused(t, await request(url, '/v1/print-jobs/create', { method: 'POST', headers: b.headers, body: { name: 'x', model_file_id: b.file, make_id: a.make } }), 'make', "A's make_id")
  refused(t, await request(url, `/v1/print-jobs/${b.job}/assign`, { method: 'POST', headers: b.headers, body: { printer_id: a.printer } }), 'printer', "A's printer_id on assign")
  refused(t, await request(url, `/v1/print-jobs/${a.job}`, { headers: b.headers }), 'job', "A's job in the path")
  const job = (await request(url, `/v1/print-jobs/${b.job}`, { headers: b.headers })).json
  t.equal(job.printer_id ?? null, null, "B's job is on no printer")
})

t.test("id isolation - list filters: B filtering by one of A's ids is told it is not B's, not shown an empty page", async (t) => {
  refused(t, await request(url, `/v1/inventory?material_id=${a.material}`, { headers: b.headers }), 'material_id', "A's material_id")
  refused(t, await request(url, `/v1/inventory?printer_id=${a.printer}`, { headers: b.headers }), 'printer_id', "A's printer_id")
  refused(t, await request(url, `/v1/makes?model_file_id=${a.file}`, { headers: b.headers }), 'model_file_id', "A's model_file_id")
  refused(t, await request(url, `/v1/makes?sku_id=${a.sku}`, { headers: b.headers }), 'sku_id', "A's sku_id")
  refused(t, await request(url, `/v1/model-files?modelId=${a.model}&view=active`, { headers: b.headers }), 'model', "A's modelId")
  for (const [field, id] of [
    ['printer_id', a.printer],
    ['model_file_id', a.file],
    ['make_id', a.make],
  ] as const) {
    refused(t, await request(url, '/v1/print-jobs', { method: 'POST', headers: b.headers, body: { [field]: id } }), field, `A's ${field} in the job list`)
  }
  t.equal((await request(url, `/v1/inventory?material_id=${b.material}`, { headers: b.headers })).json.spools.length, 1, "B's own filter works")
  t.equal((await request(url, '/v1/print-jobs', { method: 'POST', headers: b.headers, body: { model_file_id: b.file } })).json.jobs.length, 1)
})

t.test("id isolation - paths and upserts: B naming A's resource by id reads, changes and deletes nothing", async (t) => {
  const before = await request(url, `/v1/printers/${a.printer}`, { headers: farmA.admin })
  const upsert = await request(url, '/v1/printer-config', { method: 'POST', headers: b.headers, body: { id: a.printer, name: 'taken over', ip_address: '127.0.0.1', host_id: 'host-b' } })
  t.not(upsert.status, 200, "an upsert naming A's printer id does not update it", { body: upsert.text })
  t.ok(upsert.status >= 400 && upsert.status < 500, 'a 4xx')
  const after = await request(url, `/v1/printers/${a.printer}`, { headers: farmA.admin })
  t.equal(after.json.printer.name, before.json.printer.name, "A's printer keeps its name")

  for (const [method, path, body] of [
    ['GET', `/v1/printers/${a.printer}`, undefined],
    ['PATCH', `/v1/printers/${a.printer}/maintenance`, { maintenance: true }],
    ['PATCH', `/v1/printer-config/${a.printer}`, { name: 'x' }],
    ['DELETE', `/v1/printer-config/${a.printer}`, undefined],
    ['GET', `/v1/materials/${a.material}`, undefined],
    ['PATCH', `/v1/materials/${a.material}`, { name: 'x' }],
    ['DELETE', `/v1/materials/${a.material}`, undefined],
    ['GET', `/v1/inventory/${a.spool}`, undefined],
    ['PATCH', `/v1/inventory/${a.spool}`, { label: 'x' }],
    ['POST', `/v1/inventory/${a.spool}/adjustments`, { delta_g: -10, reason: 'x' }],
    ['DELETE', `/v1/inventory/${a.spool}`, undefined],
    ['GET', `/v1/makes/${a.make}`, undefined],
    ['DELETE', `/v1/makes/${a.make}`, undefined],
    ['GET', `/v1/model-files/${a.file}`, undefined],
    ['DELETE', `/v1/files/${a.file}`, undefined],
    ['GET', `/v1/models/${a.model}`, undefined],
    ['DELETE', `/v1/models/${a.model}`, undefined],
    ['PATCH', `/v1/print-jobs/${a.job}/status`, { status: 'cancelled' }],
    ['PATCH', `/v1/queue/${a.job}`, { priority: 5 }],
    ['DELETE', `/v1/print-jobs/${a.job}`, undefined],
    ['GET', '/v1/skus/SKU-a', undefined],
    ['POST', '/v1/skus/SKU-a/print-jobs', { quantity: 1 }],
  ] as const) {
    const res = await request(url, path, { method, headers: b.headers, ...(body === undefined ? {} : { body }) })
    t.equal(res.status, 404, `${method} ${path.replace(/[0-9a-f-]{36}|\/\d+/, (m) => (m.startsWith('/') ? '/{A id}' : '{A id}'))}: 404`, { body: res.text })
  }
  const job = (await request(url, `/v1/print-jobs/${a.job}`, { headers: farmA.admin })).json
  t.equal(job.status, 'queued', "A's job is still queued")
  t.equal((await request(url, `/v1/inventory/${a.spool}`, { headers: farmA.admin })).json.remaining_g, 1000, "A's spool is untouched")
  t.equal((await request(url, `/v1/materials/${a.material}`, { headers: farmA.admin })).status, 200, "A's material is still there")
})

/**
 * The same rule for every operation of the served OpenAPI document, so a route added later is held to
 * it without a test of its own: each body or query field whose name says which kind of resource it
 * names is first filled with B's own resource (and every path id with B's), then with A's. When B's
 * own request is accepted, A's must answer 404.
 */
t.test('id isolation - every operation: a field naming a resource, given A\'s id instead of B\'s, answers 404', async (t) => {
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
})
