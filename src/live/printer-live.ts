/**
 * What the live feed says about a printer: its state in a compact form, with
 * the display status of the nine (protocol/display-status.ts) computed once
 * on the server, so every dashboard shows the same colour.
 */
import type { PrinterView } from '../../actors/printer-actor.js'
import type { PersistedPrinterState } from '../../actors/printer-persistence.js'
import type { PrinterJob } from '../../machines/printer.js'
import { displayStatusOf, type DisplayStatus } from '../../protocol/display-status.js'

export interface PrinterLive {
  id: string
  name?: string
  hostId: string | null
  online: boolean
  status: DisplayStatus
  activity: 'idle' | 'printing' | 'paused'
  rawStatus: string | null
  job: PrinterJob | null
  /** The newest three. */
  errors: PersistedPrinterState['errors']
  maintenance: boolean
  filamentRunout: boolean
  ams: PersistedPrinterState['ams']
  lastSeenAt: number | null
}

export function printerLive(view: Omit<PrinterView, 'organizationId' | 'assignmentEpoch' | 'filamentJobId'> & { name?: string }, now: number): PrinterLive {
  return {
    id: view.printerId,
    ...(view.name === undefined ? {} : { name: view.name }),
    hostId: view.hostId,
    online: view.online,
    status: displayStatusOf(view, now),
    activity: view.activity,
    rawStatus: view.rawStatus,
    job: view.job,
    errors: view.errors.slice(-3),
    maintenance: view.maintenance,
    filamentRunout: view.filamentRunout,
    ams: view.ams,
    lastSeenAt: view.lastSeenAt,
  }
}

export function activityOf(job: PrinterJob | null): PrinterLive['activity'] {
  return job?.state === 'printing' ? 'printing' : job?.state === 'paused' ? 'paused' : 'idle'
}
