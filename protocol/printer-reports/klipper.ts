/**
 * Klipper through Moonraker: the printer objects `{print_stats, extruder,
 * heater_bed, display_status, virtual_sdcard, 'temperature_sensor chamber' |
 * 'heater_generic chamber'}`, as a query answers them (`{result: {status}}`
 * or `{status}`), as the `notify_status_update` notification carries them
 * (`{method, params: [objects, eventtime]}`), or bare. Notifications carry
 * only what changed, so everything is optional.
 *
 * Decisions:
 * - Progress is display_status.progress (0-1, what the printer's screen
 *   shows), else virtual_sdcard.progress; as a percentage.
 * - Time left is not reported by Klipper; it is estimated as
 *   print_duration × (1 − p) / p when both are in the report (p the progress
 *   fraction), as Mainsail and Fluidd do for their file-relative estimate.
 */
import { readNormalized } from './normalized.js'
import { phaseOfWord } from './status-words.js'
import type { PrinterReport } from './types.js'
import { defined, finite, isObject, maxLayers, maxSeconds, objectAt, temperature, text, whole, type Json } from './values.js'

function objectsOf(data: Json): Json {
  if (data['method'] === 'notify_status_update' && Array.isArray(data['params']) && isObject(data['params'][0])) return data['params'][0]
  const result = objectAt(data, 'result')
  if (result !== undefined && isObject(result['status'])) return result['status']
  if (isObject(data['status'])) return data['status']
  return data
}

export function readKlipper(data: Json): PrinterReport {
  const base = readNormalized(data)
  const objects = objectsOf(data)
  const stats = objectAt(objects, 'print_stats')
  const state = text(stats?.['state'])
  const phase = state === undefined ? undefined : phaseOfWord('klipper', state)
  const fraction = finite(objectAt(objects, 'display_status')?.['progress']) ?? finite(objectAt(objects, 'virtual_sdcard')?.['progress'])
  const p = fraction === undefined ? undefined : Math.min(1, Math.max(0, fraction))
  const duration = finite(stats?.['print_duration'])
  const info = objectAt(stats, 'info')
  const heater = (name: string) => {
    const h = objectAt(objects, name)
    return h === undefined ? undefined : temperature(h['temperature'], h['target'])
  }
  const temps = defined({ nozzle: heater('extruder'), bed: heater('heater_bed'), chamber: heater('heater_generic chamber') ?? heater('temperature_sensor chamber') })
  const message = text(stats?.['message'], 500)
  const report = defined({
    status: state,
    phase,
    temperatures: Object.keys(temps).length === 0 ? undefined : temps,
    progress: p === undefined ? undefined : p * 100,
    remaining_seconds: p !== undefined && p > 0 && duration !== undefined && duration >= 0 ? whole((duration * (1 - p)) / p, maxSeconds) : undefined,
    layer: whole(info?.['current_layer'], maxLayers),
    total_layers: whole(info?.['total_layer'], maxLayers),
    file_name: text(stats?.['filename'], 500),
    error: phase === 'error' ? { code: 'klipper_error', message: message ?? null } : phase !== undefined ? null : undefined,
  })
  return { ...base, ...report }
}
