/**
 * The normalized report, which every type accepts:
 * `{status | state, temperatures: {nozzle, bed, chamber: {actual, target} | number},
 * progress, remaining_seconds, layer, total_layers, file_name | fileName,
 * error: {code, message} | null, filaments: [{slot, type, color_hex, remaining_percent}]}`.
 */
import type { PrinterReport, ReportFilament } from './types.js'
import { celsius, colorHex, defined, finite, isObject, maxLayers, maxSeconds, percent, temperature, text, whole, type Json } from './values.js'

export function readNormalized(data: Json): PrinterReport {
  const temps = isObject(data['temperatures']) ? data['temperatures'] : undefined
  const heater = (v: unknown) => (isObject(v) ? temperature(v['actual'], v['target']) : celsius(v) === undefined ? undefined : { actual: celsius(v)! })
  const temperatures = temps === undefined ? undefined : defined({ nozzle: heater(temps['nozzle']), bed: heater(temps['bed']), chamber: heater(temps['chamber']) })
  return defined({
    status: text(data['status']) ?? text(data['state']),
    temperatures: temperatures === undefined || Object.keys(temperatures).length === 0 ? undefined : temperatures,
    progress: percent(data['progress']),
    remaining_seconds: whole(data['remaining_seconds'] ?? data['remainingSeconds'], maxSeconds),
    layer: whole(data['layer'], maxLayers),
    total_layers: whole(data['total_layers'] ?? data['totalLayers'], maxLayers),
    file_name: text(data['file_name'], 500) ?? text(data['fileName'], 500),
    error: errorOf(data['error']),
    filaments: filamentsOf(data['filaments']),
  })
}

function errorOf(v: unknown): PrinterReport['error'] {
  if (v === null) return null
  if (!isObject(v)) return undefined
  const code = text(v['code'], 100)
  return code === undefined ? undefined : { code, message: text(v['message'], 500) ?? null }
}

function filamentsOf(v: unknown): ReportFilament[] | undefined {
  if (!Array.isArray(v)) return undefined
  const seen = new Set<number>()
  const slots: ReportFilament[] = []
  for (const raw of v.slice(0, 64)) {
    if (!isObject(raw)) continue
    const slot = finite(raw['slot'])
    if (slot === undefined || !Number.isInteger(slot) || slot < 0 || slot > 63 || seen.has(slot)) continue
    seen.add(slot)
    slots.push({ slot, type: text(raw['type'], 50) ?? null, color_hex: colorHex(raw['color_hex']), remaining_percent: percent(raw['remaining_percent']) ?? null })
  }
  return slots
}
