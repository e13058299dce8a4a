/**
 * Printers by display status and how many are online, as /metrics gauges.
 * Read from the store (so every node reports the whole farm, the same
 * numbers), at most once per `maxAgeMs` however often /metrics is scraped:
 * the route is public, and a farm of thousands of printers is one query
 * worth not repeating per request.
 */
import type { Clock } from '../../actors/clock.js'
import { displayStatuses, type DisplayStatus } from '../../protocol/display-status.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { PrinterReads } from './printer-reads.js'

export class FleetGauges {
  readonly #reads: PrinterReads
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #maxAgeMs: number
  #counts: { byStatus: Map<DisplayStatus, number>; online: number } = { byStatus: new Map(), online: 0 }
  #readAt = -Infinity
  #reading: Promise<void> | undefined

  constructor(reads: PrinterReads, metrics: MetricsRegistry, clock: Clock, logger: Logger, maxAgeMs = 5_000) {
    this.#reads = reads
    this.#clock = clock
    this.#logger = logger
    this.#maxAgeMs = maxAgeMs
    metrics.gauge('printers_by_status', 'Printers of every organization by display status (read from the store; the same on every node).', ['status'], (g) => {
      for (const status of displayStatuses) g.set({ status }, this.#counts.byStatus.get(status) ?? 0)
    })
    metrics.gauge('printers_online', 'Printers whose bridge reported within the presence timeout (every organization).', [], (g) => g.set({}, this.#counts.online))
  }

  /** Rereads the counts when they are older than maxAgeMs; a failed read keeps the last ones (and is logged). */
  refresh(): Promise<void> {
    if (this.#clock.now() - this.#readAt < this.#maxAgeMs) return Promise.resolve()
    this.#reading ??= this.#reads
      .statusCounts()
      .then((counts) => {
        this.#counts = counts
        this.#readAt = this.#clock.now()
      })
      .catch((error: unknown) => this.#logger.warn('reading printer counts for /metrics failed', { error }))
      .finally(() => {
        this.#reading = undefined
      })
    return this.#reading
  }
}
