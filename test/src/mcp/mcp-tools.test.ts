/**
 * Every MCP tool called with real data through the official client SDK, as an agent runs it: a farm
 * with online printers, a model and its uploaded Bambu 3MF, jobs, materials and spools built over
 * HTTP, and a job driven by a simulated bridge through dispatch, claim, job:start and job:finish.
 * Each tool answers what its REST route answers for the same data (compared with the route called
 * over HTTP), its structuredContent passes the tool's own outputSchema (compiled with ajv), and each
 * write tool refuses with our error code: a cancelled job cancelled again, maintenance on a printing
 * printer, a verdict on a printer with nothing awaiting verification, a zero adjustment.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { Client } from '@modelcontextprotocol/client'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, EventSender, type Farm, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { connectAgent, TestAuthProvider } from '../../helpers/mcp.js'
import { startOAuthService } from '../../helpers/oauth.js'

const addFormats = addFormatsModule.default

const svc = await startOAuthService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin
const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'bridge with launch', scopes: [...bridgeScopes] } })
const launch = { 'x-api-key': key.json.key as string }
const bridge: Farm = { ...farm, bridge: launch }

// The data: a model with its sliced plate, a material with a spool, online printers.
const modelId = await createModel(url, admin, { name: 'MCP Benchy', designer: 'Ada' })
const uploaded = await upload(url, admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
const fileId: string = uploaded.json.id
const material = await request(url, '/v1/materials', { method: 'POST', headers: admin, body: { name: 'Generic PLA White', type: 'PLA', color_hex: '#ffffff' } })
if (material.status !== 201) throw new Error(`material: ${material.status} ${material.text}`)
const spool = await request(url, '/v1/inventory', { method: 'POST', headers: admin, body: { material_id: material.json.id, initial_g: 1000, remaining_g: 500, label: 'MCP spool', location: 'Shelf A' } })
if (spool.status !== 201) throw new Error(`spool: ${spool.status} ${spool.text}`)
const spoolId: string = spool.json.id

const events = new EventSender(bridge)
const send = (printer: string, type: string, data: Record<string, unknown> = {}) => events.applied(printer, type, data)
async function onlinePrinter(): Promise<string> {
  const printer = await addPrinter(farm, 'host-a', { enabled: true })
  await send(printer, 'heartbeat')
  return printer
}
const idle = await onlinePrinter()
const worker = await onlinePrinter()

// Jobs wait for a hand assignment, so the queue never moves them between a tool call and the REST call it is compared with.
const handOnly = { print_options: { auto_assign: false } }
async function createJob(name: string): Promise<any> {
  const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin, body: { name, model_file_id: fileId, ...handOnly } })
  if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
  return res.json
}
const getJob = async (id: number) => (await request(url, `/v1/print-jobs/${id}`, { headers: admin })).json

// The agent: the official client, through the OAuth flow, as the farm's admin.
const provider = new TestAuthProvider(url)
const { client } = await connectAgent(url, provider)
t.teardown(() => client.close())
const { tools } = await client.listTools()

const ajv = new Ajv({ strict: false, allErrors: true })
addFormats(ajv)
const outputValidators = new Map<string, ValidateFunction>()
for (const tool of tools) if (tool.outputSchema !== undefined) outputValidators.set(tool.name, ajv.compile(tool.outputSchema))

/** A JSON-RPC tools/call over plain HTTP with the agent's token: the raw answer, unchecked by the client. */
async function rawCall(name: string, args: Record<string, unknown>): Promise<any> {
  const res = await request(url, '/v1/mcp', {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${provider.accessToken}` },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
  })
  const data = res.text.startsWith('{') ? res.text : (/^data: (.*)$/m.exec(res.text)?.[1] ?? 'null')
  return JSON.parse(data).result
}

/**
 * Calls a tool with the client; a successful answer must not be an error and its structuredContent
 * must pass the tool's outputSchema. The client SDK checks that schema itself and throws when it
 * fails: the answer is then read over plain HTTP, so the failure shows what the tool answered.
 */
async function callOk(t: Test, c: Client, name: string, args: Record<string, unknown>): Promise<any> {
  let result: any
  let clientRefused: string | undefined
  try {
    result = await c.callTool({ name, arguments: args })
  } catch (error) {
    clientRefused = (error as Error).message
    result = await rawCall(name, args)
  }
  t.notOk(result.isError, `${name} succeeds: ${JSON.stringify(result.structuredContent ?? result.content).slice(0, 500)}`)
  t.equal(clientRefused, undefined, `the client SDK accepts ${name}'s answer`)
  const validate = outputValidators.get(name)
  t.ok(validate, `${name} has an outputSchema`)
  if (validate !== undefined && result.isError !== true) {
    const valid = validate(result.structuredContent)
    t.ok(valid, `${name}'s structuredContent matches its outputSchema: ${ajv.errorsText(validate.errors)}`)
  }
  t.same(JSON.parse((result.content as { type: string; text: string }[]).find((c) => c.type === 'text')?.text ?? 'null'), result.structuredContent, 'the text content is the same answer')
  return result.structuredContent
}

/** Calls a tool that must refuse: isError, with our error code in structuredContent.error. */
async function callRefused(t: Test, name: string, args: Record<string, unknown>, code: string, message: string): Promise<any> {
  const result: any = await client.callTool({ name, arguments: args })
  t.equal(result.isError, true, `${message}: a tool error`)
  t.match(result.structuredContent, { error: code, message: String }, `${message}: ${code}`)
  return result.structuredContent
}

t.test('every tool is listed with an input and an output schema', async (t) => {
  t.same(tools.map((tool) => tool.name).sort(), [
    'adjust_inventory', 'cancel_print_job', 'create_print_job', 'farm_summary', 'get_file_metadata', 'get_print_job', 'get_printer', 'list_inventory', 'list_jobs',
    'list_materials', 'list_model_files', 'list_models', 'list_printers', 'queue_status', 'set_maintenance', 'verify_print',
  ])
  const writes = new Set(['set_maintenance', 'create_print_job', 'cancel_print_job', 'verify_print', 'adjust_inventory'])
  for (const tool of tools) {
    t.equal(tool.inputSchema.type, 'object', `${tool.name} takes an object`)
    t.ok(outputValidators.has(tool.name), `${tool.name}'s outputSchema compiles`)
    t.notOk(outputValidators.get(tool.name)?.({ unexpected: true }), `${tool.name}'s outputSchema refuses an answer of another shape (the check is not vacuous)`)
    t.equal(tool.annotations?.readOnlyHint, !writes.has(tool.name), `${tool.name} is ${writes.has(tool.name) ? 'a write' : 'read-only'}`)
  }
})

t.test('list_printers and get_printer answer what GET /v1/printers and GET /v1/printers/{id} answer', async (t) => {
  const listed = await callOk(t, client, 'list_printers', { limit: 10 })
  const rest = await request(url, '/v1/printers?limit=10', { headers: admin })
  t.equal(rest.status, 200)
  t.same(listed, rest.json, 'the same page as the route')
  t.equal(listed.total, 2)
  t.same(listed.printers.map((p: any) => p.id).sort(), [idle, worker].sort(), "the farm's printers")

  const one = await callOk(t, client, 'get_printer', { id: idle })
  const restOne = await request(url, `/v1/printers/${idle}`, { headers: admin })
  t.same(one, restOne.json, 'the same printer as the route')
  t.equal(one.printer.id, idle)
  await callRefused(t, 'get_printer', { id: randomUUID() }, 'printer_not_found', 'an unknown printer')
})

t.test('set_maintenance turns the flag on and off as the route does; an unknown printer is not found', async (t) => {
  const on = await callOk(t, client, 'set_maintenance', { id: idle, maintenance: true })
  t.same(on, { success: true, message: 'maintenance on' })
  t.equal((await request(url, `/v1/printers/${idle}`, { headers: admin })).json.printer.maintenance, true, 'the route reads the printer in maintenance')
  t.match(await callOk(t, client, 'get_printer', { id: idle }), { printer: { maintenance: true, status: 'IDLE' } }, 'and so does get_printer')
  const off = await callOk(t, client, 'set_maintenance', { id: idle, maintenance: false })
  t.same(off, { success: true, message: 'maintenance off' })
  t.equal((await request(url, `/v1/printers/${idle}`, { headers: admin })).json.printer.maintenance, false, 'and out of it')
  await callRefused(t, 'set_maintenance', { id: randomUUID(), maintenance: true }, 'printer_not_found', 'an unknown printer')
  await callRefused(t, 'set_maintenance', { id: idle }, 'validation_failed', 'no flag')
})

t.test('create_print_job queues the job the route stores; list_jobs answers what POST /v1/print-jobs answers', async (t) => {
  const created = await callOk(t, client, 'create_print_job', { name: 'MCP job', model_file_id: fileId, priority: 7, ...handOnly })
  t.match(created, { name: 'MCP job', status: 'queued', model_file_id: fileId, priority: 7, plate: 1, printer_id: null })
  // GET /v1/print-jobs/{id} adds the queue's view of a queued job to the job the create route answers.
  const { queue, ...stored } = await getJob(created.id)
  t.same(created, stored, 'GET /v1/print-jobs/{id} reads the same job')
  t.match(queue, { reasons: [{ code: 'manual_assignment' }] }, 'waiting for a hand assignment')
  t.same(await callOk(t, client, 'get_print_job', { id: created.id }), await getJob(created.id), 'get_print_job answers what GET /v1/print-jobs/{id} answers')
  await callRefused(t, 'get_print_job', { id: 999_999_999 }, 'print_job_not_found', 'a job of nowhere')

  // A retry with the same idempotency_key (a lost answer) is the same job, not a second print.
  const key = `mcp-${randomUUID()}`
  const first = await callOk(t, client, 'create_print_job', { name: 'MCP once', model_file_id: fileId, idempotency_key: key, ...handOnly })
  const retry = await callOk(t, client, 'create_print_job', { name: 'MCP once', model_file_id: fileId, idempotency_key: key, ...handOnly })
  t.equal(retry.id, first.id, 'the retry answers the job the first call created')
  const once = await request(url, '/v1/print-jobs', { method: 'POST', headers: admin, body: { search: 'MCP once', limit: 10 } })
  t.equal(once.json.total, 1, 'one job stored')
  await callRefused(t, 'create_print_job', { name: 'x', model_file_id: fileId, idempotency_key: 'k'.repeat(201) }, 'validation_failed', 'a key over 200 characters')
  await callRefused(t, 'create_print_job', { name: 'x', model_file_id: fileId, idempotency_key: 7 }, 'validation_failed', 'a key that is not text')
  await callRefused(t, 'create_print_job', { name: 'x', model_file_id: randomUUID() }, 'file_not_found', 'a file of nowhere')
  await callRefused(t, 'create_print_job', { name: '', model_file_id: fileId }, 'validation_failed', 'an empty name')

  const filter = { status: ['queued'], search: 'MCP job', limit: 20 }
  const listed = await callOk(t, client, 'list_jobs', filter)
  const rest = await request(url, '/v1/print-jobs', { method: 'POST', headers: admin, body: filter })
  t.equal(rest.status, 200)
  t.same(listed, rest.json, 'the same page as the route')
  t.ok(listed.jobs.some((j: any) => j.id === created.id), 'the new job is listed')
})

t.test('cancel_print_job cancels a queued job; cancelling it again is job_transition_invalid', async (t) => {
  const job = await createJob('MCP to cancel')
  const cancelled = await callOk(t, client, 'cancel_print_job', { id: job.id, reason: 'wrong colour' })
  t.match(cancelled, { id: job.id, status: 'cancelled' })
  t.same(cancelled, await getJob(job.id), 'the route reads the cancelled job')
  const again = await callRefused(t, 'cancel_print_job', { id: job.id }, 'job_transition_invalid', 'an already cancelled job')
  t.match(again.message, /cancelled/, 'naming the status')
  await callRefused(t, 'cancel_print_job', { id: 999_999_999 }, 'print_job_not_found', 'a job of nowhere')
  await callRefused(t, 'cancel_print_job', { id: job.id, status: 'queued' }, 'validation_failed', 'the status is the tool\'s, not an argument')
})

t.test('queue_status answers what GET /v1/queue answers', async (t) => {
  const waiting = await createJob('MCP waiting')
  const queue = await callOk(t, client, 'queue_status', { limit: 50 })
  const rest = await request(url, '/v1/queue?limit=50', { headers: admin })
  t.equal(rest.status, 200)
  t.same(queue, rest.json, 'the same queue as the route')
  t.ok(JSON.stringify(queue).includes(`"id":${waiting.id}`), 'the waiting job is in it')
})

t.test('verify_print: a job finished on a printer is verified; maintenance is refused while it prints; nothing left to verify is refused', async (t) => {
  const job = await createJob('MCP printed')
  const assigned = await request(url, `/v1/print-jobs/${job.id}/assign`, { method: 'POST', headers: admin, body: { printer_id: worker } })
  t.equal(assigned.status, 200, assigned.text)
  const taskId: string = assigned.json.task.id
  const claimed = await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  t.equal(claimed.status, 200, claimed.text)
  await send(worker, 'job:start', { jobId: job.id, printerTaskId: taskId, claimGeneration: claimed.json.claim_generation })
  t.match(await getJob(job.id), { status: 'printing' })

  const busy = await callRefused(t, 'set_maintenance', { id: worker, maintenance: true }, 'printer_busy', 'maintenance on a printing printer')
  t.match(busy, { reason: 'job_printing' }, 'naming why')
  const printing = await callOk(t, client, 'get_printer', { id: worker })
  t.same(printing, (await request(url, `/v1/printers/${worker}`, { headers: admin })).json, 'get_printer on a printing printer answers what the route answers')

  await callRefused(t, 'verify_print', { id: worker, ready: true, event_type: 'operator:manual_verification:success' }, 'job_not_awaiting_verification', 'a verdict while the job still prints')
  await send(worker, 'job:finish', { result: 'success' })
  t.match(await getJob(job.id), { status: 'awaiting_verification' })

  const verified = await callOk(t, client, 'verify_print', {
    id: worker,
    ready: true,
    event_type: 'operator:manual_verification:success',
    part_verifications: [{ part_name: 'benchy', good_count: 1, defective_count: 0, action: 'accept' }],
  })
  t.match(verified, { success: true, ready: true, job: { id: job.id, status: 'succeeded', verification: 'success' }, requeued_job: null })
  t.match(await getJob(job.id), { status: 'succeeded' }, 'the route reads the verified job')
  t.equal((await request(url, `/v1/printers/${worker}`, { headers: admin })).json.printer.ready_gate, 'open', 'the gate opens')

  await callRefused(t, 'verify_print', { id: worker, ready: true, job_id: job.id, event_type: 'operator:manual_verification:success' }, 'job_not_awaiting_verification', 'the same job verified again')
  await callRefused(t, 'verify_print', { id: idle, ready: true, event_type: 'operator:manual_verification:success' }, 'job_not_awaiting_verification', 'a printer that printed nothing')
  await callRefused(t, 'verify_print', { id: randomUUID(), ready: true }, 'printer_not_found', 'an unknown printer')
})

t.test('list_models, list_model_files and get_file_metadata answer what their routes answer', async (t) => {
  const models = await callOk(t, client, 'list_models', { search: 'MCP Benchy' })
  const restModels = await request(url, '/v1/models?search=MCP%20Benchy', { headers: admin })
  t.same(models, restModels.json, 'the same models as GET /v1/models')
  t.same(models.models.map((m: any) => m.id), [modelId])

  const listModelFiles = tools.find((tool) => tool.name === 'list_model_files')!
  t.ok(['modelId', 'view'].every((f) => listModelFiles.inputSchema.required?.includes(f)), 'the files of one model are listed: modelId and view are required')
  await callRefused(t, 'list_model_files', {}, 'validation_failed', 'no model named')
  const files = await callOk(t, client, 'list_model_files', { modelId, view: 'active' })
  const restFiles = await request(url, `/v1/model-files?modelId=${modelId}&view=active`, { headers: admin })
  t.same(files, restFiles.json, 'the same files as GET /v1/model-files')
  t.same(files.files.map((f: any) => f.id), [fileId], 'the uploaded file is listed')

  const metadata = await callOk(t, client, 'get_file_metadata', { fileId })
  const restMetadata = await request(url, `/v1/files/${fileId}/metadata`, { headers: admin })
  t.same(metadata, restMetadata.json, 'the same metadata as GET /v1/files/{fileId}/metadata')
  t.match(metadata, { id: fileId, model_id: modelId, metadata: { estimated_seconds: 3723 } })
  await callRefused(t, 'get_file_metadata', { fileId: randomUUID() }, 'file_not_found', 'a file of nowhere')
  await callRefused(t, 'get_file_metadata', { fileId, signature: 'x' }, 'validation_failed', 'the signed-URL fields are not offered')
})

t.test('list_materials and list_inventory answer what their routes answer', async (t) => {
  const materials = await callOk(t, client, 'list_materials', {})
  t.same(materials, (await request(url, '/v1/materials', { headers: admin })).json, 'the same as GET /v1/materials')
  t.ok(materials.materials.some((m: any) => m.id === material.json.id))
  const spools = await callOk(t, client, 'list_inventory', { search: 'MCP spool' })
  t.same(spools, (await request(url, '/v1/inventory?search=MCP%20spool', { headers: admin })).json, 'the same as GET /v1/inventory')
  t.same(spools.spools.map((s: any) => s.id), [spoolId])
})

t.test('adjust_inventory writes the entry and changes the spool; a zero delta or a spool of nowhere is refused', async (t) => {
  const adjusted = await callOk(t, client, 'adjust_inventory', { id: spoolId, delta_g: -20.5, reason: 'weighed' })
  t.match(adjusted, { spool: { id: spoolId, remaining_g: 479.5 } })
  t.same(adjusted.spool, (await request(url, `/v1/inventory/${spoolId}`, { headers: admin })).json, 'the spool as the route reads it now')
  const ledger = await request(url, `/v1/inventory/${spoolId}/ledger`, { headers: admin })
  t.equal(ledger.status, 200)
  t.match(JSON.stringify(ledger.json), /weighed/, 'the entry is in the ledger')
  const zero = await callRefused(t, 'adjust_inventory', { id: spoolId, delta_g: 0, reason: 'nothing' }, 'validation_failed', 'a zero delta')
  t.match(zero.message, /delta_g must not be 0/)
  await callRefused(t, 'adjust_inventory', { id: randomUUID(), delta_g: -5, reason: 'x' }, 'spool_not_found', 'a spool of nowhere')
  t.equal((await request(url, `/v1/inventory/${spoolId}`, { headers: admin })).json.remaining_g, 479.5, 'the refusals changed nothing')
})

t.test('farm_summary counts the printers and the jobs the routes list', async (t) => {
  const summary = await callOk(t, client, 'farm_summary', {})
  const printers = (await request(url, '/v1/printers?limit=100', { headers: admin })).json
  t.equal(summary.printers.total, printers.total, 'every printer')
  const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0)
  t.equal(sum(summary.printers.by_status), printers.total, 'by status adds up to the total')
  t.equal(summary.printers.online, 2, 'both printers are online')
  const jobs = (await request(url, '/v1/print-jobs', { method: 'POST', headers: admin, body: { limit: 200 } })).json
  const byStatus: Record<string, number> = {}
  for (const job of jobs.jobs) byStatus[job.status] = (byStatus[job.status] ?? 0) + 1
  t.equal(sum(summary.jobs.by_status), jobs.total, 'every job')
  for (const [status, n] of Object.entries(summary.jobs.by_status)) t.equal(n, byStatus[status] ?? 0, `${status} jobs`)
  t.match(summary.jobs.by_status, { succeeded: 1, cancelled: 1 })
})
