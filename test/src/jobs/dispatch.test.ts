/**
 * Print jobs and exactly-once dispatch over real HTTP (docs/print-jobs.md):
 * create, assign, poll, claim (concurrent, retried, fenced), task-bound file
 * reads, the job:start link (once), the ready gate, cancel/requeue and the
 * fence of a host move.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, EventSender, type Farm, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { raceBehindRowLock } from '../../helpers/barrier.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge with launch', scopes: [...bridgeScopes] } })
const launch = { 'x-api-key': key.json.key as string }
const bridge: Farm = { ...farm, bridge: launch }
const modelId = await createModel(svc.url, farm.admin)
const uploaded = await upload(svc.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
const fileId: string = uploaded.json.id

/** Each printer's bridge numbers its own events. */
const events = new EventSender(bridge)
const send = (printer: string, type: string, data: Record<string, unknown> = {}, o: { hostId?: string; epoch?: number; eventId?: string } = {}) =>
  events.post(printer, type, data, { ...(o.hostId === undefined ? {} : { hostId: o.hostId }), ...(o.epoch === undefined ? {} : { assignmentEpoch: o.epoch }), ...(o.eventId === undefined ? {} : { eventId: o.eventId }) })

async function onlinePrinter(hostId = 'host-a'): Promise<string> {
  const printer = await addPrinter(farm, hostId, { enabled: true })
  const res = await send(printer, 'heartbeat', {}, { hostId })
  if (res.status !== 200) throw new Error(`heartbeat: ${res.status} ${res.text}`)
  return printer
}

async function createJob(name = 'Benchy', extra: Record<string, unknown> = {}) {
  const res = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name, model_file_id: fileId, ...extra } })
  if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
  return res.json
}

const assign = (jobId: number, printerId: string) => request(svc.url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printerId } })
const claim = (taskId: string, body: Record<string, unknown> = { hostId: 'host-a', assignmentEpoch: 1 }) =>
  request(svc.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body })
const job = async (id: number) => (await request(svc.url, `/v1/print-jobs/${id}`, { headers: farm.admin })).json
const poll = async (hostId = 'host-a') => (await request(svc.url, `/v1/hosts/${hostId}/printer-tasks`, { headers: launch })).json.tasks as any[]

async function dispatched(printer: string) {
  const created = await createJob()
  const assigned = await assign(created.id, printer)
  if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
  return { jobId: created.id as number, taskId: assigned.json.task.id as string, task: assigned.json.task }
}

t.test('print jobs - a job is created from the plate of a file, with the materials its slicer recorded', async (t) => {
  const created = await createJob('Two-colour', { priority: 5 })
  t.match(created, { name: 'Two-colour', status: 'queued', source: 'api', model_file_id: fileId, priority: 5, plate: 1, printer_id: null, attempts: 0 })
  t.match(created.print_options, { auto_assign: true, enable_ams: true })
  // The plate prints with filament 1 only (the slicer recorded 0 g of filament 2).
  t.same(created.constraints.required_materials.map((m: any) => [m.filament_index, m.type, m.color_hex, m.used_g]), [[0, 'PLA', '#FFFFFF', 11.66]])
  t.equal((await job(created.id)).id, created.id, 'GET reads it back')
  const listed = await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { status: ['queued'], search: 'two-col' } })
  t.equal(listed.status, 200)
  t.ok(listed.json.jobs.some((j: any) => j.id === created.id))
  t.equal(listed.json.jobs.every((j: any) => j.status === 'queued'), true)
})

t.test('print jobs - a create retried with the same Idempotency-Key answers the first job; no second print is queued', async (t) => {
  const key = `order-1042-${randomUUID()}`
  const create = () => request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: { ...farm.admin, 'idempotency-key': key }, body: { name: 'Order 1042', model_file_id: fileId } })
  const answers = await Promise.all([create(), create(), create()])
  t.same(answers.map((a) => a.status).sort(), [200, 200, 201], 'one created, the retries answer it')
  t.equal(new Set(answers.map((a) => a.json.id)).size, 1, 'one job')
  const listed = await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { search: 'Order 1042' } })
  t.equal(listed.json.total, 1)
  const tooLong = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: { ...farm.admin, 'idempotency-key': 'k'.repeat(201) }, body: { name: 'x', model_file_id: fileId } })
  t.equal(tooLong.status, 400)
})

t.test('print jobs - bad input is a 4xx naming what to fix', async (t) => {
  const bad = [
    { name: '', model_file_id: fileId },
    { name: 'x', model_file_id: 'not-a-uuid' },
    { name: 'x', model_file_id: fileId, print_options: { auto_assign: 'yes' } },
    { name: 'x', model_file_id: fileId, priority: 101 },
    { name: 'x', model_file_id: fileId, plate: 2 },
    { name: 'x', model_file_id: fileId, extra: 1 },
  ]
  for (const body of bad) {
    const res = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body })
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.json.error, 'validation_failed')
  }
  const missing = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'x', model_file_id: randomUUID() } })
  t.equal(missing.status, 404)
  t.equal((await request(svc.url, '/v1/print-jobs/999999999', { headers: farm.admin })).status, 404)
  t.equal((await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { limit: 201 } })).status, 400)
  t.equal((await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { status: ['done'] } })).status, 400)
})

t.test('dispatch - an assignment makes exactly one offered task; a second assignment of the job is refused', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId, task } = await dispatched(printer)
  t.match(task, { state: 'offered', file_id: fileId, file_name: 'plate-v1.0.3mf', file_size: Number, file_sha256: /^[0-9a-f]{64}$/ }, 'the answer names the file to fetch')
  t.match(await job(jobId), { status: 'dispatching', printer_id: printer, printer_task_id: taskId, attempts: 1 })
  const tasks = await poll()
  t.equal(tasks.filter((task) => task.job_id === jobId).length, 1)
  const mine = tasks.find((task) => task.id === taskId)
  t.match(mine, { state: 'offered', printer_id: printer, host_id: 'host-a', assignment_epoch: 1, file_id: fileId, plate: 1, claim_generation: null })
  t.same(mine.ams_mapping, [-1], 'the printer reported no AMS: nothing is mapped')
  const again = await assign(jobId, printer)
  t.equal(again.status, 200, 'the same assignment again (a lost answer retried) answers the same task')
  t.equal(again.json.task.id, taskId)
  t.equal((await poll()).filter((task) => task.job_id === jobId).length, 1, 'still one task')
  const elsewhere = await assign(jobId, await onlinePrinter())
  t.equal(elsewhere.status, 409, 'a dispatching job is not assigned to another printer')
  t.equal(elsewhere.json.error, 'job_not_dispatchable')
  const other = await createJob()
  const busy = await assign(other.id, printer)
  t.equal(busy.status, 409)
  t.equal(busy.json.error, 'printer_not_eligible')
  t.ok(busy.json.reasons.some((r: any) => r.code === 'printer_busy'))
  const deleted = await request(svc.url, `/v1/printer-config/${printer}`, { method: 'DELETE', headers: farm.admin })
  t.equal(deleted.status, 409, 'a printer with a task is not deleted from under its job')
  t.match(deleted.json, { error: 'printer_busy', reason: 'task_offered', job: { jobId } })
})

t.test('dispatch - an ineligible printer is refused with every reason', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { enabled: false })
  const created = await createJob()
  const res = await assign(created.id, printer)
  t.equal(res.status, 409)
  t.same(res.json.reasons.map((r: any) => r.code).sort(), ['printer_disabled', 'printer_offline', 'printer_state_unknown'])
  t.equal((await job(created.id)).status, 'queued', 'nothing changed')
})

t.test('claims - ten concurrent claims by the host make one claim; another host or epoch is fenced', async (t) => {
  const printer = await onlinePrinter()
  const { taskId } = await dispatched(printer)
  const answers = await Promise.all(Array.from({ length: 10 }, () => claim(taskId)))
  t.same(answers.map((a) => a.status), Array(10).fill(200))
  const generations = new Set(answers.map((a) => a.json.claim_generation))
  t.equal(generations.size, 1, 'one claim, answered ten times')
  t.equal(new Set(answers.map((a) => a.json.printer_task_access_token)).size, 1)
  t.match(answers[0]!.json.task, { state: 'claimed' })
  t.ok(answers[0]!.json.task.start_deadline_at)
  t.match(answers[0]!.json.download_url, /\/v1\/files\/.+\?expires=\d+&signature=/)
  const retried = await claim(taskId)
  t.equal(retried.json.claim_generation, answers[0]!.json.claim_generation, 'a retried claim returns the same claim')
  const otherHost = await claim(taskId, { hostId: 'host-b', assignmentEpoch: 1 })
  t.equal(otherHost.status, 409)
  t.equal(otherHost.json.error, 'assignment_other_host')
  const stale = await claim(taskId, { hostId: 'host-a', assignmentEpoch: 0 })
  t.equal(stale.status, 409)
  t.equal(stale.json.error, 'assignment_epoch_stale')
  t.equal((await claim(randomUUID())).status, 404)
})

t.test('claims - an offer past its expiry is not claimable, even before the sweep has expired it', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  await svc.services.db.sql`update printer_tasks set offer_expires_at = now() - interval '1 second' where id = ${taskId}`
  const late = await claim(taskId)
  t.equal(late.status, 409)
  t.equal(late.json.error, 'task_not_claimable')
  t.match(late.json.message, /expired/)
  t.match(await job(jobId), { status: 'dispatching' }, 'nothing was claimed')
})

t.test('claims - file reads with the task parameters must match the live claim', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId)).json
  const readOnly = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'launch only', scopes: ['print:launch'] } })
  const launchOnly = { 'x-api-key': readOnly.json.key as string }
  const params = (o: Record<string, string> = {}) =>
    '?' + new URLSearchParams({ print_job_id: String(jobId), printer_task_id: taskId, claim_generation: claimed.claim_generation, printer_task_access_token: claimed.printer_task_access_token, ...o }).toString()
  const ok = await fetch(`${svc.url}/v1/files/${fileId}${params()}`, { headers: launchOnly })
  t.equal(ok.status, 200)
  t.equal((await ok.arrayBuffer()).byteLength, bambuThreeMf().byteLength)
  const wrongGeneration = await request(svc.url, `/v1/files/${fileId}${params({ claim_generation: randomUUID() })}`, { headers: launchOnly })
  t.equal(wrongGeneration.status, 409)
  t.equal(wrongGeneration.json.error, 'task_claim_mismatch')
  const wrongToken = await request(svc.url, `/v1/files/${fileId}${params({ printer_task_access_token: randomUUID() })}`, { headers: launchOnly })
  t.equal(wrongToken.status, 403)
  t.equal(wrongToken.json.error, 'task_access_denied')
  const wrongJob = await request(svc.url, `/v1/files/${fileId}${params({ print_job_id: '1' })}`, { headers: launchOnly })
  t.equal(wrongJob.status, 409)
  const bare = await request(svc.url, `/v1/files/${fileId}`, { headers: launchOnly })
  t.equal(bare.status, 403, 'print:launch alone reads only through a claim')
  const withFilesRead = await fetch(`${svc.url}/v1/files/${fileId}`, { headers: launch })
  t.equal(withFilesRead.status, 200, 'files:read reads without the task parameters')
  await withFilesRead.arrayBuffer()
})

t.test('start - job:start with the task links once; a second start changes nothing', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId)).json
  const eventId = `start-${randomUUID()}`
  const first = await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation, name: 'plate.3mf' }, { eventId })
  t.equal(first.status, 200)
  t.equal(first.json.events[0].outcome, 'applied')
  t.match(await job(jobId), { status: 'printing', printer_state: 'printing', printer_task_id: taskId })
  const printerState = (await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer
  t.equal(printerState.job.id ?? printerState.job.job_id, jobId, "the printer's job is the dispatched job")
  const second = await send(printer, 'job:start', { jobId, printerTaskId: taskId })
  t.equal(second.json.events[0].outcome, 'refused')
  t.equal(second.json.events[0].reason, 'job_already_started')
  t.match(await job(jobId), { status: 'printing', printer_state: 'printing' })
  const jobs = await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  t.equal(jobs.json.total, 1, 'no second job was opened')
  const operator = await request(svc.url, `/v1/printers/${printer}/operator-device-start`, { method: 'POST', headers: farm.admin })
  t.equal(operator.status, 409)
  t.equal(operator.json.error, 'job_already_started')
})

t.test('start - a job:start for a task that already finished (a restarted bridge announcing its last task again) is refused and changes nothing', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId)).json
  await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  await send(printer, 'job:finish', { result: 'success' })
  const before = await job(jobId)
  t.equal(before.status, 'awaiting_verification')
  const printerBefore = (await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer
  const again = await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  t.equal(again.status, 200)
  t.equal(again.json.events[0].outcome, 'refused')
  t.equal(again.json.events[0].reason, 'job_already_started')
  t.match(again.json.events[0].message, /finished/)
  t.same(await job(jobId), before, 'the job is as it was')
  const printerAfter = (await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer
  t.same({ job: printerAfter.job, ready_gate: printerAfter.ready_gate, state: printerAfter.state }, { job: printerBefore.job, ready_gate: printerBefore.ready_gate, state: printerBefore.state }, "the printer's job and gate are as they were")
})

t.test('connection reports - a status word needs the printer\'s own host and epoch: without them, from another host or another epoch it is refused and the print runs on', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId)).json
  await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  const report = (body: Record<string, unknown>) =>
    request(svc.url, `/v1/printer-config/${printer}/connection-status`, { method: 'PATCH', headers: launch, body: { is_connected: true, last_heartbeat: new Date().toISOString(), ...body } })
  const bare = await report({ status: 'FINISH' })
  t.equal(bare.status, 400)
  t.match(bare.json, { error: 'validation_failed', message: /hostId/ })
  const otherHost = await report({ status: 'FINISH', hostId: 'host-b', assignmentEpoch: 1 })
  t.equal(otherHost.status, 409)
  t.equal(otherHost.json.error, 'assignment_other_host')
  const otherEpoch = await report({ status: 'FINISH', hostId: 'host-a', assignmentEpoch: 2 })
  t.equal(otherEpoch.status, 409)
  t.equal(otherEpoch.json.error, 'assignment_epoch_unknown')
  t.match(await job(jobId), { status: 'printing', printer_state: 'printing' }, 'the print runs on')
  t.equal((await report({})).status, 200, 'presence alone needs no fence')
  const own = await report({ status: 'RUNNING', hostId: 'host-a', assignmentEpoch: 1 })
  t.equal(own.status, 200, "the printer's own bridge may send its status word")
  t.match(await job(jobId), { status: 'printing' })
})

t.test('start - a job:start with a wrong claim generation or an unknown task is refused and starts nothing', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  await claim(taskId)
  const wrong = await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: randomUUID() })
  t.equal(wrong.json.events[0].reason, 'task_claim_mismatch')
  const unknown = await send(printer, 'job:start', { printerTaskId: randomUUID() })
  t.equal(unknown.json.events[0].reason, 'task_unknown')
  t.equal((await job(jobId)).status, 'dispatching')
})

t.test('ready gate - finish, not ready, verify success, the next job dispatches; verify failed with requeue queues a copy', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId)).json
  await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  await send(printer, 'job:update', { progress: 50 })
  await send(printer, 'job:finish', { result: 'success' })
  t.match(await job(jobId), { status: 'awaiting_verification', bridge_result: 'success', printer_state: 'finished' })
  const gated = (await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer
  t.match(gated, { ready: false, ready_gate: 'awaiting_verification' }, 'the read model shows the plate waits for a look')
  const next = await createJob('Next')
  const refused = await assign(next.id, printer)
  t.equal(refused.status, 409)
  t.same(refused.json.reasons.map((r: any) => r.code), ['printer_not_ready'])

  const verified = await request(svc.url, `/v1/printers/${printer}/ready`, {
    method: 'PATCH',
    headers: farm.admin,
    body: { ready: true, event_type: 'operator:manual_verification:success', part_verifications: [{ part_name: 'benchy', good_count: 1, defective_count: 0, action: 'accept' }] },
  })
  t.equal(verified.status, 200)
  t.match(verified.json, { success: true, ready: true, job: { id: jobId, status: 'succeeded', verification: 'success' }, requeued_job: null })
  t.same(verified.json.job.part_verifications, [{ part_name: 'benchy', good_count: 1, defective_count: 0, action: 'accept' }])
  const opened = (await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer
  t.match(opened, { ready: true, ready_gate: 'open' }, 'the gate opens, and the read model says ready as the verdict did')
  const again = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true, job_id: jobId, event_type: 'operator:manual_verification:success' } })
  t.equal(again.status, 409)
  t.equal(again.json.error, 'job_not_awaiting_verification')

  const second = await assign(next.id, printer)
  t.equal(second.status, 200, 'the verified printer takes the next job')
  const secondClaim = (await claim(second.json.task.id)).json
  await send(printer, 'job:start', { jobId: next.id, printerTaskId: second.json.task.id, claimGeneration: secondClaim.claim_generation })
  await send(printer, 'job:finish', { result: 'failed', progress: 30 })
  const failed = await request(svc.url, `/v1/printers/${printer}/ready`, {
    method: 'PATCH',
    headers: farm.admin,
    body: { ready: true, event_type: 'operator:manual_verification:failed', failure_reason: 'spaghetti', requeue_failed: true },
  })
  t.equal(failed.status, 200)
  t.match(failed.json.job, { id: next.id, status: 'failed', failure_reason: 'spaghetti' })
  t.match(failed.json.requeued_job, { status: 'queued', name: 'Next', model_file_id: fileId })
  t.not(failed.json.requeued_job.id, next.id)
  const noReason = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true, event_type: 'operator:manual_verification:failed' } })
  t.equal(noReason.status, 409, 'nothing awaits verification any more')
})

t.test('ready gate - an operator hold keeps the printer out; ready true lifts it', async (t) => {
  const printer = await onlinePrinter()
  const hold = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: false, ready_updated_source: 'operator_override' } })
  t.match(hold.json, { ready: false, ready_source: 'operator_override' })
  t.match((await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer, { ready: false, ready_gate: 'held' })
  const created = await createJob()
  const refused = await assign(created.id, printer)
  t.match(refused.json.reasons, [{ code: 'printer_not_ready' }])
  await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true } })
  t.equal((await assign(created.id, printer)).status, 200)
  const bad = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true, failure_reason: 'gremlins' } })
  t.equal(bad.status, 400)
})

t.test('cancel and requeue - a cancelled dispatch fences its task; requeue needs an unconfirmed start', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  await claim(taskId)
  const requeue = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'queued' } })
  t.equal(requeue.status, 409)
  t.equal(requeue.json.error, 'job_transition_invalid')
  t.match(requeue.json.message, /dispatching/)
  const cancelled = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'cancelled', reason: 'wrong colour' } })
  t.equal(cancelled.status, 200)
  t.equal(cancelled.json.status, 'cancelled')
  // The claim may have started on the printer without the start reaching the service: its bridge is told to stop it.
  const standing = (await poll()).find((task) => task.id === taskId)
  t.match(standing, { state: 'cancelled', commands: [{ kind: 'cancel', id: String }] }, 'the cancelled claim stays in the poll with a cancel command')
  const late = await send(printer, 'job:start', { jobId, printerTaskId: taskId })
  t.equal(late.json.events[0].reason, 'task_fenced')
  t.equal((await job(jobId)).status, 'cancelled')
  await svc.services.jobs.dispatcher.sweep(new Date(Date.now() + 60_000))
  t.ok((await poll()).some((task) => task.id === taskId), 'the cancel stands for an offer\'s time, for the bridge to poll')
  await svc.services.jobs.dispatcher.sweep(new Date(Date.now() + 10 * 60_000))
  t.notOk((await poll()).some((task) => task.id === taskId), 'then, the printer printing nothing, the cancelled task leaves the poll')
  const back = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'queued' } })
  t.match(back.json, { status: 'queued', printer_id: null, printer_task_id: null })
  t.equal((await request(svc.url, `/v1/print-jobs/${jobId}`, { method: 'DELETE', headers: farm.admin })).status, 200)
  t.equal((await request(svc.url, `/v1/print-jobs/${jobId}`, { headers: farm.admin })).status, 404)
})

t.test('requeue - a printing job nobody cancelled is refused as a transition (job_transition_invalid naming both states), not as a pending cancel', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId)).json
  await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  const requeue = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'queued' } })
  t.equal(requeue.status, 409)
  t.equal(requeue.json.error, 'job_transition_invalid')
  t.match(requeue.json.message, /printing.*queued/)
  t.notMatch(requeue.json.message, /cancel/, 'nothing was cancelled: the message does not say so')
  t.equal((await job(jobId)).status, 'printing')
})

t.test('cancel - a cancelled offer (never claimed, so never started) leaves the poll at once, with no command', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  t.ok((await poll()).some((task) => task.id === taskId), 'offered')
  const cancelled = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'cancelled' } })
  t.equal(cancelled.status, 200)
  t.notOk((await poll()).some((task) => task.id === taskId), 'gone from the poll')
})

t.test('cancel - a claimed task that did start on the printer (its start unreported) is stopped by the cancel: the bridge finishes it cancelled', async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  await claim(taskId)
  // The printer prints (its own report says so) but the bridge's job:start has not reached the service.
  await send(printer, 'status', { status: 'RUNNING' })
  const cancelled = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'cancelled' } })
  t.equal(cancelled.status, 200)
  const standing = (await poll()).find((task) => task.id === taskId)
  t.match(standing?.commands, [{ kind: 'cancel' }], 'the bridge is told to stop it')
  await svc.services.jobs.dispatcher.sweep(new Date(Date.now() + 10 * 60_000))
  t.ok((await poll()).some((task) => task.id === taskId), 'the cancel stands while the printer prints')
  await send(printer, 'job:finish', { result: 'cancelled' })
  const state = (await request(svc.url, `/v1/printers/${printer}`, { headers: launch })).json.printer
  t.equal(state.job.state, 'cancelled', "the printer's print ended, cancelled")
  await svc.services.jobs.dispatcher.sweep(new Date(Date.now() + 10 * 60_000))
  t.notOk((await poll()).some((task) => task.id === taskId), 'its effect seen, the cancel is cleared')
})

t.test('host move - the old assignment\'s claim is fenced: unconfirmed, out of the poll, refused to the old host, and its file reads refused', async (t) => {
  const printer = await onlinePrinter('host-m')
  const { jobId, taskId } = await dispatched(printer)
  const claimed = (await claim(taskId, { hostId: 'host-m', assignmentEpoch: 1 })).json
  const moved = await request(svc.url, `/v1/printers/${printer}/host-assignment`, { method: 'PUT', headers: farm.admin, body: { hostId: 'host-n' } })
  t.equal(moved.status, 200)
  t.notOk((await poll('host-m')).some((task) => task.id === taskId))
  t.equal((await request(svc.url, `/v1/printer-tasks/${taskId}`, { headers: launch })).json.state, 'unconfirmed')
  const old = await claim(taskId, { hostId: 'host-m', assignmentEpoch: 1 })
  t.equal(old.json.error, 'assignment_epoch_stale')
  const readOnly = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'launch only', scopes: ['print:launch'] } })
  const params = new URLSearchParams({ print_job_id: String(jobId), printer_task_id: taskId, claim_generation: claimed.claim_generation, printer_task_access_token: claimed.printer_task_access_token })
  const read = await request(svc.url, `/v1/files/${fileId}?${params}`, { headers: { 'x-api-key': readOnly.json.key as string } })
  t.equal(read.status, 409, "the fenced claim's file read is refused")
  t.equal(read.json.error, 'task_claim_mismatch')
  t.match(read.json.message, /older assignment/)
  const requeued = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'queued' } })
  t.equal(requeued.status, 200, 'an unconfirmed dispatch may be requeued')
  t.equal((await request(svc.url, `/v1/printer-tasks/${taskId}`, { headers: launch })).json.state, 'cancelled')
})

t.test('operator start - an unstarted task is confirmed by the operator: the job prints', async (t) => {
  const printer = await onlinePrinter()
  const { jobId } = await dispatched(printer)
  const started = await request(svc.url, `/v1/printers/${printer}/operator-device-start`, { method: 'POST', headers: farm.admin })
  t.equal(started.status, 200)
  t.match(started.json, { success: true, job: { id: jobId, status: 'printing' }, task: { state: 'started' } })
  const none = await request(svc.url, `/v1/printers/${await onlinePrinter()}/operator-device-start`, { method: 'POST', headers: farm.admin })
  t.equal(none.json.error, 'no_task_to_start')
})

t.test("operator start - a task that changed between the start's look and its lock (cancelled, the job offered again) answers 409 no_task_to_start, not 500", { skip: !svc.config.databaseUrl && 'needs a second connection to PostgreSQL' }, async (t) => {
  const printer = await onlinePrinter()
  const { jobId, taskId } = await dispatched(printer)
  await claim(taskId)
  const again = randomUUID()
  const [answer] = await raceBehindRowLock({
    databaseUrl: svc.config.databaseUrl!,
    schema: svc.config.databaseSchema,
    // While the operator's start waits for the job: its task is cancelled and the job offered again
    // to the same printer (a requeue and the next queue pass), committed when the lock is let go.
    lock: async (tx) => {
      await tx`select 1 from print_jobs where id = ${jobId} for update`
      await tx`update printer_tasks set state = 'cancelled', ended_at = now(), end_reason = 'requeued' where id = ${taskId}`
      await tx`
        insert into printer_tasks (id, organization_id, job_id, printer_id, host_id, assignment_epoch, file_id, plate, state, offered_at, offer_expires_at)
        select ${again}, organization_id, job_id, printer_id, host_id, assignment_epoch, file_id, plate, 'offered', now(), now() + interval '2 minutes' from printer_tasks where id = ${taskId}`
      await tx`update print_jobs set printer_task_id = ${again} where id = ${jobId}`
    },
    racers: 1,
    start: () => request(svc.url, `/v1/printers/${printer}/operator-device-start`, { method: 'POST', headers: farm.admin }),
  })
  t.equal(answer!.status, 409, answer!.text)
  t.equal(answer!.json.error, 'no_task_to_start')
  t.equal((await request(svc.url, `/v1/printer-tasks/${again}`, { headers: launch })).json.state, 'offered', 'the new offer is untouched')
  t.equal((await job(jobId)).status, 'dispatching')
})

t.test('isolation - another organization sees none of these jobs or tasks', async (t) => {
  const other = await request(svc.url, '/v1/organizations', { method: 'POST', headers: farm.admin, body: { name: `Other ${randomUUID().slice(0, 6)}` } })
  t.equal(other.status, 201)
  const headers = { ...farm.admin, 'x-organization-id': other.json.id }
  const created = await createJob()
  t.equal((await request(svc.url, `/v1/print-jobs/${created.id}`, { headers })).status, 404)
  t.equal((await request(svc.url, '/v1/print-jobs', { method: 'POST', headers, body: {} })).json.total, 0)
  t.equal((await request(svc.url, `/v1/print-jobs/${created.id}/status`, { method: 'PATCH', headers, body: { status: 'cancelled' } })).status, 404)
  t.equal((await request(svc.url, '/v1/hosts/host-a/printer-tasks', { headers })).json.tasks.length, 0)
  const foreignFile = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers, body: { name: 'x', model_file_id: fileId } })
  t.equal(foreignFile.status, 404)
})
