/**
 * A dispatched print is one job, tracked to its end, whatever order the bridge's reports come in
 * (docs/print-jobs.md, taking a task): a printer report that reads as printing may arrive before the bridge's
 * `job:start {jobId, printerTaskId}` (a bridge that announces a start after seeing it) or after it,
 * in an earlier batch or in the same one. In every order, for each printer family's own word, the
 * task's job is the printer's job from the start on, holds the print's events, and `job:finish`
 * ends it and its task; the report opens no second job.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, batch, item, openFarm, postBatch, type Farm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge', scopes: [...bridgeScopes] } })
const bridge: Farm = { ...farm, bridge: { 'x-api-key': key.json.key as string } }
const modelId = await createModel(svc.url, farm.admin)
const fileId: string = (await upload(svc.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id

/** Each family's own report of a print under way, as its bridge forwards it. */
const printingReports: Record<string, Record<string, unknown>[]> = {
  bambu: [{ print: { gcode_state: 'PREPARE', mc_percent: 0 } }, { print: { gcode_state: 'RUNNING', mc_percent: 3, subtask_name: 'plate' } }],
  klipper: [{ jsonrpc: '2.0', method: 'notify_status_update', params: [{ print_stats: { state: 'printing', filename: 'plate.gcode' }, virtual_sdcard: { progress: 0.03 } }, 1700000000.1] }],
  octoprint: [{ current: { state: { text: 'Printing', flags: { operational: true, printing: true, ready: false, error: false, closedOrError: false } }, progress: { completion: 3 } } }],
  prusa_connect: [{ printer: { state: 'PRINTING', temp_nozzle: 215, target_nozzle: 215 }, job: { id: 7, progress: 3 } }],
}

type Step = { type: string; data: Record<string, unknown> }

/** A printer of the family, dispatched a job whose task the bridge claimed. */
async function claimedPrint(printerType: string) {
  const printer = await addPrinter(farm, 'host-a', { enabled: true, printer_type: printerType })
  let seqn = 0
  const post = async (steps: Step[]) => {
    const items = steps.map((s) => item(seqn++, { type: s.type, data: s.data, eventId: `ev-${randomUUID()}` }))
    const res = await postBatch(bridge, batch(printer, items))
    if (res.status !== 200) throw new Error(`batch: ${res.status} ${res.text}`)
    return res.json.events as { outcome: string; reason?: string }[]
  }
  await post([{ type: 'heartbeat', data: {} }])
  const created = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: `Benchy ${printerType}`, model_file_id: fileId } })
  const assigned = await request(svc.url, `/v1/print-jobs/${created.json.id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
  const taskId: string = assigned.json.task.id
  const claimed = await request(svc.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: bridge.bridge, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  if (claimed.status !== 200) throw new Error(`claim: ${claimed.status} ${claimed.text}`)
  const start: Step = { type: 'job:start', data: { jobId: created.json.id, printerTaskId: taskId, claimGeneration: claimed.json.claim_generation, name: 'plate.3mf' } }
  return { printer, jobId: created.json.id as number, taskId, post, start }
}

const getJob = async (id: number) => (await request(svc.url, `/v1/print-jobs/${id}`, { headers: farm.admin })).json
const printerOf = async (id: string) => (await request(svc.url, `/v1/printers/${id}`, { headers: farm.admin })).json.printer
const jobsOf = async (printer: string) => (await request(svc.url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { printer_id: printer } })).json
const eventsOf = async (printer: string) => (await request(svc.url, `/v1/printers/${printer}/events?limit=100`, { headers: farm.admin })).json.events as any[]

/** The print under way is the task's job, once; job:finish ends it and its task; every event of the print is the job's. */
async function oneJobToTheEnd(t: Test, print: Awaited<ReturnType<typeof claimedPrint>>) {
  const { printer, jobId, taskId, post } = print
  t.match(await getJob(jobId), { status: 'printing', printer_task_id: taskId }, 'the task started its job')
  const during = await printerOf(printer)
  t.equal(during.job?.id ?? during.job?.job_id, jobId, "the printer's job is the task's job")
  t.equal(during.status, 'RUNNING')
  t.equal((await jobsOf(printer)).total, 1, 'the report opened no job of its own')
  const finished = await post([{ type: 'job:finish', data: { result: 'success' } }])
  t.equal(finished[0]?.outcome, 'applied')
  const ended = await getJob(jobId)
  t.match(ended, { status: 'awaiting_verification', printer_state: 'finished' }, 'job:finish ended the task\'s job')
  const tasks = (await request(svc.url, `/v1/print-jobs/${jobId}`, { headers: farm.admin })).json
  t.equal(tasks.printer_task_id, taskId)
  const after = await printerOf(printer)
  t.equal(after.ready_gate, 'awaiting_verification', 'the plate waits for the operator')
  t.equal((await jobsOf(printer)).total, 1, 'still one job for the print')
  const events = await eventsOf(printer)
  const ofPrint = events.filter((e) => e.type !== 'heartbeat')
  t.ok(ofPrint.length >= 2, 'the print has its events')
  // A report belongs to the job it opened; later reports of a job under way carry no job (the service's rule).
  t.same([...new Set(ofPrint.map((e) => e.jobId).filter((id) => id !== null))], [jobId], "every event of the print that names a job names the task's job")
  t.equal(ofPrint[0]?.jobId, jobId, "the print's first event (the report that saw it, or the start) is the task's job's")
  const verified = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true, event_type: 'operator:manual_verification:success', job_id: jobId } })
  t.equal(verified.status, 200, 'the operator verifies the job', { body: verified.text })
  t.equal((await getJob(jobId)).status, 'succeeded')
}

for (const [family, reports] of Object.entries(printingReports)) {
  t.test(`start order - ${family}: the printing report in an earlier batch than job:start; the task's job takes the report's over`, async (t) => {
    const print = await claimedPrint(family)
    for (const data of reports) t.equal((await print.post([{ type: 'printer:statusUpdate', data }]))[0]?.outcome, 'applied')
    t.equal((await printerOf(print.printer)).status, 'RUNNING', 'the report alone shows the print')
    const started = await print.post([print.start])
    t.equal(started[0]?.outcome, 'applied', 'the start is applied', { started })
    await oneJobToTheEnd(t, print)
  })

  t.test(`start order - ${family}: the printing report and job:start in one batch, the report first`, async (t) => {
    const print = await claimedPrint(family)
    const answers = await print.post([...reports.map((data) => ({ type: 'printer:statusUpdate', data })), print.start])
    t.ok(answers.every((a) => a.outcome === 'applied'), 'all applied', { answers })
    await oneJobToTheEnd(t, print)
  })

  t.test(`start order - ${family}: job:start first, the printing report after`, async (t) => {
    const print = await claimedPrint(family)
    t.equal((await print.post([print.start]))[0]?.outcome, 'applied')
    for (const data of reports) t.equal((await print.post([{ type: 'printer:statusUpdate', data }]))[0]?.outcome, 'applied')
    await oneJobToTheEnd(t, print)
  })
}
