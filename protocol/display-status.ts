/**
 * The nine display statuses (SPEC part 2, "Status binding order") and the
 * classifier that maps a printer's state onto them. Pure: the live page, the
 * live feed and (later) the status displays all use this one function, so a
 * tile's colour and a light's pattern never disagree.
 *
 * Decisions where the spec is silent:
 * - OFFLINE comes first: a printer nobody hears from cannot truthfully claim
 *   anything else (stale state is the complaint presence exists to fix).
 * - Then the spec's index order is the priority: FILAMENT_RUNOUT, ERROR,
 *   COMPLETE, PAUSED, RUNNING, WAITING, IDLE.
 * - ERROR: an error reported since the current job started (errors are
 *   cleared at job:start), or the last job failed.
 * - COMPLETE: the last job finished within `completeWindowMs` (10 minutes).
 * - WAITING: online, no job running, not in maintenance (ready for work);
 *   IDLE: online but in maintenance (not taking work).
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
  errors: readonly unknown[]
  job: { state: 'printing' | 'paused' | 'finished' | 'failed'; endedAt: number | null } | null
}

export function displayStatusOf(printer: ClassifiedPrinter, now: number): DisplayStatus {
  if (printer.lastSeenAt === null && !printer.online) return 'UNKNOWN'
  if (!printer.online) return 'OFFLINE'
  if (printer.filamentRunout) return 'FILAMENT_RUNOUT'
  const job = printer.job
  if (printer.errors.length > 0 || job?.state === 'failed') return 'ERROR'
  if (job?.state === 'finished' && job.endedAt !== null && now - job.endedAt < completeWindowMs) return 'COMPLETE'
  if (job?.state === 'paused') return 'PAUSED'
  if (job?.state === 'printing') return 'RUNNING'
  return printer.maintenance ? 'IDLE' : 'WAITING'
}
