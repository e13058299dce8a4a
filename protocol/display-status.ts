/**
 * The nine display statuses ("Status binding order") and the
 * classifier that maps a printer's state onto them. Pure: the live page, the
 * live feed and (later) the status displays all use this one function, so a
 * tile's colour and a light's pattern never disagree.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - OFFLINE comes first: a printer nobody hears from cannot truthfully claim
 *   anything else (stale state is the complaint presence exists to fix). A
 *   printer whose own word says it is disconnected from its host software
 *   (OctoPrint "Offline") is OFFLINE too.
 * - Then the documented status order is the priority: FILAMENT_RUNOUT, ERROR,
 *   COMPLETE, PAUSED, RUNNING, WAITING, IDLE.
 * - ERROR: a standing error (reported, or a failure word such as "FAILED",
 *   "Error", "ATTENTION"); it holds until a healthy report or an operator's
 *   acknowledgement clears it. A failure word never reads as ready.
 * - COMPLETE: the last job finished within `completeWindowMs` (10 minutes).
 * - IDLE: online but not taking work: in maintenance, busy with something
 *   that is not a print (heating, calibrating), or its last job was cancelled
 *   within `completeWindowMs` (the plate holds a part-print).
 * - WAITING: online, healthy, nothing running, nothing in the way (ready).
 * - UNKNOWN: the printer has never reported.
 */
export const displayStatuses = ['FILAMENT_RUNOUT', 'ERROR', 'COMPLETE', 'OFFLINE', 'PAUSED', 'RUNNING', 'WAITING', 'IDLE', 'UNKNOWN'] as const
export type DisplayStatus = (typeof displayStatuses)[number]

export const completeWindowMs = 10 * 60_000

export interface ClassifiedPrinter {
  online: boolean
  lastSeenAt: number | null
  filamentRunout: boolean
  maintenance: boolean
  error: unknown
  /** The meaning of the printer's own status word, when known. */
  phase: string | null
  job: { state: 'printing' | 'paused' | 'finished' | 'failed' | 'cancelled'; endedAt: number | null } | null
}

export function displayStatusOf(printer: ClassifiedPrinter, now: number): DisplayStatus {
  if (printer.lastSeenAt === null && !printer.online) return 'UNKNOWN'
  if (!printer.online || printer.phase === 'offline') return 'OFFLINE'
  if (printer.filamentRunout) return 'FILAMENT_RUNOUT'
  const job = printer.job
  if (printer.error !== null && printer.error !== undefined) return 'ERROR'
  const recent = job !== null && job.endedAt !== null && now - job.endedAt < completeWindowMs
  if (job?.state === 'finished' && recent) return 'COMPLETE'
  if (job?.state === 'paused' && job.endedAt === null) return 'PAUSED'
  if (job?.state === 'printing' && job.endedAt === null) return 'RUNNING'
  if (printer.maintenance || printer.phase === 'busy' || (job?.state === 'cancelled' && recent)) return 'IDLE'
  return 'WAITING'
}
