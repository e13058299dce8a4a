/**
 * Commands on a running printer task over real HTTP (docs/print-jobs.md "Commands"; docs/print-jobs.md):
 * pause, resume and cancel ride on the task as `commands: [{id, kind, issued_at}]`, the host's poll lists
 * a started task while it carries one, a repeated command keeps its id, pause and resume replace each
 * other, cancel replaces both, and the bridge's matching event (job:pause, job:unpause, job:finish with
 * result cancelled) clears it and moves the job.
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, EventSender, type Farm, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge with launch', scopes: [...bridgeScopes] } })
const launch = { 'x-api-key': key.json.key as string }
const bridge: Farm = { ...farm, bridge: launch }
const modelId = await createModel(svc.url, farm.admin)
const fileId: string = (await upload(svc.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id

/** Each printer's bridge numbers its own events. */
const events = new EventSender(bridge)
const send = (printer: string, type: string, data: Record<string, unknown> = {}) => events.accepted(printer, type, data)

async function onlinePrinter(): Promise<string> {
  const printer = await addPrinter(farm, 'host-a', { enabled: true })
  await send(printer, 'heartbeat')
  return printer
}

const setStatus = (jobId: number, status: string, reason?: string) =>
  request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: reason === undefined ? { status } : { status, reason } })
const job = async (id: number) => (await request(svc.url, `/v1/print-jobs/${id}`, { headers: farm.admin })).json
const task = async (id: string) => (await request(svc.url, `/v1/printer-tasks/${id}`, { headers: launch })).json
const polled = async (taskId: string) => ((await request(svc.url, '/v1/hosts/host-a/printer-tasks', { headers: launch })).json.tasks as any[]).find((x) => x.id === taskId)
const kinds = (commands: { kind: string }[]) => commands.map((c) => c.kind)

async function createJob(): Promise<number> {
  const res = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'Benchy', model_file_id: fileId } })
  if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
  return res.json.id
}

/** A job dispatched to a fresh printer, claimed by host-a and reported started by its bridge: printing. */
async function printing(): Promise<{ printer: string; jobId: number; taskId: string }> {
  const printer = await onlinePrinter()
  const jobId = await createJob()
  const assigned = await request(svc.url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
  const taskId: string = assigned.json.task.id
  const claimed = await request(svc.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  if (claimed.status !== 200) throw new Error(`claim: ${claimed.status} ${claimed.text}`)
  const started = await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.json.claim_generation, name: 'plate.3mf' })
  if (started.outcome !== 'applied') throw new Error(`job:start: ${JSON.stringify(started)}`)
  return { printer, jobId, taskId }
}

t.test('commands - a started task without commands is not polled; a pause puts it back in the poll with one pause command', async (t) => {
  const { jobId, taskId } = await printing()
  t.equal(await polled(taskId), undefined, 'started and nothing to do: not listed')
  const paused = await setStatus(jobId, 'paused')
  t.equal(paused.status, 200)
  t.equal(paused.json.status, 'printing', 'the status follows when the bridge reports the pause')
  const listed = await polled(taskId)
  t.match(listed, { id: taskId, state: 'started', job_id: jobId })
  t.equal(listed.commands.length, 1)
  const [command] = listed.commands
  t.equal(command.kind, 'pause')
  t.match(command.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  t.ok(Number.isFinite(Date.parse(command.issued_at)), 'issued_at is a time')
  t.same((await task(taskId)).commands, listed.commands, 'GET of the task shows the same command')
})

t.test('commands - pausing twice keeps the one pause command and its id', async (t) => {
  const { jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  const first = (await polled(taskId)).commands
  const again = await setStatus(jobId, 'paused')
  t.equal(again.status, 200)
  t.same((await polled(taskId)).commands, first, 'same id, same issued_at: the bridge dedupes on the id')
})

t.test("commands - the bridge's job:pause clears the pause and the job is paused; job:unpause clears the resume and the job prints", async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  const pauseId = (await polled(taskId)).commands[0].id
  t.equal((await send(printer, 'job:pause')).outcome, 'applied')
  t.match(await job(jobId), { status: 'paused', printer_state: 'paused' })
  t.same((await task(taskId)).commands, [], 'the pause is answered')
  t.equal(await polled(taskId), undefined, 'nothing left to do: out of the poll')

  const resumed = await setStatus(jobId, 'printing')
  t.equal(resumed.status, 200)
  t.equal(resumed.json.status, 'paused', 'still paused until the bridge reports it')
  const resume = (await polled(taskId)).commands
  t.same(kinds(resume), ['resume'])
  t.not(resume[0].id, pauseId, 'a new command, a new id')
  t.equal((await send(printer, 'job:unpause')).outcome, 'applied')
  t.match(await job(jobId), { status: 'printing', printer_state: 'printing' })
  t.same((await task(taskId)).commands, [])
  t.equal(await polled(taskId), undefined)
})

t.test('commands - a progress report while a pause is pending leaves the pause in place', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  const before = (await polled(taskId)).commands
  await send(printer, 'job:update', { progress: 20 })
  t.same((await polled(taskId)).commands, before, 'only job:pause answers a pause')
  t.equal((await job(jobId)).status, 'printing')
})

t.test('commands - a resume sent while the pause is still pending takes the pause back', async (t) => {
  const { jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  const resumed = await setStatus(jobId, 'printing')
  t.equal(resumed.status, 200, `resume: ${resumed.text}`)
  t.equal(resumed.json.status, 'printing')
  t.equal(await polled(taskId), undefined, 'the printer never paused: no command is left, so the started task leaves the poll')
})

t.test('commands - a pause sent while the resume is still pending takes the resume back', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  await send(printer, 'job:pause')
  await setStatus(jobId, 'printing')
  t.same(kinds((await polled(taskId)).commands), ['resume'])
  const paused = await setStatus(jobId, 'paused')
  t.equal(paused.status, 200, `pause: ${paused.text}`)
  t.equal(paused.json.status, 'paused')
  t.equal(await polled(taskId), undefined, 'the printer is still paused: nothing to carry out')
})

t.test('commands - cancel of a printing job cancels it at once and replaces a pending pause with cancel', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  const pauseId = (await polled(taskId)).commands[0].id
  const cancelled = await setStatus(jobId, 'cancelled', 'wrong colour')
  t.equal(cancelled.status, 200)
  t.match(cancelled.json, { status: 'cancelled', failure_reason: 'wrong colour', printer_task_id: taskId })
  const listed = await polled(taskId)
  t.match(listed, { state: 'started' }, 'the printer still prints until the bridge stops it')
  t.same(kinds(listed.commands), ['cancel'], 'cancel replaces the pause')
  t.not(listed.commands[0].id, pauseId)

  const again = await setStatus(jobId, 'cancelled')
  t.equal(again.status, 409, 'a cancelled job cannot be cancelled again')
  t.equal(again.json.error, 'job_transition_invalid')
  t.same((await polled(taskId)).commands, listed.commands, 'the cancel command is unchanged')

  t.equal((await send(printer, 'job:finish', { result: 'cancelled', progress: 40 })).outcome, 'applied')
  t.equal(await polled(taskId), undefined, 'the finished task leaves the poll')
  const finished = await task(taskId)
  t.equal(finished.state, 'finished')
  t.same(finished.commands, [], 'the cancel is answered')
  t.match(await job(jobId), { status: 'cancelled', bridge_result: 'cancelled', printer_state: 'cancelled' })

  // The plate holds what was printed before the stop: the printer waits for the operator like after any end.
  const next = await createJob()
  const refused = await request(svc.url, `/v1/print-jobs/${next}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  t.same(refused.json.reasons?.map((r: { code: string }) => r.code), ['printer_not_ready'])
  await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true } })
  t.equal((await request(svc.url, `/v1/print-jobs/${next}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })).status, 200)
})

t.test('commands - cancel of a paused job carries cancel in place of a pending resume', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'paused')
  await send(printer, 'job:pause')
  await setStatus(jobId, 'printing')
  t.same(kinds((await polled(taskId)).commands), ['resume'])
  const cancelled = await setStatus(jobId, 'cancelled')
  t.equal(cancelled.json.status, 'cancelled')
  t.same(kinds((await polled(taskId)).commands), ['cancel'], 'cancel replaces the resume')
  // The bridge acted on the resume it had already seen: the job stays cancelled, the cancel stays pending.
  await send(printer, 'job:unpause')
  t.equal((await job(jobId)).status, 'cancelled')
  t.same(kinds((await polled(taskId)).commands), ['cancel'])
})

t.test("commands - a job the bridge finishes normally after a cancel stays cancelled and its task leaves the poll", async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'cancelled')
  await send(printer, 'job:finish', { result: 'success' })
  t.equal((await job(jobId)).status, 'cancelled', 'the operator cancelled it: the printer does not undo that')
  t.equal((await task(taskId)).state, 'finished')
  t.equal(await polled(taskId), undefined)
})

t.test('commands - pause and resume need a running task: queued and dispatching jobs are refused with 409', async (t) => {
  const queued = await createJob()
  for (const status of ['paused', 'printing']) {
    const res = await setStatus(queued, status)
    t.equal(res.status, 409, `${status} of a queued job`)
    t.equal(res.json.error, 'job_transition_invalid')
    t.match(res.json.message, /queued/)
  }
  const printer = await onlinePrinter()
  const dispatching = await createJob()
  const assigned = await request(svc.url, `/v1/print-jobs/${dispatching}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  const paused = await setStatus(dispatching, 'paused')
  t.equal(paused.status, 409, 'nothing prints yet')
  t.equal(paused.json.error, 'job_transition_invalid')
  t.same((await polled(assigned.json.task.id)).commands, [], 'no command was left on the offer')
  t.equal((await job(dispatching)).status, 'dispatching')
})

t.test('commands - a paused job cannot be paused again and a printing one cannot be resumed', async (t) => {
  const { printer, jobId } = await printing()
  const resume = await setStatus(jobId, 'printing')
  t.equal(resume.status, 409)
  t.equal(resume.json.error, 'job_transition_invalid')
  await setStatus(jobId, 'paused')
  await send(printer, 'job:pause')
  const pause = await setStatus(jobId, 'paused')
  t.equal(pause.status, 409)
  t.equal(pause.json.error, 'job_transition_invalid')
  t.match(pause.json.message, /paused/)
})

t.test('commands - a job that ended on the printer takes no command', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await send(printer, 'job:finish', { result: 'success' })
  t.equal((await job(jobId)).status, 'awaiting_verification')
  for (const status of ['paused', 'printing', 'cancelled']) {
    const res = await setStatus(jobId, status)
    t.equal(res.status, 409, status)
    t.equal(res.json.error, 'job_transition_invalid')
  }
  t.same((await task(taskId)).commands, [])
})

t.test('commands - a cancelled job whose printer has not stopped cannot be deleted: the cancel stays with the bridge', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'cancelled')
  const deleted = await request(svc.url, `/v1/print-jobs/${jobId}`, { method: 'DELETE', headers: farm.admin })
  t.equal(deleted.status, 409, `delete: ${deleted.text}`)
  t.equal(deleted.json.error, 'job_in_progress', 'the printer still prints it')
  t.same(kinds((await polled(taskId))?.commands ?? []), ['cancel'], 'the bridge still sees the cancel')
  await send(printer, 'job:update', { progress: 60 })
  t.match(await job(jobId), { status: 'cancelled', source: 'api' }, 'a report of the print does not revive the job')
})

t.test('commands - the task of a cancel the bridge never confirms is ended by the operator saying the printer is clear', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'cancelled')
  const idle = await createJob()
  const blocked = await request(svc.url, `/v1/print-jobs/${idle}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  t.equal(blocked.status, 409, 'the printer still holds the cancelled print')
  const clear = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true } })
  t.equal(clear.status, 200)
  t.match(await task(taskId), { state: 'finished', commands: [] })
  t.equal((await setStatus(jobId, 'queued')).status, 200, 'the cancelled job may be requeued now')
  // Whether the printer takes the next job is the printer's own word: until it reports the print ended it is busy.
  const still = await request(svc.url, `/v1/print-jobs/${idle}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  t.match(still.json.reasons, [{ code: 'printer_busy' }])
  await send(printer, 'job:finish', { result: 'cancelled' })
  await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true } })
  t.equal((await request(svc.url, `/v1/print-jobs/${idle}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })).status, 200, 'then it takes the next job')
})

t.test('commands - a cancelled job cannot be requeued before its printer stopped; after the stop it can', async (t) => {
  const { printer, jobId, taskId } = await printing()
  await setStatus(jobId, 'cancelled')
  const early = await setStatus(jobId, 'queued')
  t.equal(early.status, 409, 'the printer still prints the old attempt')
  t.equal(early.json.error, 'job_in_progress')
  t.match(await polled(taskId), { state: 'started' }, 'the old task still carries its cancel')
  await send(printer, 'job:finish', { result: 'cancelled' })
  const requeued = await setStatus(jobId, 'queued')
  t.equal(requeued.status, 200)
  const idle = await onlinePrinter()
  const assigned = await request(svc.url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: idle } })
  t.equal(assigned.status, 200, `assign: ${assigned.text.slice(0, 300)}`)
})

t.test('commands - a cancel given after the printer moved host reaches the bridge now in charge of it', async (t) => {
  const { printer, jobId, taskId } = await printing()
  const moved = await request(svc.url, `/v1/printers/${printer}/host-assignment`, { method: 'PUT', headers: farm.admin, body: { hostId: 'host-b' } })
  t.equal(moved.status, 200)
  t.equal((await setStatus(jobId, 'cancelled')).status, 200)
  t.same(kinds((await task(taskId)).commands), ['cancel'], 'the command is stored on the task')
  const seen = []
  for (const host of ['host-a', 'host-b']) {
    const tasks = (await request(svc.url, `/v1/hosts/${host}/printer-tasks`, { headers: launch })).json.tasks as { id: string }[]
    if (tasks.some((x) => x.id === taskId)) seen.push(host)
  }
  t.same(seen, ['host-b'], 'the new host polls the cancel')
})
