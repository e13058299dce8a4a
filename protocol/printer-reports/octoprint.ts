/**
 * OctoPrint's push message (the `current` message of its SockJS socket, or
 * the same object without the wrapper): `{state: {text, flags, error?},
 * job: {file: {name, display}}, progress: {completion (0-100),
 * printTimeLeft (s)}, temps: [{time, tool0, bed, chamber}]}`. Temperatures
 * come as a history: the newest entry counts.
 */
import { readNormalized } from './normalized.js'
import { phaseOfWord } from './status-words.js'
import type { PrinterReport } from './types.js'
import { defined, finite, isObject, maxSeconds, objectAt, percent, temperature, text, whole, type Json } from './values.js'

export function readOctoprint(data: Json): PrinterReport {
  const base = readNormalized(data)
  const current = isObject(data['current']) ? data['current'] : data
  const state = objectAt(current, 'state')
  const word = text(state?.['text'])
  const flags = objectAt(state, 'flags')
  const progress = objectAt(current, 'progress')
  const file = objectAt(objectAt(current, 'job'), 'file')
  const temps = newestTemperatures(current['temps'])
  const failing = flags?.['error'] === true || flags?.['closedOrError'] === true
  const message = text(state?.['error'], 500)
  const phase = word === undefined ? undefined : phaseOfWord('octoprint', word)
  let error: PrinterReport['error']
  if (message !== undefined && (failing || phase === 'error')) error = { code: 'octoprint_error', message }
  else if (flags !== undefined && flags['error'] === false && flags['closedOrError'] !== true) error = null
  const report = defined({
    status: word,
    phase,
    temperatures: temps,
    progress: percent(progress?.['completion']),
    remaining_seconds: whole(progress?.['printTimeLeft'], maxSeconds),
    file_name: text(file?.['display'], 500) ?? text(file?.['name'], 500),
    error,
  })
  return { ...base, ...report }
}

function newestTemperatures(temps: unknown): PrinterReport['temperatures'] {
  if (!Array.isArray(temps) || temps.length === 0) return undefined
  let newest: Json | undefined
  for (const entry of temps.slice(-100)) {
    if (!isObject(entry)) continue
    if (newest === undefined || (finite(entry['time']) ?? -Infinity) >= (finite(newest['time']) ?? -Infinity)) newest = entry
  }
  if (newest === undefined) return undefined
  const heater = (name: string) => {
    const h = objectAt(newest, name)
    return h === undefined ? undefined : temperature(h['actual'], h['target'])
  }
  const out = defined({ nozzle: heater('tool0'), bed: heater('bed'), chamber: heater('chamber') })
  return Object.keys(out).length === 0 ? undefined : out
}
