/**
 * Wires the printer actors of this node: the PostgreSQL persistence with
 * its group commit, the retention sweep, and their metrics, over the shard
 * directory the service gives (started and stopped by the service, since
 * the displays share it). Stopping drains in order: actors first (their last
 * messages commit), then the writer, then the sweeps.
 */
import type { Clock } from '../../actors/clock.js'
import { LocalShardDirectory, type ShardDirectory } from '../../actors/shard-directory.js'
import { PrinterRuntime } from '../../actors/printer-runtime.js'
import type { Config } from '../node/config.js'
import type { Logger } from '../observability/log.js'
import type { Counter, MetricsRegistry } from '../observability/metrics.js'
import type { Database } from '../storage/database.js'
import { EventRetention } from './event-retention.js'
import { PgPrinterPersistence } from './event-store.js'

export interface PrinterNode {
  readonly runtime: PrinterRuntime
  /** printer_tasks_total: task changes, counted here for the starts a job:start links and by the dispatcher for the rest. */
  readonly taskEvents: Counter
  readonly persistence: PgPrinterPersistence
  readonly retention: EventRetention
  stop(): Promise<void>
}

export async function startPrinterNode(db: Database, config: Config, metrics: MetricsRegistry, logger: Logger, clock: Clock, directory: ShardDirectory = new LocalShardDirectory()): Promise<PrinterNode> {
  const taskEvents = metrics.counter('printer_tasks_total', 'Printer task changes: offered, claimed, started, expired, unconfirmed, cancelled.', ['event'])
  const persistence = new PgPrinterPersistence(db, clock, {
    taskStarts: taskEvents,
    flushSize: metrics.histogram('printer_event_flush_events', 'Events written per group-commit flush.', [], [0, 1, 10, 50, 100, 250, 500, 1000, 2500, 5000]),
    flushSeconds: metrics.histogram('printer_event_flush_seconds', 'Duration of one group-commit flush statement.', [], [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]),
    tolerantRetries: metrics.counter(
      'printer_event_flush_retries_total',
      'Group-commit flushes sent again skipping duplicates, because the log already held an event its printer actor did not know of (a few are normal; many cost throughput).',
    ),
    copyRefusals: metrics.counter(
      'printer_event_copy_refusals_total',
      'Group-commit flushes whose COPY the event log refused (an event it already held, or a value a column refuses) and that were written again by the JSON statement (a few are normal; many cost throughput).',
    ),
  })
  const ingested = metrics.counter('printer_events_total', 'Printer events by outcome: stored, duplicate (already stored), refused (never stored).', ['outcome'])
  const outcomes = { stored: ingested.cell({ outcome: 'stored' }), duplicate: ingested.cell({ outcome: 'duplicate' }), refused: ingested.cell({ outcome: 'refused' }) }
  const runtime = new PrinterRuntime({
    directory,
    persistence,
    clock,
    presenceTimeoutMs: config.presenceTimeoutMs,
    // Resident past the presence timeout, so the timer, not passivation, decides offline.
    idleMs: Math.max(2 * config.presenceTimeoutMs, 60_000),
    maxResident: config.printerActorsMax,
    onBackgroundError: (what, error) => logger.warn(`printer ${what} failed`, { error }),
    onIngested: (result) => {
      outcomes.stored.inc(result.stored)
      outcomes.duplicate.inc(result.duplicates)
      outcomes.refused.inc(result.failed)
    },
  })
  metrics.gauge('printer_actors_resident', 'Printer actors in memory on this node.', [], (g) => g.set({}, runtime.resident))
  const retention = new EventRetention(db, config.eventRetentionDays, logger, clock)
  runtime.start()
  retention.start()
  return {
    runtime,
    taskEvents,
    persistence,
    retention,
    async stop() {
      await runtime.stop()
      await persistence.flushed()
      await retention.stop()
    },
  }
}
