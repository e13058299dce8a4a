/**
 * Snapshots for live-feed subscriptions, read from PostgreSQL: the committed
 * state (the feed's events are published after the same commits, so a
 * snapshot is never behind the events that follow it).
 */
import type { Clock } from '../../actors/clock.js'
import type { PrinterJob } from '../../machines/printer.js'
import type { PersistedPrinterState } from '../../actors/printer-persistence.js'
import type { Database } from '../storage/database.js'
import { DisplayStore, type DisplayLive } from '../displays/display-store.js'
import { activityOf, printerLive, type PrinterLive } from './printer-live.js'

interface Row {
  id: string
  name: string
  host_id: string | null
  state: PersistedPrinterState | null
  online: boolean | null
}

const emptyState: PersistedPrinterState = { rawStatus: null, job: null, errors: [], ams: [], filamentRunout: false, maintenance: false, lastSeenAt: null, filamentJobId: null }

function live(row: Row, now: number): PrinterLive {
  const state = row.state ?? emptyState
  return printerLive({ ...state, printerId: row.id, name: row.name, hostId: row.host_id, online: row.online ?? false, activity: activityOf(state.job) }, now)
}

export interface LiveJob extends PrinterJob {
  printerId: string | null
}

export class Snapshots {
  readonly #db: Database
  readonly #clock: Clock
  /** `clock` tells the display status its now (COMPLETE lasts 10 minutes after a job ends). */
  constructor(db: Database, clock: Clock) {
    this.#db = db
    this.#clock = clock
  }

  /** Status displays with their targets (the `displays` topic). */
  async displays(organizationId: string): Promise<{ displays: DisplayLive[] }> {
    return { displays: await new DisplayStore(this.#db.sql).live(organizationId) }
  }

  async printers(organizationId: string): Promise<{ printers: PrinterLive[] }> {
    const rows = await this.#db.sql<Row[]>`
      select p.id, p.name, p.host_id, s.state, s.online from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} order by p.name, p.id`
    const now = this.#clock.now()
    return { printers: rows.map((r) => live(r, now)) }
  }

  /** undefined when the organization has no such printer (the topic is refused, like another organization's). */
  async printer(organizationId: string, printerId: string): Promise<{ printer: PrinterLive } | undefined> {
    const [row] = await this.#db.sql<Row[]>`
      select p.id, p.name, p.host_id, s.state, s.online from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} and p.id = ${printerId}`
    return row === undefined ? undefined : { printer: live(row, this.#clock.now()) }
  }

  /** The display status of each of these printers of one organization (a status display's pixels). */
  async statuses(organizationId: string, printerIds: readonly string[]): Promise<Map<string, PrinterLive['status']>> {
    if (printerIds.length === 0) return new Map()
    const rows = await this.#db.sql<Row[]>`
      select p.id, p.name, p.host_id, s.state, s.online from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} and p.id = any(${printerIds as string[]}::uuid[])`
    const now = this.#clock.now()
    return new Map(rows.map((r) => [r.id, live(r, now).status]))
  }

  async jobs(organizationId: string): Promise<{ jobs: LiveJob[] }> {
    const rows = await this.#db.sql<{ id: number; printer_id: string | null; name: string | null; state: PrinterJob['state']; progress: number | null; started_at_ms: number | null; ended_at_ms: number | null }[]>`
      select id, printer_id, name, state, progress, started_at_ms, ended_at_ms from print_jobs
      where organization_id = ${organizationId} order by id desc limit 100`
    return {
      jobs: rows.map((r) => ({ jobId: r.id, printerId: r.printer_id, name: r.name, state: r.state, progress: r.progress, startedAt: r.started_at_ms ?? 0, endedAt: r.ended_at_ms })),
    }
  }
}
