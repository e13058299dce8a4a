/**
 * The model-files filters and the overview of one file over real HTTP, with real jobs, makes,
 * SKUs and orders (src/files/model-file-reads.ts, src/files/model-file-overview.ts):
 * - GET /v1/model-files `filters` (printing, queued, has_makes, missing_label) each find exactly
 *   the files whose jobs print (printing/paused) or wait (queued/dispatching), that have a make or
 *   a project filament without a label; several must all hold; `filter_options.filters` count the
 *   view (active or deleted) before the list's own filters, only on the first page; a cancelled
 *   job, a deleted make and a deleted file change them;
 * - GET /v1/model-files/{fileId}/overview counts the file's printing and waiting jobs, its batches
 *   and makes, lists its project filaments with their labels and the SKUs made of it;
 * - its capabilities answer for the caller (an admin, a read-only key, a writing key) and for the
 *   file's state (deleted: only restore, and not once its model is deleted);
 * - another organization's file is not found; a bad or unknown id is refused.
 *
 * Each case opens its own organization (the queue is per organization), one service serves them.
 * A job reaches `printing` the way a bridge takes it there: an online printer, the queue's
 * dispatch, the claim of the task and a job:start naming it.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { until } from '../../helpers/poll.js'
import { eventSender, openOrg as openFarmOrg, white, type Org } from '../../helpers/queue-farm.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)
const send = eventSender(url)

const openOrg = (name: string): Promise<Org> => openFarmOrg(url, farm.admin, name)

/** A new model of the organization with one uploaded copy of the Bambu plate per name. */
async function modelWithFiles(org: Org, names: string[]): Promise<{ modelId: string; ids: string[] }> {
  const modelId = await createModel(url, org.admin, { name: `Model ${randomUUID().slice(0, 6)}` })
  const ids: string[] = []
  for (const name of names) {
    const res = await upload(url, org.admin, modelId, { name, bytes: bambuThreeMf() })
    if (res.status !== 201) throw new Error(`upload ${name}: ${res.status} ${JSON.stringify(res.json)}`)
    ids.push(res.json.id)
  }
  return { modelId, ids }
}

async function createJob(org: Org, fileId: string, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: org.admin, body: { name: 'Benchy', model_file_id: fileId, ...extra } })
  if (res.status !== 201) throw new Error(`create job: ${res.status} ${res.text}`)
  return res.json.id
}

async function saveMake(org: Org, fileId: string, name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await request(url, `/v1/model-files/${fileId}/full-workshop/makes`, { method: 'POST', headers: org.admin, body: { name, materials: [], ...extra } })
  if (res.status !== 201) throw new Error(`make: ${res.status} ${res.text}`)
  return res.json.id
}

async function label(org: Org, fileId: string, labels: Record<string, string>) {
  const res = await request(url, `/v1/model-files/${fileId}/filament-labels`, { method: 'PATCH', headers: org.admin, body: { labels } })
  if (res.status !== 200) throw new Error(`labels: ${res.status} ${res.text}`)
  return res.json
}

const getJob = async (org: Org, id: number) => (await request(url, `/v1/print-jobs/${id}`, { headers: org.admin })).json
const setStatus = (org: Org, id: number, status: string) => request(url, `/v1/print-jobs/${id}/status`, { method: 'PATCH', headers: org.admin, body: { status } })

/** An enabled printer on the organization's host that reported AMS slots holding the plate's white PLA (so it is online). */
async function onlinePrinter(org: Org): Promise<string> {
  const res = await request(url, '/v1/printer-config', {
    method: 'POST',
    headers: org.admin,
    body: { name: `P-${randomUUID().slice(0, 6)}`, ip_address: '127.0.0.1', enabled: true, host_id: org.hostId },
  })
  if (res.status !== 200) throw new Error(`printer: ${res.status} ${res.text}`)
  await send(org, res.json.id, 'printer:amsUpdate', { slots: white })
  return res.json.id
}

/** Waits until the queue offers one of `jobIds` to `printer` (the job is dispatching); answers that job's id. */
async function dispatchedOne(t: Test, org: Org, jobIds: number[]): Promise<number> {
  const jobs = await until(
    () => Promise.all(jobIds.map((id) => getJob(org, id))),
    (js) => js.some((j) => j.status === 'dispatching'),
  )
  const job = jobs.find((j) => j.status === 'dispatching')
  if (!t.ok(job, 'the queue dispatches a job to the printer', { jobs: jobs.map((j) => ({ id: j.id, status: j.status })) })) throw new Error('no job was dispatched')
  return job.id
}

/** The bridge claims the dispatched job's task and reports its start: the job prints. */
async function startPrinting(t: Test, org: Org, printer: string, jobId: number): Promise<void> {
  const tasks = (await request(url, `/v1/hosts/${org.hostId}/printer-tasks`, { headers: org.bridge })).json.tasks as any[]
  const task = tasks.find((task) => task.job_id === jobId)
  if (!t.ok(task, 'the host is offered the task', { tasks })) throw new Error('no task')
  const claimed = await request(url, `/v1/printer-tasks/${task.id}/claim`, { method: 'POST', headers: org.bridge, body: { hostId: org.hostId, assignmentEpoch: 1 } })
  t.equal(claimed.status, 200, 'the bridge claims the task', { body: claimed.text })
  await send(org, printer, 'job:start', { jobId, printerTaskId: task.id, claimGeneration: claimed.json.claim_generation, name: 'plate.3mf' })
  const job = await until(() => getJob(org, jobId), (j) => j.status === 'printing')
  t.equal(job.status, 'printing', 'the job prints', { job })
}

const sorted = (ids: string[]) => [...ids].sort()
const overview = (headers: Record<string, string>, fileId: string) => request(url, `/v1/model-files/${fileId}/overview`, { headers })

t.test('filters - printing, queued, has_makes, missing_label find exactly their files, all must hold, and their counts follow the view', async (t) => {
  const org = await openOrg('filters')
  const { modelId, ids } = await modelWithFiles(org, ['p.3mf', 'q.3mf', 'm.3mf', 'l.3mf', 'n.3mf'])
  const [P, Q, M, L, N] = ids as [string, string, string, string, string]
  const name = new Map([
    [P, 'P'],
    [Q, 'Q'],
    [M, 'M'],
    [L, 'L'],
    [N, 'N'],
  ])
  const list = async (query: string, view = 'active') => {
    const res = await request(url, `/v1/model-files?modelId=${modelId}&view=${view}${query === '' ? '' : `&${query}`}`, { headers: org.admin })
    if (res.status !== 200) throw new Error(`list ${query}: ${res.status} ${res.text}`)
    return res.json
  }
  const names = (answer: any) => (answer.files as { id: string }[]).map((f) => name.get(f.id) ?? f.id).sort()

  // L's only project filament gets a label; Q's job waits (the queue leaves it); M has a make.
  t.same((await label(org, L, { '1': 'Body' })).filament_labels, { '1': 'Body' })
  const queuedJob = await createJob(org, Q, { name: 'by hand', print_options: { auto_assign: false } })
  const makeId = await saveMake(org, M, 'White')
  // P's job goes to the printer: while it is being handed over it counts as queued.
  const printer = await onlinePrinter(org)
  const printingJob = await createJob(org, P, { name: 'to print' })
  t.equal(await dispatchedOne(t, org, [printingJob]), printingJob)
  t.equal((await getJob(org, queuedJob)).status, 'queued', 'the job that is not auto-assigned stays queued')
  const handingOver = await list('filters=queued')
  t.same(names(handingOver), ['P', 'Q'], 'queued: a dispatching job waits as a queued one does')
  t.same(handingOver.filter_options.filters, { printing: 0, queued: 2, has_makes: 1, missing_label: 4 })
  await startPrinting(t, org, printer, printingJob)

  const expected = { printing: 1, queued: 1, has_makes: 1, missing_label: 4 }
  const all = await list('')
  t.same(names(all), ['L', 'M', 'N', 'P', 'Q'], 'no filter: every active file')
  t.equal(all.total, 5)
  t.same(all.filter_options.filters, expected, 'the counts of the four filters')

  const cases: [string, string[]][] = [
    ['printing', ['P']],
    ['queued', ['Q']],
    ['has_makes', ['M']],
    ['missing_label', ['M', 'N', 'P', 'Q']],
    ['queued,missing_label', ['Q']],
    ['printing, missing_label', ['P']],
    ['has_makes,missing_label', ['M']],
    ['has_makes,queued', []],
    ['printing,queued', []],
    ['queued,,queued', ['Q']],
  ]
  for (const [filters, want] of cases) {
    const answer = await list(`filters=${encodeURIComponent(filters)}`)
    t.same(names(answer), want, `filters=${filters} finds ${want.join(', ') || 'nothing'}`)
    t.equal(answer.total, want.length, `filters=${filters}: total ${want.length}`)
    t.same(answer.filter_options?.filters, expected, `filters=${filters}: the counts do not depend on the filters applied`)
  }

  const secondPage = await list('filters=missing_label&limit=2&offset=2')
  t.equal(secondPage.total, 4, 'total counts every match past the first page')
  t.equal(secondPage.files.length, 2)
  t.equal(secondPage.filter_options, undefined, 'no filter options past the first page')
  const firstPage = await list('filters=missing_label&limit=2')
  t.same([...names(firstPage), ...names(secondPage)].sort(), ['M', 'N', 'P', 'Q'], 'the two pages hold the four matches once each')

  // A cancelled job no longer waits.
  const cancelled = await setStatus(org, queuedJob, 'cancelled')
  t.equal(cancelled.status, 200, 'the queued job is cancelled', { body: cancelled.text })
  const afterCancel = await list('filters=queued')
  t.same(names(afterCancel), [], 'queued: a cancelled job does not count')
  t.equal(afterCancel.total, 0)
  t.same(afterCancel.filter_options.filters, { printing: 1, queued: 0, has_makes: 1, missing_label: 4 })

  // A deleted make no longer counts.
  const deletedMake = await request(url, `/v1/makes/${makeId}`, { method: 'DELETE', headers: org.admin })
  t.equal(deletedMake.status, 200, 'the make is deleted', { body: deletedMake.text })
  const afterMake = await list('filters=has_makes')
  t.same(names(afterMake), [], 'has_makes: the deleted make does not count')
  t.same(afterMake.filter_options.filters, { printing: 1, queued: 0, has_makes: 0, missing_label: 4 })

  // Deleted files move to the deleted view, with their counts.
  for (const id of [N, L]) t.equal((await request(url, `/v1/files/${id}`, { method: 'DELETE', headers: org.admin })).status, 200, `${name.get(id)} is deleted`)
  const active = await list('')
  t.same(names(active), ['M', 'P', 'Q'])
  t.same(active.filter_options.filters, { printing: 1, queued: 0, has_makes: 0, missing_label: 3 }, 'the active view counts the active files only')
  const deleted = await list('', 'deleted')
  t.same(names(deleted), ['L', 'N'])
  t.same(deleted.filter_options.filters, { printing: 0, queued: 0, has_makes: 0, missing_label: 1 }, 'the deleted view counts the deleted files only')
  const deletedMissing = await list('filters=missing_label', 'deleted')
  t.same(names(deletedMissing), ['N'], 'filters apply in the deleted view too')
  t.equal(deletedMissing.total, 1)
  t.same(deletedMissing.filter_options.filters, { printing: 0, queued: 0, has_makes: 0, missing_label: 1 })
})

t.test('overview - counts of printing and waiting jobs, batches and makes; filaments with labels; the SKUs made of the file', async (t) => {
  const org = await openOrg('overview')
  const { ids } = await modelWithFiles(org, ['subject.3mf'])
  const fileId = ids[0]!

  const empty = await overview(org.admin, fileId)
  t.equal(empty.status, 200, 'a fresh file has an overview', { body: empty.text })
  t.same(empty.json.counts, { printing: 0, queued: 0, batches: 0, makes: 0 })
  t.same(empty.json.skus, [])
  t.same(empty.json.filaments, [{ index: 0, id: '1', type: 'PLA', color_hex: '#FFFFFF', used_g: 11.66, label: null }], 'the project filament, no label yet')

  // Two makes of the file; a SKU made of the first, ordered twice; a make of another file in another SKU.
  const makeA = await saveMake(org, fileId, 'White', { is_default: true })
  const makeB = await saveMake(org, fileId, 'Spare')
  t.not(makeA, makeB)
  const sku = `OV-${randomUUID().slice(0, 8)}`
  const created = await request(url, '/v1/skus', { method: 'POST', headers: org.admin, body: { sku, name: 'Overview boat', makes: [{ make_id: makeA, quantity: 1 }] } })
  t.equal(created.status, 201, 'the SKU is created', { body: created.text })
  const otherMake = await saveMake(org, org.fileId, 'Other file')
  const other = await request(url, '/v1/skus', { method: 'POST', headers: org.admin, body: { sku: `OT-${randomUUID().slice(0, 8)}`, name: 'Other', makes: [{ make_id: otherMake, quantity: 1 }] } })
  t.equal(other.status, 201, "another SKU, of another file's make", { body: other.text })
  const order = await request(url, `/v1/skus/${sku}/print-jobs`, { method: 'POST', headers: org.admin, body: { quantity: 2 } })
  t.equal(order.status, 201, 'the order is placed', { body: order.text })
  const batchJobs = (order.json.jobs as any[]).map((j) => j.id as number)
  t.equal(batchJobs.length, 2, 'two units, two jobs')
  const direct = await createJob(org, fileId, { name: 'direct' })
  t.equal((await getJob(org, direct)).batch_id ?? null, null, 'the direct job belongs to no batch')

  const waiting = await overview(org.admin, fileId)
  t.same(waiting.json.counts, { printing: 0, queued: 3, batches: 1, makes: 2 }, 'three jobs wait, two of them in one batch')

  // One of the three goes to a printer and prints; the printer then holds it, the others wait.
  const printer = await onlinePrinter(org)
  const printingJob = await dispatchedOne(t, org, [...batchJobs, direct])
  await startPrinting(t, org, printer, printingJob)
  const live = [...batchJobs, direct].filter((id) => id !== printingJob)
  await label(org, fileId, { '1': 'Body' })

  const answer = await overview(org.admin, fileId)
  t.equal(answer.status, 200)
  t.same(answer.json.counts, { printing: 1, queued: 2, batches: 1, makes: 2 }, 'one printing, the rest waiting, one batch, two makes')
  t.same(answer.json.skus, [{ id: created.json.id, sku, name: 'Overview boat' }], 'only the SKU made of this file')
  t.same(answer.json.filaments, [{ index: 0, id: '1', type: 'PLA', color_hex: '#FFFFFF', used_g: 11.66, label: 'Body' }], 'the filament carries its label')
  const record = await request(url, `/v1/model-files/${fileId}`, { headers: org.admin })
  t.same(answer.json.file, record.json, 'the file is the record GET /v1/model-files/{id} answers')
  t.same(answer.json.file.filament_labels, { '1': 'Body' })

  // A cancelled job no longer waits; the batch stays a batch of the file.
  const cancelled = await setStatus(org, live[0]!, 'cancelled')
  t.equal(cancelled.status, 200, 'a waiting job is cancelled', { body: cancelled.text })
  t.same((await overview(org.admin, fileId)).json.counts, { printing: 1, queued: 1, batches: 1, makes: 2 }, 'the cancelled job is not counted as waiting')
})

t.test('capabilities - answer for the caller and for the state of the file', async (t) => {
  const org = await openOrg('capabilities')
  const { modelId, ids } = await modelWithFiles(org, ['cap.3mf'])
  const fileId = ids[0]!
  const keyWith = async (scopes: string[]) => {
    const res = await request(url, '/v1/api-keys', { method: 'POST', headers: org.admin, body: { name: scopes.join(' '), scopes } })
    if (res.status !== 200) throw new Error(`api key: ${res.status} ${res.text}`)
    return { 'x-api-key': res.json.key as string }
  }
  const capabilities = async (headers: Record<string, string>, what: string) => {
    const res = await overview(headers, fileId)
    t.equal(res.status, 200, `${what}: the overview answers`, { body: res.text })
    return res.json.capabilities
  }

  t.same(
    await capabilities(org.admin, 'admin'),
    { can_print: true, can_edit_labels: true, can_reprocess: true, can_delete: true, can_restore: false },
    'an admin may do everything but restore an active file',
  )
  const reader = await keyWith(['files:read'])
  t.same(
    await capabilities(reader, 'files:read key'),
    { can_print: false, can_edit_labels: false, can_reprocess: false, can_delete: false, can_restore: false },
    'a read-only key may only read',
  )
  const writer = await keyWith(['files:read', 'files:write', 'print-jobs:write'])
  t.same(
    await capabilities(writer, 'writing key'),
    { can_print: true, can_edit_labels: true, can_reprocess: false, can_delete: true, can_restore: false },
    'a key with files:write and print-jobs:write may print, label and delete, never reprocess',
  )
  // What the writing key's capabilities promise, the routes grant; and what they deny, refuse.
  t.equal((await request(url, '/v1/print-jobs/create', { method: 'POST', headers: writer, body: { name: 'by key', model_file_id: fileId, print_options: { auto_assign: false } } })).status, 201, 'the key prints')
  t.equal((await request(url, `/v1/model-files/${fileId}/filament-labels`, { method: 'PATCH', headers: writer, body: { labels: { '1': 'Hull' } } })).status, 200, 'the key labels')
  t.equal((await request(url, `/v1/model-files/${fileId}/reprocess`, { method: 'POST', headers: writer })).status, 403, 'the key may not reprocess')
  t.equal((await request(url, `/v1/model-files/${fileId}/filament-labels`, { method: 'PATCH', headers: reader, body: { labels: { '1': 'x' } } })).status, 403, 'the read-only key may not label')

  const deleted = await request(url, `/v1/files/${fileId}`, { method: 'DELETE', headers: org.admin })
  t.equal(deleted.status, 200, 'the file is deleted', { body: deleted.text })
  const afterDelete = await overview(org.admin, fileId)
  t.equal(afterDelete.status, 200, 'a deleted file still has an overview')
  t.match(afterDelete.json.file, { id: fileId, deleted_at: String })
  t.same(afterDelete.json.capabilities, { can_print: false, can_edit_labels: false, can_reprocess: false, can_delete: false, can_restore: true }, 'a deleted file may only be restored')
  t.same(
    await capabilities(reader, 'files:read key, deleted file'),
    { can_print: false, can_edit_labels: false, can_reprocess: false, can_delete: false, can_restore: false },
    'a read-only key may not restore it',
  )
  t.same(
    await capabilities(writer, 'writing key, deleted file'),
    { can_print: false, can_edit_labels: false, can_reprocess: false, can_delete: false, can_restore: true },
    'a key with files:write may restore it',
  )

  const modelDeleted = await request(url, `/v1/models/${modelId}`, { method: 'DELETE', headers: org.admin })
  t.equal(modelDeleted.status, 200, 'the model is deleted', { body: modelDeleted.text })
  const afterModel = await overview(org.admin, fileId)
  t.equal(afterModel.status, 200, 'the overview still answers')
  t.same(afterModel.json.capabilities, { can_print: false, can_edit_labels: false, can_reprocess: false, can_delete: false, can_restore: false }, 'no restore while the model is deleted')
  t.match(await request(url, `/v1/files/${fileId}/restore`, { method: 'POST', headers: org.admin }), { status: 409, json: { error: 'model_unavailable' } }, 'as the restore route says')
})

t.test("isolation and bad input - another organization's file is not found; a bad id 400, an unknown one 404", async (t) => {
  const org = await openOrg('owner')
  const stranger = await openOrg('stranger')
  t.equal((await overview(org.admin, org.fileId)).status, 200, 'its own organization reads it')
  t.match(await overview(stranger.admin, org.fileId), { status: 404, json: { error: 'file_not_found' } }, "another organization's admin does not find it")
  t.match(await overview(org.admin, 'not-a-uuid'), { status: 400, json: { error: 'validation_failed' } }, 'a fileId that is not a uuid')
  t.match(await overview(org.admin, randomUUID()), { status: 404, json: { error: 'file_not_found' } }, 'an unknown uuid')
  t.equal((await request(url, `/v1/model-files/${org.fileId}/overview`)).status, 401, 'no credential, no overview')
})
