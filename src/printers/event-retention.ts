/**
 * Event-log retention: events are kept EVENT_RETENTION_DAYS
 * after receipt, then deleted by this sweep in chunks of `chunk` rows, so a
 * large backlog never holds a long lock or a long transaction. Deleting by
 * the received_at index is cheaper to run and to reason about than monthly
 * partitions, and works the same on embedded PGlite; partitioning is the
 * upgrade path if a farm's write rate makes the deletes themselves costly.
 * Old rows matter little to idempotency: a retry older than the retention
 * falls at or below its printer's seqn high-water mark, so it never changes
 * the printer's state again; its seqn slot is free by then, so it is stored
 * again as a late event (and deleted again with its age).
 */
import type { Clock } from '../../actors/clock.js'
import type { Logger } from '../observability/log.js'
import type { Database } from '../storage/database.js'

export class EventRetention {
  readonly #db: Database
  readonly #days: number
  readonly #logger: Logger
  readonly #clock: Clock
  #timer: unknown
  #running: Promise<number> | undefined

  /** `clock`: the node's (its sweeps, and the age of an event, run on it). */
  constructor(db: Database, days: number, logger: Logger, clock: Clock) {
    this.#db = db
    this.#clock = clock
    this.#days = days
    this.#logger = logger
  }

  start(everyMs = 3_600_000): void {
    this.#timer = this.#clock.setInterval(() => {
      this.sweep().catch((error: unknown) => this.#logger.warn('event retention sweep failed', { error }))
    }, everyMs)
  }

  async stop(): Promise<void> {
    this.#clock.clearInterval(this.#timer)
    await this.#running?.catch(() => undefined)
  }

  /** Deletes every event past the retention; returns how many. One sweep at a time. */
  sweep(chunk = 10_000): Promise<number> {
    this.#running ??= (async () => {
      let total = 0
      try {
        for (;;) {
          const deleted = await this.#db.sql`
            delete from printer_events where ctid = any(array(
              select ctid from printer_events where received_at < ${new Date(this.#clock.now())}::timestamptz - make_interval(days => ${this.#days}) limit ${chunk}))`
          total += deleted.count
          if (deleted.count < chunk) break
        }
      } finally {
        this.#running = undefined
      }
      if (total > 0) this.#logger.info('old printer events deleted', { count: total, retentionDays: this.#days })
      return total
    })()
    return this.#running
  }
}
