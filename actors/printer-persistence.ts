/**
 * What the printer runtime needs from the durable store, as an interface:
 * actors/ may not touch PostgreSQL (the layering of docs/development.md), so
 * src/printers implements this and the runtime is given it. The store, not
 * the actor, is the truth: an actor whose write failed is rehydrated from
 * here.
 */
import type { PrinterEventType } from '../protocol/printer-events.js'
import type { PrinterContext, PrinterJob } from '../machines/printer.js'
import type { PrinterType } from '../protocol/printer-reports/index.js'

/** The printer state kept across restarts: the machine's context minus its id, its configuration and per-transition bookkeeping. */
export type PersistedPrinterState = Omit<PrinterContext, 'printerId' | 'printerType' | 'changedJobs' | 'eventJobs'>

/** The configuration the actor reads with its state: what the read model and the report adapters need. */
export interface PrinterIdentity {
  name: string
  printerType: PrinterType
  model: string | null
  /**
   * The ready gate (docs/print-jobs.md): open, awaiting an operator's verification of the plate
   * (set in the store by the commit that ends a job, and here by the same commit), or held out
   * of dispatch by an operator.
   */
  readyGate: ReadyGate
}

export type ReadyGate = 'open' | 'awaiting_verification' | 'held'

/** The gate as printers.ready / ready_source store it. */
export function readyGateOf(ready: boolean, source: string | null): ReadyGate {
  return ready ? 'open' : source === 'operator_override' ? 'held' : 'awaiting_verification'
}

export interface HydratedPrinter extends PrinterIdentity {
  printerId: string
  organizationId: string
  hostId: string | null
  assignmentEpoch: number
  /** Of the current epoch; -1 when it has no events yet. */
  highWaterSeqn: number
  /** The newest stored eventIds, oldest first. */
  recentEventIds: string[]
  /** The idempotency keys of those events (the ones that have one), oldest first. */
  recentKeys: string[]
  state: PersistedPrinterState | null
}

/** One event as it goes to the event log. */
export interface EventRecord {
  eventId: string
  idempotencyKey: string | null
  type: PrinterEventType
  seqn: number
  timestamp: number
  deliveryAttempt: number
  data: Record<string, unknown>
  /** The job the event belongs to (job:* events, and a report that opened a job), else null. */
  jobId: number | null
  /** Applied in seqn order; false for a late event (stored in the history, not applied). */
  applied: boolean
}

/** Everything one actor message changes, written atomically (one group-commit unit). */
export interface PrinterCommit {
  printerId: string
  organizationId: string
  hostId: string | null
  assignmentEpoch: number
  /** The shard's fencing token, checked in the same statement (0: unfenced); a refusal rejects with ShardUnavailable 'fenced'. */
  fencingToken: number
  events: EventRecord[]
  highWaterSeqn: number
  state: PersistedPrinterState
  online: boolean
  /** The message was a sign of life from the bridge (events, a connection report): the silence sweep's clock restarts. */
  seen: boolean
  jobs: PrinterJob[]
}

export interface CommitOutcome {
  /** eventIds the log did not hold before (the rest were already stored: duplicates the store caught). */
  inserted: ReadonlySet<string>
}

/** An event the log holds, as far as idempotency cares. */
export interface StoredEventRef {
  eventId: string
  idempotencyKey: string | null
  jobId: number | null
}

/** What linking a bridge's job:start to a printer task did (docs/print-jobs.md). */
export interface TaskStartLink {
  /** linked: the task started now; already: it had started before (by this start or an operator); finished: its job has ended. */
  outcome: 'linked' | 'already' | 'finished' | 'fenced' | 'mismatch' | 'unknown'
  /** The task's job (linked or already). */
  jobId: number | null
}

export interface TaskStartRequest {
  taskId: string
  assignmentEpoch: number
  claimGeneration?: string | undefined
  /** The job:start's jobId, when it names one: it must be the task's job. */
  jobId?: number | undefined
  /**
   * The stored job a printer report opened for this print before the start arrived: linked,
   * the task's job takes it over (its events move to the task's job; the report's job is deleted).
   */
  reportJobId?: number | undefined
}

export interface PrinterPersistence {
  /** undefined when no such printer exists. */
  hydrate(printerId: string): Promise<HydratedPrinter | undefined>
  /** Resolves only after the commit (group-committed with other actors' units). */
  commit(unit: PrinterCommit): Promise<CommitOutcome>
  /** Fresh numeric job ids (the jobs table's own sequence), for job:start events. */
  reserveJobIds(count: number): Promise<number[]>
  /** The eventIds stored at these seqns of one epoch (to tell a resent event from a reused seqn). */
  storedEventIds(printerId: string, assignmentEpoch: number, seqns: readonly number[]): Promise<Map<number, string>>
  /** Events of the printer the log holds with one of these eventIds or idempotency keys (any epoch). */
  lookupEvents(printerId: string, eventIds: readonly string[], idempotencyKeys: readonly string[]): Promise<StoredEventRef[]>
  /**
   * Moves the printer to a host if its epoch is still `fromEpoch` (compare-and-set);
   * false when the store moved on (another writer), so the actor rehydrates;
   * rejects with ShardUnavailable 'fenced' when the token is not the newest.
   */
  assignHost(printerId: string, hostId: string, fromEpoch: number, toEpoch: number, fencingToken: number): Promise<boolean>
  /**
   * Starts the printer's tasks named by job:start events, each in its own transaction (task →
   * started, job → printing), once: a task that started already answers `already`.
   */
  /** Fenced by the shard token the actor holds (ShardUnavailable when another node has raised it). */
  linkTaskStarts(printerId: string, starts: readonly TaskStartRequest[], fencingToken: number): Promise<Map<string, TaskStartLink>>
  /** Printers still marked online that nobody has heard from since `before`, other than the live ones and those `owns` rejects: marked offline. */
  markSilentOffline(before: Date, liveIds: readonly string[], owns?: (printerId: string) => boolean): Promise<string[]>
}
