/**
 * The smart queue's order and limits over real HTTP (protocol/queue-match.ts planQueue,
 * src/queue/reorder.ts, src/queue/stagger.ts, src/live/queue-feed.ts): jobs go out by priority,
 * then position, then age; PATCH /v1/queue/{jobId} reorders; the start stagger holds the
 * surplus on their chosen printers; a job never goes to a printer without its material; the live
 * `queue` topic follows; another organization sees none of it.
 *
 * The queue is per organization: each test opens its own. One service serves them all (an
 * embedded start costs seconds): QUEUE_MAX_STARTS 2 in a ten-minute window is the stagger of every
 * organization, so no test but the stagger's starts more than two prints in its organization.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { openFarm } from '../../helpers/bridge.js'
import { request } from '../../helpers/http.js'
import { until } from '../../helpers/poll.js'
import { eventSender, openOrg as openFarmOrg, queueCalls, white, type Org } from '../../helpers/queue-farm.js'
import { connectLive } from '../../helpers/live.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t, { QUEUE_MAX_STARTS: '2', QUEUE_STAGGER_MS: '600000' })
const farm = await openFarm(svc.url)

const openOrg = (name: string): Promise<Org> => openFarmOrg(svc.url, farm.admin, name)
const send = eventSender(svc.url)

/** An enabled printer on the organization's host that reported these AMS slots (so it is online). */
async function onlinePrinter(org: Org, slots: Record<string, unknown>[] = white): Promise<string> {
  const res = await request(svc.url, '/v1/printer-config', { method: 'POST', headers: org.admin, body: { name: `P-${randomUUID().slice(0, 6)}`, ip_address: '127.0.0.1', enabled: true, host_id: org.hostId } })
  if (res.status !== 200) throw new Error(`printer: ${res.status} ${res.text}`)
  await send(org, res.json.id, 'printer:amsUpdate', { slots })
  return res.json.id
}

const maintenance = async (org: Org, printer: string, on: boolean) => {
  const res = await request(svc.url, `/v1/printers/${printer}/maintenance`, { method: 'PATCH', headers: org.admin, body: { maintenance: on } })
  if (res.status !== 200) throw new Error(`maintenance: ${res.status} ${res.text}`)
}

const { createJob, getJob, getQueue, entryOf, hostTasks } = queueCalls(svc.url)
const reorder = (org: Org, jobId: number | string, body: unknown) => request(svc.url, `/v1/queue/${jobId}`, { method: 'PATCH', headers: org.admin, body })
const cancel = (org: Org, id: number) => request(svc.url, `/v1/print-jobs/${id}/status`, { method: 'PATCH', headers: org.admin, body: { status: 'cancelled' } })
const reasonPairs = (entry: any) => (entry?.match.reasons ?? []).map((r: any) => [r.printer_id, r.code]).sort()

/** The queue offers the job to `printer` by itself. */
async function dispatchedTo(t: Test, org: Org, jobId: number, printer: string, what: string) {
  const job = await until(() => getJob(org, jobId), (j) => j.status === 'dispatching')
  t.equal(job.status, 'dispatching', what, { job })
  t.equal(job.printer_id, printer, `${what}: to the printer`)
  t.ok((await hostTasks(org)).some((task) => task.job_id === jobId && task.state === 'offered' && task.printer_id === printer), `${what}: the host is offered its task`)
}

t.test('queue order - higher priority first, then position, then age; a job moved to position 1 is dispatched next', async (t) => {
  const org = await openOrg('order')
  const printer = await onlinePrinter(org)
  // Held in maintenance while the jobs are queued, so one pass sees them all.
  await maintenance(org, printer, true)
  const older = await createJob(org, { name: 'older' })
  const newer = await createJob(org, { name: 'newer' })
  const urgent = await createJob(org, { name: 'urgent', priority: 5 })
  const before = await getQueue(org)
  t.same(before.jobs.map((e: any) => [e.index, e.job.id]), [[1, urgent], [2, older], [3, newer]], 'priority first, then age')
  t.equal(before.total, 3)

  const moved = await reorder(org, newer, { position: 1 })
  t.equal(moved.status, 200, 'the reorder is accepted', { body: moved.text })
  t.match(moved.json, { id: newer, status: 'queued', priority: 0, position: 1 }, 'the answer is the job with its place')
  const after = await getQueue(org)
  t.same(after.jobs.map((e: any) => [e.index, e.job.id, e.job.position]), [[1, urgent, null], [2, newer, 1], [3, older, 2]], 'the moved job leads its priority; the other is numbered after it')
  t.same((await getJob(org, newer)).queue.index, 2, "GET /v1/print-jobs/{id} gives the same place")

  await maintenance(org, printer, false)
  await dispatchedTo(t, org, urgent, printer, 'the higher priority goes first')
  t.match(await getJob(org, newer), { status: 'queued' })
  t.match(await getJob(org, older), { status: 'queued' })
  t.equal((await cancel(org, urgent)).status, 200)
  await dispatchedTo(t, org, newer, printer, 'the job moved to position 1 goes next')
  const last = entryOf(await getQueue(org), older)
  t.match(last, { index: 2, job: { status: 'queued' } }, 'the older job waits behind the dispatching one')
  t.same(reasonPairs(last), [[printer, 'printer_busy']])

  const refused = await reorder(org, newer, { position: 1 })
  t.equal(refused.status, 409, 'a dispatching job is not reordered')
  t.equal(refused.json.error, 'job_not_queued')
})

t.test('queue reorder - a priority alone puts the job after the positioned jobs of that priority; another organization and bad bodies are refused', async (t) => {
  const org = await openOrg('reorder')
  // No printer: the jobs only wait.
  const a = await createJob(org, { name: 'a' })
  const b = await createJob(org, { name: 'b' })
  const c = await createJob(org, { name: 'c' })
  t.equal((await reorder(org, c, { priority: 3, position: 1 })).status, 200)
  const promoted = await reorder(org, a, { priority: 3 })
  t.match(promoted.json, { id: a, priority: 3, position: null })
  t.same((await getQueue(org)).jobs.map((e: any) => e.job.id), [c, a, b], 'c positioned first in priority 3, then a, then b of priority 0')
  t.match((await getJob(org, b)).queue, { index: 3, summary: 'no printers yet' })

  const past = await reorder(org, b, { position: 1000 })
  t.match(past.json, { id: b, position: 1 }, 'past the end: last of its priority (here the only one)')

  const other = await openOrg('reorder-other')
  const foreign = await reorder(other, a, { position: 1 })
  t.equal(foreign.status, 404, "another organization's job is not found")
  t.equal(foreign.json.error, 'print_job_not_found')
  t.equal((await reorder(org, 999_999_999, { position: 1 })).status, 404, 'an unknown job is not found')

  for (const body of [{}, { position: 0 }, { position: -1 }, { position: 1.5 }, { priority: 101 }, { priority: -101 }, { position: '1' }, { position: 1, extra: true }]) {
    const res = await reorder(org, a, body)
    t.equal(res.status, 400, `${JSON.stringify(body)} is refused`)
    t.equal(res.json.error, 'validation_failed')
  }
  t.equal((await reorder(org, 'abc', { position: 1 })).status, 400, 'a job id that is not a number is refused')
  t.match(await getJob(org, a), { priority: 3, position: null }, 'the refusals changed nothing')
})

t.test('stagger - with 2 starts allowed per window, 5 jobs on 5 free printers: 2 are offered, 3 wait each on a printer of its own', async (t) => {
  const org = await openOrg('stagger')
  const printers = [] as string[]
  for (let i = 0; i < 5; i++) printers.push(await onlinePrinter(org))
  const jobs = [] as number[]
  for (let i = 0; i < 5; i++) jobs.push(await createJob(org, { name: `job ${i + 1}` }))
  const queue = await until(
    () => getQueue(org),
    (q) => q.jobs.filter((e: any) => e.job.status === 'dispatching').length === 2 && q.jobs.filter((e: any) => e.match.reasons.some((r: any) => r.code === 'stagger_wait')).length === 3,
  )
  const offered = queue.jobs.filter((e: any) => e.job.status === 'dispatching')
  const held = queue.jobs.filter((e: any) => e.job.status === 'queued')
  t.equal(offered.length, 2, 'exactly two are dispatched', { queue })
  t.equal(held.length, 3, 'three wait')
  t.same(offered.map((e: any) => e.job.id).sort(), jobs.slice(0, 2).sort(), 'the first two in queue order go')
  for (const e of held) {
    t.same(reasonPairs(e), [[e.match.printer_id, 'stagger_wait']], `job ${e.job.id} waits for the stagger only`)
    t.equal(e.summary, 'printer chosen; waiting for the start stagger')
  }
  const chosen = held.map((e: any) => e.match.printer_id)
  const busy = offered.map((e: any) => e.job.printer_id)
  t.equal(new Set(chosen).size, 3, 'each waiting job has a printer of its own')
  t.same([...chosen, ...busy].sort(), [...printers].sort(), 'and none is a printer already offered a job')
  t.match(queue.stagger, { max_starts: 2, window_ms: 600_000, starts_in_window: 2, next_start_at: String })
  t.equal((await hostTasks(org)).length, 2, 'the host is offered two tasks')
})

t.test('materials - a job never goes to a printer without its material: the PLA printer takes one, the other waits (PETG there, the PLA one busy)', async (t) => {
  const org = await openOrg('material')
  const pla = await onlinePrinter(org)
  const petg = await onlinePrinter(org, [{ position: 0, materialType: 'PETG', color: 'FFFFFFFF' }])
  // The PLA printer is held while both jobs are queued, so the pass that frees it places both.
  await maintenance(org, pla, true)
  const first = await createJob(org, { name: 'first' })
  const second = await createJob(org, { name: 'second' })
  await maintenance(org, pla, false)
  await dispatchedTo(t, org, first, pla, 'the first job goes to the PLA printer')
  const waiting = entryOf(await getQueue(org), second)
  t.match(waiting, { job: { status: 'queued', printer_id: null }, match: { printer_id: null } })
  t.same(reasonPairs(waiting), [[pla, 'printer_busy'], [petg, 'material_missing']].sort(), 'PETG on one printer, the other busy')
  t.same((await getJob(org, second)).queue.reasons.map((r: any) => [r.printer_id, r.code]).sort(), reasonPairs(waiting), 'GET /v1/print-jobs/{id} says the same')
  t.equal((await hostTasks(org)).filter((task) => task.printer_id === petg).length, 0, 'the PETG printer is offered nothing')
})

t.test('live queue topic - a subscription answers the waiting jobs; a job created arrives in a frame with its summary', async (t) => {
  const org = await openOrg('live')
  const client = await connectLive(svc.url, { headers: org.admin })
  t.teardown(() => client.close())
  client.send({ op: 'subscribe', topics: ['queue'] })
  const snapshot = await client.next((f) => f.topic === 'queue' && (f.op === 'snapshot' || f.op === 'error'))
  t.match(snapshot, { op: 'snapshot', data: { queue: { total: 0, printers: 0, jobs: [] } } })
  const jobId = await createJob(org, { name: 'live', priority: 2 })
  const frame = await client.next((f) => f.op === 'event' && f.topic === 'queue' && f.data?.queue?.jobs?.some((j: any) => j.id === jobId))
  t.match(frame.seq, Number)
  t.match(frame.data.queue, { total: 1, printers: 0 })
  t.match(
    frame.data.queue.jobs.find((j: any) => j.id === jobId),
    { id: jobId, name: 'live', status: 'queued', priority: 2, position: null, index: 1, printer_id: null, summary: 'no printers yet', reason_counts: {} },
  )
})

t.test("isolation - another organization's queue shows none of these jobs", async (t) => {
  const org = await openOrg('mine')
  const jobId = await createJob(org)
  t.ok(entryOf(await getQueue(org), jobId), 'the owner sees the job')
  const other = await openOrg('theirs')
  const theirs = await request(svc.url, '/v1/queue', { headers: other.admin })
  t.equal(theirs.status, 200)
  t.match(theirs.json, { total: 0, jobs: [], printers: 0 })
  t.equal((await request(svc.url, `/v1/print-jobs/${jobId}`, { headers: other.admin })).status, 404)
})
