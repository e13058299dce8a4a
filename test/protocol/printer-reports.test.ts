/**
 * The printer-report adapters (protocol/printer-reports): golden samples of
 * each native shape read into the exact report, every status word of every
 * table, the failure words, the docs table kept true, and hostile input that
 * never throws and never yields an out-of-range value.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { phaseOfWord, printerTypes, readPrinterReport, statusWordTables, type PrinterReport } from '../../protocol/printer-reports/index.js'

t.test('printer reports - bambu: a whole report while printing', async (t) => {
  const report = readPrinterReport('bambu', {
    print: {
      command: 'push_status',
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
      ams: { ams: [{ id: '1', tray: [{ id: '0', tray_type: 'PLA', tray_color: '00AE42FF', remain: 76 }, { id: '3', tray_type: '', tray_color: 'zz', remain: -1 }] }], tray_now: '4' },
    },
  })
  t.same(report, {
    status: 'RUNNING',
    phase: 'printing',
    temperatures: { nozzle: { actual: 219.8, target: 220 }, bed: { actual: 55.1, target: 55 }, chamber: { actual: 31 } },
    progress: 45,
    remaining_seconds: 1920,
    layer: 88,
    total_layers: 240,
    file_name: 'gear_housing',
    error: null,
    filaments: [
      { slot: 4, type: 'PLA', color_hex: '#00AE42', remaining_percent: 76 },
      { slot: 7, type: null, color_hex: null, remaining_percent: null },
    ],
  })
})

t.test('printer reports - bambu: a delta carries only what changed; a cancel is not a failure; a failure names its error, with a message an operator reads', async (t) => {
  t.same(readPrinterReport('bambu', { print: { command: 'push_status', mc_percent: 46, nozzle_temper: 220.1 } }), { progress: 46, temperatures: { nozzle: { actual: 220.1 } } })
  t.same(readPrinterReport('bambu', { print: { gcode_state: 'FAILED', print_error: 0x0300400c } }), { status: 'FAILED', phase: 'cancelled' })
  t.same(readPrinterReport('bambu', { print: { gcode_state: 'FAILED', print_error: 117473283 } }), { status: 'FAILED', phase: 'error', error: { code: '0700_8003', message: 'Bambu print error 0700_8003 while FAILED' } })
  t.same(readPrinterReport('bambu', { print: { print_error: 50348045 } }).error, { code: '0300_400D', message: 'Bambu print error 0300_400D' }, 'a delta without a state: the code alone')
  t.same(readPrinterReport('bambu', { print: { gcode_state: 'FAILED', hms: [{ attr: 0x03000100, code: 0x00010001 }] } }), {
    status: 'FAILED',
    phase: 'error',
    error: { code: 'HMS_0300_0100_0001_0001', message: 'Bambu HMS 0300_0100_0001_0001 while FAILED' },
  })
  t.same(readPrinterReport('bambu', { print: { gcode_state: 'RUNNING', hms: [{ attr: 0x07002000, code: 0x00020001 }] } }), { status: 'RUNNING', phase: 'printing' }, 'an HMS notice while printing is not an error')
})

t.test('printer reports - octoprint: the push message, with and without its wrapper; an error stop', async (t) => {
  const current = {
    state: { text: 'Printing', flags: { operational: true, printing: true, error: false, closedOrError: false } },
    job: { file: { name: 'benchy.gcode', display: 'Benchy.gcode' } },
    progress: { completion: 12.5, printTimeLeft: 3150 },
    temps: [
      { time: 1700000005, tool0: { actual: 209.9, target: 210 }, bed: { actual: 60.1, target: 60 } },
      { time: 1700000000, tool0: { actual: 205.1, target: 210 }, bed: { actual: 58, target: 60 } },
    ],
  }
  const expected: PrinterReport = {
    status: 'Printing',
    phase: 'printing',
    temperatures: { nozzle: { actual: 209.9, target: 210 }, bed: { actual: 60.1, target: 60 } },
    progress: 12.5,
    remaining_seconds: 3150,
    file_name: 'Benchy.gcode',
    error: null,
  }
  t.same(readPrinterReport('octoprint', { current }), expected)
  t.same(readPrinterReport('octoprint', current), expected, 'the same object without the wrapper')
  t.same(readPrinterReport('octoprint', { current: { state: { text: 'Offline after error', flags: { error: true, closedOrError: true }, error: 'SerialException: no data' } } }), {
    status: 'Offline after error',
    phase: 'error',
    error: { code: 'octoprint_error', message: 'SerialException: no data' },
  })
  t.same(readPrinterReport('octoprint', { current: { state: { text: 'Offline', flags: { closedOrError: true } } } }), { status: 'Offline', phase: 'offline' })
})

t.test('printer reports - klipper: notify_status_update, a query answer, a partial update, an error', async (t) => {
  const objects = {
    print_stats: { state: 'printing', filename: 'voron_cube.gcode', print_duration: 600, message: '', info: { current_layer: 12, total_layer: 100 } },
    extruder: { temperature: 244.7, target: 245 },
    heater_bed: { temperature: 99.5, target: 100 },
    'temperature_sensor chamber': { temperature: 41.2 },
    display_status: { progress: 0.25, message: null },
    virtual_sdcard: { progress: 0.24, is_active: true },
  }
  const expected: PrinterReport = {
    status: 'printing',
    phase: 'printing',
    temperatures: { nozzle: { actual: 244.7, target: 245 }, bed: { actual: 99.5, target: 100 }, chamber: { actual: 41.2 } },
    progress: 25,
    remaining_seconds: 1800,
    layer: 12,
    total_layers: 100,
    file_name: 'voron_cube.gcode',
    error: null,
  }
  t.same(readPrinterReport('klipper', { jsonrpc: '2.0', method: 'notify_status_update', params: [objects, 12345.6] }), expected)
  t.same(readPrinterReport('klipper', { result: { eventtime: 1, status: objects } }), expected, 'a query answer')
  t.same(readPrinterReport('klipper', { status: objects }), expected, 'status as an object is not a word')
  t.same(readPrinterReport('klipper', { method: 'notify_status_update', params: [{ extruder: { temperature: 245.1 } }, 12346] }), { temperatures: { nozzle: { actual: 245.1 } } })
  t.same(readPrinterReport('klipper', { print_stats: { state: 'error', message: 'Move out of range' } }), { status: 'error', phase: 'error', error: { code: 'klipper_error', message: 'Move out of range' } })
})

t.test('printer reports - prusa_connect: the PrusaLink status body; ATTENTION is an error', async (t) => {
  t.same(
    readPrinterReport('prusa_connect', {
      printer: { state: 'PRINTING', temp_nozzle: 214.7, target_nozzle: 215, temp_bed: 59.9, target_bed: 60, axis_z: 2.4 },
      job: { id: 42, progress: 63, time_remaining: 1200, time_printing: 2040, file: { display_name: 'Shape-Box.bgcode' } },
    }),
    {
      status: 'PRINTING',
      phase: 'printing',
      temperatures: { nozzle: { actual: 214.7, target: 215 }, bed: { actual: 59.9, target: 60 } },
      progress: 63,
      remaining_seconds: 1200,
      file_name: 'Shape-Box.bgcode',
      error: null,
    },
  )
  t.same(readPrinterReport('prusa_connect', { printer: { state: 'ATTENTION' } }), { status: 'ATTENTION', phase: 'error', error: { code: 'prusa_attention', message: 'ATTENTION' } })
})

t.test('printer reports - the normalized form reads the same for every type', async (t) => {
  const data = {
    status: 'printing',
    temperatures: { nozzle: { actual: 215.3, target: 220 }, bed: 59.8, chamber: { target: 40 } },
    progress: 137,
    remaining_seconds: 1820.4,
    layer: 42,
    total_layers: 180,
    fileName: 'bracket.3mf',
    error: { code: 'E1', message: 'm' },
    filaments: [{ slot: 0, type: 'PLA', color_hex: '#00ae42', remaining_percent: 76 }, { slot: 0, type: 'dup' }, { slot: 99 }],
  }
  for (const type of printerTypes) {
    t.same(
      readPrinterReport(type, data),
      {
        status: 'printing',
        phase: 'printing',
        temperatures: { nozzle: { actual: 215.3, target: 220 }, bed: { actual: 59.8 }, chamber: { target: 40 } },
        progress: 100,
        remaining_seconds: 1820,
        layer: 42,
        total_layers: 180,
        file_name: 'bracket.3mf',
        error: { code: 'E1', message: 'm' },
        filaments: [{ slot: 0, type: 'PLA', color_hex: '#00AE42', remaining_percent: 76 }],
      },
      type,
    )
  }
})

t.test('status words - every word of every table has its meaning; failure words are errors for every type; an unknown word keeps no meaning', async (t) => {
  for (const [type, words] of Object.entries(statusWordTables)) {
    for (const { word, phase } of words) {
      const as = type === 'generic' ? 'snapmaker' : (type as (typeof printerTypes)[number])
      t.equal(phaseOfWord(as, type === 'generic' ? word.toUpperCase() : word), phase, `${type} ${word}`)
    }
  }
  for (const type of printerTypes) {
    for (const word of ['Error', 'Offline after error', 'FAILED', 'error', 'ERROR', 'ATTENTION']) t.equal(phaseOfWord(type, word), 'error', `${type} ${word}`)
    t.same(readPrinterReport(type, { status: 'Wibbling' }), { status: 'Wibbling' }, `${type}: an unknown word is kept, with no meaning`)
  }
})

t.test('status words - the documentation lists every word of every table', async (t) => {
  const doc = readFileSync(new URL('../../docs/printer-reports.md', import.meta.url), 'utf8')
  for (const [type, words] of Object.entries(statusWordTables)) {
    const section = doc.split(`### ${type}`)[1]?.split('###')[0] ?? ''
    t.ok(section.length > 0, `a section for ${type}`)
    for (const { word, phase } of words) {
      t.match(section, new RegExp(`\`${word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\`[^\\n]*\\| ${phase}`), `${type}: ${word} → ${phase}`)
    }
  }
})

/** A small seeded generator of hostile JSON values (tap has no property-testing library). */
function seeded(seed: number) {
  let s = seed >>> 0
  return () => ((s = (Math.imul(s ^ (s >>> 15), 2246822507) + 0x6d2b79f5) >>> 0) / 2 ** 32)
}

function hostile(random: () => number, depth: number): unknown {
  const pick = Math.floor(random() * 12)
  const keys = ['print', 'current', 'state', 'status', 'printer', 'job', 'progress', 'temps', 'params', 'result', 'print_stats', 'extruder', 'ams', 'tray', 'error', 'temperatures', 'nozzle', 'filaments', 'slot', 'gcode_state', 'mc_percent', 'mc_remaining_time', 'print_error', 'hms', 'attr', 'code', 'method', 'display_status', 'info', 'time_remaining']
  switch (pick) {
    case 0: return null
    case 1: return random() < 0.5
    case 2: return (random() - 0.5) * 10 ** Math.floor(random() * 320)
    case 3: return Math.floor(random() * 2 ** 33) - 2 ** 32
    case 4: return 'x'.repeat(Math.floor(random() * 3000))
    case 5: return ['RUNNING', 'FAILED', 'error', 'notify_status_update', '00AE42FF', '', ' ', '\u0000'][Math.floor(random() * 8)]
    case 6: return depth > 6 ? [] : Array.from({ length: Math.floor(random() * 5) }, () => hostile(random, depth + 1))
    case 7: return Array.from({ length: 10_000 }, (_, i) => ({ slot: i, id: String(i), tray: [] }))
    default: {
      if (depth > 6) return {}
      const out: Record<string, unknown> = {}
      for (let i = Math.floor(random() * 6); i > 0; i--) out[keys[Math.floor(random() * keys.length)]!] = hostile(random, depth + 1)
      return out
    }
  }
}

t.test('printer reports - hostile input never throws and never yields an out-of-range value', async (t) => {
  const random = seeded(20261124)
  let checked = 0
  for (let i = 0; i < 3000; i++) {
    const data = hostile(random, 0)
    const input = data !== null && typeof data === 'object' && !Array.isArray(data) ? (data as Record<string, unknown>) : { print: data, current: data, printer: data, status: data }
    for (const type of printerTypes) {
      const r = readPrinterReport(type, input)
      checked++
      const bad = (why: string) => t.fail(`${type}: ${why} for ${JSON.stringify(input).slice(0, 300)}`)
      if (r.progress !== undefined && !(r.progress >= 0 && r.progress <= 100)) bad(`progress ${r.progress}`)
      for (const k of ['remaining_seconds', 'layer', 'total_layers'] as const) if (r[k] !== undefined && !(Number.isInteger(r[k]) && r[k]! >= 0)) bad(`${k} ${r[k]}`)
      for (const h of Object.values(r.temperatures ?? {})) for (const v of [h?.actual, h?.target]) if (v !== undefined && v !== null && !Number.isFinite(v)) bad(`temperature ${v}`)
      if (r.status !== undefined && (typeof r.status !== 'string' || r.status.length > 200 || r.status.length === 0)) bad('status')
      if (r.file_name !== undefined && r.file_name.length > 500) bad('file_name')
      for (const f of r.filaments ?? []) if (!(Number.isInteger(f.slot) && f.slot >= 0 && f.slot <= 63)) bad(`slot ${f.slot}`)
      if ((r.filaments?.length ?? 0) > 64) bad('more than 64 slots')
      if (r.error !== undefined && r.error !== null && (typeof r.error.code !== 'string' || r.error.code.length === 0)) bad('error code')
    }
  }
  t.equal(checked, 3000 * printerTypes.length)
})
