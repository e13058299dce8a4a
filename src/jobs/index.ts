/**
 * Print jobs on this node: the job store, the dispatcher and its deadline
 * sweep. Every node sweeps (each change is conditional on the row under its
 * lock, so nodes sweeping together change each task once); the sweep runs on
 * the node's clock, often enough for the shortest deadline configured.
 */
import type { Clock } from '../../actors/clock.js'
import type { Config } from '../config.js'
import type { FileNode } from '../files/index.js'
import type { Logger } from '../log.js'
import type { Counter, MetricsRegistry } from '../metrics.js'
import type { SealedBox } from '../secrets/sealed-box.js'
import type { Database } from '../storage/database.js'
import { Dispatcher } from './dispatch.js'
import { JobStore } from './job-store.js'

export interface JobNode {
  readonly store: JobStore
  readonly dispatcher: Dispatcher
  start(): void
  close(): void
}

export function createJobNode(config: Config, db: Database, box: SealedBox, files: FileNode, logger: Logger, metrics: MetricsRegistry, clock: Clock, taskEvents: Counter): JobNode {
  const dispatcher = new Dispatcher(db.sql, {
    offerTtlSeconds: config.taskOfferTtlSeconds,
    startDeadlineSeconds: config.taskStartDeadlineSeconds,
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
  const sweep = () => {
    if (running) return
    running = true
    dispatcher
      .sweep(new Date(clock.now()))
      .catch((error: unknown) => logger.warn('printer task sweep failed; retried at the next tick', { error: String(error) }))
      .finally(() => (running = false))
  }
  return {
    store: new JobStore(db.sql),
    dispatcher,
    start: () => {
      timer = clock.setInterval(sweep, everyMs)
      sweep()
    },
    close: () => clock.clearInterval(timer),
  }
}
