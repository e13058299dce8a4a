/**
 * Printer reports, read into one typed partial report (docs/printer-reports.md:
 * a bridge sends the normalized form, or forwards the
 * printer's own message unchanged). Pure: no I/O, never throws; a field of
 * the wrong type or out of range is left out, never guessed at. Only what the
 * input carries appears in the output: reports may be partial (deltas), and
 * the caller merges them into the last known state.
 */
import { readBambu } from './bambu.js'
import { readKlipper } from './klipper.js'
import { readNormalized } from './normalized.js'
import { readOctoprint } from './octoprint.js'
import { readPrusaConnect } from './prusa-connect.js'
import { phaseOfWord } from './status-words.js'
import type { PrinterReport, PrinterType } from './types.js'
import type { Json } from './values.js'

export type { Phase, PrinterReport, PrinterType, ReportError, ReportFilament, ReportTemperature } from './types.js'
export { phaseOfWord, statusWordTables } from './status-words.js'

export const printerTypes: readonly PrinterType[] = ['bambu', 'prusa_connect', 'octoprint', 'klipper', 'snapmaker', 'flashforge']

const native: Record<PrinterType, (data: Json) => PrinterReport> = {
  bambu: readBambu,
  octoprint: readOctoprint,
  klipper: readKlipper,
  prusa_connect: readPrusaConnect,
  // Snapmaker and FlashForge bridges send the normalized form.
  snapmaker: readNormalized,
  flashforge: readNormalized,
}

export function readPrinterReport(printerType: PrinterType, data: Record<string, unknown>): PrinterReport {
  try {
    const report = (native[printerType] ?? readNormalized)(data)
    // A word from the normalized form gets its meaning here (the native readers set theirs).
    if (report.status !== undefined && report.phase === undefined) {
      const phase = phaseOfWord(printerType, report.status)
      if (phase !== undefined) report.phase = phase
    }
    return report
  } catch {
    // Getters or proxies cannot reach here (data is parsed JSON); this only keeps the promise.
    return {}
  }
}
