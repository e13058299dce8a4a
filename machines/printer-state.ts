/**
 * What the service knows of one printer, and the pure reducer that folds a
 * bridge event into it (docs/printers-and-events.md: the read model is kept by the
 * printer's actor; this is its state and its rules).
 *
 * Reports (`status`, `printer:statusUpdate`, `printer:dataUpdate`,
 * `printer:deltaUpdate`) are read by the adapter of the printer's type
 * (protocol/printer-reports), which accepts the normalized form or the
 * printer's own message; only what a report carries changes, so a partial
 * report (a delta) merges into the last known state.
 *
 * Rules decided here:
 * - A status word whose meaning is `error` records an error (the report's
 *   own, or one named after the word) and never reads as ready; a healthy
 *   word clears it, and so does an explicit "no error" (Bambu print_error 0)
 *   while the standing word is healthy. An operator may acknowledge it.
 * - A report saying the printer prints (or is paused) with no open job opens
 *   one; a job:start that follows adopts it instead of opening a second (a
 *   job:start of a printer task keeps its task's job id: the report's job
 *   becomes that job).
 *   finished / cancelled words end the open job; an error word ends it as
 *   failed. A print that resumes after an error report (the same file) goes
 *   on as the same job, so a printer's attention stop makes no ghost job.
 * - An idle word does not end a job: a printer may still say idle for a
 *   moment after the bridge started a print.
 * - Jobs the reducer opens get placeholder ids (negative), which the actor
 *   replaces with ids from the job sequence (`resolveJobIds`) before the
 *   state is stored: the reducer stays pure and the store allocates ids.
 */
import { readPrinterReport, type Phase, type PrinterReport, type PrinterType } from '../protocol/printer-reports/index.js'
import type { PrinterEventType } from '../protocol/printer-events.js'

export type JobState = 'printing' | 'paused' | 'finished' | 'failed' | 'cancelled'

export interface PrinterJob {
  jobId: number
  name: string | null
  progress: number | null
  state: JobState
  startedAt: number
  endedAt: number | null
  remainingSeconds?: number | null
  layer?: number | null
  totalLayers?: number | null
  /** Opened by a printer report rather than a bridge job:start (a job:start adopts it). */
  openedByReport?: boolean
}

export interface PrinterError {
  code: string
  message: string | null
  at: number
}

export interface Temperature {
  actual: number | null
  target: number | null
}

export interface Temperatures {
  nozzle: Temperature
  bed: Temperature
  chamber: Temperature
}

export interface AmsSlot {
  position: number
  materialType: string | null
  color: string | null
  remaining: number | null
  /** Set by POST /v1/printers/{id}/filaments/assign (the operator's or queue's choice); kept across AMS updates of the same slot. */
  materialId?: string | null
  vendor?: string | null
}

/** One slot of a filament assignment (docs/printers-and-events.md). */
export interface FilamentAssignment {
  position: number
  materialId?: string | null | undefined
  materialType?: string | null | undefined
  color?: string | null | undefined
  vendor?: string | null | undefined
}

export interface PrinterContext {
  printerId: string
  /** Which adapter reads its native reports (configuration, not stored with the state). */
  printerType: PrinterType
  /**
   * Every job the last transition created or changed, in its final state
   * then, for the runtime to persist. Includes a job that was still running
   * when a new job:start arrived, closed as failed at that moment (a printer
   * runs one job at a time): no ghost job stays "printing" forever.
   */
  changedJobs: PrinterJob[]
  /** Per event of the last transition (in order): the job it belongs to, or null. */
  eventJobs: (number | null)[]
  /** The job the last filament assignment was made for, if any. */
  filamentJobId: number | null
  /** Timestamp (bridge clock, ms) of the newest event applied. */
  lastSeenAt: number | null
  /** The printer's own status word from its last report, as sent. */
  rawStatus: string | null
  /** What that word means (null when unknown or never reported). */
  phase: Phase | null
  job: PrinterJob | null
  /** The standing error, until a healthy report or an acknowledgement clears it. */
  error: PrinterError | null
  /**
   * The code of the error an operator acknowledged, while the printer has not
   * reported a healthy state since: a printer that keeps repeating the same
   * failure word (Bambu's full reports say FAILED until the next print) does
   * not raise it again; another code does.
   */
  acknowledgedError: string | null
  temperatures: Temperatures
  ams: AmsSlot[]
  filamentRunout: boolean
  maintenance: boolean
}

/** A bridge event as applied: its type, payload and time, and optionally the id a job it opens takes. */
export interface BridgeEvent {
  type: PrinterEventType
  data: Record<string, unknown>
  timestamp: number
  jobId?: number | undefined
}

export const emptyTemperatures: Temperatures = {
  nozzle: { actual: null, target: null },
  bed: { actual: null, target: null },
  chamber: { actual: null, target: null },
}

const healthy: ReadonlySet<Phase> = new Set(['idle', 'busy', 'printing', 'paused', 'finished', 'cancelled'])

const reportTypes: ReadonlySet<PrinterEventType> = new Set(['status', 'printer:statusUpdate', 'printer:dataUpdate', 'printer:deltaUpdate'])

const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v.slice(0, 500) : null)
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)

/** Records a job's new state in `changedJobs` (latest wins per job, listed last). */
function recordJobChange(changed: PrinterJob[], job: PrinterJob): void {
  const at = changed.findIndex((j) => j.jobId === job.jobId)
  if (at >= 0) changed.splice(at, 1)
  changed.push(job)
}

/** The id a job opened by this transition takes until the store gives it one: -1, -2, … */
function placeholderId(context: PrinterContext): number {
  return -1 - context.changedJobs.filter((j) => j.jobId < 0).length
}

const isOpen = (job: PrinterJob | null): job is PrinterJob => job !== null && job.endedAt === null
/** The same test without narrowing: the caller goes on to look at an ended job. */
const running = (job: PrinterJob | null): boolean => isOpen(job)

/**
 * Bridge events, in seqn order, applied to a printer's context as one
 * transition (pure: `context` and what it holds are never changed). Unknown
 * or malformed payload fields are ignored: a bridge event never invents state.
 *
 * The batch is folded into one working copy of the context, which the steps
 * below change in place; only the values they replace (a job, an error, the
 * temperatures, the slots) are new objects. A copy of the whole context per
 * event, and of the per-event job list, was most of the reducer's cost on a
 * 100-event batch (bench/ingest).
 */
export function applyPrinterEvents(context: PrinterContext, events: readonly BridgeEvent[]): PrinterContext {
  const next: PrinterContext = { ...context, changedJobs: [], eventJobs: [] }
  for (const event of events) applyEvent(next, event)
  return next
}

/** One event applied to the working copy `c` (owned by applyPrinterEvents). */
function applyEvent(c: PrinterContext, event: BridgeEvent): void {
  const data = event.data
  const before = c.job
  c.lastSeenAt = Math.max(c.lastSeenAt ?? 0, event.timestamp)
  if (reportTypes.has(event.type)) {
    applyReport(c, readPrinterReport(c.printerType, data), event)
  } else {
    switch (event.type) {
      case 'printer:error':
        raise(c, str(data['code'] ?? data['errorCode']) ?? 'unknown', str(data['message']), event.timestamp)
        break
      case 'printer:amsUpdate': {
        const slots = slotsFrom(data)
        if (slots !== undefined) c.ams = keepAssignments(c.ams, slots)
        break
      }
      case 'printer:filamentStateChanged': {
        const runout = data['runout'] ?? data['filamentRunout']
        if (typeof runout === 'boolean') c.filamentRunout = runout
        break
      }
      case 'job:start':
        startJob(c, event, str(data['name'] ?? data['fileName'] ?? data['file_name']))
        break
      case 'job:update': {
        const report = readPrinterReport(c.printerType, data)
        if (isOpen(c.job)) c.job = withProgress(c.job, report)
        break
      }
      case 'job:pause':
        if (c.job?.state === 'printing' && c.job.endedAt === null) c.job = { ...c.job, state: 'paused' }
        break
      case 'job:unpause':
      case 'job:offlineRecovery':
        if (isOpen(c.job)) c.job = { ...c.job, state: 'printing' }
        break
      case 'job:finish': {
        if (!isOpen(c.job)) break
        // What the finish says of the print (its progress, above all) is the last word on it: a failed
        // or cancelled run is charged by it.
        c.job = withProgress(c.job, readPrinterReport(c.printerType, data))
        const cancelled = data['cancelled'] === true || data['result'] === 'cancelled' || data['status'] === 'cancelled'
        const failed = !cancelled && (data['success'] === false || data['result'] === 'failed' || data['status'] === 'failed')
        endJob(c, cancelled ? 'cancelled' : failed ? 'failed' : 'finished', event.timestamp)
        if (failed) raise(c, 'job_failed', str(data['message'] ?? data['reason']) ?? `job ${c.job!.jobId} failed`, event.timestamp)
        break
      }
      default:
        break
    }
  }
  if (c.job !== null && c.job !== before) recordJobChange(c.changedJobs, c.job)
  c.eventJobs.push(jobOfEvent(before, c.job, event.type))
}

/** A job:* event belongs to the job open before or after it; any other event only to a job it opened. */
function jobOfEvent(before: PrinterJob | null, after: PrinterJob | null, type: PrinterEventType): number | null {
  if (after === null) return null
  const opened = before === null || before.jobId !== after.jobId
  if (type.startsWith('job:')) return isOpen(before) || isOpen(after) || opened ? after.jobId : null
  return opened ? after.jobId : null
}

/** A state report (normalized or native, already read by the type's adapter) merged into the working copy. */
function applyReport(c: PrinterContext, report: PrinterReport, event: BridgeEvent): void {
  const previousPhase = c.phase
  const previousError = c.error
  const previousStatus = c.rawStatus
  if (report.temperatures !== undefined) c.temperatures = mergeTemperatures(c.temperatures, report.temperatures)
  if (report.filaments !== undefined) {
    const slots = report.filaments.map((f) => ({ position: f.slot, materialType: f.type, color: f.color_hex, remaining: f.remaining_percent }))
    c.ams = keepAssignments(c.ams, slots)
  }
  if (report.status !== undefined) {
    c.rawStatus = report.status
    c.phase = report.phase ?? null
  }
  const phase = report.status !== undefined ? (report.phase ?? null) : previousPhase
  const at = event.timestamp

  if (report.phase !== undefined) followPhase(c, report.phase, report, event, previousPhase)
  if (isOpen(c.job)) c.job = withProgress(c.job, report)

  if (report.error !== undefined && report.error !== null) {
    raise(c, report.error.code, report.error.message, at)
  } else if (phase === 'error') {
    // The word says error and the report names none: keep a standing one, else name it after the word.
    if (previousError === null) raise(c, errorCodeOfWord(c.printerType, report.status ?? previousStatus ?? 'error'), report.status ?? previousStatus, at)
  } else if (phase !== null && healthy.has(phase) && (report.phase !== undefined || report.error === null)) {
    c.error = null
    c.acknowledgedError = null
  }
}

/** Records an error, unless it is the one the operator acknowledged and the printer is still repeating. A standing error of the same code keeps its time. */
function raise(c: PrinterContext, code: string, message: string | null, at: number): void {
  if (c.acknowledgedError === code) return
  c.error = { code, message, at: c.error?.code === code ? c.error.at : at }
}

/** The operator's acknowledgement: the error no longer holds the printer in ERROR. */
export function acknowledgeError(context: PrinterContext): PrinterContext {
  return context.error === null ? context : { ...context, error: null, acknowledgedError: context.error.code }
}

/** What a word's meaning does to the job: open, resume, pause, end. */
function followPhase(c: PrinterContext, phase: Phase, report: PrinterReport, event: BridgeEvent, previous: Phase | null): void {
  const job = c.job
  const at = event.timestamp
  switch (phase) {
    case 'printing':
    case 'paused': {
      const state = phase
      if (running(job)) {
        if (job!.state !== state) c.job = { ...job!, state }
        return
      }
      // Back from an error stop with the same file: the same print goes on.
      if (job !== null && job.state === 'failed' && job.openedByReport === true && previous === 'error' && (report.file_name ?? job.name) === job.name) {
        c.job = { ...job, state, endedAt: null }
        return
      }
      openJob(c, event, report.file_name ?? null, state, true)
      return
    }
    case 'finished':
      if (running(job)) endJob(c, 'finished', at)
      return
    case 'cancelled':
      if (running(job)) endJob(c, 'cancelled', at)
      return
    case 'error':
      if (running(job)) endJob(c, 'failed', at)
      return
    default:
      return
  }
}

function startJob(c: PrinterContext, event: BridgeEvent, name: string | null): void {
  const job = c.job
  c.error = null
  c.acknowledgedError = null
  // A report saw the print before the bridge's job:start: the start adopts that job. When the
  // start names its task's job (event.jobId), that job is the printer's from now on and takes the
  // report's over: its progress here, its events (those of this transition here; those stored
  // before, where the task's start was linked, src/jobs/task-links.ts), and the report's job is no
  // job of its own (a placeholder of this transition is never stored).
  if (isOpen(job) && job.openedByReport === true) {
    const taskJob = event.jobId !== undefined && event.jobId !== job.jobId ? event.jobId : job.jobId
    if (taskJob !== job.jobId) {
      const at = c.changedJobs.findIndex((j) => j.jobId === job.jobId)
      if (at >= 0) c.changedJobs.splice(at, 1)
      for (let i = 0; i < c.eventJobs.length; i++) if (c.eventJobs[i] === job.jobId) c.eventJobs[i] = taskJob
      if (c.filamentJobId === job.jobId) c.filamentJobId = taskJob
    }
    c.job = { ...job, jobId: taskJob, name: name ?? job.name, openedByReport: false }
    return
  }
  if (running(job)) recordJobChange(c.changedJobs, { ...job!, state: 'failed', endedAt: event.timestamp })
  openJob(c, event, name, 'printing', false)
}

function openJob(c: PrinterContext, event: BridgeEvent, name: string | null, state: 'printing' | 'paused', byReport: boolean): void {
  const jobId = event.jobId ?? placeholderId(c)
  const job: PrinterJob = { jobId, name, progress: 0, state, startedAt: event.timestamp, endedAt: null, remainingSeconds: null, layer: null, totalLayers: null }
  if (byReport) job.openedByReport = true
  // Listed in changedJobs by applyEvent, in its state at the end of the event.
  c.job = job
}

function endJob(c: PrinterContext, state: 'finished' | 'failed' | 'cancelled', at: number): void {
  const job = c.job!
  c.job = { ...job, state, endedAt: at, progress: state === 'finished' ? 100 : job.progress, remainingSeconds: state === 'finished' ? 0 : (job.remainingSeconds ?? null) }
}

function withProgress(job: PrinterJob, report: PrinterReport): PrinterJob {
  if (report.progress === undefined && report.remaining_seconds === undefined && report.layer === undefined && report.total_layers === undefined && report.file_name === undefined) return job
  const next = { ...job }
  if (report.progress !== undefined) next.progress = Math.min(100, Math.max(0, report.progress))
  if (report.remaining_seconds !== undefined) next.remainingSeconds = report.remaining_seconds
  if (report.layer !== undefined) next.layer = report.layer
  if (report.total_layers !== undefined) next.totalLayers = report.total_layers
  if (report.file_name !== undefined && next.name === null) next.name = report.file_name
  return next
}

function mergeTemperatures(previous: Temperatures, reported: NonNullable<PrinterReport['temperatures']>): Temperatures {
  const merge = (before: Temperature, t: { actual?: number | null; target?: number | null } | undefined): Temperature =>
    t === undefined ? before : { actual: t.actual === undefined ? before.actual : t.actual, target: t.target === undefined ? before.target : t.target }
  return { nozzle: merge(previous.nozzle, reported.nozzle), bed: merge(previous.bed, reported.bed), chamber: merge(previous.chamber, reported.chamber) }
}

/** `octoprint_offline_after_error` for OctoPrint's "Offline after error": a stable code a program can switch on. */
export function errorCodeOfWord(printerType: PrinterType, word: string): string {
  const slug = word.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '').slice(0, 60)
  return `${printerType}_${slug || 'error'}`
}

/** Replaces the placeholder ids of jobs this transition opened with ids from the job sequence. */
export function resolveJobIds(context: PrinterContext, ids: ReadonlyMap<number, number>): PrinterContext {
  if (ids.size === 0) return context
  const real = (id: number) => ids.get(id) ?? id
  return {
    ...context,
    job: context.job === null ? null : { ...context.job, jobId: real(context.job.jobId) },
    changedJobs: context.changedJobs.map((j) => ({ ...j, jobId: real(j.jobId) })),
    eventJobs: context.eventJobs.map((id) => (id === null ? null : real(id))),
    filamentJobId: context.filamentJobId === null ? null : real(context.filamentJobId),
  }
}

/** The placeholder ids the last transition handed out (jobs it opened), in order -1, -2, … */
export function placeholderJobIds(context: PrinterContext): number[] {
  const ids = new Set<number>()
  for (const j of context.changedJobs) if (j.jobId < 0) ids.add(j.jobId)
  if (context.job !== null && context.job.jobId < 0) ids.add(context.job.jobId)
  return [...ids].sort((a, b) => b - a)
}

function slotsFrom(data: Record<string, unknown>): AmsSlot[] | undefined {
  const slots = data['slots'] ?? data['trays']
  if (!Array.isArray(slots)) return undefined
  const seen = new Set<number>()
  return slots.slice(0, 64).flatMap((raw, index) => {
    if (raw === null || typeof raw !== 'object') return []
    const s = raw as Record<string, unknown>
    const position = num(s['position']) ?? index
    // A slot is a whole number 0-63, once: anything else is not a slot.
    if (!Number.isInteger(position) || position < 0 || position > 63 || seen.has(position)) return []
    seen.add(position)
    return [
      {
        position,
        materialType: str(s['materialType'] ?? s['type']),
        color: str(s['color'] ?? s['color_hex']),
        remaining: num(s['remaining'] ?? s['remaining_percent']),
      },
    ]
  })
}

/** An AMS report replaces the slots but keeps what was assigned to a slot that still holds the same material type. */
export function keepAssignments(previous: readonly AmsSlot[], reported: AmsSlot[]): AmsSlot[] {
  const byPosition = new Map(previous.map((s) => [s.position, s]))
  return reported.map((slot) => {
    const before = byPosition.get(slot.position)
    if (before === undefined || (before.materialId == null && before.vendor == null)) return slot
    if (slot.materialType !== null && before.materialType !== null && slot.materialType !== before.materialType) return slot
    return { ...slot, materialId: before.materialId ?? null, vendor: before.vendor ?? null }
  })
}

export function assignFilaments(previous: readonly AmsSlot[], assignments: readonly FilamentAssignment[]): AmsSlot[] {
  const slots = new Map(previous.map((s) => [s.position, s]))
  for (const a of assignments) {
    const before = slots.get(a.position) ?? { position: a.position, materialType: null, color: null, remaining: null }
    slots.set(a.position, {
      ...before,
      materialId: a.materialId === undefined ? (before.materialId ?? null) : a.materialId,
      materialType: a.materialType === undefined ? before.materialType : a.materialType,
      color: a.color === undefined ? before.color : a.color,
      vendor: a.vendor === undefined ? (before.vendor ?? null) : a.vendor,
    })
  }
  return [...slots.values()].sort((x, y) => x.position - y.position)
}
