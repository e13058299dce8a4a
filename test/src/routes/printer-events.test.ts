import t from 'tap'
import { createServer } from 'node:net'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch, postEvent, single } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const sql = svc.services.db.sql

const storedSeqns = async (printerId: string) =>
  (await sql<{ seqn: number }[]>`select seqn from printer_events where printer_id = ${printerId} order by assignment_epoch, seqn`).map((r) => r.seqn)
const stateOf = async (printerId: string) => (await sql`select * from printer_state where printer_id = ${printerId}`)[0]

t.test('printer events - a batch is stored, counted and answered only once committed', async (t) => {
  const printer = await addPrinter(farm)
  const res = await postBatch(farm, batch(printer, [item(0), item(1), item(2)]))
  t.equal(res.status, 200)
  t.same(res.json, {
    success: true,
    processed: 3,
    failed: 0,
    events: [0, 1, 2].map((seqn) => ({ eventId: `ev-${seqn}`, seqn, outcome: 'applied' })),
    refused: [],
    last_seqn: 2,
  })
  t.same(await storedSeqns(printer), [0, 1, 2], 'in the log when the answer arrives')
  t.match(await stateOf(printer), { high_water_seqn: 2, seqn_epoch: 1, online: true })
})

t.test('printer events - events apply in seqn order, whatever order the batch lists them in', async (t) => {
  const printer = await addPrinter(farm)
  const res = await postBatch(
    farm,
    batch(printer, [item(3, { type: 'job:finish' }), item(1, { type: 'job:start', data: { name: 'benchy.3mf' } }), item(2, { type: 'job:update', data: { progress: 40 } })]),
  )
  t.equal(res.status, 200)
  const jobs = await sql`select * from print_jobs where printer_id = ${printer}`
  t.equal(jobs.length, 1)
  t.match(jobs[0], { name: 'benchy.3mf', state: 'finished', progress: 100 }, 'finish came last, after start and update')
  const jobIds = await sql`select seqn, job_id from printer_events where printer_id = ${printer} order by seqn`
  t.same(jobIds.map((r) => r['job_id']), [jobs[0]!['id'], jobs[0]!['id'], jobs[0]!['id']], 'every job event is linked to its job')
})

t.test('printer events - a retried batch answers like the first delivery and stores nothing twice', async (t) => {
  const printer = await addPrinter(farm)
  const body = batch(printer, [item(10), item(11), item(12)], { batchId: 'b-1' })
  const first = await postBatch(farm, body)
  const retry = await postBatch(farm, { ...body, events: (body['events'] as Record<string, unknown>[]).map((e) => ({ ...e, deliveryAttempt: 2 })) })
  t.same(retry.json, { ...first.json, events: first.json.events.map((e: object) => ({ ...e, outcome: 'duplicate' })) }, 'the same counts; each event now a duplicate')
  t.same(await storedSeqns(printer), [10, 11, 12])
  const overlap = await postBatch(farm, batch(printer, [item(11), item(12), item(13)]))
  t.match(overlap.json, { success: true, processed: 3, failed: 0, refused: [], last_seqn: 13 })
  t.same(overlap.json.events.map((e: { outcome: string }) => e.outcome), ['duplicate', 'duplicate', 'applied'])
  t.same(await storedSeqns(printer), [10, 11, 12, 13], 'only the new event was added')
  const byKey = await postBatch(farm, batch(printer, [item(14, { idempotencyKey: 'k-14' })]))
  const sameKey = await postBatch(farm, batch(printer, [item(15, { eventId: 'other-id', idempotencyKey: 'k-14' })]))
  t.same([byKey.json.processed, sameKey.json.processed], [1, 1])
  t.same(await storedSeqns(printer), [10, 11, 12, 13, 14], 'a known idempotencyKey is a duplicate whatever its seqn')
})

t.test('printer events - a late event is stored but not applied; a reused seqn is refused for good; retries answer alike', async (t) => {
  const printer = await addPrinter(farm)
  await postBatch(farm, batch(printer, [item(1), item(5, { type: 'printer:statusUpdate', data: { status: 'RUNNING' } })]))
  const late = batch(printer, [item(3, { type: 'printer:statusUpdate', data: { status: 'IDLE' } }), item(5, { eventId: 'impostor' }), item(6)])
  const first = await postBatch(farm, late)
  t.equal(first.status, 200)
  const reason = 'seqn 5 already holds another event (a reused seqn is a bridge fault; not stored)'
  t.same(first.json, {
    success: true,
    processed: 2,
    failed: 1,
    events: [
      { eventId: 'ev-3', seqn: 3, outcome: 'late' },
      { eventId: 'impostor', seqn: 5, outcome: 'refused', reason: 'seqn_reused', message: reason },
      { eventId: 'ev-6', seqn: 6, outcome: 'applied' },
    ],
    refused: [{ eventId: 'impostor', seqn: 5, reason }],
    last_seqn: 6,
  })
  t.same(await storedSeqns(printer), [1, 3, 5, 6], 'the late event is in the log: a 200 means stored')
  t.match(await stateOf(printer), { high_water_seqn: 6, state: { rawStatus: 'RUNNING' } }, 'but the state did not go back to what it said')
  const again = await postBatch(farm, late)
  t.same(again.json.events.map((e: { outcome: string }) => e.outcome), ['duplicate', 'refused', 'duplicate'], 'a retry: stored ones are duplicates, the reused seqn is refused again')
  t.match(again.json, { processed: 2, failed: 1 })
  t.same(await storedSeqns(printer), [1, 3, 5, 6])
})

t.test('printer events - a job event the memory window forgot but the log holds is not applied twice', async (t) => {
  const printer = await addPrinter(farm)
  const start = await postEvent(farm, single(printer, 0, { type: 'job:start', eventId: 'job-start-1', data: { name: 'long print' } }))
  for (let b = 0; b < 3; b++) await postBatch(farm, batch(printer, Array.from({ length: 100 }, (_, i) => item(1 + b * 100 + i))))
  // Resent under a new seqn, long after: beyond the window of recent ids.
  const resent = await postEvent(farm, single(printer, 400, { type: 'job:start', eventId: 'job-start-1', data: { name: 'long print' } }))
  t.match(resent.json, { success: true, jobId: start.json.jobId, outcome: 'duplicate' }, 'answered with the job it was stored with')
  const jobs = await sql`select id, state from print_jobs where printer_id = ${printer}`
  t.same(jobs.map((j) => [j['id'], j['state']]), [[start.json.jobId, 'printing']], 'no second job, and the running one was not closed')
})

t.test('printer events - job events of two printers resent at once by idempotency key beyond the window: each found in the log, each with its own job', async (t) => {
  const printers = [await addPrinter(farm), await addPrinter(farm)]
  const starts = await Promise.all(
    printers.map((p, n) => postEvent(farm, single(p, 0, { type: 'job:start', eventId: `start-${n}`, idempotencyKey: `job-key-${n}`, data: { name: `part ${n}` } }))),
  )
  // Keyed events push the starts' keys out of the window of recent keys too.
  for (const p of printers) for (let b = 0; b < 3; b++) await postBatch(farm, batch(p, Array.from({ length: 100 }, (_, i) => item(1 + b * 100 + i, { idempotencyKey: `k-${1 + b * 100 + i}` }))))
  // The same starts under new event ids and seqns, both printers in the same moment: their look-ups in the log share a statement.
  const resent = await Promise.all(
    printers.map((p, n) => postEvent(farm, single(p, 400, { type: 'job:start', eventId: `start-again-${n}`, idempotencyKey: `job-key-${n}`, data: { name: `part ${n}` } }))),
  )
  for (const n of [0, 1]) {
    t.match(resent[n]!.json, { success: true, jobId: starts[n]!.json.jobId, outcome: 'duplicate' }, `printer ${n}: its own job, found by the key`)
    const jobs = await sql`select id, state from print_jobs where printer_id = ${printers[n]!}`
    t.same(
      jobs.map((j) => [j['id'], j['state']]),
      [[starts[n]!.json.jobId, 'printing']],
      `printer ${n}: no second job`,
    )
  }
})

t.test('printer events - a job event resent soon under a new event id with the same idempotency key answers with its job', async (t) => {
  const printer = await addPrinter(farm)
  const start = await postEvent(farm, single(printer, 0, { type: 'job:start', eventId: 'start-soon', idempotencyKey: 'job-key-soon', data: { name: 'part' } }))
  const resent = await postEvent(farm, single(printer, 1, { type: 'job:start', eventId: 'start-soon-again', idempotencyKey: 'job-key-soon', data: { name: 'part' } }))
  t.match(resent.json, { success: true, jobId: start.json.jobId, outcome: 'duplicate' }, 'known by its key from memory, its job from the log')
  const jobs = await sql`select id from print_jobs where printer_id = ${printer}`
  t.same(jobs.map((j) => j['id']), [start.json.jobId], 'no second job')
})

t.test('printer events - data nested too deeply is a 400 on both routes, not a broken flush', async (t) => {
  const printer = await addPrinter(farm)
  // 5,000 levels, written as text: deep enough to break a recursive serializer.
  const deep = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000)
  const withData = (json: string) => json.replace('"data":{"marker":1}', `"data":${deep}`)
  const body = withData(JSON.stringify(batch(printer, [item(0, { data: { marker: 1 } })])))
  const res = await request(farm.url, '/v1/printer-events/batch', { method: 'POST', headers: { ...farm.bridge, 'content-type': 'application/json' }, body })
  t.equal(res.status, 400)
  t.match(res.json, { code: 'validation_failed', message: /events\[0\]\.data nests deeper than 32/ })
  const one = await request(farm.url, '/v1/printer-events', { method: 'POST', headers: { ...farm.bridge, 'content-type': 'application/json' }, body: withData(JSON.stringify(single(printer, 0, { data: { marker: 1 } }))) })
  t.equal(one.status, 400)
  t.same(await storedSeqns(printer), [])
  const ok = await postBatch(farm, batch(printer, [item(0, { data: { a: { b: { c: 1 } } } })]))
  t.equal(ok.status, 200)
})

t.test('printer inputs - a NUL character in a host id or an unrepresentable heartbeat time is a 400, not a 500', async (t) => {
  const printer = await addPrinter(farm)
  const nul = await request(farm.url, `/v1/printers/${printer}/host-assignment`, { method: 'PUT', headers: farm.admin, body: { hostId: 'host\u0000x' } })
  t.equal(nul.status, 400)
  t.equal(nul.json.error, 'validation_failed')
  const leap = await request(farm.url, `/v1/printer-config/${printer}/connection-status`, { method: 'PATCH', headers: farm.bridge, body: { is_connected: true, last_heartbeat: '2016-12-31T23:59:60Z' } })
  t.equal(leap.status, 400)
  t.match(leap.json.message, /last_heartbeat/)
})

t.test('printer events - concurrent batches for one printer are serialized by its actor', async (t) => {
  const printer = await addPrinter(farm)
  const results = await Promise.all(Array.from({ length: 10 }, (_, b) => postBatch(farm, batch(printer, Array.from({ length: 10 }, (_, i) => item(b * 10 + i))))))
  t.same(results.map((r) => r.status), Array(10).fill(200))
  const seqns = await storedSeqns(printer)
  // A batch that arrives after a later one is below the mark: refused, never stored out of order.
  t.equal(seqns.length + results.reduce((n, r) => n + r.json.failed, 0), 100, 'every event stored or refused, none lost')
  t.same(seqns, [...seqns].sort((a, b) => a - b))
  t.equal((await stateOf(printer))!['high_water_seqn'], Math.max(...seqns))
})

t.test('printer events - the fence refuses other hosts and other epochs with specific codes', async (t) => {
  const unassigned = (await request(farm.url, '/v1/printer-config', { method: 'POST', headers: farm.admin, body: { name: 'no host', ip_address: 'h' } })).json.id
  const none = await postBatch(farm, batch(unassigned, [item(0)]))
  t.equal(none.status, 409)
  t.match(none.json, { code: 'printer_not_assigned', error: 'printer_not_assigned', message: /host-assignment/ })

  const printer = await addPrinter(farm, 'host-a')
  const moved = await request(farm.url, `/v1/printers/${printer}/host-assignment`, { method: 'PUT', headers: farm.admin, body: { hostId: 'host-b' } })
  t.same(moved.json, { printerId: printer, hostId: 'host-b', assignmentEpoch: 2 })
  const config = await request(farm.url, `/v1/printer-config?host_id=host-b&include_incomplete=true`, { headers: farm.bridge })
  t.match(config.json.printers.find((p: { id: string }) => p.id === printer), { host_id: 'host-b', assignment_epoch: 2 }, 'a bridge reads its epoch')

  const cases: [Record<string, unknown>, string][] = [
    [{ hostId: 'host-a', assignmentEpoch: 1 }, 'assignment_epoch_stale'],
    [{ hostId: 'host-b', assignmentEpoch: 1 }, 'assignment_epoch_stale'],
    [{ hostId: 'host-b', assignmentEpoch: 3 }, 'assignment_epoch_unknown'],
    [{ hostId: 'host-a', assignmentEpoch: 2 }, 'assignment_other_host'],
  ]
  for (const [fence, code] of cases) {
    const res = await postBatch(farm, batch(printer, [item(0, fence as never)]))
    t.equal(res.status, 409, `${JSON.stringify(fence)} → 409`)
    t.equal(res.json.code, code)
    const one = await postEvent(farm, single(printer, 0, fence as never))
    t.equal(one.json.code, code, 'the single route too')
  }
  t.same(await storedSeqns(printer), [], 'nothing stored by a refused host')
  const ok = await postBatch(farm, batch(printer, [item(0, { hostId: 'host-b', assignmentEpoch: 2 })]))
  t.equal(ok.status, 200, "the new host's first seqn is accepted: a new epoch starts a new sequence")
})

t.test('printer events - moving a printer whose old host already used high seqns lets the new host start at 0', async (t) => {
  const printer = await addPrinter(farm, 'host-a')
  await postBatch(farm, batch(printer, [item(500)]))
  await request(farm.url, `/v1/printers/${printer}/host-assignment`, { method: 'PUT', headers: farm.admin, body: { hostId: 'host-c' } })
  const res = await postBatch(farm, batch(printer, [item(0, { hostId: 'host-c', assignmentEpoch: 2, eventId: 'c-0' })]))
  t.match(res.json, { success: true, processed: 1, failed: 0, refused: [], events: [{ eventId: 'c-0', outcome: 'applied' }], last_seqn: 0 })
})

t.test('printer events - the single route names its printer, stores once, and returns the job id of job events', async (t) => {
  const printer = await addPrinter(farm)
  const start = await postEvent(farm, single(printer, 1, { type: 'job:start', data: { name: 'gear.3mf' } }))
  t.equal(start.status, 200)
  t.match(start.json, { success: true, jobId: Number, outcome: 'applied', last_seqn: 1 })
  const update = await postEvent(farm, { ...single(printer, 2, { type: 'job:update', data: { progress: 10, printerId: printer } }), printerId: undefined })
  t.match(update.json, { success: true, jobId: start.json.jobId }, 'data.printerId names the printer too')
  const other = await postEvent(farm, single(printer, 3))
  t.same(other.json, { success: true, jobId: null, message: 'stored and applied', outcome: 'applied', last_seqn: 3 })
  const again = await postEvent(farm, single(printer, 3, { deliveryAttempt: 2 }))
  t.same(again.json, { success: true, jobId: null, message: 'already stored (an earlier delivery); nothing changed', outcome: 'duplicate', last_seqn: 3 })
  const startAgain = await postEvent(farm, single(printer, 1, { type: 'job:start', data: { name: 'gear.3mf' }, deliveryAttempt: 2 }))
  t.match(startAgain.json, { success: true, jobId: start.json.jobId, outcome: 'duplicate' }, 'a retried job:start answers with the same job id')
  const nameless = await postEvent(farm, { ...single(printer, 4), printerId: undefined })
  t.equal(nameless.status, 400)
  t.match(nameless.json, { code: 'validation_failed', message: /printerId/ })
  t.same(await storedSeqns(printer), [1, 2, 3])
})

t.test('printer events - a printer id that names nothing answers 404 with a code', async (t) => {
  for (const id of ['not-a-uuid', '00000000-0000-4000-8000-000000000000']) {
    const res = await postBatch(farm, batch(id, [item(0)]))
    t.equal(res.status, 404)
    t.match(res.json, { code: 'printer_not_found', error: 'printer_not_found' })
  }
})

t.test('printer events - data the event log cannot hold is a 400 and stores nothing', async (t) => {
  const printer = await addPrinter(farm)
  const res = await request(farm.url, '/v1/printer-events/batch', {
    method: 'POST',
    headers: { ...farm.bridge, 'content-type': 'application/json' },
    body: JSON.stringify(batch(printer, [item(0), item(1, { data: { text: 'a\u0000b' } })])),
  })
  t.equal(res.status, 400)
  t.match(res.json, { code: 'validation_failed', message: /\\u0000/ })
  t.same(await storedSeqns(printer), [])
  const after = await postBatch(farm, batch(printer, [item(0)]))
  t.equal(after.status, 200, 'the actor was rebuilt from the store and goes on')
})

t.test('printer events - ids, keys, host and data holding tabs, line ends, backslashes, quotes and non-ASCII text come back from the log as sent', async (t) => {
  const host = 'rack\t7 \\ "north" ü'
  const printer = await addPrinter(farm, host)
  const tricky = 'tab\there\nline\r\nback\\slash \\N "quoted" ünïcödé 🖨️ \\.'
  const sent = [
    item(0, { hostId: host, eventId: `id\t${tricky}`, idempotencyKey: `key\n${tricky}`, data: { text: tricky, nested: { list: [tricky, 1.5, -0.25, 1e21, null, true] }, 'key\twith\\escapes': '' } }),
    item(1, { hostId: host, eventId: 'plain', data: {} }),
  ]
  const res = await postBatch(farm, batch(printer, sent))
  t.match(res.json, { success: true, processed: 2, failed: 0 })
  const history = await request(farm.url, `/v1/printers/${printer}/events`, { headers: farm.bridge })
  t.same(
    history.json.events.map((e: Record<string, unknown>) => [e['eventId'], e['data']]),
    sent.map((e) => [e['eventId'], e['data']]),
    'the history shows them as sent',
  )
  const rows = await sql`select event_id, idempotency_key, host_id, payload::text as payload from printer_events where printer_id = ${printer} order by seqn`
  t.same(
    rows.map((r) => [r['event_id'], r['idempotency_key'], r['host_id'], JSON.parse(r['payload'])]),
    sent.map((e) => [e['eventId'], e['idempotencyKey'] ?? null, host, e['data']]),
    'the log holds them as sent',
  )
  const again = await postBatch(farm, batch(printer, [{ ...sent[0]!, deliveryAttempt: 2 }]))
  t.match(again.json, { success: true, events: [{ outcome: 'duplicate' }] }, 'the stored id is the id a retry carries')
})

t.test('printer events - a NUL character in an event id is a 400 that stores nothing, and the printer goes on', async (t) => {
  const printer = await addPrinter(farm)
  const res = await postBatch(farm, batch(printer, [item(0), item(1, { eventId: 'ev-\u0000-1' })]))
  t.equal(res.status, 400)
  t.match(res.json, { code: 'validation_failed', message: /\\u0000/ })
  t.same(await storedSeqns(printer), [])
  const after = await postBatch(farm, batch(printer, [item(0), item(1)]))
  t.match(after.json, { success: true, processed: 2 })
  t.same(await storedSeqns(printer), [0, 1])
})

t.test('printer presence - events mark a printer online, client:disconnect and connection reports mark it offline at once', async (t) => {
  const printer = await addPrinter(farm)
  await postBatch(farm, batch(printer, [item(0, { type: 'heartbeat' })]))
  t.equal((await stateOf(printer))!['online'], true)
  await postBatch(farm, batch(printer, [item(1, { type: 'client:disconnect' })]))
  t.equal((await stateOf(printer))!['online'], false)
  const up = await request(farm.url, `/v1/printer-config/${printer}/connection-status`, { method: 'PATCH', headers: farm.bridge, body: { is_connected: true, last_heartbeat: new Date().toISOString(), status: 'IDLE', hostId: 'host-a', assignmentEpoch: 1 } })
  t.same(up.json, { success: true })
  t.match(await stateOf(printer), { online: true, state: { rawStatus: 'IDLE' } })
  await request(farm.url, `/v1/printer-config/${printer}/connection-status`, { method: 'PATCH', headers: farm.bridge, body: { is_connected: false, last_heartbeat: new Date().toISOString() } })
  t.equal((await stateOf(printer))!['online'], false)
  const bad = await request(farm.url, `/v1/printer-config/${printer}/connection-status`, { method: 'PATCH', headers: farm.bridge, body: { is_connected: 'yes', last_heartbeat: 'yesterday' } })
  t.equal(bad.status, 400)
})

t.test('printer maintenance - refused with {job, reason, message} while a job prints, allowed once it ends', async (t) => {
  const printer = await addPrinter(farm)
  const path = `/v1/printers/${printer}/maintenance`
  await postBatch(farm, batch(printer, [item(0, { type: 'job:start', data: { name: 'vase' } })]))
  const busy = await request(farm.url, path, { method: 'PATCH', headers: farm.admin, body: { maintenance: true } })
  t.equal(busy.status, 409)
  t.match(busy.json, { job: { jobId: Number, state: 'printing', name: 'vase' }, reason: 'job_printing', message: /printing/ })
  await postBatch(farm, batch(printer, [item(1, { type: 'job:finish' })]))
  const ok = await request(farm.url, path, { method: 'PATCH', headers: farm.admin, body: { maintenance: true, organizationId: farm.orgId } })
  t.same(ok.json, { success: true, message: 'maintenance on' })
  t.match(await stateOf(printer), { state: { maintenance: true } })
  const wrongOrg = await request(farm.url, path, { method: 'PATCH', headers: farm.admin, body: { maintenance: false, organizationId: 'another-org' } })
  t.equal(wrongOrg.status, 400)
  const missing = await request(farm.url, path, { method: 'PATCH', headers: farm.admin, body: {} })
  t.equal(missing.status, 400)
})

t.test('printer filaments - slots are kept on the printer and validated', async (t) => {
  const printer = await addPrinter(farm)
  const path = `/v1/printers/${printer}/filaments/assign`
  const material = (await request(farm.url, '/v1/materials', { method: 'POST', headers: farm.admin, body: { name: 'Black PLA', type: 'PLA', color_hex: '#000000' } })).json.id as string
  const model = await createModel(farm.url, farm.admin)
  const file = (await upload(farm.url, farm.admin, model, { name: 'plate.gcode.3mf', bytes: bambuThreeMf() })).json as { id: string }
  const jobId = (await request(farm.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'loaded for', model_file_id: file.id } })).json.id as number
  const res = await request(farm.url, path, { method: 'POST', headers: farm.bridge, body: { slots: [{ position: 0, materialId: material, materialType: 'PLA', color: '#000000', vendor: 'Acme' }], jobId: Number(jobId) } })
  t.equal(res.status, 200, res.text)
  t.match(res.json, { success: true, jobId: Number(jobId), slots: [{ position: 0, materialId: material, materialType: 'PLA', vendor: 'Acme' }] })
  t.match(await stateOf(printer), { state: { ams: [{ position: 0, materialId: material }], filamentJobId: Number(jobId) } })
  for (const [what, body, code] of [
    ['a materialId that is not a uuid', { slots: [{ position: 0, materialId: 'm-1' }] }, 400],
    ['an unknown material', { slots: [{ position: 0, materialId: '00000000-0000-4000-8000-000000000000' }] }, 404],
    ['an unknown job', { slots: [{ position: 0 }], jobId: 999_999 }, 404],
  ] as const) {
    t.equal((await request(farm.url, path, { method: 'POST', headers: farm.bridge, body })).status, code, what)
  }
  for (const body of [{ slots: [] }, { slots: [{ position: 1.5 }] }, { slots: [{ position: 64 }] }, { slots: [{ position: 1 }, { position: 1 }] }, { slots: [{ position: 1, extra: true }] }, {}]) {
    const bad = await request(farm.url, path, { method: 'POST', headers: farm.bridge, body })
    t.equal(bad.status, 400, JSON.stringify(body))
  }
})

t.test('printer test-connection - a real, bounded TCP check of the printer address and port', async (t) => {
  const listener = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
  t.teardown(() => listener.close())
  const port = (listener.address() as { port: number }).port
  const open = await addPrinter(farm, 'host-a', { port })
  const ok = await request(farm.url, `/v1/printer-config/${open}/test-connection`, { method: 'POST', headers: farm.admin })
  t.match(ok.json, { success: true, host: '127.0.0.1', port })
  listener.close()
  await new Promise((r) => setTimeout(r, 20))
  const refused = await request(farm.url, `/v1/printer-config/${open}/test-connection`, { method: 'POST', headers: farm.admin })
  t.match(refused.json, { success: false, error: /refused/ })
  const unresolvable = await addPrinter(farm, 'host-a', { ip_address: 'printer.invalid', port: 80 })
  const bad = await request(farm.url, `/v1/printer-config/${unresolvable}/test-connection`, { method: 'POST', headers: farm.admin })
  t.match(bad.json, { success: false, error: String })
})
