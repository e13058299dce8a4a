/**
 * A finished job's grams leave the spools loaded in its mapped slots, once
 * (sections 13 and 14), driven end to end: a plate of two filaments,
 * a printer reporting which slot holds which, spools loaded in those slots,
 * a job dispatched, claimed, started and finished by a reference bridge.
 * The service deducts after the commit that ended the job; the tests wait for
 * the ledger entries it writes, never for a time.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { strToU8 } from 'fflate'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { deductFinishedJob, slotDraws } from '../../../src/inventory/deduction.js'
import { addPrinter, batch, EventSender, type Farm, openFarm, postBatch } from '../../helpers/bridge.js'
import { waitFor } from '../../helpers/poll.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const sql = svc.services.db.sql
const farm = await openFarm(svc.url)
const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge with launch', scopes: [...bridgeScopes] } })
const launch = { 'x-api-key': key.json.key as string }
const bridge: Farm = { ...farm, bridge: launch }
const modelId = await createModel(svc.url, farm.admin)

/** A plate of two filaments: 11.66 g of white PLA and 5 g of red PLA. */
const twoColours = bambuThreeMf({
  'Metadata/slice_info.config': strToU8(
    '<?xml version="1.0" encoding="UTF-8"?>\n<config>\n  <header>\n    <header_item key="X-BBL-Client-Type" value="slicer"/>\n  </header>\n  <plate>\n' +
      '    <metadata key="index" value="1"/>\n    <metadata key="printer_model_id" value="C12"/>\n    <metadata key="weight" value="16.66"/>\n' +
      '    <filament id="1" tray_info_idx="GFA00" type="PLA" color="#FFFFFF" used_m="3.91" used_g="11.66"/>\n' +
      '    <filament id="2" tray_info_idx="GFA00" type="PLA" color="#FF0000" used_m="1.68" used_g="5.00"/>\n  </plate>\n</config>\n',
  ),
})
const fileId: string = (await upload(svc.url, farm.admin, modelId, { name: 'two-colour.3mf', bytes: twoColours })).json.id
const material: string = (await request(svc.url, '/v1/materials', { method: 'POST', headers: farm.admin, body: { name: 'Generic PLA', type: 'PLA' } })).json.id

const events = new EventSender(bridge)
/** The next event of a printer's bridge, as a batch body (post it once, or again to re-deliver it). */
const eventBatch = (printer: string, type: string, data: Record<string, unknown> = {}) => events.next(printer, type, data)
async function send(printer: string, type: string, data: Record<string, unknown> = {}): Promise<void> {
  await events.applied(printer, type, data)
}

/** An online printer whose slot 2 holds white PLA and slot 5 red PLA (AMS unit 0 tray 2, unit 1 tray 1). */
async function printerWithSlots(): Promise<string> {
  const printer = await addPrinter(farm, 'host-a', { enabled: true })
  await send(printer, 'heartbeat')
  const slots = [
    { position: 2, materialType: 'PLA', color: '#FFFFFF' },
    { position: 5, materialType: 'PLA', color: '#FF0000' },
  ]
  const res = await request(svc.url, `/v1/printers/${printer}/filaments/assign`, { method: 'POST', headers: farm.admin, body: { slots } })
  if (res.status !== 200) throw new Error(`filaments: ${res.status} ${res.text}`)
  return printer
}

async function loadSpool(printer: string | null, slot: number | null, grams = 1000): Promise<string> {
  const res = await request(svc.url, '/v1/inventory', { method: 'POST', headers: farm.admin, body: { material_id: material, initial_g: grams, ...(printer === null ? {} : { printer_id: printer, slot }) } })
  if (res.status !== 201) throw new Error(`spool: ${res.status} ${res.text}`)
  return res.json.id
}

/** A job of the plate assigned to the printer, claimed and started by its bridge. */
async function printing(printer: string, jobId?: number): Promise<{ jobId: number; taskId: string; mapping: number[] }> {
  const id = jobId ?? (await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'Two-colour', model_file_id: fileId, print_options: { auto_assign: false } } })).json.id
  const assigned = await request(svc.url, `/v1/print-jobs/${id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
  const taskId: string = assigned.json.task.id
  const claimed = await request(svc.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  await send(printer, 'job:start', { jobId: id, printerTaskId: taskId, claimGeneration: claimed.json.claim_generation })
  return { jobId: id, taskId, mapping: assigned.json.task.ams_mapping }
}

/** A dispatched job on the printer that failed at 50 %, deducted, and given the operator's "failed" verdict. */
async function failedHalfWay(t: Test, printer: string): Promise<number> {
  const { jobId } = await printing(printer)
  await send(printer, 'job:update', { progress: 50 })
  await send(printer, 'job:finish', { result: 'failed' })
  await deducted(jobId)
  const verdict = await request(svc.url, `/v1/printers/${printer}/ready`, { method: 'PATCH', headers: farm.admin, body: { ready: true, event_type: 'operator:manual_verification:failed', failure_reason: 'spaghetti' } })
  t.equal(verdict.status, 200)
  return jobId
}

/** As if the job's deduction had not run yet (the node stopped after the commit that ended the run). */
async function forgetDeduction(jobId: number, spool: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`delete from spool_ledger where job_id = ${jobId}`
    await tx`update spools set remaining_g = initial_g where id = ${spool}`
    await tx`update print_jobs set inventory_deducted_at = null, inventory_deducted_attempt = null where id = ${jobId}`
  })
}

t.test('slot draws - grams per slot: whole when finished, by progress otherwise; shared slots summed; unmapped and unused skipped', async (t) => {
  const req = (filament_index: number, used_g: number | null) => ({ filament_index, type: 'PLA', color_hex: null, used_g, material_id: null })
  const required = [req(0, 11.66), req(1, 5), req(2, 0), req(3, 7), req(4, null)]
  t.same(slotDraws(required, [2, 5, 6, -1, 1], 'finished', 100), [
    { slot: 2, grams: 11.66, filaments: [1] },
    { slot: 5, grams: 5, filaments: [2] },
  ])
  t.same(slotDraws(required, [2, 5], 'failed', 40), [
    { slot: 2, grams: 4.66, filaments: [1] },
    { slot: 5, grams: 2, filaments: [2] },
  ], 'a failed job at 40 %: 40 % of each, to the centigram')
  t.same(slotDraws(required, [2, 2, 2, 2], 'cancelled', 50), [{ slot: 2, grams: 11.83, filaments: [1, 2, 4] }], 'filaments printed from one slot are one draw')
  t.same(slotDraws(required, [2, 5], 'failed', null), [], 'no progress reported: nothing')
  t.same(slotDraws(required, [], 'finished', 100), [], 'no mapping: nothing')
  t.same(slotDraws(required, [64, 'x', 1.5], 'finished', 100), [], 'slots outside 0-63 or not whole are ignored')
})

const ledger = async (spoolId: string) => (await request(svc.url, `/v1/inventory/${spoolId}/ledger`, { headers: farm.admin })).json.entries as any[]
const remaining = async (spoolId: string) => (await request(svc.url, `/v1/inventory/${spoolId}`, { headers: farm.admin })).json.remaining_g as number
const marker = async (jobId: number) => (await sql<{ at: Date | null }[]>`select inventory_deducted_at as at from print_jobs where id = ${jobId}`)[0]!.at
const deducted = (jobId: number) => waitFor(async () => (await marker(jobId)) !== null, `job ${jobId} deducted`, 30_000)

t.test('deduction - a finished job takes its plate\'s grams from the spools in its mapped slots, exactly once', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const red = await loadSpool(printer, 5, 3)
  const shelf = await loadSpool(null, null)
  const { jobId, mapping } = await printing(printer)
  t.same(mapping, [2, 5], 'the task maps filament 1 to slot 2 and filament 2 to slot 5')
  const finish = eventBatch(printer, 'job:finish', { result: 'success' })
  t.equal((await postBatch(bridge, finish)).json.events[0].outcome, 'applied')
  await deducted(jobId)

  t.match(await ledger(white), [{ spool_id: white, delta_g: -11.66, applied_g: -11.66, shortfall_g: 0, job_id: jobId, reason: `job ${jobId} printed (filament 1)` }])
  t.match(await ledger(red), [{ delta_g: -5, applied_g: -3, shortfall_g: 2, job_id: jobId }], 'the red spool had 3 g on record: the shortfall is written')
  t.equal(await remaining(white), 988.34)
  t.equal(await remaining(red), 0, 'never below 0')
  t.same(await ledger(shelf), [], 'a spool on the shelf is not touched')

  t.same(await deductFinishedJob(sql, farm.orgId, jobId, new Date()), [], 'deducting again writes nothing')
  const again = await postBatch(bridge, finish)
  t.equal(again.status, 200)
  t.not(again.json.events[0].outcome, 'applied', 're-delivered, the finish is not applied twice')
  t.same(await deductFinishedJob(sql, farm.orgId, jobId, new Date()), [])
  t.equal((await ledger(white)).length, 1, 'still one entry')
  t.equal(await remaining(white), 988.34)
  // The unique index holds even against a writer that skipped the marker.
  const [attempt] = await sql<{ attempts: number }[]>`select attempts from print_jobs where id = ${jobId}`
  await t.rejects(
    sql`insert into spool_ledger (id, organization_id, spool_id, delta_g, applied_g, reason, job_id, job_attempt) values (${randomUUID()}, ${farm.orgId}, ${white}, -1, -1, 'twice', ${jobId}, ${attempt!.attempts})`,
    { code: '23505' },
  )
  const metrics = (await request(svc.url, '/metrics')).text
  t.match(metrics, /inventory_deducted_grams_total \d/, 'the grams are counted')
})

t.test('deduction - a failed job at 40 % takes 40 % of its grams', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const red = await loadSpool(printer, 5)
  const { jobId } = await printing(printer)
  await send(printer, 'job:update', { progress: 40 })
  await send(printer, 'job:finish', { result: 'failed' })
  await deducted(jobId)
  t.match((await request(svc.url, `/v1/print-jobs/${jobId}`, { headers: farm.admin })).json, { printer_state: 'failed', progress: 40 })
  t.match(await ledger(white), [{ delta_g: -4.66, applied_g: -4.66, job_id: jobId, reason: `job ${jobId} failed at 40 % (filament 1)` }])
  t.match(await ledger(red), [{ delta_g: -2, job_id: jobId }])
  t.equal(await remaining(red), 998)
})

t.test('deduction - a job:finish that carries its progress is charged by it (no job:update before it)', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const { jobId } = await printing(printer)
  await send(printer, 'job:finish', { result: 'failed', progress: 50 })
  await deducted(jobId)
  t.match((await request(svc.url, `/v1/print-jobs/${jobId}`, { headers: farm.admin })).json, { printer_state: 'failed', progress: 50 })
  t.match(await ledger(white), [{ delta_g: -5.83, job_id: jobId }], 'half the plate')
})

t.test('deduction - a slot with no spool deducts nothing; the job is marked all the same', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const { jobId } = await printing(printer)
  await send(printer, 'job:finish', { result: 'success' })
  await deducted(jobId)
  t.equal((await ledger(white)).length, 1, 'the loaded slot is charged')
  const [rows] = await sql<{ n: number }[]>`select count(*)::int as n from spool_ledger where job_id = ${jobId}`
  t.equal(rows!.n, 1, 'nothing for the empty slot')

  const bare = await printerWithSlots()
  const { jobId: unstocked } = await printing(bare)
  await send(bare, 'job:finish', { result: 'success' })
  await deducted(unstocked)
  const [none] = await sql<{ n: number }[]>`select count(*)::int as n from spool_ledger where job_id = ${unstocked}`
  t.equal(none!.n, 0, 'a printer without spools: marked, nothing written')
})

t.test('deduction - a job a bridge opened by itself has no mapping: marked, nothing written', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  await send(printer, 'job:start', { name: 'from the touchscreen' })
  await send(printer, 'job:finish', { result: 'success' })
  const [job] = await sql<{ id: string }[]>`select id from print_jobs where printer_id = ${printer} order by id desc limit 1`
  await deducted(Number(job!.id))
  t.same(await ledger(white), [])
})

t.test('deduction - a failed job requeued under the same id prints again and is deducted again', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const jobId = await failedHalfWay(t, printer)
  const requeued = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'queued' } })
  t.equal(requeued.status, 200)
  t.same(await deductFinishedJob(sql, farm.orgId, jobId, new Date()), [], 'queued again: nothing to deduct while it waits')
  // The printer reports itself idle again (healthy): the failure's error clears and it may take the job.
  await send(printer, 'status', { status: 'IDLE' })
  await printing(printer, jobId)
  await send(printer, 'job:finish', { result: 'success' })
  await waitFor(async () => (await ledger(white)).length === 2, 'the second run deducted', 30_000)
  t.same((await ledger(white)).map((e) => [e.delta_g, e.job_id]), [
    [-11.66, jobId],
    [-5.83, jobId],
  ], 'half the plate for the failed run, all of it for the one that finished')
  t.same(await deductFinishedJob(sql, farm.orgId, jobId, new Date()), [])
})

t.test('deduction - the sweep catches up on a job that ended without its deduction (a crash between the two)', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const { jobId } = await printing(printer)
  await send(printer, 'job:finish', { result: 'success' })
  await deducted(jobId)
  await forgetDeduction(jobId, white)
  t.equal(await remaining(white), 1000)
  await waitFor(async () => (await ledger(white)).length === 1, 'the sweep deducts it', 30_000)
  t.match(await ledger(white), [{ delta_g: -11.66, job_id: jobId }])
  t.equal(await remaining(white), 988.34)
  t.not(await marker(jobId), null)
})

t.test('deduction - a failed job requeued while its deduction is still pending is charged for the run that ended, once', async (t) => {
  const printer = await printerWithSlots()
  const white = await loadSpool(printer, 2)
  const jobId = await failedHalfWay(t, printer)
  await forgetDeduction(jobId, white)
  const requeued = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'queued' } })
  t.equal(requeued.status, 200, requeued.text)
  t.equal(requeued.json.status, 'queued')
  t.match(await ledger(white), [{ delta_g: -5.83, job_id: jobId }], 'the failed run is charged by the requeue')
  t.equal(await remaining(white), 994.17)
  t.same(await deductFinishedJob(sql, farm.orgId, jobId, new Date()), [], 'and not again')
})

t.test('deduction - no attempt failed along the way', async (t) => {
  t.same(svc.logs.filter((l) => /inventory/.test(String(l['msg']))), [], 'no deduction or catch-up was logged as failed')
})
