/**
 * Reading printers back (GET /v1/printers, /v1/printers/{id}, the history):
 * from the state each printer's actor committed, in PostgreSQL.
 *
 * Why the store and not the actors: an actor adopts a state only after its
 * commit, so the committed row is exactly what the actor holds (presence
 * changes included: the actor writes them too). Reading it takes no lock a
 * writer waits for (MVCC), never wakes a passivated printer, never queues
 * behind a printer's mailbox, and answers the same on every node: a list of
 * 200 printers is one query, not 200 messages to actors across the cluster.
 *
 * The status filter is computed, not stored (COMPLETE lasts ten minutes
 * after a job ends, and ends by the clock alone), so a status-filtered list
 * classifies every candidate from a narrow projection of its state, then
 * reads whole rows only for the page.
 */
import type { Clock } from '../../actors/clock.js'
import { ServiceError } from '../../protocol/errors.js'
import type { DisplayStatus } from '../../protocol/display-status.js'
import { decodeHistoryCursor, encodeHistoryCursor, type PrinterListQuery, type PrinterState } from '../../protocol/schemas/printer-state.js'
import type { PrinterEventType } from '../../protocol/printer-events.js'
import type { Sql, TransactionSql } from 'postgres'
import type { Database } from '../storage/database.js'
import { printerStateOfRow, statusOfRow, type PrinterRow } from './read-model.js'

/** The columns a PrinterRow needs, from `printers p left join printer_state s`. */
export const printerColumns = (sql: Database['sql']) => sql`
  p.id, p.name, p.printer_type, p.model, p.host_id, p.assignment_epoch, p.ready, p.ready_source,
  s.state, s.online, s.seqn_epoch, s.high_water_seqn, greatest(p.updated_at, s.updated_at) as updated_at`

export interface HistoryEvent {
  eventId: string
  type: string
  seqn: number
  assignmentEpoch: number
  timestamp: number
  received_at: string
  data: Record<string, unknown>
  applied: boolean
  jobId: number | null
}

export class PrinterReads {
  readonly #db: Database
  readonly #clock: Clock

  constructor(db: Database, clock: Clock) {
    this.#db = db
    this.#clock = clock
  }

  async list(organizationId: string, query: PrinterListQuery): Promise<{ printers: PrinterState[]; total: number; limit: number; offset: number }> {
    const sql = this.#db.sql
    const { limit, offset } = query
    const where = this.#where(organizationId, query)
    if (query.status === undefined) {
      const [count] = await sql<{ n: string }[]>`select count(*) as n from printers p left join printer_state s on s.printer_id = p.id where ${where}`
      const rows = await sql<PrinterRow[]>`
        select ${printerColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
        where ${where} order by p.name, p.id limit ${limit} offset ${offset}`
      const now = this.#clock.now()
      return { printers: rows.map((r) => printerStateOfRow(r, now)), total: Number(count!.n), limit, offset }
    }
    const wanted = new Set(query.status.split(',') as DisplayStatus[])
    const candidates = await sql<Pick<PrinterRow, 'id' | 'state' | 'online'>[]>`
      select ${classifiedColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
      where ${where} order by p.name, p.id`
    const now = this.#clock.now()
    const matching = candidates.filter((r) => wanted.has(statusOfProjection(r, now))).map((r) => r.id)
    const page = matching.slice(offset, offset + limit)
    const rows =
      page.length === 0
        ? []
        : await sql<PrinterRow[]>`
            select ${printerColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
            where p.organization_id = ${organizationId} and p.id = any(${page}::uuid[]) order by p.name, p.id`
    // A printer may change between the two reads: the page shows what it is now.
    return { printers: rows.map((r) => printerStateOfRow(r, now)), total: matching.length, limit, offset }
  }

  async get(organizationId: string, printerId: string): Promise<PrinterState> {
    const sql = this.#db.sql
    const [row] = await sql<PrinterRow[]>`
      select ${printerColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} and p.id = ${printerId}`
    if (row === undefined) throw notFound()
    return printerStateOfRow(row, this.#clock.now())
  }

  /** Printers by display status, and how many are online: of every organization (the /metrics gauges) or of one. */
  async statusCounts(organizationId?: string): Promise<{ byStatus: Map<DisplayStatus, number>; online: number }> {
    const sql = this.#db.sql
    const rows = await sql<Pick<PrinterRow, 'id' | 'state' | 'online'>[]>`
      select ${classifiedColumns(sql)} from printers p left join printer_state s on s.printer_id = p.id
      where ${organizationId === undefined ? sql`true` : sql`p.organization_id = ${organizationId}`}`
    const now = this.#clock.now()
    const byStatus = new Map<DisplayStatus, number>()
    let online = 0
    for (const row of rows) {
      const status = statusOfProjection(row, now)
      byStatus.set(status, (byStatus.get(status) ?? 0) + 1)
      if (row.online === true) online++
    }
    return { byStatus, online }
  }

  /** One page of a printer's event history, in (epoch, seqn) order after the cursor. */
  async history(
    organizationId: string,
    printerId: string,
    query: { after?: string | undefined; limit: number; type?: PrinterEventType | undefined },
  ): Promise<{ events: HistoryEvent[]; next_cursor: string | null }> {
    const sql = this.#db.sql
    const after = query.after === undefined ? { epoch: -1, seqn: -1 } : decodeHistoryCursor(query.after)
    if (after === undefined) throw new ServiceError('validation_failed', 'query.after is not a cursor this service issued: pass next_cursor from the previous page')
    const [printer] = await sql`select 1 from printers where organization_id = ${organizationId} and id = ${printerId}`
    if (printer === undefined) throw notFound()
    const rows = await sql<
      { event_id: string; event_type: string; seqn: string; assignment_epoch: number; occurred_at_ms: number; received_at: Date; data: Record<string, unknown>; applied: boolean; job_id: string | null }[]
    >`
      select event_id, event_type, seqn, assignment_epoch, occurred_at_ms, received_at, coalesce(payload, data::json) as data, applied, job_id from printer_events
      where printer_id = ${printerId} and organization_id = ${organizationId}
        and (assignment_epoch, seqn) > (${after.epoch}::int, ${after.seqn}::bigint)
        ${query.type === undefined ? sql`` : sql`and event_type = ${query.type}`}
      order by assignment_epoch, seqn limit ${query.limit + 1}`
    const more = rows.length > query.limit
    const page = more ? rows.slice(0, query.limit) : rows
    const last = page.at(-1)
    return {
      events: page.map((r) => ({
        eventId: r.event_id,
        type: r.event_type,
        seqn: Number(r.seqn),
        assignmentEpoch: r.assignment_epoch,
        timestamp: r.occurred_at_ms,
        received_at: r.received_at.toISOString(),
        data: r.data,
        applied: r.applied,
        jobId: r.job_id === null ? null : Number(r.job_id),
      })),
      next_cursor: more && last !== undefined ? encodeHistoryCursor(last.assignment_epoch, Number(last.seqn)) : null,
    }
  }

  #where(organizationId: string, query: PrinterListQuery) {
    const sql = this.#db.sql
    const like = query.search === undefined ? undefined : `%${query.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
    return sql`p.organization_id = ${organizationId}
      ${query.host_id === undefined ? sql`` : sql`and p.host_id = ${query.host_id}`}
      ${query.online === undefined ? sql`` : query.online ? sql`and coalesce(s.online, false)` : sql`and not coalesce(s.online, false)`}
      ${like === undefined ? sql`` : sql`and (p.name ilike ${like} or p.serial_number ilike ${like})`}`
  }
}

/**
 * Just what the display status needs, of a printer_state row aliased `s` (a printer's whole state
 * may be kilobytes): read it back with `statusOfProjection`. The queue reads its eligibility from it too.
 */
export const statusProjection = (sql: Sql | TransactionSql) => sql`
  jsonb_build_object(
    'lastSeenAt', s.state->'lastSeenAt', 'filamentRunout', s.state->'filamentRunout', 'maintenance', s.state->'maintenance',
    'error', s.state->'error', 'errors', s.state->'errors', 'phase', s.state->'phase',
    'job', jsonb_build_object('state', s.state->'job'->'state', 'endedAt', s.state->'job'->'endedAt')
  )`

const classifiedColumns = (sql: Database['sql']) => sql`p.id, s.online, ${statusProjection(sql)} as state`

/** The display status of a row read with `statusProjection` as its state. */
export function statusOfProjection(row: Pick<PrinterRow, 'state' | 'online'>, now: number): DisplayStatus {
  return statusOfRow(withoutEmptyJob(row), now)
}

/** The narrow projection builds `job: {state: null, endedAt: null}` for a printer without a job. */
function withoutEmptyJob<Row extends Pick<PrinterRow, 'state'>>(row: Row): Row {
  const job = row.state?.job as { state: unknown } | null | undefined
  if (row.state === null || (job !== null && job !== undefined && job.state !== null)) return row
  return { ...row, state: { ...row.state, job: null } }
}

function notFound(): ServiceError {
  return new ServiceError('printer_not_found', 'no such printer in this organization')
}
