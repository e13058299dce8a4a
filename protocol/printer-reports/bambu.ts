/**
 * Bambu Lab's MQTT report (`device/<serial>/report`): `{print: {gcode_state,
 * mc_percent, mc_remaining_time (minutes), layer_num, total_layer_num,
 * nozzle_temper, nozzle_target_temper, bed_temper, bed_target_temper,
 * chamber_temper, subtask_name, gcode_file, print_error, hms, ams}}`. Printers
 * push a whole report on request and deltas in between, so every field is
 * optional.
 *
 * Decisions:
 * - print_error 0x0300400C ("the task was cancelled") with FAILED is a
 *   cancel, not a failure: a user who stops a print is not an error.
 * - print_error is shown as Bambu's apps show it, `0300_400C`; an HMS entry
 *   `{attr, code}` as `HMS_AAAA_AAAA_CCCC_CCCC` (attr and code, 32 bits each,
 *   in hex). HMS entries are often notices while a print runs: they name the
 *   error only when the printer says FAILED without a print_error.
 * - Bambu reports carry numbers only; the message an operator reads says
 *   which family, which code and in what state ("Bambu print error 0300_400D
 *   while FAILED"): the code is what Bambu's own apps and wiki look up.
 * - AMS tray j of unit i is slot i*4 + j (four trays a unit); `remain` -1
 *   (unknown) is null. The external spool (vt_tray) has no AMS slot and is
 *   not listed.
 */
import { readNormalized } from './normalized.js'
import { phaseOfWord } from './status-words.js'
import type { PrinterReport, ReportFilament } from './types.js'
import { colorHex, defined, finite, isObject, maxLayers, percent, temperature, text, whole, type Json } from './values.js'

const cancelledError = 0x0300400c

const hex4 = (n: number) => (n & 0xffff).toString(16).toUpperCase().padStart(4, '0')
export const printErrorCode = (n: number) => `${hex4(n >>> 16)}_${hex4(n)}`
const hmsCode = (attr: number, code: number) => `HMS_${hex4(attr >>> 16)}_${hex4(attr)}_${hex4(code >>> 16)}_${hex4(code)}`

export function readBambu(data: Json): PrinterReport {
  const base = readNormalized(data)
  const print = isObject(data['print']) ? data['print'] : undefined
  if (print === undefined) return base
  const state = text(print['gcode_state'])
  const printError = finite(print['print_error'])
  const cancelled = state === 'FAILED' && printError === cancelledError
  const nozzle = temperature(print['nozzle_temper'], print['nozzle_target_temper'])
  const bed = temperature(print['bed_temper'], print['bed_target_temper'])
  const chamber = temperature(print['chamber_temper'], undefined)
  const temps = defined({ nozzle, bed, chamber })
  const minutes = finite(print['mc_remaining_time'])
  const report: PrinterReport = defined({
    status: state,
    phase: state === undefined ? undefined : cancelled ? 'cancelled' : phaseOfWord('bambu', state),
    temperatures: Object.keys(temps).length === 0 ? undefined : temps,
    progress: percent(print['mc_percent']),
    remaining_seconds: minutes === undefined ? undefined : whole(minutes * 60, 10 * 366 * 24 * 3600),
    layer: whole(print['layer_num'], maxLayers),
    total_layers: whole(print['total_layer_num'], maxLayers),
    file_name: text(print['subtask_name'], 500) ?? text(print['gcode_file'], 500),
    error: errorOf(state, printError, cancelled, print['hms']),
    filaments: trays(print['ams']),
  })
  return { ...base, ...report, ...(report.temperatures === undefined ? {} : { temperatures: { ...base.temperatures, ...report.temperatures } }) }
}

function errorOf(state: string | undefined, printError: number | undefined, cancelled: boolean, hms: unknown): PrinterReport['error'] {
  const during = state === undefined ? '' : ` while ${state}`
  if (printError !== undefined && printError !== 0 && !cancelled && Number.isInteger(printError) && printError > 0) {
    const code = printErrorCode(printError)
    return { code, message: `Bambu print error ${code}${during}` }
  }
  if (state === 'FAILED' && !cancelled && Array.isArray(hms)) {
    const first = hms.find((h): h is Json => isObject(h) && finite(h['attr']) !== undefined && finite(h['code']) !== undefined)
    if (first !== undefined) {
      const code = hmsCode(first['attr'] as number, first['code'] as number)
      return { code, message: `Bambu HMS ${code.slice('HMS_'.length)}${during}` }
    }
  }
  return printError === 0 ? null : undefined
}

function trays(ams: unknown): ReportFilament[] | undefined {
  if (!isObject(ams) || !Array.isArray(ams['ams'])) return undefined
  const slots = new Map<number, ReportFilament>()
  for (const [unitIndex, unit] of ams['ams'].slice(0, 16).entries()) {
    if (!isObject(unit) || !Array.isArray(unit['tray'])) continue
    const unitId = Number.parseInt(String(unit['id'] ?? unitIndex), 10)
    for (const [trayIndex, tray] of unit['tray'].slice(0, 4).entries()) {
      if (!isObject(tray)) continue
      const trayId = Number.parseInt(String(tray['id'] ?? trayIndex), 10)
      const slot = (Number.isInteger(unitId) ? unitId : unitIndex) * 4 + (Number.isInteger(trayId) && trayId >= 0 && trayId < 4 ? trayId : trayIndex)
      if (slot < 0 || slot > 63 || slots.has(slot)) continue
      const remain = finite(tray['remain'])
      slots.set(slot, { slot, type: text(tray['tray_type'], 50) ?? null, color_hex: colorHex(tray['tray_color']), remaining_percent: remain === undefined || remain < 0 ? null : (percent(remain) ?? null) })
    }
  }
  return [...slots.values()].sort((a, b) => a.slot - b.slot)
}
