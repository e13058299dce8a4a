/**
 * A bridge may forward a printer's own report unchanged: over real HTTP,
 * the native messages of Bambu (MQTT `print` report), OctoPrint (push
 * `current`), Klipper (Moonraker `notify_status_update`) and PrusaLink
 * (status body) turn into the right status, progress, layers and
 * temperatures on the printer's read model.
 */
import t from 'tap'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)

async function report(printer: string, seqn: number, data: Record<string, unknown>, type = 'printer:statusUpdate') {
  // Stamped now: COMPLETE lasts ten minutes after the bridge's time of the finish.
  const res = await postBatch(farm, batch(printer, [item(seqn, { type, data, timestamp: Date.now() })]))
  if (res.status !== 200) throw new Error(`batch: ${res.status} ${res.text}`)
  return (await request(svc.url, `/v1/printers/${printer}`, { headers: farm.bridge })).json.printer
}

t.test('native reports - bambu: the MQTT print report (minutes left, AMS trays, a failure)', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { printer_type: 'bambu' })
  const running = await report(printer, 0, {
    print: {
      command: 'push_status',
      sequence_id: '2001',
      gcode_state: 'RUNNING',
      mc_percent: 45,
      mc_remaining_time: 32,
      layer_num: 88,
      total_layer_num: 240,
      nozzle_temper: 219.8,
      nozzle_target_temper: 220,
      bed_temper: 55.1,
      bed_target_temper: 55,
      chamber_temper: 31,
      subtask_name: 'gear_housing',
      gcode_file: '/data/Metadata/plate_1.gcode',
      print_error: 0,
      hms: [],
      ams: { ams: [{ id: '0', humidity: '4', temp: '24.1', tray: [{ id: '0', tray_type: 'PLA', tray_color: '00AE42FF', remain: 76 }, { id: '1', tray_type: 'PETG', tray_color: 'FFFFFFFF', remain: -1 }] }] },
    },
  })
  t.match(running, { status: 'RUNNING', raw_status: 'RUNNING', ready: true, ready_gate: 'open', error: null })
  t.match(running.job, { state: 'printing', progress: 45, remaining_seconds: 1920, layer: 88, total_layers: 240 })
  t.ok(running.job.name, 'the job is named from the report')
  t.match(running.temperatures, { nozzle: { actual: 219.8, target: 220 }, bed: { actual: 55.1, target: 55 }, chamber: { actual: 31 } })
  t.match(running.filaments, [
    { slot: 0, type: 'PLA', color_hex: '#00AE42', remaining_percent: 76 },
    { slot: 1, type: 'PETG', color_hex: '#FFFFFF', remaining_percent: null },
  ])
  const delta = await report(printer, 1, { print: { command: 'push_status', mc_percent: 46, nozzle_temper: 220.1 } }, 'printer:deltaUpdate')
  t.match(delta, { status: 'RUNNING', job: { progress: 46, layer: 88 }, temperatures: { nozzle: { actual: 220.1, target: 220 } } }, 'a delta merges into the last state')
  const paused = await report(printer, 2, { print: { gcode_state: 'PAUSE' } }, 'printer:deltaUpdate')
  t.equal(paused.status, 'PAUSED')
  const failed = await report(printer, 3, { print: { gcode_state: 'FAILED', print_error: 117473283 } })
  t.match(failed, { status: 'ERROR', ready: false, raw_status: 'FAILED', error: { code: '0700_8003', message: 'Bambu print error 0700_8003 while FAILED', at: String } })
  t.match(failed.job, { state: 'failed', ended_at: String })
  const idle = await report(printer, 4, { print: { gcode_state: 'IDLE', print_error: 0 } })
  // Waiting again, but the failed plate waits for an operator's look before the next job (the ready gate).
  t.match(idle, { status: 'WAITING', ready: false, ready_gate: 'awaiting_verification', error: null })
})

t.test('native reports - octoprint: the push message current (Printing, Offline after error)', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { printer_type: 'octoprint' })
  const printing = await report(printer, 0, {
    current: {
      state: { text: 'Printing', flags: { operational: true, printing: true, paused: false, pausing: false, cancelling: false, error: false, ready: false, closedOrError: false } },
      job: { file: { name: 'benchy.gcode', display: 'benchy.gcode', path: 'benchy.gcode', origin: 'local' }, estimatedPrintTime: 3600 },
      progress: { completion: 12.5, filepos: 123456, printTime: 450, printTimeLeft: 3150 },
      temps: [
        { time: 1700000000, tool0: { actual: 205.1, target: 210 }, bed: { actual: 58, target: 60 } },
        { time: 1700000005, tool0: { actual: 209.9, target: 210 }, bed: { actual: 60.1, target: 60 } },
      ],
      logs: [],
      messages: [],
    },
  })
  t.match(printing, { status: 'RUNNING', raw_status: 'Printing' })
  t.match(printing.job, { name: 'benchy.gcode', progress: 12.5, remaining_seconds: 3150 })
  t.match(printing.temperatures, { nozzle: { actual: 209.9, target: 210 }, bed: { actual: 60.1, target: 60 } }, 'the newest temperature entry')
  const broken = await report(printer, 1, {
    current: { state: { text: 'Offline after error', flags: { operational: false, printing: false, error: true, closedOrError: true }, error: 'SerialException: device reports readiness to read but returned no data' } },
  })
  t.match(broken, { status: 'ERROR', ready: false, raw_status: 'Offline after error', error: { code: String } })
  t.match(broken.error.message, /no data|Offline after error/)
  const operational = await report(printer, 2, { current: { state: { text: 'Operational', flags: { operational: true, ready: true, error: false } } } })
  t.match(operational, { status: 'WAITING', error: null })
})

t.test('native reports - klipper: Moonraker notify_status_update, whole and partial', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { printer_type: 'klipper' })
  const printing = await report(printer, 0, {
    jsonrpc: '2.0',
    method: 'notify_status_update',
    params: [
      {
        print_stats: { state: 'printing', filename: 'voron_cube.gcode', print_duration: 600, total_duration: 640, message: '', info: { current_layer: 12, total_layer: 100 } },
        extruder: { temperature: 244.7, target: 245 },
        heater_bed: { temperature: 99.5, target: 100 },
        display_status: { progress: 0.25, message: null },
        virtual_sdcard: { progress: 0.24, is_active: true },
      },
      12345.6,
    ],
  })
  t.match(printing, { status: 'RUNNING', raw_status: 'printing' })
  t.match(printing.job, { name: 'voron_cube.gcode', progress: 25, layer: 12, total_layers: 100 })
  t.ok(printing.job.remaining_seconds > 0, 'time left estimated from the print duration and progress')
  t.match(printing.temperatures, { nozzle: { actual: 244.7, target: 245 }, bed: { actual: 99.5, target: 100 } })
  const partial = await report(printer, 1, { jsonrpc: '2.0', method: 'notify_status_update', params: [{ extruder: { temperature: 245.1 } }, 12346.1] }, 'printer:deltaUpdate')
  t.match(partial, { status: 'RUNNING', temperatures: { nozzle: { actual: 245.1, target: 245 }, bed: { actual: 99.5 } }, job: { progress: 25 } }, 'only what changed')
  const error = await report(printer, 2, { print_stats: { state: 'error', message: 'Move out of range: 0.000 0.000 -5.000 [0.000]' } }, 'printer:deltaUpdate')
  t.match(error, { status: 'ERROR', error: { message: /Move out of range/ } })
  const standby = await report(printer, 3, { print_stats: { state: 'standby', message: '' } }, 'printer:deltaUpdate')
  t.match(standby, { status: 'WAITING', error: null })
})

t.test('native reports - prusa_connect: the PrusaLink status body (PRINTING, ATTENTION, FINISHED)', async (t) => {
  const printer = await addPrinter(farm, 'host-a', { printer_type: 'prusa_connect' })
  const printing = await report(printer, 0, {
    storage: { path: '/usb/', name: 'usb', read_only: false },
    printer: { state: 'PRINTING', temp_nozzle: 214.7, target_nozzle: 215, temp_bed: 59.9, target_bed: 60, axis_z: 2.4, flow: 100, speed: 100, fan_hotend: 5000, fan_print: 3000 },
    job: { id: 42, progress: 63, time_remaining: 1200, time_printing: 2040 },
  })
  t.match(printing, { status: 'RUNNING', raw_status: 'PRINTING' })
  t.match(printing.job, { progress: 63, remaining_seconds: 1200 })
  t.match(printing.temperatures, { nozzle: { actual: 214.7, target: 215 }, bed: { actual: 59.9, target: 60 } })
  const attention = await report(printer, 1, { printer: { state: 'ATTENTION', temp_nozzle: 214.2, target_nozzle: 215, temp_bed: 60, target_bed: 60 } })
  t.match(attention, { status: 'ERROR', ready: false, raw_status: 'ATTENTION' })
  const resumed = await report(printer, 2, { printer: { state: 'PRINTING' }, job: { id: 42, progress: 64, time_remaining: 1150 } })
  t.match(resumed, { status: 'RUNNING', error: null })
  t.equal(resumed.job.id, printing.job.id, 'the print that resumed after the attention stop is the same job')
  const finished = await report(printer, 3, { printer: { state: 'FINISHED', temp_nozzle: 180, target_nozzle: 0, temp_bed: 55, target_bed: 0 }, job: { id: 42, progress: 100, time_remaining: 0 } })
  t.match(finished, { status: 'COMPLETE', job: { state: 'finished', progress: 100 } })
  const jobs = await svc.services.db.sql`select id, state from print_jobs where printer_id = ${printer}`
  t.equal(jobs.length, 1, 'one job for the whole print')
})
