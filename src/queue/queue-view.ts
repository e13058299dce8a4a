/**
 * The queue as people read it (GET /v1/queue, a job's `queue` field, the
 * live `queue` topic): the jobs being dispatched, then the queued ones in
 * order, each with where it goes or why it waits. Computed from the store
 * with the same plan the queue's passes make, so what it says is what the
 * next pass does.
 */
import type { Sql, TransactionSql } from 'postgres'
import { planQueue, reasonCounts, summaryOf, type JobMatch, type Reason } from '../../protocol/queue-match.js'
import type { PrintJob, QueueExplanation } from '../../protocol/schemas/print-jobs.js'
import type { QueueEntry, QueueList } from '../../protocol/schemas/queue.js'
import { jobOf, type JobRow } from '../jobs/job-records.js'
import { queuedJobs, queuePrinters } from './queue-facts.js'
import { staggerOf, type StaggerSettings } from './stagger.js'

export interface ViewSettings extends StaggerSettings {
  colorTolerance: number
}

interface Placed {
  jobId: number
  status: 'queued' | 'dispatching'
  match: JobMatch
}

interface DispatchingRow {
  id: string
  printer_id: string | null
  task_state: string | null
  ams_mapping: number[] | null
}

/**
 * Every waiting job's place (dispatching ones first, then the queued ones in queue order), with
 * reasons for the jobs of `explain`: ids, or a page of the places. A page bounds the plan too.
 */
/**
 * One consistent read: a queue pass may commit between two statements, and a view that read the
 * queued jobs before it and the stagger or the job rows after would show a job both waiting for the
 * stagger and already dispatched. REPEATABLE READ gives every statement the same snapshot.
 */
async function snapshot<T>(sql: Sql, read: (tx: TransactionSql) => Promise<T>): Promise<T> {
  return (await sql.begin('isolation level repeatable read read only', read)) as T
}

async function placeAll(sql: Sql | TransactionSql, organizationId: string, settings: ViewSettings, now: number, explain: ReadonlySet<number> | { offset: number; limit: number }) {
  const [dispatching, queued, printers, stagger] = await Promise.all([
    sql<DispatchingRow[]>`
      select j.id, j.printer_id, t.state as task_state, t.ams_mapping
      from print_jobs j left join printer_tasks t on t.id = j.printer_task_id
      where j.organization_id = ${organizationId} and j.status = 'dispatching'
      order by j.updated_at, j.id`,
    queuedJobs(sql, organizationId),
    queuePrinters(sql, organizationId, now),
    staggerOf(sql, organizationId, settings, now),
  ])
  let explained: ReadonlySet<number>
  let upTo: number | undefined
  if (explain instanceof Set) explained = explain
  else {
    const page = explain as { offset: number; limit: number }
    // The plan keeps the order of the queued jobs as read (the store sorts them the same way).
    const first = Math.max(0, page.offset - dispatching.length)
    upTo = Math.max(0, page.offset + page.limit - dispatching.length)
    explained = new Set(queued.slice(first, upTo).map((j) => j.id))
  }
  const plan = planQueue(queued, printers, { colorTolerance: settings.colorTolerance, startsAvailable: stagger.startsAvailable, explain: (id) => explained.has(id), ...(upTo === undefined ? {} : { upTo }) })
  const placed: Placed[] = dispatching.map((d) => {
    const id = Number(d.id)
    const reasons: Reason[] =
      d.task_state === 'unconfirmed' && d.printer_id !== null
        ? [{ printer_id: d.printer_id, code: 'start_unconfirmed', detail: 'the bridge claimed the task and never reported the start: say it started (POST /v1/printers/{id}/operator-device-start) or requeue the job' }]
        : []
    return { jobId: id, status: 'dispatching' as const, match: { job_id: id, printer_id: d.printer_id, ams_mapping: d.ams_mapping ?? [], score: null, reasons } }
  })
  for (const match of plan.matches) placed.push({ jobId: match.job_id, status: 'queued', match })
  return { placed, printers: printers.length, stagger, queuedTotal: queued.length, dispatchingTotal: dispatching.length }
}

function explanationOf(p: Placed, index: number, printerCount: number, withReasons: boolean): QueueExplanation {
  return {
    index,
    printer_id: p.match.printer_id,
    summary: summaryOf(p.match, printerCount, p.status),
    reason_counts: reasonCounts(p.match.reasons) as Record<string, number>,
    ...(withReasons ? { reasons: p.match.reasons } : {}),
  }
}

export async function queueList(sql: Sql, organizationId: string, settings: ViewSettings, now: number, page: { limit: number; offset: number; reasonsLimit: number }): Promise<QueueList> {
  const { placed, printers, stagger, queuedTotal, dispatchingTotal, onPage, jobs } = await snapshot(sql, async (tx) => {
    const all = await placeAll(tx, organizationId, settings, now, page)
    const onPage = all.placed.slice(page.offset, page.offset + page.limit)
    return { ...all, onPage, jobs: await jobsById(tx, organizationId, onPage.map((p) => p.jobId)) }
  })
  const entries: QueueEntry[] = []
  onPage.forEach((p, i) => {
    const job = jobs.get(p.jobId)
    if (job === undefined) return
    const explanation = explanationOf(p, page.offset + i + 1, printers, false)
    entries.push({
      index: explanation.index,
      job: { ...job, queue: explanation },
      match: {
        printer_id: p.match.printer_id,
        ams_mapping: p.match.ams_mapping,
        score: p.match.score,
        reasons: p.match.reasons.slice(0, page.reasonsLimit),
        reasons_total: p.match.reasons.length,
        reason_counts: explanation.reason_counts,
      },
      summary: explanation.summary,
    })
  })
  return {
    jobs: entries,
    total: queuedTotal + dispatchingTotal,
    limit: page.limit,
    offset: page.offset,
    printers,
    stagger: {
      max_starts: Number.isFinite(stagger.maxStarts) ? stagger.maxStarts : null,
      window_ms: settings.staggerMs,
      starts_in_window: stagger.startsInWindow,
      next_start_at: stagger.nextStartAt === null ? null : new Date(stagger.nextStartAt).toISOString(),
    },
  }
}

/** The `queue` field of jobs that wait (queued or dispatching); `withReasons` adds every reason per printer. */
export async function explainJobs(sql: Sql, organizationId: string, jobs: readonly PrintJob[], settings: ViewSettings, now: number, withReasons: boolean): Promise<PrintJob[]> {
  const waiting = new Set(jobs.filter((j) => j.status === 'queued' || j.status === 'dispatching').map((j) => j.id))
  if (waiting.size === 0) return [...jobs]
  const { placed, printers } = await snapshot(sql, (tx) => placeAll(tx, organizationId, settings, now, waiting))
  const byJob = new Map<number, QueueExplanation>()
  placed.forEach((p, i) => {
    if (waiting.has(p.jobId)) byJob.set(p.jobId, explanationOf(p, i + 1, printers, withReasons))
  })
  return jobs.map((j) => (waiting.has(j.id) ? { ...j, queue: byJob.get(j.id) ?? null } : j))
}

/** The first jobs of the queue as the live `queue` topic shows them. */
export async function queueHead(sql: Sql, organizationId: string, settings: ViewSettings, now: number, count: number): Promise<QueueHead> {
  const { printers, queuedTotal, dispatchingTotal, head, jobs } = await snapshot(sql, async (tx) => {
    const all = await placeAll(tx, organizationId, settings, now, { offset: 0, limit: count })
    const head = all.placed.slice(0, count)
    return { ...all, head, jobs: await jobsById(tx, organizationId, head.map((p) => p.jobId)) }
  })
  return {
    total: queuedTotal + dispatchingTotal,
    printers,
    jobs: head.flatMap((p, i) => {
      const job = jobs.get(p.jobId)
      if (job === undefined) return []
      const e = explanationOf(p, i + 1, printers, false)
      return [{ id: job.id, name: job.name, status: job.status, priority: job.priority, position: job.position, index: e.index, printer_id: e.printer_id, summary: e.summary, reason_counts: e.reason_counts }]
    }),
  }
}

export interface QueueHead {
  total: number
  printers: number
  jobs: { id: number; name: string | null; status: string; priority: number; position: number | null; index: number; printer_id: string | null; summary: string; reason_counts: Record<string, number> }[]
}

async function jobsById(sql: Sql | TransactionSql, organizationId: string, ids: readonly number[]): Promise<Map<number, PrintJob>> {
  if (ids.length === 0) return new Map()
  const rows = await sql<JobRow[]>`select * from print_jobs where organization_id = ${organizationId} and id = any(${ids as number[]}::int8[])`
  return new Map(rows.map((r) => [Number(r.id), jobOf(r)]))
}

