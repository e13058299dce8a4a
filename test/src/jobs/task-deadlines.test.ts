/**
 * The two deadlines of a printer task (docs/print-jobs.md), each on its own service started with a short
 * setting (the minimum, 5 s): an offer nobody claimed within TASK_OFFER_TTL_S expires and its job is queued
 * again; a claim not reported started within TASK_START_DEADLINE_S becomes `unconfirmed` and is never
 * re-offered by itself — the job waits, still dispatching, for an operator to confirm the start or requeue it.
 * Each service runs on a clock the test sets ahead past a deadline (test/helpers/clock.ts ForwardClock); the
 * service's own sweep moves the tasks, and the tests wait for the state it writes, never for a time.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { waitFor } from '../../helpers/poll.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { ForwardClock } from '../../helpers/clock.js'

/** Long enough for the sweep after a deadline on a loaded machine. */
const deadlineWaitMs = 30_000
/** The deadlines the two services are started with. */
const deadlineMs = 5_000

/** A service with `env`, an admin, a bridge key with print:launch, one uploaded plate, and the calls the tests make. */
async function openDispatch(env: Record<string, string>) {
  const clock = new ForwardClock()
  const svc = await startTestService(t, env, { clock })
  const farm = await openFarm(svc.url)
  const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge with launch', scopes: [...bridgeScopes] } })
  const launch = { 'x-api-key': key.json.key as string }
  const modelId = await createModel(svc.url, farm.admin)
  const fileId: string = (await upload(svc.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id
  const seqns = new Map<string, number>()
  const send = async (printer: string, type: string, data: Record<string, unknown> = {}) => {
    const seqn = (seqns.get(printer) ?? -1) + 1
    seqns.set(printer, seqn)
    const res = await postBatch({ ...farm, bridge: launch }, batch(printer, [item(seqn, { type, data, eventId: `ev-${randomUUID()}` })]))
    if (res.status !== 200) throw new Error(`${type}: ${res.status} ${res.text}`)
    return res.json.events[0] as { outcome: string; reason?: string }
  }
  const api = {
    farm,
    /** The service's time moves past the deadline (what was due before now is due). */
    pastDeadline: () => clock.forward(deadlineMs),
    launch,
    send,
    async onlinePrinter(): Promise<string> {
      const printer = await addPrinter(farm, 'host-a', { enabled: true })
      await send(printer, 'heartbeat')
      return printer
    },
    async createJob(): Promise<number> {
      const res = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'Benchy', model_file_id: fileId } })
      if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
      return res.json.id
    },
    assign: (jobId: number, printerId: string) => request(svc.url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printerId } }),
    claim: (taskId: string) => request(svc.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } }),
    job: async (id: number) => (await request(svc.url, `/v1/print-jobs/${id}`, { headers: farm.admin })).json,
    task: async (id: string) => (await request(svc.url, `/v1/printer-tasks/${id}`, { headers: launch })).json,
    polled: async (taskId: string) => ((await request(svc.url, '/v1/hosts/host-a/printer-tasks', { headers: launch })).json.tasks as any[]).find((x) => x.id === taskId),
    setStatus: (jobId: number, status: string) => request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status } }),
    operatorStart: (printerId: string) => request(svc.url, `/v1/printers/${printerId}/operator-device-start`, { method: 'POST', headers: farm.admin }),
    /** A job assigned to a fresh printer: its task offered. */
    async dispatched() {
      const printer = await api.onlinePrinter()
      const jobId = await api.createJob()
      const assigned = await api.assign(jobId, printer)
      if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
      return { printer, jobId, taskId: assigned.json.task.id as string, offered: assigned.json.task }
    },
    /** A dispatched job whose task host-a claimed. */
    async claimed() {
      const d = await api.dispatched()
      const claim = await api.claim(d.taskId)
      if (claim.status !== 200) throw new Error(`claim: ${claim.status} ${claim.text}`)
      return { ...d, claimGeneration: claim.json.claim_generation as string }
    },
    reachesState: (taskId: string, state: string) => waitFor(async () => (await api.task(taskId)).state === state, `task ${taskId} ${state}`, deadlineWaitMs),
  }
  return api
}

const [offers, starts] = await Promise.all([openDispatch({ TASK_OFFER_TTL_S: '5', TASK_START_DEADLINE_S: '86400' }), openDispatch({ TASK_START_DEADLINE_S: '5', TASK_OFFER_TTL_S: '86400' })])

// Claims made up front, so the start deadlines of the tests below run out together, when the clock moves past them.
const [toConfirm, toRequeue, startedLate] = await Promise.all([starts.claimed(), starts.claimed(), starts.claimed()])
starts.pastDeadline()

t.test('offer expiry - an offer nobody claims expires, its job is queued again, a late claim or start is refused, and it can be assigned again', async (t) => {
  const { printer, jobId, taskId, offered } = await offers.dispatched()
  t.equal(Date.parse(offered.offer_expires_at) - Date.parse(offered.offered_at), deadlineMs, 'offered for TASK_OFFER_TTL_S')
  offers.pastDeadline()
  await offers.reachesState(taskId, 'expired')
  t.match(await offers.job(jobId), { status: 'queued', printer_id: null, printer_task_id: null, attempts: 1 })
  t.equal(await offers.polled(taskId), undefined, 'the expired task leaves the poll')
  const late = await offers.claim(taskId)
  t.equal(late.status, 409)
  t.equal(late.json.error, 'task_not_claimable')
  t.equal((await offers.send(printer, 'job:start', { jobId, printerTaskId: taskId })).reason, 'task_fenced', 'do not print an expired offer')
  t.equal((await offers.job(jobId)).status, 'queued')

  const again = await offers.assign(jobId, printer)
  t.equal(again.status, 200, 'the printer is free again')
  t.match(again.json.job, { status: 'dispatching', attempts: 2, printer_id: printer })
  t.not(again.json.task.id, taskId, 'a new task')
  t.equal(again.json.task.state, 'offered')
})

t.test('offer expiry - a claimed task outlives its offer: still claimed, still polled, and its start links', async (t) => {
  const claimedFirst = await offers.claimed()
  // Offered after the claimed one, so by the time the sweep expires it the claimed task's offer time has passed too.
  const witness = await offers.dispatched()
  offers.pastDeadline()
  await offers.reachesState(witness.taskId, 'expired')
  t.ok(Date.parse((await offers.task(claimedFirst.taskId)).offer_expires_at) <= Date.parse((await offers.task(witness.taskId)).offer_expires_at))
  t.match(await offers.task(claimedFirst.taskId), { state: 'claimed', claim_generation: claimedFirst.claimGeneration })
  t.match(await offers.polled(claimedFirst.taskId), { state: 'claimed' }, 'the bridge still sees its claim')
  t.match(await offers.job(claimedFirst.jobId), { status: 'dispatching', printer_task_id: claimedFirst.taskId })
  const start = await offers.send(claimedFirst.printer, 'job:start', { jobId: claimedFirst.jobId, printerTaskId: claimedFirst.taskId, claimGeneration: claimedFirst.claimGeneration })
  t.equal(start.outcome, 'applied')
  t.equal((await offers.job(claimedFirst.jobId)).status, 'printing')
})

t.test("start deadline - a claim never reported started becomes unconfirmed: out of the poll, its job dispatching, the printer refused with start_unconfirmed; the operator's start prints it", async (t) => {
  const { printer, jobId, taskId, claimGeneration } = toConfirm
  await starts.reachesState(taskId, 'unconfirmed')
  t.match(await starts.task(taskId), { state: 'unconfirmed', claim_generation: claimGeneration })
  t.equal(await starts.polled(taskId), undefined, 'the poll lists offered and claimed tasks only')
  t.match(await starts.job(jobId), { status: 'dispatching', printer_id: printer, printer_task_id: taskId, attempts: 1 })
  const reclaim = await starts.claim(taskId)
  t.equal(reclaim.status, 409, 'never re-offered, not even to the host that claimed it')
  t.equal(reclaim.json.error, 'task_not_claimable')

  const other = await starts.createJob()
  const refused = await starts.assign(other, printer)
  t.equal(refused.status, 409)
  t.equal(refused.json.error, 'printer_not_eligible')
  t.same(refused.json.reasons.map((r: { code: string }) => r.code), ['start_unconfirmed'])

  const confirmed = await starts.operatorStart(printer)
  t.equal(confirmed.status, 200)
  t.match(confirmed.json, { success: true, job: { id: jobId, status: 'printing' }, task: { id: taskId, state: 'started' } })
  const twice = await starts.operatorStart(printer)
  t.equal(twice.status, 409)
  t.equal(twice.json.error, 'job_already_started')
})

t.test('start deadline - requeue of an unconfirmed dispatch cancels its task; a late job:start for it is refused task_fenced', async (t) => {
  const { printer, jobId, taskId, claimGeneration } = toRequeue
  await starts.reachesState(taskId, 'unconfirmed')
  const requeued = await starts.setStatus(jobId, 'queued')
  t.equal(requeued.status, 200)
  t.match(requeued.json, { status: 'queued', printer_id: null, printer_task_id: null })
  t.equal((await starts.task(taskId)).state, 'cancelled')
  const late = await starts.send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration })
  t.equal(late.outcome, 'refused')
  t.equal(late.reason, 'task_fenced')
  t.equal((await starts.job(jobId)).status, 'queued', 'the refused start changed nothing')
  t.equal((await starts.operatorStart(printer)).json.error, 'no_task_to_start')
  const again = await starts.assign(jobId, printer)
  t.equal(again.status, 200, 'the printer takes it again')
  t.equal(again.json.job.attempts, 2)
})

t.test('start deadline - a start reported after the deadline still links: the printer did start', async (t) => {
  const { printer, jobId, taskId, claimGeneration } = startedLate
  await starts.reachesState(taskId, 'unconfirmed')
  const start = await starts.send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration })
  t.equal(start.outcome, 'applied')
  t.equal((await starts.task(taskId)).state, 'started')
  t.match(await starts.job(jobId), { status: 'printing', printer_task_id: taskId })
})
