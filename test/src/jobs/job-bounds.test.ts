/**
 * The edges of the print-job and printer-task routes over real HTTP (docs/print-jobs.md; the bounds are
 * protocol/schemas/print-jobs.ts'): every out-of-range, mistyped or unknown input is a 4xx whose body names
 * a code (`{error, message, requestId}`), never a 5xx; the values at each bound are accepted; scopes and
 * the admin role guard every change; another organization's jobs and tasks do not exist for it.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, EventSender, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request, signIn, type HttpResult } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin

async function apiKey(scopes: readonly string[], headers: Record<string, string> = admin): Promise<Record<string, string>> {
  const res = await request(url, '/v1/api-keys', { method: 'POST', headers, body: { name: `key ${randomUUID().slice(0, 6)}`, scopes } })
  if (res.status !== 200) throw new Error(`api key: ${res.status} ${res.text}`)
  return { 'x-api-key': res.json.key }
}

const launch = await apiKey(bridgeScopes)
const modelId = await createModel(url, admin)
const fileId: string = (await upload(url, admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id

const events = new EventSender(farm, launch)
const send = (printer: string, type: string, data: Record<string, unknown> = {}) => events.accepted(printer, type, data)

async function onlinePrinter(): Promise<string> {
  const printer = await addPrinter(farm, 'host-a', { enabled: true })
  await send(printer, 'heartbeat')
  return printer
}

async function createJob(name = 'Benchy'): Promise<number> {
  const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin, body: { name, model_file_id: fileId } })
  if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
  return res.json.id
}

/** A job on a fresh printer whose task host-a claimed. */
async function claimedTask() {
  const printer = await onlinePrinter()
  const jobId = await createJob()
  const assigned = await request(url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: admin, body: { printer_id: printer } })
  if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
  const taskId: string = assigned.json.task.id
  const claim = await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  if (claim.status !== 200) throw new Error(`claim: ${claim.status} ${claim.text}`)
  return { printer, jobId, taskId, claim: claim.json as { claim_generation: string; printer_task_access_token: string } }
}

/** The error body of every refusal: a registered code, a sentence, the request's id. */
function refused(t: Test, res: HttpResult, status: number, code: string, what: string): void {
  t.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 300)}`)
  t.match(res.json, { error: code, message: String, requestId: String }, `${what}: a coded JSON body`)
}

const long = (n: number) => 'x'.repeat(n)
const job = await createJob('bounds')

t.test('bounds - create: each field outside its range, of the wrong type or unknown is 400 validation_failed', async (t) => {
  const ok = { name: 'x', model_file_id: fileId }
  const bad: [string, unknown][] = [
    ['empty name', { ...ok, name: '' }],
    ['name of 201 characters', { ...ok, name: long(201) }],
    ['name a number', { ...ok, name: 5 }],
    ['no name', { model_file_id: fileId }],
    ['no model_file_id', { name: 'x' }],
    ['model_file_id not a uuid', { ...ok, model_file_id: 'plate.3mf' }],
    ['priority -101', { ...ok, priority: -101 }],
    ['priority 101', { ...ok, priority: 101 }],
    ['priority a fraction', { ...ok, priority: 1.5 }],
    ['priority a string', { ...ok, priority: '5' }],
    ['plate 0', { ...ok, plate: 0 }],
    ['plate 257', { ...ok, plate: 257 }],
    ['plate a fraction', { ...ok, plate: 1.5 }],
    ['a plate the file does not have', { ...ok, plate: 256 }],
    ['an unknown field', { ...ok, colour: 'red' }],
    ['print_options not an object', { ...ok, print_options: 'fast' }],
    ['print_options with an unknown key', { ...ok, print_options: { supports: true } }],
    ['print_options with a wrong type', { ...ok, print_options: { timelapse: 'yes' } }],
    ['make_id not a uuid', { ...ok, make_id: 'make-1' }],
    ['an empty organizationId', { ...ok, organizationId: '' }],
    ['an array', [ok]],
    ['null', null],
  ]
  // Sent as JSON text: null and arrays are bodies too.
  const create = (text: string) => request(url, '/v1/print-jobs/create', { method: 'POST', headers: { ...admin, 'content-type': 'application/json' }, body: text })
  for (const [what, body] of bad) refused(t, await create(JSON.stringify(body)), 400, 'validation_failed', what)
  refused(t, await create('{"name":'), 400, 'invalid_json', 'a cut-off body')
  refused(t, await create('{"name":"a\\u0000b","model_file_id":"' + fileId + '"}'), 400, 'validation_failed', 'a name holding \\u0000')
  refused(t, await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin }), 400, 'body_required', 'no body')
  refused(t, await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin, body: { ...ok, make_id: randomUUID() } }), 404, 'make_not_found', 'a make that does not exist')
  refused(t, await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin, body: { ...ok, organizationId: randomUUID() } }), 400, 'validation_failed', 'another organizationId')
})

t.test('bounds - create: the values at each bound are accepted', async (t) => {
  for (const body of [
    { name: long(200), model_file_id: fileId },
    { name: 'low', model_file_id: fileId, priority: -100, plate: 1 },
    { name: 'high', model_file_id: fileId, priority: 100, print_options: { auto_assign: false, enable_ams: false, bed_leveling: true, flow_calibration: true, timelapse: false } },
  ]) {
    const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin, body })
    t.equal(res.status, 201, res.text.slice(0, 200))
    t.match(res.json, { status: 'queued', name: body.name })
  }
})

t.test('bounds - list: limit, offset, status, search and unknown filters are checked', async (t) => {
  const list = (body: unknown) => request(url, '/v1/print-jobs', { method: 'POST', headers: admin, body })
  const bad: [string, unknown][] = [
    ['limit 0', { limit: 0 }],
    ['limit 201', { limit: 201 }],
    ['limit a string', { limit: '10' }],
    ['offset -1', { offset: -1 }],
    ['offset 1000001', { offset: 1_000_001 }],
    ['offset a fraction', { offset: 0.5 }],
    ['status not an array', { status: 'queued' }],
    ['status empty', { status: [] }],
    ['status unknown', { status: ['done'] }],
    ['status repeated', { status: ['queued', 'queued'] }],
    ['search of 121 characters', { search: long(121) }],
    ['search holding \\u0000', { search: 'a\u0000' }],
    ['printer_id not a uuid', { printer_id: 'p1' }],
    ['batch_id not a uuid', { batch_id: 1 }],
    ['an unknown filter', { name: 'Benchy' }],
  ]
  for (const [what, body] of bad) refused(t, await list(body), 400, 'validation_failed', what)
  const edge = await list({ limit: 200, offset: 1_000_000, search: long(120), status: ['queued', 'dispatching', 'printing', 'paused', 'awaiting_verification', 'succeeded', 'failed', 'cancelled'] })
  t.equal(edge.status, 200)
  t.match(edge.json, { jobs: [], limit: 200, offset: 1_000_000 })
  const one = await list({ limit: 1 })
  t.equal(one.json.jobs.length, 1)
  t.ok(one.json.total >= 1)
  t.equal((await request(url, '/v1/print-jobs', { method: 'POST', headers: admin })).status, 200, 'no body: every job')
})

t.test('bounds - job ids in the path: not a number, 0, negative, a fraction or 16 digits (beyond exact integers) is 400; a 15-digit id nobody has is 404', async (t) => {
  for (const id of ['abc', '0', '-1', '1.5', '01', '1e3', '9999999999999999', '9007199254740993', '12345678901234567', '99999999999999999999', '%20']) {
    refused(t, await request(url, `/v1/print-jobs/${id}`, { headers: admin }), 400, 'validation_failed', `GET ${id}`)
    refused(t, await request(url, `/v1/print-jobs/${id}/status`, { method: 'PATCH', headers: admin, body: { status: 'cancelled' } }), 400, 'validation_failed', `PATCH ${id}`)
    refused(t, await request(url, `/v1/print-jobs/${id}`, { method: 'DELETE', headers: admin }), 400, 'validation_failed', `DELETE ${id}`)
    refused(t, await request(url, `/v1/print-jobs/${id}/assign`, { method: 'POST', headers: admin, body: { printer_id: randomUUID() } }), 400, 'validation_failed', `assign ${id}`)
  }
  for (const id of ['999999999999999', '123456789012345']) {
    refused(t, await request(url, `/v1/print-jobs/${id}`, { headers: admin }), 404, 'print_job_not_found', `GET ${id}`)
    refused(t, await request(url, `/v1/print-jobs/${id}/status`, { method: 'PATCH', headers: admin, body: { status: 'cancelled' } }), 404, 'print_job_not_found', `PATCH ${id}`)
    refused(t, await request(url, `/v1/print-jobs/${id}`, { method: 'DELETE', headers: admin }), 404, 'print_job_not_found', `DELETE ${id}`)
  }
})

t.test('bounds - status change: an unknown status, a reason over 500 characters, a missing status or an unknown field is 400', async (t) => {
  const patch = (body: unknown) => request(url, `/v1/print-jobs/${job}/status`, { method: 'PATCH', headers: admin, body })
  const bad: [string, unknown][] = [
    ['status done', { status: 'done' }],
    ['status dispatching (not a change an operator asks for)', { status: 'dispatching' }],
    ['status succeeded', { status: 'succeeded' }],
    ['status upper case', { status: 'CANCELLED' }],
    ['no status', { reason: 'x' }],
    ['reason of 501 characters', { status: 'cancelled', reason: long(501) }],
    ['reason a number', { status: 'cancelled', reason: 5 }],
    ['reason holding \\u0000', { status: 'cancelled', reason: 'a\u0000b' }],
    ['an unknown field', { status: 'cancelled', force: true }],
  ]
  for (const [what, body] of bad) refused(t, await patch(body), 400, 'validation_failed', what)
  t.equal((await request(url, `/v1/print-jobs/${job}`, { headers: admin })).json.status, 'queued', 'nothing changed')
  const edge = await request(url, `/v1/print-jobs/${await createJob()}/status`, { method: 'PATCH', headers: admin, body: { status: 'cancelled', reason: long(500) } })
  t.equal(edge.status, 200)
  t.equal(edge.json.failure_reason, long(500))
})

t.test('bounds - assign: a printer_id that is no uuid, missing or unknown is refused; one nobody has is 404', async (t) => {
  const assign = (body: unknown) => request(url, `/v1/print-jobs/${job}/assign`, { method: 'POST', headers: admin, body })
  for (const [what, body] of [
    ['printer_id not a uuid', { printer_id: 'printer-1' }],
    ['printer_id a number', { printer_id: 1 }],
    ['printer_id null', { printer_id: null }],
    ['no printer_id', {}],
    ['an unknown field', { printer_id: randomUUID(), force: true }],
  ] as const) {
    refused(t, await assign(body), 400, 'validation_failed', what)
  }
  refused(t, await assign({ printer_id: randomUUID() }), 404, 'printer_not_found', 'a printer nobody has')
  refused(t, await request(url, `/v1/print-jobs/9999999999/assign`, { method: 'POST', headers: admin, body: { printer_id: randomUUID() } }), 404, 'print_job_not_found', 'a job nobody has')
})

t.test('bounds - poll and task reads: a hostId over 200 characters, a task id that is no uuid', async (t) => {
  refused(t, await request(url, `/v1/hosts/${long(201)}/printer-tasks`, { headers: launch }), 400, 'validation_failed', '201-character hostId')
  refused(t, await request(url, '/v1/hosts/a%00b/printer-tasks', { headers: launch }), 400, 'validation_failed', 'a hostId holding NUL')
  refused(t, await request(url, '/v1/hosts/a%FFb/printer-tasks', { headers: launch }), 400, 'validation_failed', 'a hostId that is not UTF-8')
  const edge = await request(url, `/v1/hosts/${long(200)}/printer-tasks`, { headers: launch })
  t.equal(edge.status, 200)
  t.same(edge.json, { tasks: [] })
  for (const id of ['abc', '1', `${randomUUID()}x`, randomUUID().replace(/-/g, '')]) {
    refused(t, await request(url, `/v1/printer-tasks/${id}`, { headers: launch }), 400, 'validation_failed', `GET task ${id}`)
    refused(t, await request(url, `/v1/printer-tasks/${id}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } }), 400, 'validation_failed', `claim ${id}`)
  }
  refused(t, await request(url, `/v1/printer-tasks/${randomUUID()}`, { headers: launch }), 404, 'printer_task_not_found', 'a task nobody has')
})

t.test('bounds - claim body: missing or empty hostId, a negative, fractional or too large epoch, unknown fields', async (t) => {
  const { taskId } = await claimedTask()
  const claim = (body: unknown) => request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body })
  const bad: [string, unknown][] = [
    ['no hostId', { assignmentEpoch: 1 }],
    ['empty hostId', { hostId: '', assignmentEpoch: 1 }],
    ['201-character hostId', { hostId: long(201), assignmentEpoch: 1 }],
    ['hostId a number', { hostId: 1, assignmentEpoch: 1 }],
    ['no assignmentEpoch', { hostId: 'host-a' }],
    ['assignmentEpoch -1', { hostId: 'host-a', assignmentEpoch: -1 }],
    ['assignmentEpoch 2^31', { hostId: 'host-a', assignmentEpoch: 2_147_483_648 }],
    ['assignmentEpoch 1e20', { hostId: 'host-a', assignmentEpoch: 1e20 }],
    ['assignmentEpoch a fraction', { hostId: 'host-a', assignmentEpoch: 1.5 }],
    ['assignmentEpoch a string', { hostId: 'host-a', assignmentEpoch: '1' }],
    ['snake_case fields', { host_id: 'host-a', assignment_epoch: 1 }],
    ['an unknown field', { hostId: 'host-a', assignmentEpoch: 1, force: true }],
  ]
  for (const [what, body] of bad) refused(t, await claim(body), 400, 'validation_failed', what)
  refused(t, await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch }), 400, 'body_required', 'no body')
  refused(t, await claim({ hostId: 'host-a', assignmentEpoch: 2_147_483_647 }), 409, 'assignment_epoch_unknown', 'the largest epoch, never issued')
  refused(t, await claim({ hostId: 'host-a', assignmentEpoch: 0 }), 409, 'assignment_epoch_stale', 'epoch 0')
  t.equal((await claim({ hostId: 'host-a', assignmentEpoch: 1 })).status, 200, 'the claim itself is untouched')
})

t.test('bounds - ready gate: unknown event_type or failure_reason, bad part_verifications, bad job_id', async (t) => {
  const printer = await onlinePrinter()
  const ready = (body: unknown, id = printer) => request(url, `/v1/printers/${id}/ready`, { method: 'PATCH', headers: admin, body })
  const part = { part_name: 'benchy', good_count: 1, defective_count: 0, action: 'accept' }
  const verdict = { ready: true, event_type: 'operator:manual_verification:success' }
  const bad: [string, unknown][] = [
    ['no ready', { event_type: 'operator:manual_verification:success' }],
    ['ready a string', { ready: 'yes' }],
    ['event_type unknown', { ready: true, event_type: 'operator:manual_verification:maybe' }],
    ['event_type without its prefix', { ready: true, event_type: 'success' }],
    ['failure_reason unknown', { ready: true, event_type: 'operator:manual_verification:failed', failure_reason: 'gremlins' }],
    ['ready_source other than operator_override', { ready: false, ready_source: 'bridge' }],
    ['ready_updated_source other than operator_override', { ready: false, ready_updated_source: 'job_ended' }],
    ['job_id 0', { ...verdict, job_id: 0 }],
    ['job_id negative', { ...verdict, job_id: -5 }],
    ['job_id a string', { ...verdict, job_id: '12' }],
    ['job_id past 2^53', { ...verdict, job_id: 2 ** 53 }],
    ['a negative good_count', { ...verdict, part_verifications: [{ ...part, good_count: -1 }] }],
    ['a negative defective_count', { ...verdict, part_verifications: [{ ...part, defective_count: -1 }] }],
    ['a count over 100000', { ...verdict, part_verifications: [{ ...part, good_count: 100_001 }] }],
    ['a fractional count', { ...verdict, part_verifications: [{ ...part, good_count: 0.5 }] }],
    ['an empty part_name', { ...verdict, part_verifications: [{ ...part, part_name: '' }] }],
    ['a 201-character part_name', { ...verdict, part_verifications: [{ ...part, part_name: long(201) }] }],
    ['an unknown action', { ...verdict, part_verifications: [{ ...part, action: 'burn' }] }],
    ['a part without action', { ...verdict, part_verifications: [{ part_name: 'benchy', good_count: 1, defective_count: 0 }] }],
    ['a part with an unknown field', { ...verdict, part_verifications: [{ ...part, colour: 'red' }] }],
    ['201 part verifications', { ...verdict, part_verifications: Array.from({ length: 201 }, (_, i) => ({ ...part, part_name: `p${i}` })) }],
    ['part_verifications not an array', { ...verdict, part_verifications: part }],
    ['metadata with 65 keys', { ready: true, metadata: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i])) }],
    ['an unknown field', { ready: true, verdict: 'ok' }],
  ]
  for (const [what, body] of bad) refused(t, await ready(body), 400, 'validation_failed', what)
  refused(t, await ready({ ready: true }, 'printer-1'), 400, 'validation_failed', 'a printer id that is no uuid')
  refused(t, await ready({ ready: true }, randomUUID()), 404, 'printer_not_found', 'a printer nobody has')
  refused(t, await ready({ ready: true, event_type: 'operator:manual_verification:failed' }), 409, 'job_not_awaiting_verification', 'a verdict with nothing to verify')
  refused(t, await ready({ ...verdict, job_id: Number.MAX_SAFE_INTEGER }), 404, 'print_job_not_found', 'the largest job id')
})

t.test('bounds - ready gate: 200 part verifications with counts at their bounds are stored with the job', async (t) => {
  const { printer, jobId, taskId, claim } = await claimedTask()
  await send(printer, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claim.claim_generation })
  await send(printer, 'job:finish', { result: 'success' })
  const nul = await request(url, `/v1/printers/${printer}/ready`, {
    method: 'PATCH',
    headers: admin,
    body: { ready: true, event_type: 'operator:manual_verification:success', part_verifications: [{ part_name: 'a\u0000b', good_count: 1, defective_count: 0, action: 'accept' }] },
  })
  refused(t, nul, 400, 'validation_failed', 'a part_name holding \\u0000 (the store cannot keep it)')
  t.equal((await request(url, `/v1/print-jobs/${jobId}`, { headers: admin })).json.status, 'awaiting_verification', 'nothing was verified')
  const parts = Array.from({ length: 200 }, (_, i) => ({ part_name: i === 0 ? long(200) : `part ${i}`, good_count: i === 0 ? 100_000 : 0, defective_count: i === 1 ? 100_000 : 0, action: 'accept' }))
  const res = await request(url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: admin, body: { ready: true, event_type: 'operator:manual_verification:success', job_id: jobId, part_verifications: parts } })
  t.equal(res.status, 200, res.text.slice(0, 300))
  t.equal(res.json.job.part_verifications.length, 200)
  t.same((await request(url, `/v1/print-jobs/${jobId}`, { headers: admin })).json.part_verifications, parts)
})

t.test('bounds - file reads: some but not all of the task parameters, or malformed ones, are 400', async (t) => {
  const { jobId, taskId, claim } = await claimedTask()
  const full = { print_job_id: String(jobId), printer_task_id: taskId, claim_generation: claim.claim_generation, printer_task_access_token: claim.printer_task_access_token }
  const read = (params: Record<string, string>) => request(url, `/v1/files/${fileId}?${new URLSearchParams(params).toString()}`, { headers: launch })
  const partial: (keyof typeof full)[][] = [['print_job_id'], ['printer_task_id'], ['claim_generation'], ['printer_task_access_token'], ['print_job_id', 'printer_task_id', 'claim_generation'], ['printer_task_id', 'printer_task_access_token']]
  for (const keys of partial) {
    refused(t, await read(Object.fromEntries(keys.map((k) => [k, full[k]]))), 400, 'validation_failed', `only ${keys.join(', ')}`)
  }
  refused(t, await read({ ...full, printer_task_id: 'task-1' }), 400, 'validation_failed', 'printer_task_id not a uuid')
  refused(t, await read({ ...full, claim_generation: '1' }), 400, 'validation_failed', 'claim_generation not a uuid')
  refused(t, await read({ ...full, print_job_id: long(201) }), 400, 'validation_failed', 'a 201-character print_job_id')
  refused(t, await read({ ...full, print_job_id: 'abc' }), 409, 'task_claim_mismatch', 'print_job_id of no job')
  refused(t, await read({ ...full, printer_task_id: randomUUID() }), 404, 'printer_task_not_found', 'a task nobody has')
  const ok = await fetch(`${url}/v1/files/${fileId}?${new URLSearchParams(full).toString()}`, { headers: launch })
  t.equal(ok.status, 200, 'all four together read the file')
  await ok.arrayBuffer()
})

t.test('scopes - a print-jobs:read key lists and reads but changes nothing, polls nothing and claims nothing', async (t) => {
  const reader = await apiKey(['print-jobs:read'])
  const { printer, jobId, taskId } = await claimedTask()
  t.equal((await request(url, '/v1/print-jobs', { method: 'POST', headers: reader, body: {} })).status, 200, 'list')
  t.equal((await request(url, `/v1/print-jobs/${jobId}`, { headers: reader })).status, 200, 'one job')
  t.equal((await request(url, `/v1/printer-tasks/${taskId}`, { headers: reader })).status, 200, 'one task')
  const denied: [string, Promise<HttpResult>][] = [
    ['create', request(url, '/v1/print-jobs/create', { method: 'POST', headers: reader, body: { name: 'x', model_file_id: fileId } })],
    ['cancel', request(url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: reader, body: { status: 'cancelled' } })],
    ['delete', request(url, `/v1/print-jobs/${job}`, { method: 'DELETE', headers: reader })],
    ['assign', request(url, `/v1/print-jobs/${job}/assign`, { method: 'POST', headers: reader, body: { printer_id: printer } })],
    ['poll', request(url, '/v1/hosts/host-a/printer-tasks', { headers: reader })],
    ['claim', request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: reader, body: { hostId: 'host-a', assignmentEpoch: 1 } })],
    ['ready gate', request(url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: reader, body: { ready: true } })],
    ['operator start', request(url, `/v1/printers/${printer}/operator-device-start`, { method: 'POST', headers: reader })],
  ]
  for (const [what, res] of denied) refused(t, await res, 403, 'insufficient_scope', what)
  t.match(await request(url, `/v1/print-jobs/${jobId}`, { headers: admin }), { json: { status: 'dispatching' } }, 'nothing changed')
})

t.test('scopes - without print:launch a bridge key neither polls nor claims; print:launch alone does not read jobs', async (t) => {
  const noLaunch = await apiKey(bridgeScopes.filter((s) => s !== 'print:launch'))
  const launchOnly = await apiKey(['print:launch'])
  const printer = await onlinePrinter()
  const jobId = await createJob()
  const taskId: string = (await request(url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: admin, body: { printer_id: printer } })).json.task.id
  refused(t, await request(url, '/v1/hosts/host-a/printer-tasks', { headers: noLaunch }), 403, 'insufficient_scope', 'poll')
  refused(t, await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: noLaunch, body: { hostId: 'host-a', assignmentEpoch: 1 } }), 403, 'insufficient_scope', 'claim')
  t.equal((await request(url, `/v1/printer-tasks/${taskId}`, { headers: launch })).json.state, 'offered', 'the offer is untouched')
  refused(t, await request(url, '/v1/print-jobs', { method: 'POST', headers: launchOnly, body: {} }), 403, 'insufficient_scope', 'print:launch lists no jobs')
  t.equal((await request(url, `/v1/printer-tasks/${taskId}`, { headers: launchOnly })).status, 200, 'print:launch reads a task')
  t.equal((await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launchOnly, body: { hostId: 'host-a', assignmentEpoch: 1 } })).status, 200, 'and claims it')
})

t.test('scopes - a member reads jobs and tasks but creating, changing, assigning, polling and claiming need an admin', async (t) => {
  const added = await request(url, `/v1/organizations/${farm.orgId}/members`, { method: 'POST', headers: admin, body: { email: 'operator@jobs.printfarm', password: 'operator-password-1', role: 'member' } })
  t.equal(added.status, 200, added.text)
  const member = (await signIn(url, 'operator@jobs.printfarm', 'operator-password-1')).auth
  const printer = await onlinePrinter()
  const jobId = await createJob()
  const taskId: string = (await request(url, `/v1/print-jobs/${jobId}/assign`, { method: 'POST', headers: admin, body: { printer_id: printer } })).json.task.id
  t.equal((await request(url, '/v1/print-jobs', { method: 'POST', headers: member, body: { status: ['dispatching'] } })).status, 200, 'list')
  t.equal((await request(url, `/v1/print-jobs/${jobId}`, { headers: member })).status, 200, 'one job')
  t.equal((await request(url, `/v1/printer-tasks/${taskId}`, { headers: member })).status, 200, 'one task')
  const denied: [string, Promise<HttpResult>][] = [
    ['create', request(url, '/v1/print-jobs/create', { method: 'POST', headers: member, body: { name: 'x', model_file_id: fileId } })],
    ['assign', request(url, `/v1/print-jobs/${job}/assign`, { method: 'POST', headers: member, body: { printer_id: printer } })],
    ['cancel', request(url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: member, body: { status: 'cancelled' } })],
    ['delete', request(url, `/v1/print-jobs/${job}`, { method: 'DELETE', headers: member })],
    ['poll', request(url, '/v1/hosts/host-a/printer-tasks', { headers: member })],
    ['claim', request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: member, body: { hostId: 'host-a', assignmentEpoch: 1 } })],
    ['ready gate', request(url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: member, body: { ready: false, ready_updated_source: 'operator_override' } })],
    ['operator start', request(url, `/v1/printers/${printer}/operator-device-start`, { method: 'POST', headers: member })],
  ]
  for (const [what, res] of denied) refused(t, await res, 403, 'ORG_ADMIN_REQUIRED', what)
  t.match(await request(url, `/v1/printer-tasks/${taskId}`, { headers: admin }), { json: { state: 'offered' } }, 'nothing changed')
})

t.test('scopes - no credential is 401 on every route', async (t) => {
  const { printer, jobId, taskId } = await claimedTask()
  for (const [what, res] of [
    ['create', request(url, '/v1/print-jobs/create', { method: 'POST', body: { name: 'x', model_file_id: fileId } })],
    ['list', request(url, '/v1/print-jobs', { method: 'POST', body: {} })],
    ['read', request(url, `/v1/print-jobs/${jobId}`)],
    ['poll', request(url, '/v1/hosts/host-a/printer-tasks')],
    ['task', request(url, `/v1/printer-tasks/${taskId}`)],
    ['claim', request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', body: { hostId: 'host-a', assignmentEpoch: 1 } })],
    ['ready gate', request(url, `/v1/printers/${printer}/ready`, { method: 'PATCH', body: { ready: true } })],
  ] as const) {
    refused(t, await res, 401, 'unauthorized', what)
  }
})

t.test("isolation - another organization's credentials find none of this organization's tasks, jobs or printers", async (t) => {
  const created = await request(url, '/v1/organizations', { method: 'POST', headers: admin, body: { name: `Other ${randomUUID().slice(0, 6)}` } })
  t.equal(created.status, 201)
  const otherAdmin = { ...admin, 'x-organization-id': created.json.id as string }
  const otherBridge = await apiKey(bridgeScopes, otherAdmin)
  const { printer, jobId, taskId, claim } = await claimedTask()
  for (const [who, headers] of [
    ['admin of the other organization', otherAdmin],
    ['bridge key of the other organization', otherBridge],
  ] as const) {
    refused(t, await request(url, `/v1/printer-tasks/${taskId}`, { headers }), 404, 'printer_task_not_found', `${who}: GET task`)
    refused(t, await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers, body: { hostId: 'host-a', assignmentEpoch: 1 } }), 404, 'printer_task_not_found', `${who}: claim`)
    t.same((await request(url, '/v1/hosts/host-a/printer-tasks', { headers })).json, { tasks: [] }, `${who}: the same host name polls nothing of ours`)
    refused(t, await request(url, `/v1/print-jobs/${jobId}`, { headers }), 404, 'print_job_not_found', `${who}: GET job`)
    refused(t, await request(url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers, body: { status: 'cancelled' } }), 404, 'print_job_not_found', `${who}: cancel`)
    refused(t, await request(url, `/v1/print-jobs/${jobId}`, { method: 'DELETE', headers }), 404, 'print_job_not_found', `${who}: delete`)
    refused(t, await request(url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers, body: { ready: false, ready_updated_source: 'operator_override' } }), 404, 'printer_not_found', `${who}: ready gate`)
    refused(t, await request(url, `/v1/printers/${printer}/operator-device-start`, { method: 'POST', headers }), 404, 'printer_not_found', `${who}: operator start`)
    const params = new URLSearchParams({ print_job_id: String(jobId), printer_task_id: taskId, claim_generation: claim.claim_generation, printer_task_access_token: claim.printer_task_access_token })
    const read = await request(url, `/v1/files/${fileId}?${params.toString()}`, { headers })
    t.equal(read.status, 404, `${who}: the claim's file read`)
    t.type(read.json?.error, 'string')
  }
  const theirJob = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: otherAdmin, body: { name: 'theirs', model_file_id: fileId } })
  refused(t, theirJob, 404, 'file_not_found', "a job of our file in their organization")
  const ours = await createJob()
  refused(t, await request(url, `/v1/print-jobs/${ours}/assign`, { method: 'POST', headers: otherAdmin, body: { printer_id: printer } }), 404, 'print_job_not_found', 'their admin assigns our job')
  t.match(await request(url, `/v1/printer-tasks/${taskId}`, { headers: launch }), { json: { state: 'claimed', claim_generation: claim.claim_generation } }, 'our claim is untouched')
  t.equal((await request(url, `/v1/print-jobs/${jobId}`, { headers: admin })).json.status, 'dispatching')
})
