/**
 * What a farm reads back, over real HTTP: the printer state read model
 * (GET /v1/printers, /v1/printers/{id}), the honest batch answer (per-event
 * outcomes, last_seqn), truthful status words, the error acknowledgement,
 * the event history with its cursor, deleting a printer, and the /metrics
 * gauges.
 */
import t from 'tap'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch, postEvent, single, type Farm } from '../../helpers/bridge.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)

const get = async (printer: string) => {
  const res = await request(svc.url, `/v1/printers/${printer}`, { headers: farm.bridge })
  if (res.status !== 200) throw new Error(`GET printer: ${res.status} ${res.text}`)
  return res.json.printer
}

async function post(f: Farm, printer: string, items: Record<string, unknown>[]) {
  const res = await postBatch(f, batch(printer, items))
  if (res.status !== 200) throw new Error(`batch: ${res.status} ${res.text}`)
  return res.json
}

t.test('read model - a new printer reads back UNKNOWN with every field, before any event', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { name: 'Fresh', printer_type: 'klipper', model: 'Voron 2.4' })
  const state = await get(printer)
  t.same(Object.keys(state).sort(), [
    'assignment_epoch', 'error', 'filaments', 'host_id', 'id', 'job', 'last_seen_at', 'last_seqn', 'maintenance', 'model', 'name', 'online',
    'printer_type', 'raw_status', 'ready', 'ready_gate', 'status', 'temperatures', 'updated_at',
  ])
  t.match(state, { id: printer, name: 'Fresh', printer_type: 'klipper', model: 'Voron 2.4', host_id: 'host-a', assignment_epoch: 1, last_seqn: null, online: false, status: 'UNKNOWN', ready: true, ready_gate: 'open', job: null, error: null })
  t.same(state.temperatures, { nozzle: { actual: null, target: null }, bed: { actual: null, target: null }, chamber: { actual: null, target: null } })
})

t.test('read model - a status report with temperatures, progress and layers reads back on the printer', async (t) => {
  const printer = await addPrinter(farm)
  await post(farm, printer, [
    item(0, {
      type: 'printer:statusUpdate',
      timestamp: 1_700_000_000_000,
      data: { status: 'printing', temperatures: { nozzle: { actual: 215.3, target: 220 }, bed: { actual: 59.8, target: 60 } }, progress: 37, remaining_seconds: 1820, layer: 42, total_layers: 180, file_name: 'bracket.3mf' },
    }),
    item(1, { type: 'printer:amsUpdate', data: { slots: [{ position: 0, materialType: 'PLA', color: 'FF0000FF', remaining: 80 }, { position: 1, materialType: 'PETG', color: 'not a colour' }] } }),
  ])
  const state = await get(printer)
  t.match(state, { status: 'RUNNING', raw_status: 'printing', online: true, ready: true, ready_gate: 'open', last_seqn: 1, last_seen_at: '2023-11-14T22:13:20.001Z' })
  t.match(state.job, { id: Number, name: 'bracket.3mf', state: 'printing', progress: 37, remaining_seconds: 1820, layer: 42, total_layers: 180, ended_at: null })
  t.same(state.temperatures, { nozzle: { actual: 215.3, target: 220 }, bed: { actual: 59.8, target: 60 }, chamber: { actual: null, target: null } })
  t.same(state.filaments, [
    { slot: 0, type: 'PLA', color_hex: '#FF0000', remaining_percent: 80, material_id: null },
    { slot: 1, type: 'PETG', color_hex: null, remaining_percent: null, material_id: null },
  ])
  // A delta changes only what it carries.
  await post(farm, printer, [item(2, { type: 'printer:deltaUpdate', data: { temperatures: { nozzle: { actual: 219.9 } }, progress: 38 } })])
  const after = await get(printer)
  t.same(after.temperatures.nozzle, { actual: 219.9, target: 220 }, 'the target stays')
  t.equal(after.temperatures.bed.actual, 59.8)
  t.equal(after.job.progress, 38)
  t.equal(after.job.id, state.job.id, 'the same job')
  const jobs = await svc.services.db.sql`select id, state, name from print_jobs where printer_id = ${printer}`
  t.same(jobs.map((j) => [Number(j['id']), j['state'], j['name']]), [[state.job.id, 'printing', 'bracket.3mf']], 'the report opened one job, stored')
})

t.test('status words - an Error word reads as ERROR (the gate stays as it was), and a healthy report clears the error', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { printer_type: 'octoprint' })
  await post(farm, printer, [item(0, { type: 'printer:statusUpdate', data: { status: 'Operational' } })])
  t.match(await get(printer), { status: 'WAITING', ready: true, raw_status: 'Operational' })
  await post(farm, printer, [item(1, { type: 'printer:statusUpdate', data: { status: 'Error' } })])
  const failed = await get(printer)
  t.match(failed, { status: 'ERROR', ready: true, ready_gate: 'open', raw_status: 'Error', error: { code: String, message: 'Error' } }, 'no job ended: the gate is open; the status keeps the queue away')
  await post(farm, printer, [item(2, { type: 'heartbeat', data: {} })])
  t.match(await get(printer), { status: 'ERROR' }, 'a heartbeat is no healthy report: the error stands')
  await post(farm, printer, [item(3, { type: 'printer:statusUpdate', data: { status: 'Operational' } })])
  t.match(await get(printer), { status: 'WAITING', ready: true, error: null }, 'healthy again: cleared without a new job')
})

t.test('status words - every failure word of every printer type is ERROR', async (t) => {
  const words = ['Error', 'Offline after error', 'FAILED', 'error', 'ERROR', 'ATTENTION']
  for (const type of ['bambu', 'octoprint', 'klipper', 'prusa_connect', 'snapmaker', 'flashforge']) {
    const printer = await addPrinter(farm, 'host-a', { printer_type: type })
    for (const [i, word] of words.entries()) {
      await post(farm, printer, [item(2 * i, { type: 'printer:statusUpdate', data: { status: 'idle' } }), item(2 * i + 1, { type: 'status', data: { status: word } })])
      const state = await get(printer)
      t.equal(state.status, 'ERROR', `${type} "${word}"`)
      t.equal(state.status, 'ERROR', `${type} "${word}" is never a status that takes a job`)
    }
  }
})

t.test('errors - an acknowledgement clears the error; the same word repeated does not raise it again, another error does', async (t) => {
  const printer = await addPrinter(farm)
  await post(farm, printer, [item(0, { type: 'printer:statusUpdate', data: { status: 'FAILED', error: { code: '0300_400C', message: 'nozzle clog' } } })])
  t.match(await get(printer), { status: 'ERROR', error: { code: '0300_400C', message: 'nozzle clog' } })
  const ack = await request(svc.url, `/v1/printers/${printer}/error/acknowledge`, { method: 'POST', headers: farm.bridge, body: { note: 'cleared the nozzle' } })
  t.equal(ack.status, 200)
  t.match(ack.json, { success: true, acknowledged: { code: '0300_400C', message: 'nozzle clog' }, printer: { id: printer, error: null } })
  t.not(ack.json.printer.status, 'ERROR')
  await post(farm, printer, [item(1, { type: 'printer:statusUpdate', data: { status: 'FAILED', error: { code: '0300_400C', message: 'nozzle clog' } } })])
  t.equal((await get(printer)).error, null, 'the printer repeating the acknowledged failure does not raise it again')
  await post(farm, printer, [item(2, { type: 'printer:error', data: { code: 'HMS_0700_2000_0002_0001', message: 'AMS slot 1 runout' } })])
  t.match(await get(printer), { status: 'ERROR', error: { code: 'HMS_0700_2000_0002_0001' } }, 'another error is raised')
  const empty = await request(svc.url, `/v1/printers/${printer}/error/acknowledge`, { method: 'POST', headers: farm.admin })
  t.equal(empty.status, 200, 'no body is fine')
  const again = await request(svc.url, `/v1/printers/${printer}/error/acknowledge`, { method: 'POST', headers: farm.admin, body: {} })
  t.match(again.json, { success: true, acknowledged: null }, 'nothing left to acknowledge')
  const bad = await request(svc.url, `/v1/printers/${printer}/error/acknowledge`, { method: 'POST', headers: farm.admin, body: { note: 'x'.repeat(501) } })
  t.equal(bad.status, 400)
})

t.test('batch answers - every event has its outcome; late events are stored, not applied; last_seqn is the highest applied', async (t) => {
  const printer = await addPrinter(farm)
  const first = await post(farm, printer, [item(5, { type: 'printer:statusUpdate', data: { status: 'RUNNING' } }), item(7, { type: 'printer:statusUpdate', data: { status: 'PAUSE' } })])
  t.same(first.events, [
    { eventId: 'ev-5', seqn: 5, outcome: 'applied' },
    { eventId: 'ev-7', seqn: 7, outcome: 'applied' },
  ])
  t.match(first, { processed: 2, failed: 0, last_seqn: 7 })

  // seqn 6 arrives after 7: late. seqn 7 again with its eventId: duplicate. seqn 5 with a new id: reused.
  const second = await post(farm, printer, [
    item(6, { type: 'printer:statusUpdate', data: { status: 'RUNNING' } }),
    item(7, { type: 'printer:statusUpdate', data: { status: 'PAUSE' } }),
    item(5, { eventId: 'other-5', type: 'printer:statusUpdate', data: { status: 'FINISH' } }),
    item(8, { type: 'heartbeat', data: {} }),
  ])
  t.equal(second.events.length, 4)
  t.same(second.events[0], { eventId: 'ev-6', seqn: 6, outcome: 'late' })
  t.same(second.events[1], { eventId: 'ev-7', seqn: 7, outcome: 'duplicate' })
  t.match(second.events[2], { eventId: 'other-5', seqn: 5, outcome: 'refused', reason: 'seqn_reused', message: /seqn 5 already holds another event/ })
  t.same(second.events[3], { eventId: 'ev-8', seqn: 8, outcome: 'applied' })
  t.match(second, { success: true, processed: 3, failed: 1, last_seqn: 8, refused: [{ eventId: 'other-5', seqn: 5 }] })
  const state = await get(printer)
  t.equal(state.raw_status, 'PAUSE', 'the late RUNNING was not applied')
  t.equal(state.status, 'PAUSED')
  t.equal(state.last_seqn, 8)

  const history = await request(svc.url, `/v1/printers/${printer}/events`, { headers: farm.bridge })
  t.same(history.json.events.map((e: { seqn: number; applied: boolean; eventId: string }) => [e.seqn, e.eventId, e.applied]), [
    [5, 'ev-5', true],
    [6, 'ev-6', false],
    [7, 'ev-7', true],
    [8, 'ev-8', true],
  ], 'the late event is in the history, marked not applied; the refused one is not stored')

  const lateSingle = await postEvent(farm, single(printer, 4, { eventId: 'single-4', type: 'heartbeat', data: {} }))
  t.match(lateSingle.json, { success: true, outcome: 'late', last_seqn: 8 })
  const reusedSingle = await postEvent(farm, single(printer, 4, { eventId: 'single-4b', type: 'heartbeat', data: {} }))
  t.match(reusedSingle.json, { success: false, outcome: 'refused', reason: 'seqn_reused', last_seqn: 8 })
  const dupSingle = await postEvent(farm, single(printer, 8, { type: 'heartbeat', data: {} }))
  t.match(dupSingle.json, { success: true, outcome: 'duplicate' })
})

t.test('history - pages follow the cursor without repeats or gaps; the type filter; bad cursors and limits are 400', async (t) => {
  const printer = await addPrinter(farm)
  const items = Array.from({ length: 23 }, (_, i) => item(i, { type: i % 5 === 0 ? 'printer:error' : 'heartbeat', data: i % 5 === 0 ? { code: `E${i}` } : {} }))
  await post(farm, printer, items)
  const seen: number[] = []
  let after: string | null = null
  let pages = 0
  do {
    const res = await request(svc.url, `/v1/printers/${printer}/events?limit=5${after === null ? '' : `&after=${after}`}`, { headers: farm.bridge })
    t.equal(res.status, 200)
    t.ok(res.json.events.length <= 5)
    seen.push(...res.json.events.map((e: { seqn: number }) => e.seqn))
    after = res.json.next_cursor
    pages++
  } while (after !== null && pages < 20)
  t.same(seen, Array.from({ length: 23 }, (_, i) => i), 'every event once, in order')
  t.equal(pages, 5)
  const first = (await request(svc.url, `/v1/printers/${printer}/events?limit=1`, { headers: farm.bridge })).json.events[0]
  t.match(first, { eventId: 'ev-0', type: 'printer:error', seqn: 0, assignmentEpoch: 1, timestamp: 1_700_000_000_000, received_at: String, data: { code: 'E0' }, applied: true, jobId: null })
  const errors = await request(svc.url, `/v1/printers/${printer}/events?type=printer:error`, { headers: farm.bridge })
  t.same(errors.json.events.map((e: { seqn: number }) => e.seqn), [0, 5, 10, 15, 20])
  t.equal(errors.json.next_cursor, null)
  for (const query of ['limit=0', 'limit=201', 'limit=abc', 'type=printer:nope', 'after=%%%', 'after=bm9wZQ', 'after=', 'unknown=1']) {
    const res = await request(svc.url, `/v1/printers/${printer}/events?${query}`, { headers: farm.bridge })
    t.equal(res.status, 400, query)
    t.equal(res.json.error, 'validation_failed', query)
  }
})

t.test('list - filters by status, host, online and search; total counts all matches; bad values are 400', async (t) => {
  const other = await openFarm(svc.url)
  const org = await request(svc.url, '/v1/organizations', { method: 'POST', headers: farm.admin, body: { name: 'List farm' } })
  const f: Farm = { ...other, orgId: org.json.id, admin: { ...farm.admin, 'x-organization-id': org.json.id } }
  const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: f.admin, body: { name: 'list bridge', scopes: ['printers:read', 'printers:write'] } })
  f.bridge = { 'x-api-key': key.json.key }
  const printing = await addPrinter(f, 'host-a', { name: 'Bay 01', serial_number: 'SN-LIST-01' })
  const waiting = await addPrinter(f, 'host-a', { name: 'Bay 02' })
  const silent = await addPrinter(f, 'host-b', { name: 'Bay 03' })
  await post(f, printing, [item(0, { type: 'printer:statusUpdate', data: { status: 'RUNNING' } })])
  await post(f, waiting, [item(0, { type: 'printer:statusUpdate', data: { status: 'IDLE' } })])
  const list = async (query: string) => {
    const res = await request(svc.url, `/v1/printers${query}`, { headers: f.bridge })
    t.equal(res.status, 200, query)
    return res.json
  }
  const all = await list('')
  t.same(all.printers.map((p: { id: string }) => p.id), [printing, waiting, silent], 'sorted by name')
  t.match(all, { total: 3, limit: 100, offset: 0 })
  t.same((await list('?status=RUNNING')).printers.map((p: { id: string }) => p.id), [printing])
  t.same((await list('?status=WAITING,UNKNOWN')).printers.map((p: { id: string }) => p.id), [waiting, silent])
  t.same((await list('?host_id=host-b')).printers.map((p: { id: string }) => p.id), [silent])
  t.same((await list('?online=true')).printers.map((p: { id: string }) => p.id), [printing, waiting])
  t.same((await list('?online=false')).printers.map((p: { id: string }) => p.id), [silent])
  t.same((await list('?search=bay%2003')).printers.map((p: { id: string }) => p.id), [silent], 'by name, case-insensitive')
  t.same((await list('?search=SN-LIST')).printers.map((p: { id: string }) => p.id), [printing], 'by serial number')
  t.same((await list('?search=%25')).printers, [], 'a % is a character, not a wildcard')
  const page = await list('?limit=1&offset=1')
  t.same(page.printers.map((p: { id: string }) => p.id), [waiting])
  t.match(page, { total: 3, limit: 1, offset: 1 })
  const statusPage = await list('?status=WAITING,UNKNOWN,RUNNING&limit=2&offset=1')
  t.same(statusPage.printers.map((p: { id: string }) => p.id), [waiting, silent])
  t.equal(statusPage.total, 3)
  for (const query of ['status=READY', 'status=RUNNING,', 'status=running', 'online=yes', 'limit=0', 'limit=201', 'offset=-1', 'limit=1.5', 'search=', 'host_id=', 'colour=red']) {
    const res = await request(svc.url, `/v1/printers?${query}`, { headers: f.bridge })
    t.equal(res.status, 400, query)
    t.equal(res.json.error, 'validation_failed', query)
  }
  t.equal((await request(svc.url, '/v1/printers/not-a-uuid', { headers: f.bridge })).status, 400)
  t.equal((await request(svc.url, '/v1/printers/00000000-0000-4000-8000-000000000000', { headers: f.bridge })).json.error, 'printer_not_found')
})

t.test('delete - refused while printing; afterwards the printer is gone from every read', async (t) => {
  const printer = await addPrinter(farm)
  await post(farm, printer, [item(0, { type: 'job:start', data: { name: 'long.3mf' } })])
  const busy = await request(svc.url, `/v1/printer-config/${printer}`, { method: 'DELETE', headers: farm.admin })
  t.equal(busy.status, 409)
  t.match(busy.json, { error: 'printer_busy', reason: 'job_printing', job: { state: 'printing' } })
  t.equal((await request(svc.url, `/v1/printer-config/${printer}`, { method: 'DELETE', headers: farm.bridge })).status, 403, 'a bridge key without fleet:write may not')
  await post(farm, printer, [item(1, { type: 'job:finish', data: {} })])
  const gone = await request(svc.url, `/v1/printer-config/${printer}`, { method: 'DELETE', headers: farm.admin })
  t.same(gone.json, { success: true })
  t.equal((await request(svc.url, `/v1/printers/${printer}`, { headers: farm.bridge })).status, 404)
  t.equal((await request(svc.url, `/v1/printers/${printer}/events`, { headers: farm.bridge })).status, 404)
  t.notOk((await request(svc.url, '/v1/printers', { headers: farm.bridge })).json.printers.some((p: { id: string }) => p.id === printer))
  const late = await postBatch(farm, batch(printer, [item(2)]))
  t.equal(late.status, 404, "its bridge's next batch is refused")
  t.equal(late.json.code, 'printer_not_found')
  const jobs = await svc.services.db.sql`select printer_id, state from print_jobs where name = 'long.3mf'`
  t.match(jobs, [{ printer_id: null, state: 'finished' }], 'the job keeps its history')
})

t.test('metrics - printers by status and online are gauges', async (t) => {
  const text = (await request(svc.url, '/metrics')).text
  for (const status of ['FILAMENT_RUNOUT', 'ERROR', 'COMPLETE', 'OFFLINE', 'PAUSED', 'RUNNING', 'WAITING', 'IDLE', 'UNKNOWN']) {
    t.match(text, new RegExp(`^printers_by_status\\{status="${status}"\\} \\d+$`, 'm'), status)
  }
  const running = Number(/^printers_by_status\{status="RUNNING"\} (\d+)$/m.exec(text)?.[1])
  const listed = await request(svc.url, '/v1/printers?status=RUNNING&limit=1', { headers: farm.bridge })
  t.ok(running >= listed.json.total, 'counts every organization')
  t.ok(running >= 1)
  t.match(text, /^printers_online \d+$/m)
  t.match(text, /# TYPE printers_by_status gauge/)
})
