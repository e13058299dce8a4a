/**
 * Print jobs on this node: the job store, the dispatcher and its deadline
 * sweep. Every node sweeps (each change is conditional on the row under its
 * lock, so nodes sweeping together change each task once); the sweep runs on
 * the node's clock, often enough for the shortest deadline configured.
 */
import type { Clock } from '../../actors/clock.js'
import type { PrinterChange } from '../../actors/printer-actor.js'
import type { PrinterRuntime } from '../../actors/printer-runtime.js'
import type { Config } from '../node/config.js'
import type { FileNode } from '../files/index.js'
import type { Logger } from '../observability/log.js'
import type { Counter, MetricsRegistry } from '../observability/metrics.js'
import type { SealedBox } from '../secrets/sealed-box.js'
import type { Database } from '../storage/database.js'
import { createDeductionRunner } from '../inventory/deduction.js'
import { perTurn } from '../async/per-turn.js'
import { Dispatcher } from './dispatch.js'
import { JobStore } from './job-store.js'

export interface JobNode {
  readonly store: JobStore
  readonly dispatcher: Dispatcher
  /** Follows the printers' commits: a task a bridge's event started, finished or answered a command of is announced. */
  watch(printers: Pick<PrinterRuntime, 'onChange'>): void
  start(): void
  close(): void
}

/** Job events that change the job's task (start, command answers, the end). */
const taskChangingEvents = new Set(['job:start', 'job:pause', 'job:unpause', 'job:finish'])

export function createJobNode(config: Config, db: Database, box: SealedBox, files: FileNode, logger: Logger, metrics: MetricsRegistry, clock: Clock, taskEvents: Counter): JobNode {
  const dispatcher = new Dispatcher(db.sql, {
    offerTtlSeconds: config.taskOfferTtlSeconds,
    startDeadlineSeconds: config.taskStartDeadlineSeconds,
    colorTolerance: config.queueColorTolerance,
    tokenKeys: box.derivedKeys('printer-task-token'),
    downloadUrl: (fileId, sha256, nowMs) => files.downloads.url(fileId, sha256, nowMs).download_url,
    metrics: {
      tasks: taskEvents,
      claimConflicts: metrics.counter('printer_task_claim_conflicts_total', 'Claims refused: another host, a stale epoch, or a task no longer offered.', ['reason']),
    },
  })
  const everyMs = Math.min(5_000, Math.max(250, (Math.min(config.taskOfferTtlSeconds, config.taskStartDeadlineSeconds) * 1000) / 4))
  let timer: unknown
  let running = false
  // A finished job's grams leave the inventory after the commit that ended it; the sweep catches up on any a crash left.
  const deductions = createDeductionRunner({ sql: db.sql, logger, metrics, clock })
  const sweep = () => {
    void deductions.catchUp()
    if (running) return
    running = true
    dispatcher
      .sweep(new Date(clock.now()))
      .catch((error: unknown) => logger.warn('printer task sweep failed; retried at the next tick', { error: String(error) }))
      .finally(() => (running = false))
  }
  // Task changes the group commit makes (src/printers/event-store.ts, src/jobs/task-links.ts) are announced
  // after it, from the committed change: the jobs its job events touched, looked up once per turn of the
  // event loop for every commit of that turn (the commits of one group-commit flush resolve together).
  const announceTouched = async (touched: readonly number[]): Promise<void> => {
    const tasks = await db.sql<{ id: string; organization_id: string; host_id: string }[]>`
      select t.id, t.organization_id, coalesce(p.host_id, t.host_id) as host_id from printer_tasks t left join printers p on p.id = t.printer_id
      where t.job_id = any(${[...new Set(touched)]}::int8[]) and t.state in ('started', 'finished')`
    for (const task of tasks) dispatcher.notify(task.organization_id, task.host_id, task.id)
  }
  const touch = perTurn<number>((jobIds) => void announceTouched(jobIds).catch((error: unknown) => logger.warn('announcing printer task changes failed', { error: String(error) })))
  const announce = (change: PrinterChange): void => {
    for (const e of change.events) if (e.applied && e.jobId !== null && taskChangingEvents.has(e.type)) touch(e.jobId)
    for (const job of change.jobs) if (job.endedAt !== null) touch(job.jobId)
  }
  let unwatch: (() => void) | undefined
  return {
    store: new JobStore(db.sql),
    dispatcher,
    watch: (printers) => {
      unwatch = printers.onChange((change) => {
        announce(change)
        deductions.afterCommit(change)
      })
    },
    start: () => {
      timer = clock.setInterval(sweep, everyMs)
      sweep()
    },
    close: () => {
      clock.clearInterval(timer)
      unwatch?.()
    },
  }
}
