/**
 * A finished job's grams leave the spools it printed from, once (docs/inventory.md:
 * grams are deducted at job:finish: the plate's used_g per slot, times
 * progress / 100 when not successful).
 *
 * Exactly once is three things together: attempts that may repeat (after the
 * printer commit that ended the job, and again from the sweep's catch-up, so
 * a crash between the commit and the deduction is healed), the marker on the
 * job row checked under its lock (`inventory_deducted_attempt` = the job's
 * `attempts`), and the unique index of the ledger (one entry per spool and
 * job run). A failed job requeued under the same id is a new run (its
 * `attempts` moves at the next dispatch) and is deducted again when that run
 * ends.
 *
 * The rules:
 * - Only a dispatched job has a slot mapping (its printer task's
 *   `ams_mapping`: per project filament, the printer slot, −1 unused). A job
 *   a bridge opened by itself has none: it is marked, with nothing written.
 * - Per filament with `used_g` > 0 mapped to a slot: `used_g` when the
 *   printer's job state is `finished`, else `used_g × progress / 100`
 *   (no progress: 0), to the centigram. Filaments sharing a slot are summed
 *   into one entry. The spool loaded in that slot of the task's printer when
 *   the deduction runs is the one charged; a slot with no spool is skipped.
 * - The job is marked even when nothing was deducted, so it is not looked at
 *   again.
 *
 * Rows are locked job first, then spools (adjustments and spool changes lock
 * only spools), so no two writers wait on each other in a circle.
 */
import type { Sql, TransactionSql } from 'postgres'
import type { Clock } from '../../actors/clock.js'
import type { PrinterChange } from '../../actors/printer-actor.js'
import type { LedgerEntry } from '../../protocol/schemas/inventory.js'
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { perTurn } from '../async/per-turn.js'
import { writeLedgerEntry } from './spool-ledger.js'

type RequiredMaterial = PrintJob['constraints']['required_materials'][number]

/** The statuses a job ends its run in (machines/print-job.ts); a requeued job (queued again) is not one of them. */
const endedStatuses = ['awaiting_verification', 'succeeded', 'failed', 'cancelled'] as const

interface DeductionJobRow {
  id: string | number
  state: string
  progress: number | null
  required_materials: RequiredMaterial[]
  ended_at_ms: number | null
  status: string
  attempts: number
  printer_task_id: string | null
  inventory_deducted_attempt: number | null
}

/** What one printer slot gave to a job run: grams and the (1-based) filaments that took them. */
export interface SlotDraw {
  slot: number
  grams: number
  filaments: number[]
}

/**
 * The grams a run took from each slot (pure): see the rules above. `state` is the printer's own
 * job state; `progress` 0-100.
 */
export function slotDraws(required: readonly RequiredMaterial[], mapping: readonly unknown[], state: string, progress: number | null): SlotDraw[] {
  const share = state === 'finished' ? 1 : Math.min(100, Math.max(0, progress ?? 0)) / 100
  const draws = new Map<number, SlotDraw>()
  for (const material of Array.isArray(required) ? required : []) {
    const index = material.filament_index
    const used = material.used_g
    if (!Number.isInteger(index) || typeof used !== 'number' || !Number.isFinite(used) || used <= 0) continue
    const slot = mapping[index]
    if (typeof slot !== 'number' || !Number.isInteger(slot) || slot < 0 || slot > 63) continue
    const draw = draws.get(slot) ?? { slot, grams: 0, filaments: [] }
    draw.grams += used * share
    draw.filaments.push(index + 1)
    draws.set(slot, draw)
  }
  return [...draws.values()].map((d) => ({ ...d, grams: Math.round(d.grams * 100) / 100 })).filter((d) => d.grams > 0)
}

function reasonOf(jobId: number, state: string, progress: number | null, filaments: readonly number[]): string {
  const what = state === 'finished' ? 'printed' : `${state === 'cancelled' ? 'cancelled' : 'failed'} at ${Math.round(Math.min(100, Math.max(0, progress ?? 0)))} %`
  return `job ${jobId} ${what} (filament ${filaments.join(', ')})`
}

/**
 * Deducts one ended job run's grams, in one transaction; [] when it has not ended, was deducted
 * already, or took nothing from a loaded spool.
 */
export async function deductFinishedJob(sql: Sql, organizationId: string, jobId: number, now: Date): Promise<LedgerEntry[]> {
  if ((await markUndispatched(sql, [{ organizationId, jobId }], now)).size > 0) return []
  return deductInTransaction(sql, organizationId, jobId, now)
}

/**
 * Marks the ended runs of jobs no printer task dispatched (a bridge opened them on its own: no
 * slot mapping, nothing to deduct), many in one statement; answers the ids it marked. Most ended
 * jobs are such: a transaction of four round trips per job held pool connections idle while the
 * event loop was busy and starved the event log's group commit under load (bench/ingest: half of
 * a 10-connection pool, at one job per 100 events).
 */
export async function markUndispatched(sql: Sql, jobs: readonly { organizationId: string; jobId: number }[], now: Date): Promise<Set<number>> {
  if (jobs.length === 0) return new Set()
  // Planned with its values every time (an unnamed statement): a prepared one switches to a
  // generic plan after five runs and keeps it, and one made while print_jobs was still small is
  // a sequential scan of the whole table per call once it has grown (bench/ingest: a tenth of
  // the database's CPU, reading ~12,000 rows per ended job).
  const rows = await sql.unsafe<{ id: string | number }[]>(
    `update print_jobs j set inventory_deducted_at = $1, inventory_deducted_attempt = j.attempts
    from unnest($2::uuid[], $3::int8[]) as k(organization_id, id)
    where j.organization_id = k.organization_id and j.id = k.id and j.printer_task_id is null and j.ended_at_ms is not null
      and j.status = any($4::text[]) and j.inventory_deducted_attempt is distinct from j.attempts
    returning j.id`,
    [now, jobs.map((j) => j.organizationId), jobs.map((j) => j.jobId), endedStatuses as unknown as string[]],
    { prepare: false },
  )
  return new Set(rows.map((r) => Number(r.id)))
}

async function deductInTransaction(sql: Sql, organizationId: string, jobId: number, now: Date): Promise<LedgerEntry[]> {
  return sql.begin((tx) => deductJobRun(tx, organizationId, jobId, now))
}

/**
 * Deducts the job's ended run inside the caller's transaction (which locks the job first, as every
 * writer of jobs does): a requeue does this before the run's facts are cleared, so a deduction still
 * pending when an operator requeues is not lost.
 */
export async function deductJobRun(tx: TransactionSql, organizationId: string, jobId: number, now: Date): Promise<LedgerEntry[]> {
  const [job] = await tx<DeductionJobRow[]>`
    select id, state, progress, required_materials, ended_at_ms, status, attempts, printer_task_id, inventory_deducted_attempt
    from print_jobs where organization_id = ${organizationId} and id = ${jobId} for update`
  if (job === undefined || job.ended_at_ms === null || !(endedStatuses as readonly string[]).includes(job.status)) return []
  if (job.inventory_deducted_attempt === job.attempts) return []
  const entries: LedgerEntry[] = []
  const [task] =
    job.printer_task_id === null
      ? []
      : await tx<{ printer_id: string; ams_mapping: unknown[] }[]>`
          select printer_id, ams_mapping from printer_tasks where id = ${job.printer_task_id} and job_id = ${jobId} and state in ('finished', 'started')`
  const draws = task === undefined ? [] : slotDraws(job.required_materials, Array.isArray(task.ams_mapping) ? task.ams_mapping : [], job.state, job.progress)
  if (task !== undefined && draws.length > 0) {
    const spools = await tx<{ id: string; slot: number; remaining_g: number }[]>`
      select id, slot, remaining_g from spools
      where organization_id = ${organizationId} and printer_id = ${task.printer_id} and slot = any(${draws.map((d) => d.slot)}::int[])
      order by id for update`
    for (const draw of draws) {
      const spool = spools.find((s) => s.slot === draw.slot)
      if (spool === undefined) continue
      const written = await writeLedgerEntry(tx, {
        organizationId,
        spoolId: spool.id,
        remaining: spool.remaining_g,
        delta: -draw.grams,
        reason: reasonOf(jobId, job.state, job.progress, draw.filaments),
        job: { id: jobId, attempt: job.attempts },
        now,
      })
      if (written !== undefined) entries.push(written.entry)
    }
  }
  await tx`update print_jobs set inventory_deducted_at = ${now}, inventory_deducted_attempt = ${job.attempts} where id = ${jobId}`
  return entries
}

/** Ended job runs not deducted yet, oldest first (the catch-up after a crash between a commit and its deduction). */
export async function pendingDeductions(sql: Sql, limit: number): Promise<{ organization_id: string; id: number }[]> {
  const rows = await sql<{ organization_id: string; id: string | number }[]>`
    select organization_id, id from print_jobs
    where ended_at_ms is not null and status in ('awaiting_verification', 'succeeded', 'failed', 'cancelled')
      and inventory_deducted_attempt is distinct from attempts
    order by id limit ${limit}`
  return rows.map((r) => ({ organization_id: r.organization_id, id: Number(r.id) }))
}

export interface DeductionRunner {
  /** After a printer commit: deducts the jobs it ended (failures are logged; the catch-up retries them). */
  afterCommit(change: Pick<PrinterChange, 'view' | 'jobs'>): void
  /** Deducts every ended job run still pending, a page per call; one call at a time. */
  catchUp(): Promise<void>
}

/** Catch-up page size: a node back from a long outage works through its backlog a page per sweep. */
const catchUpPage = 100

export function createDeductionRunner(deps: { sql: Sql; logger: Logger; metrics: MetricsRegistry; clock: Clock }): DeductionRunner {
  const grams = deps.metrics.counter('inventory_deducted_grams_total', 'Grams of filament finished jobs took from spools.')
  const shortfall = deps.metrics.counter('inventory_deduction_shortfall_grams_total', 'Grams finished jobs used that their spools did not have on record.')
  const failures = deps.metrics.counter('inventory_deduction_failures_total', 'Deductions that failed (retried by the catch-up).')
  const count = (entries: readonly LedgerEntry[]): void => {
    for (const entry of entries) {
      grams.inc({}, -entry.applied_g)
      if (entry.shortfall_g > 0) shortfall.inc({}, entry.shortfall_g)
    }
  }
  const failed = (jobIds: readonly number[], error: unknown): void => {
    failures.inc({}, jobIds.length)
    deps.logger.warn('inventory deduction of a finished job failed; the sweep retries it', { jobIds, error: String(error) })
  }
  const deduct = async (organizationId: string, jobId: number): Promise<void> => {
    try {
      count(await deductFinishedJob(deps.sql, organizationId, jobId, new Date(deps.clock.now())))
    } catch (error) {
      failed([jobId], error)
    }
  }
  // The jobs that printer commits ended, gathered over one turn of the event loop (the commits of
  // one group-commit flush resolve together): the undispatched ones are marked by one statement,
  // the others deducted one transaction each.
  const deductEnded = async (jobs: { organizationId: string; jobId: number }[]): Promise<void> => {
    const now = new Date(deps.clock.now())
    let marked: Set<number>
    try {
      marked = await markUndispatched(deps.sql, jobs, now)
    } catch (error) {
      failed(
        jobs.map((j) => j.jobId),
        error,
      )
      return
    }
    for (const job of jobs) {
      if (marked.has(job.jobId)) continue
      try {
        count(await deductInTransaction(deps.sql, job.organizationId, job.jobId, now))
      } catch (error) {
        failed([job.jobId], error)
      }
    }
  }
  const deductLater = perTurn<{ organizationId: string; jobId: number }>((jobs) => void deductEnded(jobs))
  let catchingUp = false
  return {
    afterCommit: (change) => {
      for (const job of change.jobs) if (job.endedAt !== null) deductLater({ organizationId: change.view.organizationId, jobId: job.jobId })
    },
    catchUp: async () => {
      if (catchingUp) return
      catchingUp = true
      try {
        for (const job of await pendingDeductions(deps.sql, catchUpPage)) await deduct(job.organization_id, job.id)
      } catch (error) {
        deps.logger.warn('listing the jobs still to deduct from the inventory failed; retried at the next sweep', { error: String(error) })
      } finally {
        catchingUp = false
      }
    },
  }
}
