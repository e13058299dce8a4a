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
  const settings: ViewSettings = { maxStarts: config.queueMaxStarts, staggerMs: config.queueStaggerMs, colorTolerance: config.queueColorTolerance }
  const passes = metrics.counter('queue_passes_total', 'Queue passes run (per organization and wake), by outcome.', ['outcome'])
  const placed = metrics.counter('queue_jobs_dispatched_total', 'Jobs the queue offered to a printer.')
  const staggered = metrics.counter('queue_starts_staggered_total', 'Starts the stagger held back at a pass (a job may count at several passes).')
  const remote = new Set<(organizationId: string) => void>()
  const passed = new Set<(organizationId: string, pass: PassStats) => void>()
  const seen = new Map<string, string>()
  let announcing: string | undefined

  /**
   * One pass: the printers first (no free printer, or no start allowed: nothing to read of the
   * jobs), then the queued jobs a page at a time in queue order until nothing more can be placed,
   * then one dispatch transaction for every pair chosen.
   */
  const pass = async (organizationId: string, fence: Fence): Promise<PassOutcome> => {
    const started = performance.now()
    const now = clock.now()
    // Most wakes of a farm at work find nothing waiting (a printer's status changed): one indexed probe, nothing else read.
    const [waiting] = await db.sql<{ any: boolean }[]>`select exists (select 1 from print_jobs j where j.organization_id = ${organizationId} and j.status = 'queued' ${automatic(db.sql)}) as any`
    if (waiting?.any !== true) {
      passes.inc({ outcome: 'empty' })
      for (const listener of passed) listener(organizationId, { offered: 0, queued: 0, ms: performance.now() - started })
      return { empty: true, wakeInMs: null }
    }
    const [printers, stagger] = await Promise.all([queuePrinters(db.sql, organizationId, now), staggerOf(db.sql, organizationId, settings, now)])
    const planner = new Planner(printers, { colorTolerance: settings.colorTolerance, startsAvailable: stagger.startsAvailable })
    let queued = 0
    const jobs = new Map<number, QueueJob>()
    for (let offset = 0; ; offset += pageSize) {
      // With no free printer the jobs are not read: only whether any wait (the actor rests when none does). Jobs that
      // wait for a hand assignment are never read by a pass (GET /v1/queue explains them).
      const page = await queuedJobs(db.sql, organizationId, planner.freeLeft === 0 ? 1 : pageSize, offset, { automaticOnly: true })
      queued += page.length
      for (const job of page) jobs.set(job.id, job)
      planner.place(page)
      if (page.length < pageSize || !planner.canDispatch) break
    }
    const planned = performance.now()
    if (queued === 0) {
      passes.inc({ outcome: 'empty' })
      for (const listener of passed) listener(organizationId, { offered: 0, queued: 0, ms: performance.now() - started })
      return { empty: true, wakeInMs: null }
    }
    const offered = await dispatchPlanned(db.sql, organizationId, planner.assignments.map((a) => ({ job: jobs.get(a.jobId)!, printerId: a.printerId })), {
      colorTolerance: settings.colorTolerance,
      offerTtlSeconds: config.taskOfferTtlSeconds,
      fence,
      now: new Date(now),
    })
    const ended = performance.now()
    logger.debug('queue pass', { organizationId, node: directory.nodeId, shard: fence.shard, token: fence.token, queued, offered: offered.length, staggered: planner.staggered, readPlanMs: planned - started, dispatchMs: ended - planned })
    passes.inc({ outcome: offered.length > 0 ? 'dispatched' : 'waiting' })
    if (offered.length > 0) {
      placed.inc({}, offered.length)
      taskEvents.inc({ event: 'offered' }, offered.length)
    }
    if (planner.staggered > 0) staggered.inc({}, planner.staggered)
    // The host topics hear of the offers; the queue itself needs no second pass for its own.
    announcing = organizationId
    try {
      for (const o of offered) dispatcher.notify(organizationId, o.hostId, o.taskId)
    } finally {
      announcing = undefined
    }
    for (const listener of passed) listener(organizationId, { offered: offered.length, queued, ms: performance.now() - started })
    // Held back by the stagger: look again when the window frees a start (the window counts from the store).
    const after = planner.staggered > 0 || (stagger.startsAvailable === 0 && planner.freeLeft > 0) ? await staggerOf(db.sql, organizationId, settings, clock.now()) : undefined
    const wakeInMs = after === undefined ? null : after.nextStartAt === null ? 0 : Math.max(0, after.nextStartAt - clock.now())
    return { empty: false, wakeInMs }
  }

  const runtime = new QueueRuntime({
    directory,
    clock,
    pass,
    settleMs: 25,
    sweepMs: config.queueSweepMs,
    onError: (organizationId, error) => logger.warn('queue pass failed; retried', { organizationId, error: String(error) }),
  })

  const wake = (organizationId: string) => {
    if (runtime.wake(organizationId)) return
    for (const listener of remote) listener(organizationId)
  }

  /** What the queue reads of a printer, as one string: a change of it may free or bar a job. */
  const signatureOf = (p: PrinterState): string =>
    [p.online, p.status, p.maintenance, p.ready_gate, p.host_id, p.assignment_epoch, p.job === null ? '' : `${p.job.id}:${p.job.state}`, p.filaments.map((f) => `${f.slot}:${f.type}:${f.color_hex}`).join(',')].join('|')

  let sweepTimer: unknown
  const sweep = async () => {
    const rows = await db.sql<{ organization_id: string }[]>`select distinct organization_id from print_jobs where status = 'queued'`
    for (const row of rows) runtime.wake(row.organization_id)
  }
  let unsubscribeGained: (() => void) | undefined

  return {
    settings,
    wake,
    printerChanged: (organizationId, printer) => {
      const signature = signatureOf(printer)
      if (seen.get(printer.id) === signature) return
      seen.set(printer.id, signature)
      runtime.wake(organizationId)
    },
    taskChanged: (organizationId) => {
      if (announcing !== organizationId) wake(organizationId)
    },
    printerRemoved: (printerId) => void seen.delete(printerId),
    wakeFromPeer: (organizationId) => void runtime.wake(organizationId),
    onRemoteWake: (listener) => void remote.add(listener),
    onPassed: (listener) => void passed.add(listener),
    start: () => {
      const run = () => void sweep().catch((error: unknown) => logger.warn('queue sweep failed; retried at the next tick', { error: String(error) }))
      sweepTimer = clock.setInterval(run, config.queueSweepMs)
      unsubscribeGained = directory.onShardGained(run)
      run()
    },
    close: () => {
      clock.clearInterval(sweepTimer)
      unsubscribeGained?.()
      runtime.stop()
    },
  }
}
