/**
 * Snapshots for live-feed subscriptions, read from PostgreSQL: the committed
 * state (the feed's events are published after the same commits, so a
 * snapshot is never behind the events that follow it).
 */
import type { Clock } from '../../actors/clock.js'
import type { PrinterJob } from '../../machines/printer.js'
import type { PrinterTask } from '../../protocol/schemas/print-jobs.js'
import type { PrinterState } from '../../protocol/schemas/printer-state.js'
import { printerStateOfRow, type PrinterRow } from '../printers/read-model.js'
import { printerColumns } from '../printers/printer-reads.js'
import type { Database } from '../storage/database.js'
import { DisplayStore, type DisplayLive } from '../displays/display-store.js'
import type { TaskSource } from './host-tasks.js'

export interface LiveJob extends Pick<PrinterJob, 'jobId' | 'name' | 'progress' | 'state' | 'startedAt' | 'endedAt'> {
  printerId: string | null
}


export class Snapshots {
  readonly #db: Database
  readonly #clock: Clock
  readonly #tasks: Pick<TaskSource, 'hostTasks'> | undefined
  readonly #queue: ((organizationId: string) => Promise<object>) | undefined
  /**
   * `clock` tells the display status its now (COMPLETE lasts 10 minutes after a job ends);
   * `tasks` answers the host topics (the displays' status feed, which reads no tasks, goes without).
   */
  constructor(db: Database, clock: Clock, tasks?: Pick<TaskSource, 'hostTasks'>, queue?: (organizationId: string) => Promise<object>) {
    this.#db = db
    this.#clock = clock
    this.#tasks = tasks
    this.#queue = queue
  }

  /** The `queue` topic: the first waiting jobs, each with why it waits (src/queue/queue-view.ts). */
  async queue(organizationId: string): Promise<{ queue: object }> {
    if (this.#queue === undefined) throw new TypeError('these snapshots were made without a queue source: they serve no queue topic')
    return { queue: await this.#queue(organizationId) }
  }

  /** The `host:<hostId>` topic: exactly what GET /v1/hosts/{hostId}/printer-tasks answers (a host with no tasks has an empty list, as there). */
  async hostTasks(organizationId: string, hostId: string): Promise<{ tasks: PrinterTask[] }> {
    if (this.#tasks === undefined) throw new TypeError('these snapshots were made without a task source: they serve no host topic')
    return { tasks: await this.#tasks.hostTasks(organizationId, hostId) }
  }

  /** Status displays with their targets (the `displays` topic). */
  async displays(organizationId: string): Promise<{ displays: DisplayLive[] }> {
    return { displays: await new DisplayStore(this.#db.sql, () => this.#clock.now()).live(organizationId) }
  }

  async printers(organizationId: string): Promise<{ printers: PrinterState[] }> {
    const sql = this.#db.sql
    const rows = await sql<PrinterRow[]>`
      select ${printerColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} order by p.name, p.id`
    const now = this.#clock.now()
    return { printers: rows.map((r) => printerStateOfRow(r, now)) }
  }

  /** undefined when the organization has no such printer (the topic is refused, like another organization's). */
  async printer(organizationId: string, printerId: string): Promise<{ printer: PrinterState } | undefined> {
    const sql = this.#db.sql
    const [row] = await sql<PrinterRow[]>`
      select ${printerColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} and p.id = ${printerId}`
    return row === undefined ? undefined : { printer: printerStateOfRow(row, this.#clock.now()) }
  }

  /** The display status of each of these printers of one organization (a status display's pixels). */
  async statuses(organizationId: string, printerIds: readonly string[]): Promise<Map<string, PrinterState['status']>> {
    if (printerIds.length === 0) return new Map()
    const sql = this.#db.sql
    const rows = await sql<PrinterRow[]>`
      select ${printerColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} and p.id = any(${printerIds as string[]}::uuid[])`
    const now = this.#clock.now()
    return new Map(rows.map((r) => [r.id, printerStateOfRow(r, now).status]))
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
