/**
 * Reordering the queue (PATCH /v1/queue/{jobId}): the job takes the priority
 * and/or the 1-based position asked for; the other queued jobs of that
 * priority are numbered again around it in their current order, so every
 * queued job of the priority has a position afterwards and the order people
 * see is the order they set. A position past the end puts the job last.
 */
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { QueueReorderBody } from '../../protocol/schemas/queue.js'
import { jobOf, type JobRow } from '../jobs/job-records.js'
import { lockJob } from '../jobs/job-store.js'
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'

export async function reorder(sql: Sql, organizationId: string, jobId: number, body: QueueReorderBody, now: Date): Promise<PrintJob> {
  return await sql.begin(async (tx) => {
    const job = await lockJob(tx, organizationId, jobId)
    if (job.status !== 'queued') throw new ServiceError('job_not_queued', `job ${jobId} is ${job.status}; only a queued job can be reordered`)
    const priority = body.priority ?? job.priority
    if (body.position === undefined) {
      // A new priority without a place: the job joins the end of its new priority's queue, by age.
      const [row] = await tx<JobRow[]>`update print_jobs set priority = ${priority}, position = ${priority === job.priority ? job.position : null}, updated_at = ${now} where id = ${jobId} returning *`
      return jobOf(row!)
    }
    // The others of that priority, in queue order, locked in id order first (as every writer).
    const others = await tx<{ id: string }[]>`
      select id from print_jobs where organization_id = ${organizationId} and status = 'queued' and priority = ${priority} and id <> ${jobId}
      order by id for update`
    const ordered = await tx<{ id: string }[]>`
      select id from print_jobs where id = any(${others.map((o) => Number(o.id))}::int8[])
      order by position nulls last, created_at, id`
    const ids = ordered.map((o) => Number(o.id))
    ids.splice(Math.min(body.position - 1, ids.length), 0, jobId)
    await tx`
      update print_jobs j set position = r.position, priority = ${priority}, updated_at = case when j.id = ${jobId} then ${now} else j.updated_at end
      from unnest(${ids}::int8[], ${ids.map((_, i) => i + 1)}::int[]) as r(id, position)
      where j.id = r.id`
    const [row] = await tx<JobRow[]>`select * from print_jobs where id = ${jobId}`
    return jobOf(row!)
  })
}
