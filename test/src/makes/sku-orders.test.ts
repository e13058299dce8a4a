/**
 * SKUs, orders and batches over real HTTP (src/routes/skus.ts, src/makes/sku-store.ts, the ready
 * gate's requeue in src/jobs/ready-gate.ts). It proves that:
 * - ordering N units of a SKU creates exactly N × make quantity × quantity_to_print queued jobs
 *   per make, each carrying its make, SKU, batch and the make's required materials, named after
 *   what they print; the batch records the composition and counts them all as remaining;
 * - an order sent again with the same Idempotency-Key (one after the other, or five at once)
 *   answers the first batch and creates nothing more; another key, or no key, orders again;
 * - an order is all or nothing: too many jobs (400 order_too_large) or a deleted file (409
 *   file_not_printable) leave no batch and no job behind;
 * - batch progress follows the jobs through the real lifecycle (dispatch, bridge start and
 *   finish, the operator's verdict): a failure verified with requeue_failed is queued again in
 *   its batch once (a retried verdict makes no second copy), and a cancelled copy shows as missing;
 * - a SKU's code, composition and order size are bounded; another organization sees none of it
 *   and cannot use its makes; PATCH replaces the composition; DELETE keeps the batches and frees
 *   the makes, which are protected while a SKU or an unfinished job uses them.
 *
 * Each case opens its own organization (the queue is per organization); one service serves all.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { openFarm } from '../../helpers/bridge.js'
import { request, type HttpResult } from '../../helpers/http.js'
import { until } from '../../helpers/poll.js'
import { eventSender, openOrg as openFarmOrg, queueCalls, white, type Org } from '../../helpers/queue-farm.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const openOrg = (name: string): Promise<Org> => openFarmOrg(svc.url, farm.admin, name)
const send = eventSender(svc.url)
const { getJob, hostTasks } = queueCalls(svc.url)

/** What the uploaded plate's slicer recorded for its one filament (test/helpers/files.ts bambuThreeMf). */
const slicerGrams = 11.66

async function material(org: Org, body: Record<string, unknown>): Promise<{ id: string; type: string; color_hex: string }> {
  const res = await request(svc.url, '/v1/materials', { method: 'POST', headers: org.admin, body })
  if (res.status !== 201) throw new Error(`material: ${res.status} ${res.text}`)
  return res.json
}

async function make(org: Org, body: Record<string, unknown>, fileId = org.fileId): Promise<any> {
  const res = await request(svc.url, `/v1/model-files/${fileId}/full-workshop/makes`, { method: 'POST', headers: org.admin, body: { materials: [], ...body } })
  if (res.status !== 201) throw new Error(`make: ${res.status} ${res.text}`)
  return res.json
}

const createSku = (org: Org, body: Record<string, unknown>) => request(svc.url, '/v1/skus', { method: 'POST', headers: org.admin, body })
const getSku = (org: Org, code: string) => request(svc.url, `/v1/skus/${encodeURIComponent(code)}`, { headers: org.admin })
const patchSku = (org: Org, code: string, body: Record<string, unknown>) => request(svc.url, `/v1/skus/${encodeURIComponent(code)}`, { method: 'PATCH', headers: org.admin, body })
const deleteSku = (org: Org, code: string) => request(svc.url, `/v1/skus/${encodeURIComponent(code)}`, { method: 'DELETE', headers: org.admin })
const order = (org: Org, code: string, body: Record<string, unknown>, key?: string) =>
  request(svc.url, `/v1/skus/${encodeURIComponent(code)}/print-jobs`, { method: 'POST', headers: key === undefined ? org.admin : { ...org.admin, 'idempotency-key': key }, body })
const getBatch = (org: Org, id: string) => request(svc.url, `/v1/batches/${id}`, { headers: org.admin })
const listBatches = (org: Org, query = '') => request(svc.url, `/v1/batches${query}`, { headers: org.admin })
const setStatus = (org: Org, id: number, status: string) => request(svc.url, `/v1/print-jobs/${id}/status`, { method: 'PATCH', headers: org.admin, body: { status } })
const ready = (org: Org, printer: string, body: Record<string, unknown>) => request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: org.admin, body })
const deleteMake = (org: Org, id: string) => request(svc.url, `/v1/makes/${id}`, { method: 'DELETE', headers: org.admin })

/** Every job of a batch (POST /v1/print-jobs filters by batch_id), pages of 200. */
async function batchJobs(org: Org, batchId: string): Promise<any[]> {
  const jobs: any[] = []
  for (let offset = 0; ; offset += 200) {
    const res = await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: org.admin, body: { batch_id: batchId, limit: 200, offset } })
    if (res.status !== 200) throw new Error(`list: ${res.status} ${res.text}`)
    jobs.push(...res.json.jobs)
    if (jobs.length >= res.json.total || res.json.jobs.length === 0) return jobs
  }
}

/** How many jobs the organization has, in any status. */
async function jobCount(org: Org): Promise<number> {
  const res = await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: org.admin, body: { limit: 1 } })
  if (res.status !== 200) throw new Error(`list: ${res.status} ${res.text}`)
  return res.json.total
}

const batchCount = async (org: Org): Promise<number> => (await listBatches(org)).json.total

function refused(t: Test, res: HttpResult, status: number, error: string, what: string): void {
  t.equal(res.status, status, `${what}: ${status}`, { body: res.text })
  t.equal(res.json?.error, error, `${what}: ${error}`)
}

const ids = (jobs: readonly any[]): number[] => jobs.map((j) => j.id as number).sort((a, b) => a - b)
const byId = (a: any, b: any): number => a.id - b.id

/** An enabled printer on the organization's host that reported white PLA in slot 0 (so it is online). */
async function onlinePrinter(org: Org): Promise<string> {
  const res = await request(svc.url, '/v1/printer-config', { method: 'POST', headers: org.admin, body: { name: `P-${randomUUID().slice(0, 6)}`, ip_address: '127.0.0.1', enabled: true, host_id: org.hostId } })
  if (res.status !== 200) throw new Error(`printer: ${res.status} ${res.text}`)
  await send(org, res.json.id, 'printer:amsUpdate', { slots: white })
  return res.json.id
}

/**
 * The job the queue offered `printer` (one of `candidates`), claimed by the host's bridge, started and
 * finished with `result`: it awaits verification. Answers its id.
 */
async function printedOnce(t: Test, org: Org, printer: string, candidates: readonly number[], result: 'success' | 'failed'): Promise<number> {
  const offered = await until(
    async () => (await hostTasks(org)).find((task) => task.state === 'offered' && task.printer_id === printer && candidates.includes(task.job_id)),
    (task) => task !== undefined,
  )
  if (!t.ok(offered, 'the queue offers the printer a job of the batch')) throw new Error('nothing offered')
  const jobId: number = offered.job_id
  t.match(await getJob(org, jobId), { status: 'dispatching', printer_id: printer, printer_task_id: offered.id }, `job ${jobId} is dispatched`)
  const claim = await request(svc.url, `/v1/printer-tasks/${offered.id}/claim`, { method: 'POST', headers: org.bridge, body: { hostId: org.hostId, assignmentEpoch: 1 } })
  t.equal(claim.status, 200, 'the bridge claims the task', { body: claim.text })
  await send(org, printer, 'job:start', { jobId, printerTaskId: offered.id, claimGeneration: claim.json.claim_generation, name: 'plate.3mf' })
  t.equal((await getJob(org, jobId)).status, 'printing', 'job:start: printing')
  await send(org, printer, 'job:finish', { result })
  t.match(await getJob(org, jobId), { status: 'awaiting_verification', bridge_result: result }, `job:finish ${result}: awaiting verification`)
  return jobId
}

t.test('order - N units of a SKU of two makes create N×2 + N×3 queued jobs, each with its make, SKU, batch, materials and name; the batch counts them', async (t) => {
  const org = await openOrg('order')
  const red = await material(org, { name: 'Red PETG', type: 'PETG', color_hex: '#FF0000' })
  const black = await material(org, { name: 'Black PLA', type: 'PLA', color_hex: '#000000' })
  const body = await make(org, { name: 'Body', materials: [{ filament_index: 0, material_id: black.id }] })
  const created = await createSku(org, { sku: 'LAMP-01', name: 'Desk lamp', description: 'two bodies, three clips', makes: [{ make_id: body.id, quantity: 2 }] })
  t.equal(created.status, 201, 'the SKU is created', { body: created.text })
  t.match(created.json, { sku: 'LAMP-01', name: 'Desk lamp', description: 'two bodies, three clips', makes: [{ make_id: body.id, quantity: 2 }] })
  const skuId: string = created.json.id
  t.equal((await request(svc.url, `/v1/makes/${body.id}`, { headers: org.admin })).json.sku_id, skuId, 'a make of no SKU yet becomes the new SKU\'s')
  // Saved with sku_id, the second make joins the SKU (quantity 1).
  const clip = await make(org, { name: 'Clip', materials: [{ filament_index: 0, material_id: red.id }], quantity_to_print: 3, sku_id: skuId })
  const sku = await getSku(org, 'LAMP-01')
  t.equal(sku.status, 200)
  t.same(sku.json.makes, [{ make_id: body.id, quantity: 2 }, { make_id: clip.id, quantity: 1 }], 'the SKU is two bodies and one clip make')

  const N = 3
  const ordered = await order(org, 'LAMP-01', { quantity: N, priority: 5 })
  t.equal(ordered.status, 201, 'the order is created', { body: ordered.text })
  const { batch_id: batchId, batch, jobs } = ordered.json
  t.equal(batch.id, batchId)
  t.equal(jobs.length, N * 2 + N * 3, `${N * 2 + N * 3} jobs`)
  t.match(batch, { sku_id: skuId, sku: 'LAMP-01', quantity: N })
  t.same(
    batch.composition,
    [
      { make_id: body.id, quantity: 2, quantity_to_print: 1, jobs: N * 2 },
      { make_id: clip.id, quantity: 1, quantity_to_print: 3, jobs: N * 3 },
    ],
    'the composition as ordered, with the jobs each make gave',
  )
  t.same(batch.progress, { ordered: N * 5, printed: 0, failed: 0, cancelled: 0, remaining: N * 5, missing: 0, complete: false }, 'every part ordered is still to print')

  const bodies = jobs.filter((j: any) => j.make_id === body.id)
  const clips = jobs.filter((j: any) => j.make_id === clip.id)
  t.equal(bodies.length, N * 2, 'N × 2 × 1 body jobs')
  t.equal(clips.length, N * 3, 'N × 1 × 3 clip jobs')
  for (const j of jobs) {
    t.match(j, { status: 'queued', sku_id: skuId, batch_id: batchId, model_file_id: org.fileId, priority: 5, printer_id: null }, `job ${j.id} is queued in the batch`)
  }
  t.same(
    bodies.map((j: any) => j.constraints.required_materials),
    bodies.map(() => [{ filament_index: 0, type: 'PLA', color_hex: black.color_hex, used_g: slicerGrams, material_id: black.id }]),
    "the body jobs need the body make's material (black PLA)",
  )
  t.same(
    clips.map((j: any) => j.constraints.required_materials),
    clips.map(() => [{ filament_index: 0, type: 'PETG', color_hex: red.color_hex, used_g: slicerGrams, material_id: red.id }]),
    "the clip jobs need the clip make's material (red PETG)",
  )
  t.same([black.color_hex, red.color_hex], ['#000000', '#FF0000'], 'the colours as the materials were created')
  t.same(bodies.map((j: any) => j.name).sort(), Array.from({ length: N * 2 }, (_, i) => `LAMP-01 · Body (${i + 1}/${N * 2})`).sort(), 'the body jobs are named SKU · make (i/n)')
  t.same(clips.map((j: any) => j.name).sort(), Array.from({ length: N * 3 }, (_, i) => `LAMP-01 · Clip (${i + 1}/${N * 3})`).sort(), 'the clip jobs are named SKU · make (i/n)')
  t.equal(new Set(jobs.map((j: any) => j.name)).size, jobs.length, 'no two jobs share a name')

  const listed = await batchJobs(org, batchId)
  t.same(ids(listed), ids(jobs), 'POST /v1/print-jobs {batch_id} lists exactly the batch\'s jobs')
  t.same(listed.sort(byId).map((j) => [j.id, j.status, j.make_id, j.batch_id]), [...jobs].sort(byId).map((j: any) => [j.id, 'queued', j.make_id, batchId]))
  t.equal(await jobCount(org), N * 5, 'and the organization has no other job')
  const read = await getBatch(org, batchId)
  t.equal(read.status, 200)
  t.same(read.json, batch, 'GET /v1/batches/{id} answers the batch the order answered')
  const list = await listBatches(org, '?sku=LAMP-01')
  t.same(list.json.batches.map((b: any) => b.id), [batchId], 'GET /v1/batches?sku= lists it')
  t.equal((await listBatches(org, '?sku=OTHER')).json.total, 0, 'and not under another code')
})

t.test('order - a make that names no filament: its jobs need what the slicer recorded for the filament', async (t) => {
  // The decisions in protocol/schemas/makes.ts: "filaments not named take what the slicer recorded".
  // Jobs that required nothing would go to any printer, whatever it has loaded.
  const org = await openOrg('unnamed')
  const plain = await make(org, { name: 'As sliced' })
  t.equal((await createSku(org, { sku: 'PLAIN', name: 'As sliced', makes: [{ make_id: plain.id, quantity: 1 }] })).status, 201)
  const ordered = await order(org, 'PLAIN', { quantity: 1 })
  t.equal(ordered.status, 201, 'ordered', { body: ordered.text })
  const reference = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: org.admin, body: { name: 'no make', model_file_id: org.fileId } })
  t.equal(reference.status, 201)
  t.same(reference.json.constraints.required_materials, [{ filament_index: 0, type: 'PLA', color_hex: '#FFFFFF', used_g: slicerGrams, material_id: null }], 'a job of the file without a make needs white PLA')
  t.same(
    ordered.json.jobs[0]?.constraints.required_materials,
    reference.json.constraints.required_materials,
    "the make's job needs the same: the filament the make leaves unnamed prints as sliced (not: nothing required, any printer)",
  )
})

t.test('idempotency - a retried order answers the first batch; five at once with one key make one batch; another key or no key orders again', async (t) => {
  const org = await openOrg('retry')
  const part = await make(org, { name: 'Part', quantity_to_print: 2 })
  t.equal((await createSku(org, { sku: 'KIT_1', name: 'Kit', makes: [{ make_id: part.id, quantity: 1 }] })).status, 201)

  const key = `order-${randomUUID()}`
  const first = await order(org, 'KIT_1', { quantity: 2 }, key)
  t.equal(first.status, 201, 'the first request creates the batch', { body: first.text })
  t.equal(first.json.jobs.length, 4)
  const again = await order(org, 'KIT_1', { quantity: 2 }, key)
  t.equal(again.status, 200, 'the retry answers 200', { body: again.text })
  t.equal(again.json.batch_id, first.json.batch_id, 'with the same batch')
  t.same(ids(again.json.jobs), ids(first.json.jobs), 'and the same jobs')
  const otherBody = await order(org, 'KIT_1', { quantity: 7 }, key)
  t.equal(otherBody.status, 200, 'a retry with another body still answers the first batch')
  t.equal(otherBody.json.batch_id, first.json.batch_id)
  t.equal(await jobCount(org), 4, "the organization's jobs did not grow")
  t.equal(await batchCount(org), 1)

  const fresh = `order-${randomUUID()}`
  const racing = await Promise.all(Array.from({ length: 5 }, () => order(org, 'KIT_1', { quantity: 1 }, fresh)))
  t.same(racing.map((r) => r.status).sort(), [200, 200, 200, 200, 201], 'one 201, four 200', { bodies: racing.filter((r) => r.status >= 300).map((r) => r.text) })
  const raced = new Set(racing.map((r) => r.json?.batch_id))
  t.equal(raced.size, 1, 'all five answer one batch')
  t.not(racing[0]!.json.batch_id, first.json.batch_id, 'a batch other than the first key\'s')
  t.ok(racing.every((r) => JSON.stringify(ids(r.json.jobs)) === JSON.stringify(ids(racing[0]!.json.jobs))), 'with one set of jobs')
  t.equal(racing[0]!.json.jobs.length, 2)
  t.equal(await jobCount(org), 4 + 2, 'one set of jobs was created')
  t.equal(await batchCount(org), 2, 'one batch was created')
  t.same(ids(await batchJobs(org, racing[0]!.json.batch_id)), ids(racing[0]!.json.jobs))

  const third = await order(org, 'KIT_1', { quantity: 1 }, `order-${randomUUID()}`)
  t.equal(third.status, 201, 'another key orders again')
  t.notOk([first.json.batch_id, racing[0]!.json.batch_id].includes(third.json.batch_id), 'a new batch')
  const bare = [await order(org, 'KIT_1', { quantity: 1 }), await order(org, 'KIT_1', { quantity: 1 })]
  t.same(bare.map((r) => r.status), [201, 201], 'without a key every request orders (documented: send a key to retry safely)')
  t.not(bare[0]!.json.batch_id, bare[1]!.json.batch_id, 'two batches')
  t.equal(await batchCount(org), 5)
  t.equal(await jobCount(org), 4 + 2 + 2 + 2 + 2)

  refused(t, await order(org, 'KIT_1', { quantity: 1 }, 'k'.repeat(201)), 400, 'validation_failed', 'an Idempotency-Key of 201 characters')
  t.equal(await batchCount(org), 5, 'the refused order made no batch')
})

t.test('atomicity - an order over 10,000 jobs or of a deleted file answers an error and creates no batch and no job', async (t) => {
  const org = await openOrg('atomic')
  const five = await make(org, { name: 'Five', quantity_to_print: 5 })
  const six = await make(org, { name: 'Six', quantity_to_print: 6 })
  t.equal((await createSku(org, { sku: 'BIG', name: 'Big', makes: [{ make_id: five.id, quantity: 1 }, { make_id: six.id, quantity: 1 }] })).status, 201)
  // 1000 × 5 + 1000 × 6 = 11,000 jobs: each make alone is under the limit, the order is not.
  const tooLarge = await order(org, 'BIG', { quantity: 1000 }, `order-${randomUUID()}`)
  refused(t, tooLarge, 400, 'order_too_large', '11,000 jobs')
  t.match(tooLarge.json.message, /11000 jobs/, 'the message names the count')
  t.equal(await batchCount(org), 0, 'no batch')
  t.equal(await jobCount(org), 0, 'no job')
  const eleven = await make(org, { name: 'Eleven', quantity_to_print: 11 })
  t.equal((await createSku(org, { sku: 'ELEVEN', name: 'Eleven', makes: [{ make_id: eleven.id, quantity: 1 }] })).status, 201)
  refused(t, await order(org, 'ELEVEN', { quantity: 1000 }), 400, 'order_too_large', '1000 units × 11 prints')
  t.equal(await jobCount(org), 0, 'still no job')

  const small = await make(org, { name: 'Small' })
  t.equal((await createSku(org, { sku: 'SMALL', name: 'Small', makes: [{ make_id: small.id, quantity: 3 }] })).status, 201)
  const deleted = await request(svc.url, `/v1/files/${org.fileId}`, { method: 'DELETE', headers: org.admin })
  t.equal(deleted.status, 200, 'the file is deleted', { body: deleted.text })
  const key = `order-${randomUUID()}`
  const unprintable = await order(org, 'SMALL', { quantity: 2 }, key)
  refused(t, unprintable, 409, 'file_not_printable', 'an order of a deleted file')
  t.match(unprintable.json.message, /Small/, 'the message names the make')
  t.equal(await batchCount(org), 0, 'no batch')
  t.equal(await jobCount(org), 0, 'no job')
  // The refused order did not spend its key: once the file is back, the same key orders.
  const restored = await request(svc.url, `/v1/files/${org.fileId}/restore`, { method: 'POST', headers: org.admin })
  t.equal(restored.status, 204, 'the file is restored', { body: restored.text })
  const retried = await order(org, 'SMALL', { quantity: 2 }, key)
  t.equal(retried.status, 201, 'the same key now creates the batch', { body: retried.text })
  t.equal(retried.json.jobs.length, 6)
  t.equal(await jobCount(org), 6)
})

t.test('progress - a batch counts printed, failed (requeued once through the ready gate) and cancelled jobs, and what is missing', async (t) => {
  const org = await openOrg('progress')
  const whitePla = await material(org, { name: 'White PLA', type: 'PLA', color_hex: '#FFFFFF' })
  const part = await make(org, { name: 'Gear', materials: [{ filament_index: 0, material_id: whitePla.id }], quantity_to_print: 2 })
  t.equal((await createSku(org, { sku: 'GEAR', name: 'Gear', makes: [{ make_id: part.id, quantity: 1 }] })).status, 201)
  // No printer yet: the jobs wait, queued.
  const ordered = await order(org, 'GEAR', { quantity: 1 })
  t.equal(ordered.status, 201, 'ordered', { body: ordered.text })
  const batchId: string = ordered.json.batch_id
  const jobIds = ids(ordered.json.jobs)
  t.equal(jobIds.length, 2, 'two jobs')
  const progress = async () => (await getBatch(org, batchId)).json.progress

  const printer = await onlinePrinter(org)
  const good = await printedOnce(t, org, printer, jobIds, 'success')
  t.match(await progress(), { ordered: 2, printed: 0, remaining: 2 }, 'awaiting verification is still remaining')
  const verified = await ready(org, printer, { ready: true, job_id: good, event_type: 'operator:manual_verification:success' })
  t.equal(verified.status, 200, 'verified good', { body: verified.text })
  t.match(verified.json, { job: { id: good, status: 'succeeded' }, requeued_job: null })
  t.same(await progress(), { ordered: 2, printed: 1, failed: 0, cancelled: 0, remaining: 1, missing: 0, complete: false }, 'printed 1, remaining 1')

  // The printer is ready again: the queue offers it the other job.
  const bad = await printedOnce(t, org, printer, jobIds.filter((id) => id !== good), 'failed')
  const failBody = { ready: true, job_id: bad, event_type: 'operator:manual_verification:failed', failure_reason: 'spaghetti', requeue_failed: true }
  const failed = await ready(org, printer, failBody)
  t.equal(failed.status, 200, 'verified failed, with requeue', { body: failed.text })
  t.match(failed.json.job, { id: bad, status: 'failed', failure_reason: 'spaghetti', batch_id: batchId })
  const copy = failed.json.requeued_job
  t.match(copy, { status: 'queued', batch_id: batchId, make_id: part.id, sku_id: ordered.json.batch.sku_id, model_file_id: org.fileId, name: ordered.json.jobs.find((j: any) => j.id === bad).name }, 'the copy is queued in the same batch, of the same make')
  t.notOk(jobIds.includes(copy.id), 'as a new job')
  t.same(copy.constraints.required_materials, ordered.json.jobs.find((j: any) => j.id === bad).constraints.required_materials, 'needing the same materials')
  t.same(await progress(), { ordered: 2, printed: 1, failed: 1, cancelled: 0, remaining: 1, missing: 0, complete: false }, 'printed 1, failed 1, the copy remaining: nothing missing')

  const retried = await ready(org, printer, failBody)
  refused(t, retried, 409, 'job_not_awaiting_verification', 'the verdict sent again')
  const jobs = await batchJobs(org, batchId)
  t.same(ids(jobs), [...jobIds, copy.id].sort((a, b) => a - b), 'no second copy: the batch has its two jobs and the one copy')
  t.same(await progress(), { ordered: 2, printed: 1, failed: 1, cancelled: 0, remaining: 1, missing: 0, complete: false }, 'the progress is unchanged')

  // The copy may have been offered to the printer by now (it is ready again); cancelling works either way.
  const cancelled = await setStatus(org, copy.id, 'cancelled')
  t.equal(cancelled.status, 200, 'the copy is cancelled', { body: cancelled.text })
  t.equal((await getJob(org, copy.id)).status, 'cancelled')
  t.same(await progress(), { ordered: 2, printed: 1, failed: 1, cancelled: 1, remaining: 0, missing: 1, complete: false }, 'one part is missing: nobody prints it any more')
  const listed = (await listBatches(org)).json.batches.find((b: any) => b.id === batchId)
  t.same(listed?.progress, { ordered: 2, printed: 1, failed: 1, cancelled: 1, remaining: 0, missing: 1, complete: false }, 'GET /v1/batches shows the same progress')
})

t.test('bounds and isolation - codes, quantities and compositions are checked; another organization sees nothing; PATCH replaces, DELETE keeps batches and frees makes', async (t) => {
  const org = await openOrg('bounds')
  const a = await make(org, { name: 'A' })
  const b = await make(org, { name: 'B' })
  const c = await make(org, { name: 'C' })
  const base = { name: 'Shelf', makes: [{ make_id: a.id, quantity: 1 }] }

  for (const code of ['a/b', 'a b', '', '-lead', 'x'.repeat(65)]) {
    refused(t, await createSku(org, { ...base, sku: code }), 400, 'validation_failed', `the code ${JSON.stringify(code.length > 10 ? `${code.slice(0, 5)}…(${code.length})` : code)}`)
  }
  refused(t, await createSku(org, { ...base, sku: 'EMPTY', makes: [] }), 400, 'validation_failed', 'no makes')
  refused(t, await createSku(org, { ...base, sku: 'TWICE', makes: [{ make_id: a.id, quantity: 1 }, { make_id: a.id, quantity: 2 }] }), 400, 'validation_failed', 'one make twice')
  refused(t, await createSku(org, { ...base, sku: 'ZERO', makes: [{ make_id: a.id, quantity: 0 }] }), 400, 'validation_failed', 'a make quantity of 0')
  refused(t, await createSku(org, { ...base, sku: 'UNKNOWN', makes: [{ make_id: randomUUID(), quantity: 1 }] }), 404, 'make_not_found', 'a make that does not exist')
  t.equal((await request(svc.url, '/v1/skus', { headers: org.admin })).json.total, 0, 'no refused SKU was stored')

  const created = await createSku(org, { sku: 'Shelf-1.a_b', name: 'Shelf', makes: [{ make_id: a.id, quantity: 2 }, { make_id: b.id, quantity: 1 }] })
  t.equal(created.status, 201, 'letters, digits, dot, dash, underscore make a code', { body: created.text })
  t.equal((await request(svc.url, `/v1/makes/${a.id}`, { headers: org.admin })).json.sku_id, created.json.id, 'make A was made for it')
  refused(t, await createSku(org, { ...base, sku: 'Shelf-1.a_b' }), 409, 'sku_exists', 'the same code again')
  t.equal((await createSku(org, { ...base, sku: 'shelf-1.a_b' })).status, 201, 'codes are case-sensitive: another case is another SKU')
  t.equal((await createSku(org, { ...base, sku: 'TABLE', name: 'Table' })).status, 201)
  // The two shelves differ only in case, so which comes first is the store's collation: the test reads both pages.
  const pages = [0, 1].map((offset) => request(svc.url, `/v1/skus?search=SHELF&limit=1&offset=${offset}`, { headers: org.admin }))
  const [page1, page2] = await Promise.all(pages)
  t.match(page1!.json, { total: 2, limit: 1, offset: 0 }, 'search matches code or name case-insensitively, paged')
  t.match(page2!.json, { total: 2, limit: 1, offset: 1 })
  t.same([...page1!.json.skus, ...page2!.json.skus].map((s: any) => s.sku).sort(), ['Shelf-1.a_b', 'shelf-1.a_b'].sort(), 'one SKU a page, both shelves in all')
  t.same((await request(svc.url, '/v1/skus?search=table', { headers: org.admin })).json.skus.map((s: any) => s.sku), ['TABLE'])

  for (const quantity of [0, 1001]) refused(t, await order(org, 'Shelf-1.a_b', { quantity }), 400, 'validation_failed', `an order of ${quantity} units`)
  refused(t, await order(org, 'NOPE', { quantity: 1 }), 404, 'sku_not_found', 'an order of an unknown SKU')
  t.equal(await jobCount(org), 0, 'no refused order made a job')
  const ordered = await order(org, 'Shelf-1.a_b', { quantity: 1 })
  t.equal(ordered.status, 201, 'ordered', { body: ordered.text })
  const batchId: string = ordered.json.batch_id
  t.equal(ordered.json.jobs.length, 3)

  const other = await openOrg('bounds-other')
  refused(t, await getSku(other, 'Shelf-1.a_b'), 404, 'sku_not_found', "another organization reads the SKU")
  refused(t, await getBatch(other, batchId), 404, 'batch_not_found', "another organization reads the batch")
  refused(t, await order(other, 'Shelf-1.a_b', { quantity: 1 }), 404, 'sku_not_found', "another organization orders the SKU")
  refused(t, await createSku(other, { sku: 'MINE', name: 'Mine', makes: [{ make_id: a.id, quantity: 1 }] }), 404, 'make_not_found', "another organization's SKU made of this make")
  refused(t, await patchSku(other, 'Shelf-1.a_b', { name: 'taken' }), 404, 'sku_not_found', 'another organization changes the SKU')
  refused(t, await deleteSku(other, 'Shelf-1.a_b'), 404, 'sku_not_found', 'another organization deletes the SKU')
  t.equal((await request(svc.url, '/v1/skus', { headers: other.admin })).json.total, 0, 'it lists no SKU')
  t.equal(await batchCount(other), 0, 'and no batch')
  t.equal(await jobCount(other), 0, 'and no job')
  t.equal((await getSku(org, 'Shelf-1.a_b')).json.name, 'Shelf', 'the SKU is unchanged')

  refused(t, await patchSku(org, 'Shelf-1.a_b', { makes: [] }), 400, 'validation_failed', 'PATCH to no makes')
  refused(t, await patchSku(org, 'Shelf-1.a_b', { makes: [{ make_id: randomUUID(), quantity: 1 }] }), 404, 'make_not_found', 'PATCH to an unknown make')
  t.same((await getSku(org, 'Shelf-1.a_b')).json.makes, [{ make_id: a.id, quantity: 2 }, { make_id: b.id, quantity: 1 }], 'refused PATCHes changed nothing')
  const patched = await patchSku(org, 'Shelf-1.a_b', { makes: [{ make_id: c.id, quantity: 3 }], description: 'now of C' })
  t.equal(patched.status, 200, 'PATCH', { body: patched.text })
  t.match(patched.json, { sku: 'Shelf-1.a_b', name: 'Shelf', description: 'now of C', makes: [{ make_id: c.id, quantity: 3 }] }, 'the composition is replaced')
  t.same((await getSku(org, 'Shelf-1.a_b')).json.makes, [{ make_id: c.id, quantity: 3 }])
  t.same((await getBatch(org, batchId)).json.composition.map((p: any) => [p.make_id, p.quantity]), [[a.id, 2], [b.id, 1]], 'the batch keeps the composition it was ordered with')

  // Make C: no job, used by the SKU. Make A: no SKU any more, but two queued jobs.
  const cInUse = await deleteMake(org, c.id)
  refused(t, cInUse, 409, 'make_in_use', 'deleting a make a SKU is made of')
  t.match(cInUse.json, { skus: ['Shelf-1.a_b'], active_jobs: 0 })
  const aInUse = await deleteMake(org, a.id)
  refused(t, aInUse, 409, 'make_in_use', 'deleting a make with queued jobs')
  t.match(aInUse.json, { active_jobs: 2 })

  const gone = await deleteSku(org, 'Shelf-1.a_b')
  t.equal(gone.status, 200, 'the SKU is deleted', { body: gone.text })
  refused(t, await getSku(org, 'Shelf-1.a_b'), 404, 'sku_not_found', 'the deleted SKU')
  refused(t, await deleteSku(org, 'Shelf-1.a_b'), 404, 'sku_not_found', 'deleting it again')
  t.equal((await request(svc.url, `/v1/makes/${a.id}`, { headers: org.admin })).json.sku_id, null, "the make made for it no longer names it")
  const kept = await getBatch(org, batchId)
  t.equal(kept.status, 200, 'its batch still answers')
  t.match(kept.json, { id: batchId, sku_id: null, sku: 'Shelf-1.a_b', quantity: 1, progress: { ordered: 3, remaining: 3 } }, 'without the SKU, with the code it was ordered under')
  t.same((await listBatches(org, '?sku=Shelf-1.a_b')).json.batches.map((x: any) => x.id), [batchId], 'GET /v1/batches?sku= still finds it by code')
  t.equal((await batchJobs(org, batchId)).length, 3, 'and its jobs')
  t.equal((await getSku(org, 'shelf-1.a_b')).status, 200, 'the SKU of the other case is untouched')

  const freed = await deleteMake(org, c.id)
  t.equal(freed.status, 200, 'the make the SKU was made of can be deleted now', { body: freed.text })
  refused(t, await deleteMake(org, a.id), 409, 'make_in_use', 'A still has its queued jobs')
  for (const j of ordered.json.jobs.filter((j: any) => j.make_id === a.id)) t.equal((await setStatus(org, j.id, 'cancelled')).status, 200, `job ${j.id} cancelled`)
  // A is still in the SKUs shelf-1.a_b and TABLE (base); B only had the deleted SKU and a queued job.
  const aStill = await deleteMake(org, a.id)
  refused(t, aStill, 409, 'make_in_use', 'A is still in the other SKUs')
  t.same([...aStill.json.skus].sort(), ['TABLE', 'shelf-1.a_b'].sort(), 'naming them')
  t.equal(aStill.json.active_jobs, 0, 'and no job that has not ended')
})
