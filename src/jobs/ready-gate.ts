/**
 * The ready gate (PATCH /v1/printers/{id}/ready; docs/print-jobs.md): a
 * printer whose job ended holds what it printed until an operator has looked
 * at the plate. The answer is a verdict on the job (success, failed,
 * cancelled, skipped) and the printer's readiness: `ready: true` lets the
 * queue use it again, `ready: false` with `ready_updated_source:
 * operator_override` holds it out until an operator says otherwise.
 *
 * Decisions where the design is silent:
 * - `ready: true` without an event_type is the operator's word that the plate
 *   is clear; a job still awaiting verification stays so (it shows in the
 *   job list) and the printer is ready.
 * - A verdict with `ready: false` gives the verdict and holds the printer.
 * - `ready: true` also ends the task of a cancelled print whose bridge never
 *   confirmed the stop: the operator has seen the printer clear.
 * - `requeue_failed` copies the failed job into a new queued job (same file,
 *   make, plate, options, batch, priority); the failed job keeps its record.
 */
import type { Sql } from 'postgres'
import { nextJobStatus, type Verdict } from '../../machines/print-job.js'
import { ServiceError } from '../../protocol/errors.js'
import type { PrintJob, PrinterReadyBody } from '../../protocol/schemas/print-jobs.js'
import { jobOf, type JobRow } from './job-records.js'
import { lockJob } from './job-store.js'

export interface ReadyAnswer {
  success: true
  printer_id: string
  ready: boolean
  ready_source: string | null
  job: PrintJob | null
  requeued_job: PrintJob | null
}

export async function answerReadyGate(sql: Sql, organizationId: string, printerId: string, body: PrinterReadyBody, now: Date): Promise<ReadyAnswer> {
  return sql.begin(async (tx) => {
    const [printer] = await tx<{ id: string }[]>`select id from printers where id = ${printerId} and organization_id = ${organizationId}`
    if (printer === undefined) throw new ServiceError('printer_not_found', 'no such printer in this organization')
    let job: PrintJob | null = null
    let requeued: PrintJob | null = null
    const verdict = body.event_type === undefined || body.event_type === null ? undefined : (body.event_type.split(':').at(-1) as Verdict)
    if (verdict !== undefined) {
      let jobId = body.job_id ?? undefined
      if (jobId === undefined) {
        const [latest] = await tx<{ id: string }[]>`
          select id from print_jobs where printer_id = ${printerId} and organization_id = ${organizationId} and status = 'awaiting_verification'
          order by ended_at_ms desc nulls last, id desc limit 1`
        if (latest === undefined) throw new ServiceError('job_not_awaiting_verification', 'no job of this printer is awaiting verification')
        jobId = Number(latest.id)
      }
      const row = await lockJob(tx, organizationId, jobId)
      if (row.printer_id !== printerId) throw new ServiceError('job_not_awaiting_verification', `job ${jobId} did not run on this printer`)
      const next = nextJobStatus(row.status, { type: 'VERIFY', verdict })
      if (next === undefined) throw new ServiceError('job_not_awaiting_verification', `job ${jobId} is ${row.status}, not awaiting verification`)
      if (verdict === 'failed' && (body.failure_reason === undefined || body.failure_reason === null)) {
        throw new ServiceError('validation_failed', 'body.failure_reason is required with operator:manual_verification:failed')
      }
      const [updated] = await tx<JobRow[]>`
        update print_jobs set status = ${next}, verification = ${verdict}, verified_at = ${now}, updated_at = ${now},
          failure_reason = ${verdict === 'failed' ? body.failure_reason! : row.failure_reason},
          part_verifications = ${body.part_verifications === undefined || body.part_verifications === null ? null : tx.json(body.part_verifications)}
        where id = ${jobId} returning *`
      job = jobOf(updated!)
      if (verdict === 'failed' && body.requeue_failed === true) {
        const [copy] = await tx<JobRow[]>`
          insert into print_jobs (organization_id, name, state, status, source, model_file_id, make_id, sku_id, batch_id, priority, plate, print_options, required_materials, created_by)
          select organization_id, name, 'queued', 'queued', 'api', model_file_id, make_id, sku_id, batch_id, priority, plate, print_options, required_materials, ${`requeue:${jobId}`}
          from print_jobs where id = ${jobId} returning *`
        requeued = jobOf(copy!)
      }
    }
    const hold = !body.ready
    const source = hold ? 'operator_override' : (body.ready_source ?? 'operator')
    if (body.ready) {
      // The operator says the printer is clear: a cancelled print whose bridge never confirmed the stop is over.
      await tx`
        update printer_tasks set state = 'finished', ended_at = ${now}, end_reason = 'operator_ready', commands = '[]'::jsonb, updated_at = ${now}
        where printer_id = ${printerId} and state = 'started' and job_id in (select id from print_jobs where printer_id = ${printerId} and status = 'cancelled')`
    }
    await tx`select id from printers where id = ${printerId} for update`
    await tx`update printers set ready = ${body.ready}, ready_source = ${source}, ready_updated_at = ${now} where id = ${printerId}`
    return { success: true as const, printer_id: printerId, ready: body.ready, ready_source: source, job, requeued_job: requeued }
  })
}
