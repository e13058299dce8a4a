/**
 * Every id a request names must belong to the caller's organization: B naming
 * one of A's resources in a body, query or path is refused with 404 (the
 * field named in the message) and nothing is stored — even when the person
 * calling is a member of both organizations (the request's organization is
 * what counts, not the person's reach).
 */
import t, { type Test } from 'tap'
import { request, type HttpResult } from '../../helpers/http.js'
import { crossOrganizationIds, twoOrganizations } from '../../helpers/isolation.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url

const { a, b, farmA } = await twoOrganizations(url)

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

t.test("id isolation - every operation: a field naming a resource, given A's id instead of B's, answers 404", async (t) => {
  await crossOrganizationIds(t, url, a, b)
})
