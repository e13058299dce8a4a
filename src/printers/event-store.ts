/**
 * The printer runtime's store (actors/printer-persistence.ts) on PostgreSQL:
 * hydration, the group-commit writer of the hot path, job ids, host moves
 * and the silence sweep.
 *
 * Group commit (docs/printers-and-events.md): the units of many concurrent actor
 * messages are written by one flush statement. On a real PostgreSQL the
 * events are COPYed straight into the log (./event-copy.ts), the cheapest
 * form PostgreSQL reads and inserts, and the statement behind the COPY
 * writes states, jobs and fences; the embedded store has no COPY and reads
 * the events from one JSON document expanded by json_to_recordset. States,
 * jobs and fences travel as JSON documents either way: a flush of 1,000
 * events is a few round trips and parses, not thousands of parameters. The
 * flush is one transaction: a unit's events, its state and its jobs are
 * stored together or not at all. A flush starts as soon as the
 * previous one allows (at most `maxConcurrentFlushes` at once), so under light
 * load a unit waits for nothing and under heavy load flushes grow.
 *
 * A flush that fails on data (SQLSTATE classes 22 and 23) is retried unit
 * by unit, so one bridge's unstorable event fails its own request only.
 *
 * Duplicates: the actors already keep every event they know is stored out
 * of a flush (the seqn high-water mark, the window of recent ids, and a
 * look-up in the log for what the window forgot), so a flush is first sent
 * as a plain insert (the COPY, or the JSON statement without ON CONFLICT):
 * no pre-check of the unique indexes and no RETURNING of every stored id,
 * about a quarter of PostgreSQL's work per event (bench/ingest). The unique
 * indexes keep the last word: when one refuses a row (the log held an event
 * its actor did not know of), the flush is sent again as the JSON statement
 * with INSERT ... ON CONFLICT DO NOTHING RETURNING, which stores the rest and
 * names what was new (`tolerant`). JSON documents are read by
 * json_to_recordset, not jsonb_to_recordset: the document is only lexed once
 * instead of being built into a sorted jsonb value first.
 *
 * A COPY the log refuses is never waited for: postgres.js never settles a
 * COPY that the server rejects after its data (porsager/postgres#1173, open),
 * so the writer sends the flush statement and COMMIT right behind the COPY's
 * end, without waiting for its confirmation. A refused COPY has aborted the
 * transaction: the statement answers 25P02 and COMMIT answers ROLLBACK, and
 * the flush is written again by the JSON statement (`copyFlush`). That also
 * saves the round trip a confirmation would cost.
 *
 * Flushes are capped at `maxEventsPerFlush` (1,000 by default) so that under
 * load several run at once: one flush taking every waiting unit keeps a
 * single PostgreSQL backend busy while the others idle.
 *
 * Fencing (docs/operations.md): each unit carries its shard's token. The
 * statement takes a share lock on the shards' token rows and writes only the
 * units whose token is still the newest; the others are refused
 * (ShardUnavailable 'fenced') and nothing of theirs is stored (after a COPY,
 * the statement deletes the rows this transaction COPYed for them). The lock
 * orders the flush against a new owner's token raise: either the flush
 * commits first (and the new owner hydrates after it) or it sees the raised
 * token. Token 0 (the local directory) is not checked.
 */
import { performance } from 'node:perf_hooks'
import type { Writable } from 'node:stream'
import type { PendingQuery, ReservedSql, Row, Sql, TransactionSql } from 'postgres'
import { idempotencyWindow } from '../../machines/host-assignment.js'
import type { PrinterJob } from '../../machines/printer.js'
import { jobStatusRule, type JobStatus, type PrintJobEvent } from '../../machines/print-job.js'
import type { PrinterType } from '../../protocol/printer-reports/index.js'
import { ServiceError } from '../../protocol/errors.js'
import { ShardUnavailable, shardOf } from '../../actors/shard-directory.js'
import { readyGateOf, type CommitOutcome, type HydratedPrinter, type PersistedPrinterState, type PrinterCommit, type PrinterPersistence, type StoredEventRef, type TaskStartLink, type TaskStartRequest } from '../../actors/printer-persistence.js'
import { linkTaskStarts } from '../jobs/task-links.js'
import { eventCopyColumns, eventCopyText } from './event-copy.js'
import type { Counter, Histogram } from '../observability/metrics.js'
import { perTurn } from '../async/per-turn.js'
import type { Database } from '../storage/database.js'
import { setLocal } from '../storage/set-local.js'
import type { Clock, Timers } from '../../actors/clock.js'

interface Pending {
  unit: PrinterCommit
  resolve: (outcome: CommitOutcome) => void
  reject: (error: unknown) => void
}

interface LookUp {
  printerId: string
  eventIds: readonly string[]
  idempotencyKeys: readonly string[]
  resolve: (rows: StoredEventRef[]) => void
  reject: (error: unknown) => void
}

export interface WriterOptions {
  maxConcurrentFlushes?: number
  /** Events per flush (a flush takes whole units, at least one). */
  maxEventsPerFlush?: number
  /** Counts flushes sent again as ON CONFLICT DO NOTHING because a unique index refused a row of the plain INSERT. */
  tolerantRetries?: Counter | undefined
  /** Counts COPYs the log refused (a duplicate or a value a column refuses): those flushes went again by the JSON statement. */
  copyRefusals?: Counter | undefined
  flushSize?: Histogram | undefined
  flushSeconds?: Histogram | undefined
  /** Counts the tasks a job:start started (event "started"). */
  taskStarts?: Counter | undefined
}

export class PgPrinterPersistence implements PrinterPersistence {
  readonly #db: Database
  readonly #queue: Pending[] = []
  readonly #maxConcurrent: number
  readonly #maxEvents: number
  readonly #options: WriterOptions
  readonly #lookUpLater = perTurn<LookUp>((asked) => void this.#lookUp(asked))
  #inFlight = 0
  #scheduled = false
  readonly #idle: (() => void)[] = []
  readonly #clock: Clock

  /** `clock`: the node's, what the rows are stamped with (the time a printer was last seen, and when a change was made) and what bounds a COPY. */
  constructor(db: Database, clock: Clock, options: WriterOptions = {}) {
    this.#db = db
    this.#clock = clock
    this.#options = options
    this.#maxConcurrent = options.maxConcurrentFlushes ?? 4
    this.#maxEvents = options.maxEventsPerFlush ?? 1_000
  }

  async hydrate(printerId: string): Promise<HydratedPrinter | undefined> {
    const sql = this.#db.sql
    const [row] = await sql<
      {
        id: string
        organization_id: string
        name: string
        printer_type: PrinterType
        model: string | null
        host_id: string | null
        assignment_epoch: number
        seqn_epoch: number | null
        high_water_seqn: number | null
        state: PersistedPrinterState | null
        ready: boolean
        ready_source: string | null
      }[]
    >`select p.id, p.organization_id, p.name, p.printer_type, p.model, p.host_id, p.assignment_epoch, p.ready, p.ready_source, s.seqn_epoch, s.high_water_seqn, s.state
      from printers p left join printer_state s on s.printer_id = p.id where p.id = ${printerId}`
    if (row === undefined) return undefined
    // The window as it stood: its newest events (ids and keys each fill a window of their own).
    const recentRows = await sql<{ event_id: string; idempotency_key: string | null }[]>`
      select event_id, idempotency_key from printer_events where printer_id = ${printerId}
      order by assignment_epoch desc, seqn desc limit ${idempotencyWindow}`
    recentRows.reverse()
    return {
      printerId: row.id,
      organizationId: row.organization_id,
      name: row.name,
      printerType: row.printer_type,
      model: row.model,
      readyGate: readyGateOf(row.ready, row.ready_source),
      hostId: row.host_id,
      assignmentEpoch: row.assignment_epoch,
      highWaterSeqn: row.seqn_epoch === row.assignment_epoch && row.high_water_seqn !== null ? row.high_water_seqn : -1,
      recentEventIds: recentRows.map((r) => r.event_id),
      recentKeys: recentRows.flatMap((r) => (r.idempotency_key === null ? [] : [r.idempotency_key])),
      state: row.state,
    }
  }

  commit(unit: PrinterCommit): Promise<CommitOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ unit, resolve, reject })
      this.#schedule()
    })
  }

  /** Resolves when nothing is queued or being written (shutdown). */
  flushed(): Promise<void> {
    if (this.#queue.length === 0 && this.#inFlight === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idle.push(resolve))
  }

  async reserveJobIds(count: number): Promise<number[]> {
    const rows = await this.#db.sql<{ id: number }[]>`
      select nextval(pg_get_serial_sequence('print_jobs', 'id')) as id from generate_series(1, ${count})`
    return rows.map((r) => r.id)
  }

  async storedEventIds(printerId: string, assignmentEpoch: number, seqns: readonly number[]): Promise<Map<number, string>> {
    const rows = await this.#db.sql<{ seqn: number; event_id: string }[]>`
      select seqn, event_id from printer_events
      where printer_id = ${printerId} and assignment_epoch = ${assignmentEpoch} and seqn = any(${seqns as number[]}::int8[])`
    return new Map(rows.map((r) => [r.seqn, r.event_id]))
  }

  /**
   * The log's rows for these event ids or idempotency keys of one printer. Look-ups asked for in
   * the same turn of the event loop (the actors of one burst of requests) go out as one statement:
   * a batch holding job events asks for one, and one statement per batch was a fair share of the
   * database's work under load.
   */
  lookupEvents(printerId: string, eventIds: readonly string[], idempotencyKeys: readonly string[]): Promise<StoredEventRef[]> {
    if (eventIds.length === 0 && idempotencyKeys.length === 0) return Promise.resolve([])
    return new Promise((resolve, reject) => this.#lookUpLater({ printerId, eventIds, idempotencyKeys, resolve, reject }))
  }

  async #lookUp(asked: readonly LookUp[]): Promise<void> {
    const byId = { printers: [] as string[], values: [] as string[] }
    const byKey = { printers: [] as string[], values: [] as string[] }
    for (const a of asked) {
      for (const id of a.eventIds) byId.printers.push(a.printerId), byId.values.push(id)
      for (const key of a.idempotencyKeys) byKey.printers.push(a.printerId), byKey.values.push(key)
    }
    try {
      const rows = await this.#db.sql<(StoredEventRef & { p: string })[]>`
        select e.printer_id::text as p, e.event_id as "eventId", e.idempotency_key as "idempotencyKey", e.job_id as "jobId"
        from printer_events e join unnest(${byId.printers}::uuid[], ${byId.values}::text[]) as q(p, v) on e.printer_id = q.p and e.event_id = q.v
        union
        select e.printer_id::text, e.event_id, e.idempotency_key, e.job_id
        from printer_events e join unnest(${byKey.printers}::uuid[], ${byKey.values}::text[]) as q(p, v) on e.printer_id = q.p and e.idempotency_key = q.v`
      const found = new Map<string, StoredEventRef[]>()
      for (const { p, ...ref } of rows) {
        const list = found.get(p)
        if (list === undefined) found.set(p, [ref])
        else list.push(ref)
      }
      for (const a of asked) a.resolve(found.get(a.printerId.toLowerCase()) ?? [])
    } catch (error) {
      for (const a of asked) a.reject(error)
    }
  }

  async linkTaskStarts(printerId: string, starts: readonly TaskStartRequest[], fencingToken: number): Promise<Map<string, TaskStartLink>> {
    const links = await linkTaskStarts(this.#db.sql, printerId, starts, fencingToken, new Date(this.#clock.now()))
    for (const link of links.values()) if (link.outcome === 'linked') this.#options.taskStarts?.inc({ event: 'started' })
    return links
  }

  async assignHost(printerId: string, hostId: string, fromEpoch: number, toEpoch: number, fencingToken: number): Promise<boolean> {
    const shard = shardOf(printerId)
    const [row] = await this.#db.sql<{ moved: boolean; fenced: boolean }[]>`
      with tok as (
        select token from shard_tokens where shard = ${shard} and ${fencingToken}::bigint > 0 for share
      ), moved as (
        update printers set host_id = ${hostId}, assignment_epoch = ${toEpoch}, updated_at = ${new Date(this.#clock.now())}
        where id = ${printerId} and assignment_epoch = ${fromEpoch} and not exists (select 1 from tok where token > ${fencingToken}::bigint)
        returning id
      )
      select exists (select 1 from moved) as moved, exists (select 1 from tok where token > ${fencingToken}::bigint) as fenced`
    if (row?.fenced === true) throw new ShardUnavailable(shard, 'fenced')
    return row?.moved === true
  }

  /**
   * Not fenced: it only ever sets online = false on a row whose last sign of life is older than
   * \`before\`, and every write of an owner sets seen_at, so it cannot undo an owner's newer write.
   * With several nodes each sweeps its own shards only (\`owns\`).
   */
  async markSilentOffline(before: Date, liveIds: readonly string[], owns: (printerId: string) => boolean = () => true): Promise<string[]> {
    const candidates = await this.#db.sql<{ printer_id: string }[]>`
      select printer_id from printer_state where online and seen_at < ${before} and printer_id <> all(${liveIds as string[]}::uuid[])`
    const mine = candidates.map((r) => r.printer_id).filter(owns)
    if (mine.length === 0) return []
    const rows = await this.#db.sql<{ printer_id: string }[]>`
      update printer_state set online = false, updated_at = ${new Date(this.#clock.now())}
      where printer_id = any(${mine}::uuid[]) and online and seen_at < ${before}
      returning printer_id`
    return rows.map((r) => r.printer_id)
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxConcurrent || this.#queue.length === 0) return
    this.#scheduled = true
    // One turn of the event loop lets the units of requests parsed together join one flush.
    setImmediate(() => {
      this.#scheduled = false
      this.#startFlush()
    })
  }

  #startFlush(): void {
    if (this.#inFlight >= this.#maxConcurrent || this.#queue.length === 0) return
    let events = 0
    let take = 0
    while (take < this.#queue.length && (take === 0 || events + this.#queue[take]!.unit.events.length <= this.#maxEvents)) {
      events += this.#queue[take]!.unit.events.length
      take++
    }
    const batch = this.#queue.splice(0, take)
    this.#inFlight++
    void this.#flush(batch).finally(() => {
      this.#inFlight--
      if (this.#queue.length > 0) this.#schedule()
      else if (this.#inFlight === 0) for (const done of this.#idle.splice(0)) done()
    })
    // Room for another flush in parallel (the pool has connections to spare).
    this.#schedule()
  }

  async #flush(batch: Pending[], tolerant = false): Promise<void> {
    const started = performance.now()
    try {
      const { inserted, fenced } = await this.#write(batch.map((p) => p.unit), tolerant)
      this.#options.flushSize?.observe({}, batch.reduce((n, p) => n + p.unit.events.length, 0))
      for (const pending of batch) {
        if (fenced.has(pending.unit.printerId)) pending.reject(new ShardUnavailable(shardOf(pending.unit.printerId), 'fenced'))
        else {
          // Plain: every row was inserted. Tolerant: only the rows the statement named (none, when the log held them all).
          const stored = inserted === undefined ? new Set(pending.unit.events.map((e) => e.eventId)) : (inserted.get(pending.unit.printerId) ?? new Set<string>())
          pending.resolve({ inserted: stored })
        }
      }
    } catch (error) {
      if (!tolerant && isUniqueViolation(error)) {
        // The log already held a row of this flush: the statement that skips duplicates sorts it out.
        this.#options.tolerantRetries?.inc()
        await this.#flush(batch, true)
        return
      }
      if (batch.length > 1 && isDataError(error)) {
        // One unit's data broke the statement: bisect to find it (log2 steps, never a
        // statement per unit at once), and let the others through.
        const half = Math.ceil(batch.length / 2)
        await this.#flush(batch.slice(0, half), tolerant)
        await this.#flush(batch.slice(half), tolerant)
        return
      }
      const reason = batch.length === 1 ? translateDataError(error) : error
      for (const pending of batch) pending.reject(reason)
    } finally {
      this.#options.flushSeconds?.observe({}, (performance.now() - started) / 1000)
    }
  }

  /**
   * One flush in one transaction: on a real PostgreSQL the events are COPYed into the log and
   * the flush statement follows (./event-copy.ts); on the embedded store, after a refused COPY and
   * when tolerant, the statement reads them from a JSON document. Plain (`tolerant` false): every
   * event row is inserted, or the statement fails, so `inserted` is undefined (all of them).
   * Tolerant: rows the log holds are skipped and `inserted` names the new ones per printer.
   */
  async #write(queued: readonly PrinterCommit[], tolerant: boolean): Promise<{ inserted: Map<string, Set<string>> | undefined; fenced: Set<string> }> {
    // Every flush writes its printers' rows in one order: two flushes that meet on the same printers
    // (a shard's former owner and its new one, both sent a retried batch during a move) wait for
    // each other instead of deadlocking.
    const units = [...queued].sort((a, b) => (a.printerId < b.printerId ? -1 : a.printerId > b.printerId ? 1 : 0))
    const states: unknown[] = []
    const jobs: unknown[] = []
    const fences: { p: string; sh: number; tk: number; a: number; lo: number | null; hi: number | null }[] = []
    const fencedShards = new Set<number>()
    for (const u of units) {
      if (u.fencingToken > 0) {
        const shard = shardOf(u.printerId)
        // The unit's seqn range: where a COPY put its rows, should the fence refuse it.
        let lo: number | null = null
        let hi: number | null = null
        for (const e of u.events) {
          if (lo === null || e.seqn < lo) lo = e.seqn
          if (hi === null || e.seqn > hi) hi = e.seqn
        }
        fences.push({ p: u.printerId, sh: shard, tk: u.fencingToken, a: u.assignmentEpoch, lo, hi })
        fencedShards.add(shard)
      }
      states.push({ p: u.printerId, o: u.organizationId, a: u.assignmentEpoch, hw: u.highWaterSeqn, st: u.state, on: u.online, seen: u.seen })
      for (const job of u.jobs) jobs.push(jobRow(u, job))
    }
    // Serialized here, not by the driver: a value JSON cannot encode fails this unit, before any
    // byte is sent, instead of breaking the connection's protocol state inside the driver.
    let copied: Buffer | undefined, statesJson: string, jobsJson: string
    const copy = this.#db.copiesEvents && !tolerant
    try {
      copied = copy ? eventCopyText(units) : undefined
      statesJson = JSON.stringify(states)
      jobsJson = JSON.stringify(jobs)
    } catch (error) {
      throw new UnencodableRows(error)
    }
    // The json column would keep a NUL character, but nothing else downstream can (text, jsonb: the
    // printer's state, the live feed's readers): refused as before, when data was jsonb. One scan of
    // the flush's text; the walk only when an escaped NUL may be there.
    // COPY text holds a raw NUL only from an id, key or type (JSON.stringify escapes the data's).
    if (copy && copied === undefined) throw new UnencodableRows(new Error('a text field holds U+0000'), 'nul-field')
    const parts = { fences: JSON.stringify(fences), fencedShards: [...fencedShards], states: statesJson, jobs: jobsJson, tolerant, at: new Date(this.#clock.now()) }
    let rows: FlushRow[] | undefined
    if (copied !== undefined) {
      refuseNul(copied, units)
      rows = await copyFlush(this.#db.sql, copied, parts, this.#clock)
      if (rows === undefined) this.#options.copyRefusals?.inc()
    }
    if (rows === undefined) {
      let events: string
      try {
        events = eventsJson(units)
      } catch (error) {
        throw new UnencodableRows(error)
      }
      refuseNul(events, units)
      rows = await flushStatement(this.#db.sql, this.#db.sql`select * from json_to_recordset(${events}::text::json) as r(${this.#db.sql.unsafe(eventColumns)})`, parts)
    }
    const inserted = tolerant ? new Map<string, Set<string>>() : undefined
    const fenced = new Set<string>()
    for (const row of rows) {
      if (row.e === null) {
        fenced.add(row.p)
        continue
      }
      if (inserted === undefined) continue
      let set = inserted.get(row.p)
      if (set === undefined) inserted.set(row.p, (set = new Set()))
      set.add(row.e)
    }
    return { inserted, fenced }
  }
}

/** The JSON path's event columns: what json_to_recordset reads out of each object. */
const eventColumns = 'p uuid, o uuid, a integer, s bigint, e text, k text, t text, h text, at double precision, d integer, j bigint, x json, ap boolean'

/** The events as one JSON document (the embedded store has no COPY). */
function eventsJson(units: readonly PrinterCommit[]): string {
  const rows: unknown[] = []
  for (const u of units) {
    for (const e of u.events) {
      rows.push({ p: u.printerId, o: u.organizationId, a: u.assignmentEpoch, s: e.seqn, e: e.eventId, k: e.idempotencyKey, t: e.type, h: u.hostId, at: e.timestamp, d: e.deliveryAttempt, j: e.jobId, x: e.data, ap: e.applied })
    }
  }
  return JSON.stringify(rows)
}

/**
 * How long the rows of a flush's COPY may take to be handed to the connection before the flush is
 * given up and rolled back (its requests answer 503 and the bridges retry). At most
 * maxEventsPerFlush rows take milliseconds; the deadline is for a database that stopped reading.
 */
const copyDeadlineMs = 10_000

/**
 * How long a flush's transaction may wait for this process before PostgreSQL ends it (`copyFlush`).
 * Its own waits are turns of the event loop: milliseconds, a second in the worst pauses seen.
 */
const flushIdleTimeoutMs = 5_000

/**
 * Writes the COPY's rows and its end, and resolves once both are handed to the connection, not
 * when the server confirms them: postgres.js never settles a COPY the server refuses after its
 * data (porsager/postgres#1173), and the statement sent behind it tells the outcome anyway.
 * postgres.js writes the COPY's end (and takes the connection out of COPY mode, so that the next
 * query may be sent) in the stream's `_final`, which is wrapped here to know when it ran. Rejects
 * with the server's error when it refuses the COPY while rows are still being written.
 */
function sendCopy(stream: Writable, rows: Buffer, timers: Timers): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    // Destroying the stream ends the COPY (postgres.js sends CopyFail) and takes the connection out
    // of COPY mode, so the ROLLBACK that follows is sent instead of being refused by the driver.
    const timer = timers.setTimeout(() => stream.destroy(Object.assign(new Error(`the database did not take a COPY's rows within ${copyDeadlineMs} ms`), { code: 'ETIMEDOUT' })), copyDeadlineMs)
    stream.once('error', (error) => {
      timers.clearTimeout(timer)
      reject(error)
    })
    const final = stream._final
    if (final === undefined) {
      stream.destroy(new Error("postgres.js's COPY stream has no _final: the driver changed; see src/printers/event-store.ts"))
      return
    }
    stream._final = function (this: Writable, callback) {
      final.call(this, callback)
      timers.clearTimeout(timer)
      resolve()
    }
    stream.end(rows)
  })
}

/** An error PostgreSQL sent (a five-character SQLSTATE), not one of the connection or of this process. */
function isServerError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
}

/** SQLSTATE 25P02: a statement sent into a transaction an earlier statement (the COPY) had aborted. */
const inFailedTransaction = '25P02'

/**
 * A flush on a real PostgreSQL: the COPY of its events into the log, then the flush statement, in
 * one transaction on a connection of its own. The messages go out in two bursts (BEGIN with the
 * COPY's start; the rows, the COPY's end, the statement and COMMIT), not one round trip each:
 * every round trip waits for a turn of this process's busy event loop, and the flushes' time, not
 * the database's CPU, bounded the throughput. Answers undefined when the log refused the COPY
 * (the statement behind it answers 25P02, COMMIT answers ROLLBACK: nothing was stored), for the
 * caller to write the flush by the JSON statement.
 */
async function copyFlush(pool: Sql, rows: Buffer, parts: FlushParts, timers: Timers): Promise<FlushRow[] | undefined> {
  const sql = await pool.reserve()
  const quiet = (query: Promise<unknown>) => void query.catch(() => undefined)
  try {
    // Each sent at once, in this order (postgres.js sends a query when it is first handled).
    const begun = sql`begin`
    quiet(begun)
    // The transaction holds its shards' token rows (the statement's share lock) until COMMIT, which
    // goes out a turn of the event loop after the statement. A node frozen in between (stopped, a
    // paused VM) would keep a new owner from raising those tokens, and so from taking the shards,
    // for as long as it stays frozen: PostgreSQL ends such a transaction (and its session) after
    // this long idle. Nothing of it was acknowledged, so the bridges' retries store it once.
    quiet(setLocal(sql, { idleInTransactionMs: flushIdleTimeoutMs }))
    // Nothing else may be sent on the connection until the COPY ends: the server reads it as rows.
    const stream = await sql`copy printer_events (${sql.unsafe(eventCopyColumns)}) from stdin`.writable()
    await begun
    try {
      await sendCopy(stream, rows, timers)
    } catch (error) {
      // Refused while rows were still being written (the server's own error, whatever it is): as
      // refused after them, the flush goes again by the JSON statement.
      if (!isServerError(error)) throw error
      await sql`rollback`.catch(() => undefined)
      return undefined
    }
    // postgres.js sends a query when it is first awaited or handled: the statement first, then COMMIT behind it.
    const outcome = flushStatement(sql, undefined, parts).then(
      (stored) => ({ stored }),
      (error: unknown) => ({ error }),
    )
    const committed = sql`commit`
    quiet(committed)
    const result = await outcome
    if ('error' in result) {
      // A statement that fails turns the pipelined COMMIT into a rollback (PostgreSQL ends an aborted transaction that way).
      await committed.catch(() => undefined)
      if ((result.error as { code?: unknown }).code === inFailedTransaction) return undefined
      throw result.error
    }
    // ROLLBACK here would mean the transaction was aborted after all: nothing is stored, so nothing may be answered as stored.
    if ((await committed).command !== 'COMMIT') return undefined
    return result.stored
  } catch (error) {
    // Whatever failed before the COMMIT (or the COMMIT itself): the connection goes back without a transaction.
    await sql`rollback`.catch(() => undefined)
    throw error
  } finally {
    sql.release()
  }
}

interface FlushParts {
  fences: string
  /** Now, on the node's clock. */
  at: Date
  fencedShards: number[]
  states: string
  jobs: string
  tolerant: boolean
}

/** What the flush statement answers: a printer refused by a fence (e null) or, when tolerant, an event it stored. */
interface FlushRow {
  p: string
  e: string | null
}

/**
 * The flush statement: fences, events (from \`eventRows\`: the JSON document; undefined when the
 * transaction COPYed them already), states, jobs and what ended jobs change, in one statement.
 * Returns the printers refused by a fence (e null) and, when tolerant, the events it stored.
 */
function flushStatement(sql: Sql | TransactionSql | ReservedSql, eventRows: PendingQuery<Row[]> | undefined, { fences, fencedShards, states, jobs, tolerant, at }: FlushParts) {
  const onDuplicate = tolerant ? sql`on conflict do nothing returning printer_id as p, event_id as e` : sql``
  const stored = tolerant ? sql`select p::text as p, e from ev union all ` : sql``
  const events =
    eventRows === undefined
      ? // COPYed by this transaction: a refused unit's rows go again (its seqn range, and only the rows this transaction wrote).
        sql`delete from printer_events e using fu
          where fu.p in (select p from refused) and e.printer_id = fu.p and e.assignment_epoch = fu.a and e.seqn between fu.lo and fu.hi
            and e.xmin = pg_current_xact_id()::xid`
      : sql`insert into printer_events (${sql.unsafe(eventCopyColumns)})
          select p, o, a, s, e, k, t, h, at, d, j, x, ap
          from (${eventRows}) as r
          where p not in (select p from refused)
          ${onDuplicate}`
  return sql<FlushRow[]>`
    with fu as (
      select p, sh, tk, a, lo, hi from json_to_recordset(${fences}::text::json) as r(p uuid, sh integer, tk bigint, a integer, lo bigint, hi bigint)
    ), tok as (
      select shard, token from shard_tokens where shard = any(${fencedShards}::int[]) for share
    ), refused as (
      select fu.p from fu join tok on tok.shard = fu.sh where tok.token > fu.tk
    ), ev as (
      ${events}
    ), st as (
      insert into printer_state as cur (printer_id, organization_id, seqn_epoch, high_water_seqn, state, online, seen_at, updated_at)
      select p, o, a, hw, st, "on", case when seen then ${at}::timestamptz end, ${at}::timestamptz
      from json_to_recordset(${states}::text::json) as r(p uuid, o uuid, a integer, hw bigint, st jsonb, "on" boolean, seen boolean)
      where p not in (select p from refused)
      on conflict (printer_id) do update set
        seqn_epoch = excluded.seqn_epoch, high_water_seqn = excluded.high_water_seqn, state = excluded.state,
        online = excluded.online, seen_at = coalesce(excluded.seen_at, cur.seen_at), updated_at = ${at}
    ), jr as (
      select * from json_to_recordset(${jobs}::text::json)
        as r(id bigint, o uuid, p uuid, n text, s text, pr double precision, sa double precision, ea double precision, lf text[], lt text, br text)
      where p not in (select p from refused)
    ), jb as (
      insert into print_jobs as cur (id, organization_id, printer_id, name, state, progress, started_at_ms, ended_at_ms, status, bridge_result)
      select id, o, p, n, s, pr, sa, ea, lt, br from jr
      on conflict (id) do update set
        name = case when cur.source = 'api' then cur.name else coalesce(excluded.name, cur.name) end, state = excluded.state, progress = excluded.progress,
        started_at_ms = coalesce(cur.started_at_ms, excluded.started_at_ms),
        ended_at_ms = excluded.ended_at_ms, bridge_result = coalesce(excluded.bridge_result, cur.bridge_result),
        -- The lifecycle as machines/print-job.ts rules it: the printer's view moves the status only
        -- from the statuses its event applies in (a job an operator cancelled stays cancelled).
        status = case when cur.status = any(array(select unnest(jr.lf) from jr where jr.id = cur.id)) then excluded.status else cur.status end,
        updated_at = ${at}
      returning id
    ), ended as (
      select id, p from jr where ea is not null
    ), tf as (
      update printer_tasks set state = 'finished', ended_at = ${at}, commands = '[]'::jsonb, updated_at = ${at}
      where job_id in (select id from ended) and state = 'started'
    ), tc as (
      -- A command is done once the printer shows its effect: paused answers pause, printing answers resume.
      update printer_tasks t set updated_at = ${at}, commands = coalesce((
        select jsonb_agg(c order by n) from jsonb_array_elements(t.commands) with ordinality as e(c, n)
        where c->>'kind' <> case jr.s when 'paused' then 'pause' else 'resume' end), '[]'::jsonb)
      from jr where t.job_id = jr.id and t.state = 'started' and jr.ea is null and jr.s in ('paused', 'printing') and t.commands <> '[]'::jsonb
    ), nr as (
      -- The ready gate: a printer whose job ended holds what it printed until an operator verifies it.
      update printers set ready = false, ready_source = 'job_ended', ready_updated_at = ${at}
      where id in (select p from ended) and ready
    )
    ${stored}select p::text as p, null as e from refused`
}

function jobRow(unit: PrinterCommit, job: PrinterJob) {
  const { from, to, result } = lifecycleOf(job)
  return { id: job.jobId, o: unit.organizationId, p: unit.printerId, n: job.name, s: job.state, pr: job.progress, sa: job.startedAt, ea: job.endedAt, lf: from, lt: to, br: result }
}

/**
 * What the printer's view of a job does to its lifecycle status, as a rule
 * the statement applies (machines/print-job.ts). A job first seen here is
 * inserted with the rule's target: it was never queued.
 */
function lifecycleOf(job: PrinterJob): { from: JobStatus[]; to: JobStatus; result: string | null } {
  const result = job.state === 'finished' ? 'success' : job.state === 'failed' ? 'failed' : job.state === 'cancelled' ? 'cancelled' : null
  const event: PrintJobEvent =
    job.state === 'paused' ? { type: 'PAUSE' } : result !== null ? { type: 'FINISH', result: result as 'success' | 'failed' | 'cancelled' } : { type: 'RESUME' }
  const rule = deviceRules.get(JSON.stringify(event))!
  return { from: rule.from, to: event.type === 'RESUME' ? 'printing' : rule.to, result }
}

const deviceEvents: PrintJobEvent[] = [
  { type: 'PAUSE' },
  { type: 'RESUME' },
  { type: 'FINISH', result: 'success' },
  { type: 'FINISH', result: 'failed' },
  { type: 'FINISH', result: 'cancelled' },
]
const deviceRules = new Map(deviceEvents.map((e) => [JSON.stringify(e), jobStatusRule(e)!]))

/** Rows JSON cannot encode (a value nested beyond the serializer's stack), or data or a text field holding a NUL character. */
class UnencodableRows extends Error {
  readonly reason: 'depth' | 'nul' | 'nul-field'
  constructor(cause: unknown, reason: 'depth' | 'nul' | 'nul-field' = 'depth') {
    super('event data cannot be encoded as JSON', { cause })
    this.name = 'UnencodableRows'
    this.reason = reason
  }
}

/** Throws when the flush's text (COPY rows or JSON) carries an escaped NUL that is really in a unit's data: one scan of the text, the walk only when it may be there. */
function refuseNul(text: string | Buffer, units: readonly PrinterCommit[]): void {
  if (text.includes('u0000') && units.some(holdsNul)) throw new UnencodableRows(new Error('a JSON string may not contain \\u0000'), 'nul')
}

/** True when a string or key in one of the unit's event data is or holds U+0000 (iterative: no recursion to exhaust). */
function holdsNul(unit: PrinterCommit): boolean {
  const stack: unknown[] = unit.events.map((e) => e.data)
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return true
    } else if (Array.isArray(value)) {
      stack.push(...value)
    } else if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        if (key.includes('\u0000')) return true
        stack.push(child)
      }
    }
  }
  return false
}

/** SQLSTATE 23505: a unique index refused a row. */
function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown }).code === '23505'
}

/** SQLSTATE classes 22 (data exception) and 23 (integrity constraint), or rows JSON cannot encode: the rows, not the store, are at fault. */
function isDataError(error: unknown): boolean {
  if (error instanceof UnencodableRows) return true
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && /^2[23]/.test(code)
}

function translateDataError(error: unknown): unknown {
  if (error instanceof UnencodableRows && error.reason === 'nul-field') {
    return new ServiceError('validation_failed', "an event's eventId, idempotencyKey or type holds a NUL character (\\u0000), which the event log cannot store")
  }
  if (error instanceof UnencodableRows && error.reason === 'nul') {
    return new ServiceError('validation_failed', "an event's data holds a value the event log cannot store: a JSON string may not contain \\u0000")
  }
  if (error instanceof UnencodableRows) return new ServiceError('validation_failed', 'event data cannot be encoded as JSON (nested too deeply)')
  const code = (error as { code?: unknown }).code
  if (typeof code !== 'string') return error
  // The printer was deleted while its events were in flight.
  if (code === '23503') return new ServiceError('printer_not_found', 'no such printer in this organization')
  if (code.startsWith('22')) {
    return new ServiceError('validation_failed', `an event's data holds a value the event log cannot store (${(error as Error).message}); a JSON string may not contain \\u0000`)
  }
  return error
}
