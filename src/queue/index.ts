/**
 * The smart queue on this node: the queue actors of the organizations whose
 * queue shard this node owns (actors/queue-runtime.ts), their pass (plan with
 * protocol/queue-match.ts, dispatch with queue-dispatch.ts), and the wakes.
 *
 * What wakes a queue: a job created, requeued, reordered, cancelled or
 * deleted (the routes call `wake`); a printer whose queue-relevant facts
 * changed (online, status, job, ready gate, maintenance, host, filaments:
 * every node sees every printer change, its own actors' and, through the
 * Redis relay, the others'); a task that expired; a spool loaded. A wake on a
 * node that does not own the queue goes to every node through the relay and
 * the owner takes it. A slow sweep on every node wakes the queues it owns
 * that have queued jobs, so a lost wake costs at most QUEUE_SWEEP_MS.
 */
import { performance } from 'node:perf_hooks'
import { QueueRuntime } from '../../actors/queue-runtime.js'
import type { Clock } from '../../actors/clock.js'
import type { Fence, ShardDirectory } from '../../actors/shard-directory.js'
import type { PassOutcome } from '../../machines/queue.js'
import { Planner, type QueueJob } from '../../protocol/queue-match.js'
import type { PrinterState } from '../../protocol/schemas/printer-state.js'
import type { Config } from '../node/config.js'
import type { Dispatcher } from '../jobs/dispatch.js'
import type { Logger } from '../observability/log.js'
import type { Counter, MetricsRegistry } from '../observability/metrics.js'
import type { Database } from '../storage/database.js'
import { dispatchPlanned } from './queue-dispatch.js'
import { automatic, queuedJobs, queuePrinters } from './queue-facts.js'
import { staggerOf } from './stagger.js'
import type { ViewSettings } from './queue-view.js'

export interface QueueNode {
  readonly settings: ViewSettings
  /** Something that may let a job of this organization go: its queue looks again soon. */
  wake(organizationId: string): void
  /** A printer changed (on this node or another): wakes its queue when what the queue reads of it changed. */
  printerChanged(organizationId: string, printer: PrinterState): void
  /** A printer task changed (expired, fenced, finished…): wakes its queue, except for the offers the queue's own pass announces. */
  taskChanged(organizationId: string): void
  /** A printer left: forget what was seen of it. */
  printerRemoved(printerId: string): void
  /** Wakes coming from other nodes (the relay calls this). */
  wakeFromPeer(organizationId: string): void
  /** Wakes this node cannot take go to the other nodes through this (the relay). */
  onRemoteWake(listener: (organizationId: string) => void): void
  /** After every pass: the organization's queue may look different (the live topic follows; the benchmark times passes). */
  onPassed(listener: (organizationId: string, pass: PassStats) => void): void
  start(): void
  close(): void
}

/** Queued jobs read per query of a pass. */
const pageSize = 2_000

export interface PassStats {
  /** Tasks offered by the pass. */
  offered: number
  /** Queued jobs the pass looked at. */
  queued: number
  /** Wall time of the pass (reads, plan, dispatch transaction), ms. */
  ms: number
}

export function createQueueNode(config: Config, db: Database, dispatcher: Dispatcher, directory: ShardDirectory, clock: Clock, logger: Logger, metrics: MetricsRegistry, taskEvents: Counter): QueueNode {
  return new NodeQueues({ config, db, dispatcher, directory, clock, logger, metrics, taskEvents })
}

interface QueueDeps {
  config: Config
  db: Database
  dispatcher: Dispatcher
  directory: ShardDirectory
  clock: Clock
  logger: Logger
  metrics: MetricsRegistry
  taskEvents: Counter
}

/** What a pass read and chose: the planner with its assignments, the jobs it read, and the stagger it started from. */
interface Plan {
  planner: Planner
  jobs: Map<number, QueueJob>
  queued: number
  startsAvailable: number
}

/** The queues of the organizations whose queue shard this node owns, and the wakes that reach them. */
class NodeQueues implements QueueNode {
  readonly settings: ViewSettings
  readonly #deps: QueueDeps
  readonly #runtime: QueueRuntime
  readonly #passes: Counter
  readonly #placed: Counter
  readonly #staggered: Counter
  readonly #remote = new Set<(organizationId: string) => void>()
  readonly #passed = new Set<(organizationId: string, pass: PassStats) => void>()
  /** What the queue last read of each printer (signatureOf). */
  readonly #seen = new Map<string, string>()
  /** The organization whose offers this node's pass is announcing (its own offers wake nothing). */
  #announcing: string | undefined
  #sweepTimer: unknown
  #unsubscribeGained: (() => void) | undefined

  constructor(deps: QueueDeps) {
    const { config, metrics } = deps
    this.#deps = deps
    this.settings = { maxStarts: config.queueMaxStarts, staggerMs: config.queueStaggerMs, colorTolerance: config.queueColorTolerance }
    this.#passes = metrics.counter('queue_passes_total', 'Queue passes run (per organization and wake), by outcome.', ['outcome'])
    this.#placed = metrics.counter('queue_jobs_dispatched_total', 'Jobs the queue offered to a printer.')
    this.#staggered = metrics.counter('queue_starts_staggered_total', 'Starts the stagger held back at a pass (a job may count at several passes).')
    this.#runtime = new QueueRuntime({
      directory: deps.directory,
      clock: deps.clock,
      pass: (organizationId, fence) => this.#pass(organizationId, fence),
      settleMs: 25,
      sweepMs: config.queueSweepMs,
      onError: (organizationId, error) => deps.logger.warn('queue pass failed; retried', { organizationId, error: String(error) }),
    })
  }

  wake(organizationId: string): void {
    if (this.#runtime.wake(organizationId)) return
    for (const listener of this.#remote) listener(organizationId)
  }

  printerChanged(organizationId: string, printer: PrinterState): void {
    const signature = signatureOf(printer)
    if (this.#seen.get(printer.id) === signature) return
    this.#seen.set(printer.id, signature)
    this.#runtime.wake(organizationId)
  }

  taskChanged(organizationId: string): void {
    if (this.#announcing !== organizationId) this.wake(organizationId)
  }

  printerRemoved(printerId: string): void {
    this.#seen.delete(printerId)
  }

  wakeFromPeer(organizationId: string): void {
    this.#runtime.wake(organizationId)
  }

  onRemoteWake(listener: (organizationId: string) => void): void {
    this.#remote.add(listener)
  }

  onPassed(listener: (organizationId: string, pass: PassStats) => void): void {
    this.#passed.add(listener)
  }

  start(): void {
    const run = () => void this.#sweep().catch((error: unknown) => this.#deps.logger.warn('queue sweep failed; retried at the next tick', { error: String(error) }))
    this.#sweepTimer = this.#deps.clock.setInterval(run, this.#deps.config.queueSweepMs)
    this.#unsubscribeGained = this.#deps.directory.onShardGained(run)
    run()
  }

  close(): void {
    this.#deps.clock.clearInterval(this.#sweepTimer)
    this.#unsubscribeGained?.()
    this.#runtime.stop()
  }

  /** Wakes every queue this node owns that has queued jobs: a lost wake costs at most QUEUE_SWEEP_MS. */
  async #sweep(): Promise<void> {
    const rows = await this.#deps.db.sql<{ organization_id: string }[]>`select distinct organization_id from print_jobs where status = 'queued'`
    for (const row of rows) this.#runtime.wake(row.organization_id)
  }

  /** One pass: read and plan, then one dispatch transaction for every pair chosen, then the offers announced. */
  async #pass(organizationId: string, fence: Fence): Promise<PassOutcome> {
    const started = performance.now()
    const now = this.#deps.clock.now()
    const plan = await this.#plan(organizationId, now)
    if (plan === undefined) {
      this.#passes.inc({ outcome: 'empty' })
      this.#tell(organizationId, { offered: 0, queued: 0, ms: performance.now() - started })
      return { empty: true, wakeInMs: null }
    }
    const { planner, jobs, queued } = plan
    const planned = performance.now()
    const offered = await dispatchPlanned(this.#deps.db.sql, organizationId, planner.assignments.map((a) => ({ job: jobs.get(a.jobId)!, printerId: a.printerId })), {
      colorTolerance: this.settings.colorTolerance,
      offerTtlSeconds: this.#deps.config.taskOfferTtlSeconds,
      fence,
      now: new Date(now),
    })
    const ended = performance.now()
    this.#deps.logger.debug('queue pass', { organizationId, node: this.#deps.directory.nodeId, shard: fence.shard, token: fence.token, queued, offered: offered.length, staggered: planner.staggered, readPlanMs: planned - started, dispatchMs: ended - planned })
    this.#count(offered.length, planner.staggered)
    this.#announce(organizationId, offered)
    this.#tell(organizationId, { offered: offered.length, queued, ms: performance.now() - started })
    return { empty: false, wakeInMs: await this.#nextWake(organizationId, plan) }
  }

  /**
   * The printers first (no free printer, or no start allowed: nothing to read of the jobs), then the
   * queued jobs a page at a time in queue order until nothing more can be placed. Undefined when no job waits.
   */
  async #plan(organizationId: string, now: number): Promise<Plan | undefined> {
    const { sql } = this.#deps.db
    // Most wakes of a farm at work find nothing waiting (a printer's status changed): one indexed probe, nothing else read.
    const [waiting] = await sql<{ any: boolean }[]>`select exists (select 1 from print_jobs j where j.organization_id = ${organizationId} and j.status = 'queued' ${automatic(sql)}) as any`
    if (waiting?.any !== true) return undefined
    const [printers, stagger] = await Promise.all([queuePrinters(sql, organizationId, now), staggerOf(sql, organizationId, this.settings, now)])
    const planner = new Planner(printers, { colorTolerance: this.settings.colorTolerance, startsAvailable: stagger.startsAvailable })
    let queued = 0
    const jobs = new Map<number, QueueJob>()
    for (let offset = 0; ; offset += pageSize) {
      // With no free printer the jobs are not read: only whether any wait (the actor rests when none does). Jobs that
      // wait for a hand assignment are never read by a pass (GET /v1/queue explains them).
      const page = await queuedJobs(sql, organizationId, planner.freeLeft === 0 ? 1 : pageSize, offset, { automaticOnly: true })
      queued += page.length
      for (const job of page) jobs.set(job.id, job)
      planner.place(page)
      if (page.length < pageSize || !planner.canDispatch) break
    }
    return queued === 0 ? undefined : { planner, jobs, queued, startsAvailable: stagger.startsAvailable }
  }

  #count(offered: number, staggered: number): void {
    this.#passes.inc({ outcome: offered > 0 ? 'dispatched' : 'waiting' })
    if (offered > 0) {
      this.#placed.inc({}, offered)
      this.#deps.taskEvents.inc({ event: 'offered' }, offered)
    }
    if (staggered > 0) this.#staggered.inc({}, staggered)
  }

  /** The host topics hear of the offers; the queue itself needs no second pass for its own. */
  #announce(organizationId: string, offered: readonly { hostId: string; taskId: string }[]): void {
    this.#announcing = organizationId
    try {
      for (const o of offered) this.#deps.dispatcher.notify(organizationId, o.hostId, o.taskId)
    } finally {
      this.#announcing = undefined
    }
  }

  #tell(organizationId: string, stats: PassStats): void {
    for (const listener of this.#passed) listener(organizationId, stats)
  }

  /** Held back by the stagger: look again when the window frees a start (the window counts from the store). */
  async #nextWake(organizationId: string, { planner, startsAvailable }: Plan): Promise<number | null> {
    if (planner.staggered === 0 && !(startsAvailable === 0 && planner.freeLeft > 0)) return null
    const { clock } = this.#deps
    const after = await staggerOf(this.#deps.db.sql, organizationId, this.settings, clock.now())
    return after.nextStartAt === null ? 0 : Math.max(0, after.nextStartAt - clock.now())
  }
}

/** What the queue reads of a printer, as one string: a change of it may free or bar a job. */
function signatureOf(p: PrinterState): string {
  return [p.online, p.status, p.maintenance, p.ready_gate, p.host_id, p.assignment_epoch, p.job === null ? '' : `${p.job.id}:${p.job.state}`, p.filaments.map((f) => `${f.slot}:${f.type}:${f.color_hex}`).join(',')].join('|')
}
