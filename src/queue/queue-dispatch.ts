/**
 * The queue's dispatch: the pairs a plan chose become printer tasks in one
 * transaction, the same facts a hand assignment makes (task offered, job
 * dispatching), written in bulk:
 * - the jobs, then the printers, are locked (in id order, the hand
 *   assignment's order: job, then printer) and read again, and each pair
 *   checked again (eligible, and compatible with what is loaded now); a pair
 *   that no longer holds is left for the next pass. The printer lock orders
 *   the pass after an operator's hold or a disable committed meanwhile, so
 *   the offer never ignores one;
 * - a job moves to dispatching only if it is still queued (a conditional
 *   update: a job cancelled meanwhile is skipped, and the update's row locks
 *   order this transaction after any writer of the job);
 * - its task is inserted unless the printer got another live task meanwhile
 *   (the store's one-live-task-per-printer index answers; that job goes back
 *   to queued in the same transaction);
 * - the queue's shard fence is checked first, so a node that lost the queue
 *   of this organization stores nothing.
 * A queued job's requirements do not change, so the plan's reading of them
 * stands.
 */
import { randomUUID } from 'node:crypto'
import type { Sql } from 'postgres'
import type { Fence } from '../../actors/shard-directory.js'
import { nextJobStatus } from '../../machines/print-job.js'
import { Matcher, eligibilityReasons, type MatchOptions, type QueueJob } from '../../protocol/queue-match.js'
import { checkFence } from '../storage/fencing.js'
import { queuePrinterOf, queuePrinterRows } from './queue-facts.js'

export interface Planned {
  job: QueueJob
  printerId: string
}

export interface Offered {
  taskId: string
  jobId: number
  printerId: string
  hostId: string
}

export async function dispatchPlanned(sql: Sql, organizationId: string, planned: readonly Planned[], options: MatchOptions & { offerTtlSeconds: number; fence: Fence | undefined; now: Date }): Promise<Offered[]> {
  if (planned.length === 0) return []
  const { now } = options
  // The lifecycle's rule, asked once: a queued job dispatched is dispatching.
  const dispatching = nextJobStatus('queued', { type: 'DISPATCH' })
  if (dispatching === undefined) throw new TypeError('the print job lifecycle no longer dispatches a queued job')
  return await sql.begin(async (tx) => {
    await checkFence(tx, options.fence)
    await tx`select id from print_jobs where id = any(${planned.map((p) => p.job.id)}::int8[]) and organization_id = ${organizationId} order by id for update`
    const printers = new Map((await queuePrinterRows(tx, organizationId, { ids: planned.map((p) => p.printerId), lock: true })).map((row) => [row.id, row]))
    const matcher = new Matcher(options)
    const pairs: { taskId: string; job: QueueJob; printerId: string; hostId: string; epoch: number; mapping: number[] }[] = []
    const used = new Set<string>()
    for (const { job, printerId } of planned) {
      const row = printers.get(printerId)
      if (row === undefined || used.has(printerId) || !job.autoAssign) continue
      const printer = queuePrinterOf(row, now.getTime())
      if (eligibilityReasons(printer).length > 0) continue
      const fit = matcher.fit(job, printer)
      if (fit === undefined) continue
      used.add(printerId)
      pairs.push({ taskId: randomUUID(), job, printerId, hostId: printer.hostId!, epoch: row.assignment_epoch, mapping: fit.amsMapping })
    }
    if (pairs.length === 0) return []
    const moved = await tx<{ id: string; model_file_id: string; plate: number }[]>`
      update print_jobs j set status = ${dispatching}, printer_id = r.printer_id, printer_task_id = r.task_id, attempts = j.attempts + 1, failure_reason = null, updated_at = ${now}
      from unnest(${pairs.map((p) => p.job.id)}::int8[], ${pairs.map((p) => p.printerId)}::uuid[], ${pairs.map((p) => p.taskId)}::uuid[]) as r(job_id, printer_id, task_id)
      where j.id = r.job_id and j.organization_id = ${organizationId} and j.status = 'queued' and j.model_file_id is not null
      returning j.id, j.model_file_id, j.plate`
    if (moved.length === 0) return []
    const jobFacts = new Map(moved.map((m) => [Number(m.id), m]))
    const rows = pairs.filter((p) => jobFacts.has(p.job.id))
    const expires = new Date(now.getTime() + options.offerTtlSeconds * 1000)
    const inserted = await tx<{ id: string }[]>`
      insert into printer_tasks (id, organization_id, job_id, printer_id, host_id, assignment_epoch, file_id, plate, ams_mapping, state, offered_at, offer_expires_at, updated_at)
      select r.id, ${organizationId}, r.job_id, r.printer_id, r.host_id, r.epoch, r.file_id, r.plate, r.mapping::jsonb, 'offered', ${now}, ${expires}, ${now}
      from unnest(${rows.map((r) => r.taskId)}::uuid[], ${rows.map((r) => r.job.id)}::int8[], ${rows.map((r) => r.printerId)}::uuid[], ${rows.map((r) => r.hostId)}::text[],
        ${rows.map((r) => r.epoch)}::int8[], ${rows.map((r) => jobFacts.get(r.job.id)!.model_file_id)}::uuid[], ${rows.map((r) => jobFacts.get(r.job.id)!.plate)}::int[],
        ${rows.map((r) => JSON.stringify(r.mapping))}::text[])
        as r(id, job_id, printer_id, host_id, epoch, file_id, plate, mapping)
      on conflict do nothing
      returning id`
    const offered = new Set(inserted.map((i) => i.id))
    const lost = rows.filter((r) => !offered.has(r.taskId))
    if (lost.length > 0) {
      // Their printers got a live task between the read and the insert: the jobs wait for the next pass.
      await tx`
        update print_jobs set status = 'queued', printer_id = null, printer_task_id = null, attempts = attempts - 1
        where id = any(${lost.map((r) => r.job.id)}::int8[])`
    }
    const done = rows.filter((r) => offered.has(r.taskId))
    await tx`update printers set last_assigned_at = ${now} where id = any(${done.map((r) => r.printerId)}::uuid[])`
    return done.map((r) => ({ taskId: r.taskId, jobId: r.job.id, printerId: r.printerId, hostId: r.hostId }))
  })
}
