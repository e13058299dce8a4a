/**
 * A bridge's job:start linked to its printer task (docs/print-jobs.md): the
 * task → started and the job → printing in one transaction, once. The
 * printer actor calls it (through its persistence) before it stores the
 * event, so a task can never be started twice: the second start of a task
 * answers `already`.
 *
 * The start is fenced as the claim is: in the transaction that changes the
 * task and the job, the printer's shard token is checked (a node that lost
 * the printer's shard starts nothing: ShardUnavailable, the request is
 * retried on the owner) and the task's host and epoch are compared with the
 * stored printer row, not with what the actor cached.
 *
 * Rows are locked job first, then printer (shared), then task, the order
 * every writer of jobs and tasks keeps (src/jobs/dispatch.ts), so two
 * writers never wait on each other in a circle.
 */
import type { Sql, TransactionSql } from 'postgres'
import { shardOf } from '../../actors/shard-directory.js'
import { nextJobStatus } from '../../machines/print-job.js'
import { checkFence } from '../storage/fencing.js'
import type { TaskStartLink, TaskStartRequest } from '../../actors/printer-persistence.js'
import type { JobStatus, TaskState } from '../../protocol/schemas/print-jobs.js'

/** `fencingToken`: the printer actor's token for the printer's shard (0: the local directory, not checked). */
/** `at`: now, on the node's clock (the task's start time). */
export async function linkTaskStarts(sql: Sql, printerId: string, starts: readonly TaskStartRequest[], fencingToken: number, at: Date): Promise<Map<string, TaskStartLink>> {
  const links = new Map<string, TaskStartLink>()
  for (const start of starts) links.set(start.taskId, await linkOne(sql, printerId, start, fencingToken, at))
  return links
}

async function linkOne(sql: Sql, printerId: string, start: TaskStartRequest, fencingToken: number, at: Date): Promise<TaskStartLink> {
  return sql.begin(async (tx) => {
    await checkFence(tx, { shard: shardOf(printerId), token: fencingToken })
    const [owner] = await tx<{ job_id: string }[]>`select job_id from printer_tasks where id = ${start.taskId} and printer_id = ${printerId}`
    if (owner === undefined) return { outcome: 'unknown', jobId: null }
    const jobId = Number(owner.job_id)
    if (start.jobId !== undefined && start.jobId !== jobId) return { outcome: 'mismatch', jobId: null }
    const [job] = await tx<{ status: JobStatus }[]>`select status from print_jobs where id = ${jobId} for update`
    const [printer] = await tx<{ host_id: string | null; assignment_epoch: number }[]>`select host_id, assignment_epoch from printers where id = ${printerId} for share`
    const [task] = await tx<{ state: TaskState; host_id: string; assignment_epoch: number; claim_generation: string | null }[]>`
      select state, host_id, assignment_epoch, claim_generation from printer_tasks where id = ${start.taskId} for update`
    if (job === undefined || task === undefined || printer === undefined) return { outcome: 'unknown', jobId: null }
    // The stored assignment decides: the task's, the event's and the printer's host and epoch must be one.
    if (task.assignment_epoch !== start.assignmentEpoch || task.assignment_epoch !== printer.assignment_epoch || task.host_id !== printer.host_id) return { outcome: 'fenced', jobId }
    // A finished task's job has ended: announcing its start again (a restarted bridge repeating its last task) must not reopen it.
    if (task.state === 'finished') return { outcome: 'finished', jobId }
    if (task.state === 'started') return { outcome: 'already', jobId }
    if (task.state !== 'offered' && task.state !== 'claimed' && task.state !== 'unconfirmed') return { outcome: 'fenced', jobId }
    if (start.claimGeneration !== undefined && start.claimGeneration !== task.claim_generation) return { outcome: 'mismatch', jobId: null }
    const next = nextJobStatus(job.status, { type: 'START' })
    if (next === undefined) return { outcome: 'fenced', jobId }
    await tx`update printer_tasks set state = 'started', started_at = ${at}, updated_at = ${at} where id = ${start.taskId}`
    await tx`update print_jobs set status = ${next}, printer_id = ${printerId}, updated_at = ${at} where id = ${jobId}`
    if (start.reportJobId !== undefined && start.reportJobId !== jobId) await adoptReportJob(tx, printerId, start.reportJobId, jobId)
    return { outcome: 'linked', jobId }
  })
}

/**
 * The print a printer report saw before the bridge's job:start is the task's job: the events
 * stored under the report's job move to it, and the report's job (opened by the service, with
 * no task and nothing deducted) is deleted, so the print is one job, tracked to its end. The
 * printer's actor makes the same change to its state when it applies the start
 * (machines/printer-state.ts). Only the events since that job was created are looked at.
 */
async function adoptReportJob(tx: TransactionSql, printerId: string, reportJobId: number, jobId: number): Promise<void> {
  const [report] = await tx<{ created_at: Date }[]>`
    delete from print_jobs where id = ${reportJobId} and printer_id = ${printerId} and printer_task_id is null and source <> 'api'
    returning created_at`
  if (report === undefined) return
  await tx`
    update printer_events set job_id = ${jobId}
    where printer_id = ${printerId} and job_id = ${reportJobId} and received_at >= ${report.created_at}::timestamptz - interval '1 minute'`
}
