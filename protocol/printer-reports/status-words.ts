/**
 * Status words per printer type and what each means. A word is looked up in
 * its type's table exactly as sent, then in the generic table ignoring case,
 * so a bridge that forwards a word in another case, or a type's word another
 * type also uses, still reads right. The failure words (Error, Offline after
 * error, FAILED, ATTENTION, …) mean `error` for every type: a printer that
 * says it failed never reads as ready.
 */
import type { Phase, PrinterType } from './types.js'

type Table = readonly { word: string; phase: Phase }[]
const table = (entries: Record<string, Phase>): Table => Object.entries(entries).map(([word, phase]) => ({ word, phase }))

const bambu = table({
  IDLE: 'idle',
  INIT: 'busy',
  SLICING: 'busy',
  PREPARE: 'printing',
  RUNNING: 'printing',
  PAUSE: 'paused',
  FINISH: 'finished',
  FAILED: 'error',
  OFFLINE: 'offline',
})

const octoprint = table({
  Operational: 'idle',
  Printing: 'printing',
  'Printing from SD': 'printing',
  Starting: 'printing',
  'Starting print from SD': 'printing',
  Finishing: 'printing',
  Resuming: 'printing',
  Pausing: 'paused',
  Paused: 'paused',
  Cancelling: 'cancelled',
  'Sending file to SD': 'busy',
  'Transferring file to SD': 'busy',
  'Opening serial connection': 'busy',
  Connecting: 'busy',
  'Detecting serial connection': 'busy',
  'Detecting serial port': 'busy',
  'Detecting baudrate': 'busy',
  Error: 'error',
  'Offline after error': 'error',
  Offline: 'offline',
})

// Moonraker's print_stats.state.
const klipper = table({ standby: 'idle', printing: 'printing', paused: 'paused', complete: 'finished', cancelled: 'cancelled', error: 'error' })

// PrusaLink's printer.state.
const prusaConnect = table({
  IDLE: 'idle',
  READY: 'idle',
  BUSY: 'busy',
  PRINTING: 'printing',
  PAUSED: 'paused',
  FINISHED: 'finished',
  STOPPED: 'cancelled',
  ERROR: 'error',
  ATTENTION: 'error',
})

const snapmaker = table({ IDLE: 'idle', RUNNING: 'printing', PAUSED: 'paused', STOPPED: 'cancelled', FINISHED: 'finished', ERROR: 'error' })

const flashforge = table({ READY: 'idle', BUILDING: 'printing', PAUSED: 'paused', COMPLETED: 'finished', CANCEL: 'cancelled', BUSY: 'busy', ERROR: 'error' })

/** Any type, any case: the words of the normalized form and the failure words. */
const generic = table({
  idle: 'idle',
  ready: 'idle',
  operational: 'idle',
  standby: 'idle',
  printing: 'printing',
  running: 'printing',
  building: 'printing',
  prepare: 'printing',
  paused: 'paused',
  pause: 'paused',
  pausing: 'paused',
  finished: 'finished',
  finish: 'finished',
  complete: 'finished',
  completed: 'finished',
  done: 'finished',
  cancelled: 'cancelled',
  canceled: 'cancelled',
  cancelling: 'cancelled',
  stopped: 'cancelled',
  aborted: 'cancelled',
  busy: 'busy',
  heating: 'busy',
  preparing: 'busy',
  calibrating: 'busy',
  homing: 'busy',
  error: 'error',
  failed: 'error',
  fault: 'error',
  attention: 'error',
  'offline after error': 'error',
  offline: 'offline',
  disconnected: 'offline',
})

export const statusWordTables: Readonly<Record<PrinterType | 'generic', Table>> = {
  bambu,
  octoprint,
  klipper,
  prusa_connect: prusaConnect,
  snapmaker,
  flashforge,
  generic,
}

const exact = new Map(Object.entries(statusWordTables).map(([type, words]) => [type, new Map(words.map((w) => [w.word, w.phase]))]))
const anyCase = new Map(generic.map((w) => [w.word, w.phase]))

export function phaseOfWord(printerType: PrinterType, word: string): Phase | undefined {
  return exact.get(printerType)?.get(word) ?? anyCase.get(word.trim().toLowerCase())
}
