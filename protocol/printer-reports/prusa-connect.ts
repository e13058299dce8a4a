/**
 * PrusaLink's status body (`GET /api/v1/status`): `{printer: {state,
 * temp_nozzle, target_nozzle, temp_bed, target_bed, …}, job: {id, progress
 * (0-100), time_remaining (s), time_printing}}`, with `job.file` when the
 * bridge merges in the job body (`GET /api/v1/job`).
 */
import { readNormalized } from './normalized.js'
import { phaseOfWord } from './status-words.js'
import type { PrinterReport } from './types.js'
import { defined, maxSeconds, objectAt, percent, temperature, text, whole, type Json } from './values.js'

export function readPrusaConnect(data: Json): PrinterReport {
  const base = readNormalized(data)
  const printer = objectAt(data, 'printer')
  const job = objectAt(data, 'job')
  const file = objectAt(job, 'file')
  const state = text(printer?.['state'])
  const phase = state === undefined ? undefined : phaseOfWord('prusa_connect', state)
  const temps = printer === undefined ? {} : defined({ nozzle: temperature(printer['temp_nozzle'], printer['target_nozzle']), bed: temperature(printer['temp_bed'], printer['target_bed']) })
  const report = defined({
    status: state,
    phase,
    temperatures: Object.keys(temps).length === 0 ? undefined : temps,
    progress: percent(job?.['progress']),
    remaining_seconds: whole(job?.['time_remaining'], maxSeconds),
    file_name: text(file?.['display_name'], 500) ?? text(file?.['name'], 500),
    error: phase === 'error' ? { code: `prusa_${state!.toLowerCase()}`, message: state! } : phase !== undefined ? null : undefined,
  })
  return { ...base, ...report }
}
