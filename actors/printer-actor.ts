/**
 * One printer's actor: the single writer of its host assignment, its seqn
 * high-water mark and its state (docs/operations.md). The runtime runs its
 * methods one at a time through the printer's mailbox, so nothing here
 * needs a lock.
 *
 * The order of a message is always: check (fence, duplicates) → compute the
 * next state in memory → write it through the group commit → only then
 * adopt it. If the write fails the actor is marked stale and rebuilt from
 * the store before its next message: the store is the truth, and the
 * in-memory state never runs ahead of what was committed.
 */
import { createActor, initialTransition, type Actor, type AnyActorLogic, type SnapshotFrom } from 'xstate'
import { checkFence, classifyEvents, hostAssignmentMachine, RecentWindow, type FenceRefusal, type HostAssignmentContext } from '../machines/host-assignment.js'
import { placeholderJobIds, printerMachine, type BridgeEvent, type FilamentAssignment, type PrinterContext, type PrinterError, type PrinterJob } from '../machines/printer.js'
import { pureTransition } from '../machines/transition.js'
import type { Static } from '@sinclair/typebox'
import { ServiceError, type ErrorCode } from '../protocol/errors.js'
import type { ConnectionFenceSchema, IncomingEventSchema, IngestRequestSchema } from '../protocol/node-calls.js'
import type { EventOutcomeSchema, RefusedEventSchema, refusalReasons } from '../protocol/printer-events.js'
import type { Clock } from './clock.js'
import type { EventRecord, HydratedPrinter, PersistedPrinterState, PrinterCommit, PrinterIdentity, PrinterPersistence, TaskStartLink, TaskStartRequest } from './printer-persistence.js'

/** One bridge event as the actor takes it (the schema a forwarded ingest is checked against). */
export type IncomingEvent = Static<typeof IncomingEventSchema>

export type IngestRequest = Static<typeof IngestRequestSchema>

export type RefusedEvent = Static<typeof RefusedEventSchema>

export type EventOutcome = Static<typeof EventOutcomeSchema>

type RefusalReason = (typeof refusalReasons)[number]

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export interface IngestResult {
  /** Events of the request the log now holds: stored by this request or an earlier delivery. */
  processed: number
  /** Events the log does not hold and never will (see `refused`): retrying does not change them. */
  failed: number
  /** Newly stored by this request. */
  stored: number
  duplicates: number
  refused: RefusedEvent[]
  /** eventId → the job it belongs to (job:* events), for the single-event route's jobId. */
  jobOf: ReadonlyMap<string, number | null>
  /** Per event of the request, in its order: applied, late, duplicate or refused (with the reason). */
  outcomes: EventOutcome[]
  /** The highest seqn applied in the current epoch after this request; null before the first. */
  lastSeqn: number | null
}

/** What a dashboard or the live feed sees of a printer (the read model is built from it). */
export interface PrinterView extends PersistedPrinterState, PrinterIdentity {
  printerId: string
  organizationId: string
  online: boolean
  activity: 'idle' | 'printing' | 'paused'
  hostId: string | null
  assignmentEpoch: number
  /** The highest seqn applied in the current epoch; null before its first event. */
  lastSeqn: number | null
  /** When the actor produced this view (the runtime's clock, ms). */
  updatedAt: number
}

/** Handed to the live-feed hook after a commit. */
export interface PrinterChange {
  view: PrinterView
  /** The events this commit stored (empty for state-only changes such as presence). */
  events: readonly EventRecord[]
  /** Jobs this commit created or changed, in their state now. */
  jobs: readonly PrinterJob[]
}

export type ConnectionFence = Static<typeof ConnectionFenceSchema>

const fenceErrors: Record<FenceRefusal, ErrorCode> = {
  unassigned: 'printer_not_assigned',
  stale_epoch: 'assignment_epoch_stale',
  unknown_epoch: 'assignment_epoch_unknown',
  other_host: 'assignment_other_host',
}

type PrinterLogic = typeof printerMachine
type AssignmentSnapshot = SnapshotFrom<typeof hostAssignmentMachine>

export interface PrinterActorOptions {
  persistence: PrinterPersistence
  /** The machine with the runtime's presence timeout provided. */
  logic: PrinterLogic
  /** The runtime's clock: the machine's delays (the presence timeout) run on it. */
  clock: Clock
  /** The shard's fencing token now (read at each write). */
  fencingToken: () => number
  /** A change the actor made on its own (the presence timer): the runtime posts `persistPresence` to the mailbox. */
  onOwnChange: () => void
  /** After every commit. */
  onCommitted: (change: PrinterChange) => void
}

/** A printer hydrated from the store: its identity, host assignment and state machine. */
interface Loaded {
  organizationId: string
  identity: PrinterIdentity
  assignment: AssignmentSnapshot
  printer: Actor<PrinterLogic>
  persistedOnline: boolean
}

/** One batch on its way through ingest: what each event turned out to be, and the answers so far. */
interface IngestBatch {
  /** To apply, in seqn order. */
  apply: IncomingEvent[]
  highWaterSeqn: number
  refused: RefusedEvent[]
  duplicates: IncomingEvent[]
  /** Below the mark and never seen: stored in the history, not applied. */
  late: IncomingEvent[]
  outcomes: Map<string, EventOutcome>
  /** The job each job event was (or is now) stored with. */
  jobOf: Map<string, number | null>
  /** The job a task's job:start opens. */
  jobIdOf: Map<IncomingEvent, number>
}

export class PrinterActor {
  readonly printerId: string
  readonly #options: PrinterActorOptions
  #loaded: Loaded | undefined
  /** Set when a write failed: the next message rebuilds from the store first. */
  #stale = true
  #missing = false
  /** True while a message runs: presence changes then are that message's, not the timer's. */
  #inMessage = false
  lastUsed = 0

  constructor(printerId: string, options: PrinterActorOptions) {
    this.printerId = printerId
    this.#options = options
  }

  get online(): boolean {
    return this.#loaded?.printer.getSnapshot().value.presence === 'online'
  }

  /** No such printer in the store (as of the last hydration). */
  get missing(): boolean {
    return this.#missing
  }

  stop(): void {
    this.#loaded?.printer.stop()
    this.#loaded = undefined
    this.#stale = true
  }

  async ingest(request: IngestRequest): Promise<IngestResult> {
    const loaded = await this.#load(request.organizationId)
    const context = loaded.assignment.context
    const refusal = checkFence(context, request.hostId, request.assignmentEpoch)
    if (refusal !== undefined) throw fenceError(refusal, context.hostId, context.assignmentEpoch, request)
    const batch = await this.#sortOut(context, request.events)
    await this.#findRepeatedJobEvents(batch)
    await this.#startTasks(loaded, context.assignmentEpoch, batch)
    const stored = batch.apply.length === 0 && batch.late.length === 0 ? 0 : await this.#store(batch)
    const processed = request.events.length - batch.refused.length
    const highWater = this.#loaded!.assignment.context.highWaterSeqn
    return {
      processed,
      failed: batch.refused.length,
      stored,
      duplicates: processed - stored,
      refused: batch.refused,
      jobOf: batch.jobOf,
      outcomes: request.events.map((e) => batch.outcomes.get(e.eventId)!),
      lastSeqn: highWater >= 0 ? highWater : null,
    }
  }

  /**
   * The seqn rules (H = the high-water mark of the current epoch; docs/printers-and-events.md): seqn > H is applied
   * in order; at or below H a stored eventId / idempotencyKey is a duplicate, a free seqn is late
   * (stored in the history, not applied: the state has moved past it), and a seqn stored under
   * another id is refused as reused.
   */
  async #sortOut(context: HostAssignmentContext, events: readonly IncomingEvent[]): Promise<IngestBatch> {
    const classified = classifyEvents(context, events)
    const batch: IngestBatch = { apply: classified.apply, highWaterSeqn: classified.highWaterSeqn, refused: [], duplicates: [], late: [], outcomes: new Map(), jobOf: new Map(), jobIdOf: new Map() }
    // At or below the mark with an eventId the memory window does not hold: the log tells which.
    const unknown = new Set(classified.forgotten)
    const stored = unknown.size === 0 ? new Map<number, string>() : await this.#options.persistence.storedEventIds(this.printerId, context.assignmentEpoch, classified.forgotten.map((e) => e.seqn))
    for (const event of classified.duplicates) {
      const at = unknown.has(event) ? stored.get(event.seqn) : event.eventId
      if (at === event.eventId) batch.duplicates.push(event)
      else if (at !== undefined) batch.refused.push({ eventId: event.eventId, seqn: event.seqn, reason: `seqn ${event.seqn} already holds another event (a reused seqn is a bridge fault; not stored)` })
      else batch.late.push(event)
    }
    return batch
  }

  /**
   * Events whose effect is not idempotent (jobs, errors) are checked against the log too: the
   * memory window may have forgotten them, and applying a job:start twice would close a running job.
   * A retried job event answers with the job it was stored with, also when it is found by its
   * idempotency key under another event id (in the log, or in the memory window).
   */
  async #findRepeatedJobEvents(batch: IngestBatch): Promise<void> {
    const sensitive = batch.apply.filter((e) => e.type.startsWith('job:') || e.type === 'printer:error')
    const repeatedJobEvents = batch.duplicates.filter((e) => e.type.startsWith('job:'))
    if (sensitive.length > 0 || repeatedJobEvents.length > 0) {
      const asked = [...sensitive, ...repeatedJobEvents]
      const known = await this.#options.persistence.lookupEvents(
        this.printerId,
        asked.map((e) => e.eventId),
        asked.flatMap((e) => (e.idempotencyKey === undefined ? [] : [e.idempotencyKey])),
      )
      for (const k of known) batch.jobOf.set(k.eventId, k.jobId)
      const jobOfKey = new Map(known.flatMap((k) => (k.idempotencyKey === null ? [] : [[k.idempotencyKey, k.jobId] as const])))
      for (const e of asked) {
        if (e.idempotencyKey !== undefined && !batch.jobOf.has(e.eventId) && jobOfKey.has(e.idempotencyKey)) batch.jobOf.set(e.eventId, jobOfKey.get(e.idempotencyKey)!)
      }
      const ids = new Set(known.map((k) => k.eventId))
      const keys = new Set(known.flatMap((k) => (k.idempotencyKey === null ? [] : [k.idempotencyKey])))
      const isKnown = (e: IncomingEvent) => ids.has(e.eventId) || (e.idempotencyKey !== undefined && keys.has(e.idempotencyKey))
      batch.duplicates.push(...sensitive.filter(isKnown))
      batch.apply = batch.apply.filter((e) => !sensitive.includes(e) || !isKnown(e))
    }
    for (const e of batch.duplicates) batch.outcomes.set(e.eventId, { eventId: e.eventId, seqn: e.seqn, outcome: 'duplicate' })
    for (const r of batch.refused) batch.outcomes.set(r.eventId, { eventId: r.eventId, seqn: r.seqn, outcome: 'refused', reason: 'seqn_reused', message: r.reason })
  }

  /**
   * A job:start naming a printer task starts that task's job, once (docs/print-jobs.md): the
   * task is linked first, in its own transaction, and the event then opens the job under the
   * task's job id. A crash between the two leaves the task started and the event unstored; the
   * bridge's retry finds the task started and opens the job under the same id.
   */
  async #startTasks(loaded: Loaded, assignmentEpoch: number, batch: IngestBatch): Promise<void> {
    const taskStarts = batch.apply.filter((e) => e.type === 'job:start' && dataOf(e)['printerTaskId'] !== undefined)
    if (taskStarts.length === 0) return
    const openJob = loaded.printer.getSnapshot().context.job
    const reportJob = openJob !== null && openJob.endedAt === null && openJob.openedByReport === true && openJob.jobId > 0 ? openJob.jobId : undefined
    const links = await this.#linkTaskStarts(taskStarts, assignmentEpoch, reportJob)
    for (const e of taskStarts) {
      const link = links.get(e)!
      const task = String(dataOf(e)['printerTaskId'])
      let refusal: { reason: RefusalReason; message: string } | undefined
      if (link.outcome === 'linked' || (link.outcome === 'already' && !(openJob !== null && openJob.endedAt === null && openJob.jobId === link.jobId))) batch.jobIdOf.set(e, link.jobId!)
      else if (link.outcome === 'already') refusal = { reason: 'job_already_started', message: `task ${task} started job ${link.jobId} already; this job:start changes nothing` }
      else if (link.outcome === 'finished') refusal = { reason: 'job_already_started', message: `task ${task} finished job ${link.jobId} already; this job:start changes nothing` }
      else if (link.outcome === 'fenced') refusal = { reason: 'task_fenced', message: `task ${task} was cancelled, expired, requeued or moved to another assignment; the job is not started by it` }
      else if (link.outcome === 'mismatch') refusal = { reason: 'task_claim_mismatch', message: "claimGeneration or jobId is not the task's; use the values of the task's claim" }
      else refusal = { reason: 'task_unknown', message: `no printer task ${task.slice(0, 64)} for this printer` }
      if (refusal === undefined) continue
      batch.refused.push({ eventId: e.eventId, seqn: e.seqn, reason: refusal.message })
      batch.outcomes.set(e.eventId, { eventId: e.eventId, seqn: e.seqn, outcome: 'refused', reason: refusal.reason, message: refusal.message })
    }
    batch.apply = batch.apply.filter((e) => !batch.outcomes.has(e.eventId))
  }

  /** Applies and stores the batch's events (late ones stored only); answers how many the log did not hold yet. */
  async #store(batch: IngestBatch): Promise<number> {
    const { apply, late } = batch
    const bridgeEvents: BridgeEvent[] = apply.map((e) => ({ type: e.type, data: e.data, timestamp: e.timestamp, jobId: batch.jobIdOf.get(e) }))
    const recordsOf = (after: PrinterContext): EventRecord[] => [
      ...apply.map((e, i) => record(e, after.eventJobs[i] ?? null, true)),
      ...late.map((e) => record(e, null, false)),
    ]
    const { inserted, records } = await this.#change({ type: 'events', events: bridgeEvents }, recordsOf, batch.highWaterSeqn)
    this.#loaded!.assignment = pureTransition(hostAssignmentMachine, this.#loaded!.assignment, {
      type: 'EVENTS_APPLIED',
      highWaterSeqn: batch.highWaterSeqn,
      eventIds: records.map((r) => r.eventId),
      idempotencyKeys: records.flatMap((r) => (r.idempotencyKey === null ? [] : [r.idempotencyKey])),
    })[0]
    for (const r of records) {
      if (r.jobId !== null || r.type.startsWith('job:')) batch.jobOf.set(r.eventId, r.jobId)
      // Events the log already held (the window forgot them) are duplicates, not new.
      const outcome = !inserted.has(r.eventId) ? 'duplicate' : r.applied ? 'applied' : 'late'
      batch.outcomes.set(r.eventId, { eventId: r.eventId, seqn: r.seqn, outcome })
    }
    return records.filter((r) => inserted.has(r.eventId)).length
  }

  async assignHost(organizationId: string, hostId: string): Promise<{ printerId: string; hostId: string; assignmentEpoch: number }> {
    const loaded = await this.#load(organizationId)
    const [next, actions] = pureTransition(hostAssignmentMachine, loaded.assignment, { type: 'ASSIGN', hostId })
    const persist = actions.find((a) => a.type === 'persistAssignment')
    const params = persist?.params as { hostId: string; assignmentEpoch: number } | undefined
    if (params === undefined) throw new Error('the host-assignment machine did not ask to persist an assignment')
    const moved = await this.#options.persistence.assignHost(this.printerId, params.hostId, loaded.assignment.context.assignmentEpoch, params.assignmentEpoch, this.#options.fencingToken())
    if (!moved) {
      // Another writer moved it (an upsert that first gave it a host): rebuild and try once more.
      this.#stale = true
      const again = await this.#load(organizationId)
      const [retry] = pureTransition(hostAssignmentMachine, again.assignment, { type: 'ASSIGN', hostId })
      if (!(await this.#options.persistence.assignHost(this.printerId, hostId, again.assignment.context.assignmentEpoch, retry.context.assignmentEpoch, this.#options.fencingToken()))) {
        this.#stale = true
        throw new ServiceError('printer_owner_unavailable', 'the printer was moved concurrently; retry')
      }
      again.assignment = retry
      return { printerId: this.printerId, hostId, assignmentEpoch: retry.context.assignmentEpoch }
    }
    loaded.assignment = next
    this.#publish([])
    return { printerId: this.printerId, hostId: params.hostId, assignmentEpoch: params.assignmentEpoch }
  }

  async setMaintenance(organizationId: string, on: boolean): Promise<void> {
    const loaded = await this.#load(organizationId)
    const job = loaded.printer.getSnapshot().context.job
    if (on && job !== null && (job.state === 'printing' || job.state === 'paused')) {
      throw new ServiceError('printer_busy', `the printer is ${job.state} job ${job.jobId}; maintenance can start once it ends`, {
        extra: { job, reason: job.state === 'printing' ? 'job_printing' : 'job_paused' },
      })
    }
    await this.#change({ type: 'maintenance', on }, () => [], loaded.assignment.context.highWaterSeqn)
  }

  /** Clears the standing error (the operator saw it); answers the error cleared, or null when there was none. */
  async acknowledgeError(organizationId: string): Promise<{ acknowledged: PrinterError | null; view: PrinterView }> {
    const loaded = await this.#load(organizationId)
    const error = loaded.printer.getSnapshot().context.error
    if (error !== null) await this.#change({ type: 'acknowledgeError' }, () => [], loaded.assignment.context.highWaterSeqn)
    return { acknowledged: error, view: this.#view() }
  }

  async assignFilaments(organizationId: string, slots: readonly FilamentAssignment[], jobId: number | null): Promise<PersistedPrinterState['ams']> {
    const loaded = await this.#load(organizationId)
    await this.#change({ type: 'filaments', slots, jobId }, () => [], loaded.assignment.context.highWaterSeqn)
    return this.#loaded!.printer.getSnapshot().context.ams
  }

  /**
   * The bridge's connection report (PATCH connection-status): seen now, or disconnected now. A status
   * word can start or end the printer's job, so it comes with the bridge's host and epoch, fenced as
   * an event is (the route refuses one without them).
   */
  async reportConnection(organizationId: string, connected: boolean, at: number, status: string | undefined, fence?: ConnectionFence): Promise<void> {
    const loaded = await this.#load(organizationId)
    if (status !== undefined) {
      if (fence === undefined) throw new Error('a status word reached the printer actor without its fence')
      const context = loaded.assignment.context
      const refusal = checkFence(context, fence.hostId, fence.assignmentEpoch)
      if (refusal !== undefined) throw fenceError(refusal, context.hostId, context.assignmentEpoch, fence)
    }
    const event: BridgeEvent = connected ? { type: 'heartbeat', data: status === undefined ? {} : { status }, timestamp: at } : { type: 'client:disconnect', data: {}, timestamp: at }
    // A status word given with the report is the printer's status, like a status event's.
    const events: BridgeEvent[] = connected && status !== undefined ? [{ type: 'status', data: { status }, timestamp: at }, event] : [event]
    await this.#change({ type: 'events', events }, () => [], loaded.assignment.context.highWaterSeqn)
  }

  /** Writes a presence change the timer made (offline after silence). */
  async persistPresence(): Promise<void> {
    const loaded = this.#loaded
    if (loaded === undefined || this.#stale) return
    const online = this.online
    if (online === loaded.persistedOnline) return
    try {
      await this.#write(loaded.printer.getSnapshot().context, [], loaded.assignment.context.highWaterSeqn, online, false, [])
    } catch (error) {
      // Rebuilt from the store at the next message; the silence sweep corrects the stored flag meanwhile.
      this.stop()
      throw error
    }
    loaded.persistedOnline = online
    this.#publish([])
  }

  async view(organizationId: string): Promise<PrinterView> {
    await this.#load(organizationId)
    return this.#view()
  }

  /** Marks the actor for rehydration (its configuration changed in the store). */
  invalidate(): void {
    this.stop()
  }

  #view(): PrinterView {
    const loaded = this.#loaded!
    const snap = loaded.printer.getSnapshot()
    const highWater = loaded.assignment.context.highWaterSeqn
    return {
      ...persistable(snap.context),
      ...loaded.identity,
      printerId: this.printerId,
      organizationId: loaded.organizationId,
      online: snap.value.presence === 'online',
      activity: snap.value.activity as PrinterView['activity'],
      hostId: loaded.assignment.context.hostId,
      assignmentEpoch: loaded.assignment.context.assignmentEpoch,
      lastSeqn: highWater >= 0 ? highWater : null,
      updatedAt: this.#options.clock.now(),
    }
  }

  /**
   * Sends one machine event, gives the jobs it opened their ids, writes the
   * result, and keeps it only if the write succeeded. The previous snapshot
   * is not restored in place: the actor is rebuilt from the store
   * (`#stale`), which holds exactly what was committed.
   */
  async #change(
    event: Parameters<Actor<PrinterLogic>['send']>[0],
    recordsOf: (after: PrinterContext) => EventRecord[],
    highWaterSeqn: number,
  ): Promise<{ inserted: ReadonlySet<string>; records: EventRecord[] }> {
    const loaded = this.#loaded!
    let outcome
    let snap
    let records: EventRecord[]
    try {
      this.#send(loaded.printer, event)
      const placeholders = placeholderJobIds(loaded.printer.getSnapshot().context)
      if (placeholders.length > 0) {
        const ids = await this.#options.persistence.reserveJobIds(placeholders.length)
        this.#send(loaded.printer, { type: 'jobIds', ids: new Map(placeholders.map((p, i) => [p, ids[i]!])) })
      }
      snap = loaded.printer.getSnapshot()
      records = recordsOf(snap.context)
      const seen = event.type === 'events' && event.events.length > 0
      outcome = await this.#write(snap.context, records, highWaterSeqn, snap.value.presence === 'online', seen, snap.context.changedJobs)
    } catch (error) {
      this.stop()
      throw error
    }
    loaded.persistedOnline = snap.value.presence === 'online'
    // The commit that ends a job closed the ready gate in the store (src/printers/event-store.ts); an operator's hold stays.
    if (loaded.identity.readyGate === 'open' && snap.context.changedJobs.some((j) => j.endedAt !== null)) loaded.identity = { ...loaded.identity, readyGate: 'awaiting_verification' }
    this.#publish(records.filter((r) => outcome.inserted.has(r.eventId)), snap.context.changedJobs)
    return { inserted: outcome.inserted, records }
  }

  /** Links each job:start to its task; a printerTaskId that is no uuid names no task. */
  async #linkTaskStarts(events: readonly IncomingEvent[], assignmentEpoch: number, reportJobId: number | undefined): Promise<Map<IncomingEvent, TaskStartLink>> {
    const result = new Map<IncomingEvent, TaskStartLink>()
    const requests: TaskStartRequest[] = []
    for (const e of events) {
      const taskId = dataOf(e)['printerTaskId']
      const generation = dataOf(e)['claimGeneration']
      if (typeof taskId !== 'string' || !uuidPattern.test(taskId) || (generation !== undefined && (typeof generation !== 'string' || !uuidPattern.test(generation)))) {
        result.set(e, { outcome: typeof taskId === 'string' && uuidPattern.test(taskId) ? 'mismatch' : 'unknown', jobId: null })
        continue
      }
      const jobId = dataOf(e)['jobId']
      const namedJob = typeof jobId === 'number' ? jobId : typeof jobId === 'string' && /^[0-9]{1,15}$/.test(jobId) ? Number(jobId) : undefined
      if (jobId !== undefined && jobId !== null && namedJob === undefined) {
        result.set(e, { outcome: 'mismatch', jobId: null })
        continue
      }
      requests.push({ taskId: taskId.toLowerCase(), assignmentEpoch, claimGeneration: typeof generation === 'string' ? generation.toLowerCase() : undefined, jobId: namedJob, reportJobId })
    }
    const links = requests.length === 0 ? new Map<string, TaskStartLink>() : await this.#options.persistence.linkTaskStarts(this.printerId, requests, this.#options.fencingToken())
    for (const e of events) if (!result.has(e)) result.set(e, links.get(String(dataOf(e)['printerTaskId']).toLowerCase()) ?? { outcome: 'unknown', jobId: null })
    return result
  }

  /** A message's own machine events: presence changes they make are the message's, not the timer's. */
  #send(printer: Actor<PrinterLogic>, event: Parameters<Actor<PrinterLogic>['send']>[0]): void {
    this.#inMessage = true
    try {
      printer.send(event)
    } finally {
      this.#inMessage = false
    }
  }

  #write(context: PrinterContext, events: EventRecord[], highWaterSeqn: number, online: boolean, seen: boolean, jobs: PrinterJob[]) {
    const loaded = this.#loaded!
    const unit: PrinterCommit = {
      printerId: this.printerId,
      organizationId: loaded.organizationId,
      hostId: loaded.assignment.context.hostId,
      assignmentEpoch: loaded.assignment.context.assignmentEpoch,
      fencingToken: this.#options.fencingToken(),
      events,
      highWaterSeqn,
      state: persistable(context),
      online,
      seen,
      jobs,
    }
    return this.#options.persistence.commit(unit)
  }

  #publish(events: readonly EventRecord[], jobs: readonly PrinterJob[] = []): void {
    this.#options.onCommitted({ view: this.#view(), events, jobs })
  }

  async #load(organizationId: string) {
    if (this.#stale) {
      this.stop()
      const hydrated = await this.#options.persistence.hydrate(this.printerId)
      this.#missing = hydrated === undefined
      if (hydrated === undefined) throw notFound()
      this.#loaded = this.#build(hydrated)
      this.#stale = false
    }
    const loaded = this.#loaded!
    // Another organization's printer is "not found", exactly like a missing one.
    if (loaded.organizationId !== organizationId) throw notFound()
    return loaded
  }

  #build(hydrated: HydratedPrinter) {
    const [assignment] = initialTransition(hostAssignmentMachine, {
      printerId: hydrated.printerId,
      hostId: hydrated.hostId,
      assignmentEpoch: hydrated.assignmentEpoch,
      highWaterSeqn: hydrated.highWaterSeqn,
      recent: RecentWindow.of(hydrated.recentEventIds, hydrated.recentKeys),
    })
    const printer = createActor(this.#options.logic as AnyActorLogic as PrinterLogic, {
      input: { printerId: hydrated.printerId, printerType: hydrated.printerType, ...(hydrated.state ?? {}) },
      clock: this.#options.clock,
    })
    let presence = 'offline'
    printer.subscribe((snap) => {
      const now = snap.value.presence as string
      if (now !== presence && !this.#inMessage) this.#options.onOwnChange()
      presence = now
    })
    printer.start()
    // Hydrated printers start offline (the machine's rule); the store may still say online.
    const identity: PrinterIdentity = { name: hydrated.name, printerType: hydrated.printerType, model: hydrated.model, readyGate: hydrated.readyGate }
    return { organizationId: hydrated.organizationId, identity, assignment, printer, persistedOnline: true }
  }
}

function persistable(context: PrinterContext): PersistedPrinterState {
  const { printerId: _id, printerType: _type, changedJobs: _jobs, eventJobs: _eventJobs, ...state } = context
  return state
}

function record(e: IncomingEvent, jobId: number | null, applied: boolean): EventRecord {
  return { eventId: e.eventId, idempotencyKey: e.idempotencyKey ?? null, type: e.type, seqn: e.seqn, timestamp: e.timestamp, deliveryAttempt: e.deliveryAttempt, data: e.data, jobId, applied }
}

function dataOf(e: IncomingEvent): Record<string, unknown> {
  return e.data as Record<string, unknown>
}

function notFound(): ServiceError {
  return new ServiceError('printer_not_found', 'no such printer in this organization')
}

function fenceError(refusal: FenceRefusal, hostId: string | null, epoch: number, request: ConnectionFence): ServiceError {
  const messages: Record<FenceRefusal, string> = {
    unassigned: 'the printer is not assigned to any host; assign it with PUT /v1/printers/{id}/host-assignment',
    stale_epoch: `assignmentEpoch ${request.assignmentEpoch} is stale: the printer is at epoch ${epoch} now (it was moved); re-read GET /v1/printer-config?host_id=${request.hostId}`,
    unknown_epoch: `assignmentEpoch ${request.assignmentEpoch} was never issued for this printer (current epoch ${epoch})`,
    other_host: `the printer is assigned to another host at epoch ${epoch}`,
  }
  void hostId // never named: another host's id is not the caller's business
  return new ServiceError(fenceErrors[refusal], messages[refusal])
}
