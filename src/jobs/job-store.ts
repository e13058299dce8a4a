/**
 * Print jobs in the store (docs/print-jobs.md): create from a
 * file (and a make), read, list with filters, status changes, delete. Every
 * status change locks the job's row and asks the lifecycle machine
 * (machines/print-job.ts) what the change does; the machine refusing it is a
 * 409 `job_transition_invalid` naming both statuses.
 *
 * Rows are locked job first, then printer, then task (the order of
 * src/jobs/dispatch.ts and src/jobs/task-links.ts).
 */
import { deductJobRun } from '../inventory/deduction.js'
import { randomUUID } from 'node:crypto'
import type { Sql, TransactionSql } from 'postgres'
import { isActive, nextJobStatus, type PrintJobEvent } from '../../machines/print-job.js'
import { ServiceError } from '../../protocol/errors.js'
import type { Principal } from '../http/route.js'
import type { CreatePrintJobBody, JobStatus, PrintJob, PrintJobListBody, PrintJobStatusBody, TaskCommand } from '../../protocol/schemas/print-jobs.js'
import { escapeLike } from '../storage/like.js'
import { jobOf, type JobRow } from './job-records.js'
import { requiredMaterialsOf, type FileFacts, type MakeMaterial } from './requirements.js'

const notFound = (): ServiceError => new ServiceError('print_job_not_found', 'no such print job in this organization')

/** What a status change did besides the job itself, for the caller to publish. */
export interface StatusChange {
  job: PrintJob
  /** The task the change cancelled or gave a command, with its host (the bridge to tell). */
  task: { id: string; hostId: string } | null
}

export class JobStore {
  readonly #sql: Sql

  constructor(sql: Sql) {
    this.#sql = sql
  }

  /**
   * With an idempotency key, a create retried after a lost answer answers the job the first one
   * made (`created: false`), whatever the retry's body says; a key is the organization's, for good.
   */
  async create(organizationId: string, body: CreatePrintJobBody, createdBy: string | null, idempotencyKey?: string): Promise<{ job: PrintJob; created: boolean }> {
    if (idempotencyKey !== undefined) {
      const [existing] = await this.#sql<JobRow[]>`select * from print_jobs where organization_id = ${organizationId} and idempotency_key = ${idempotencyKey}`
      if (existing !== undefined) return { job: jobOf(existing), created: false }
    }
    return this.#sql.begin(async (tx) => {
      const [file] = await tx<(FileFacts & { deleted_at: Date | null; purged_at: Date | null })[]>`
        select id, metadata, project_filaments, deleted_at, purged_at from files where id = ${body.model_file_id} and organization_id = ${organizationId}`
      if (file === undefined) throw new ServiceError('file_not_found', 'no such model file in this organization')
      if (file.deleted_at !== null || file.purged_at !== null) throw new ServiceError('file_not_printable', 'the file is deleted: restore it (POST /v1/files/{fileId}/restore) or print another')
      let makeMaterials: MakeMaterial[] | undefined
      if (body.make_id !== undefined) {
        const [make] = await tx<{ model_file_id: string; materials: { filament_index: number; material_id: string }[] }[]>`
          select model_file_id, materials from makes where id = ${body.make_id} and organization_id = ${organizationId} for key share`
        if (make === undefined) throw new ServiceError('make_not_found', 'no such make in this organization')
        if (make.model_file_id !== body.model_file_id.toLowerCase()) throw new ServiceError('validation_failed', 'body.make_id belongs to another file than body.model_file_id')
        makeMaterials = await makeMaterialsIn(tx, organizationId, make.materials)
      }
      const { plate, required } = requiredMaterialsOf(file, body.plate, makeMaterials)
      const options = { auto_assign: true, enable_ams: true, ...(body.print_options ?? {}) }
      const [row] = await tx<JobRow[]>`
        insert into print_jobs (organization_id, name, state, status, source, model_file_id, make_id, priority, plate, print_options, required_materials, created_by, idempotency_key)
        values (${organizationId}, ${body.name}, 'queued', 'queued', 'api', ${body.model_file_id}, ${body.make_id ?? null}, ${body.priority ?? 0}, ${plate},
                ${tx.json(options)}, ${tx.json(required as never)}, ${createdBy}, ${idempotencyKey ?? null})
        on conflict (organization_id, idempotency_key) where idempotency_key is not null do nothing
        returning *`
      if (row !== undefined) return { job: jobOf(row), created: true }
      // The same key, created concurrently: that one's job.
      const [existing] = await tx<JobRow[]>`select * from print_jobs where organization_id = ${organizationId} and idempotency_key = ${idempotencyKey!}`
      return { job: jobOf(existing!), created: false }
    })
  }

  async get(organizationId: string, id: number): Promise<PrintJob> {
    const [row] = await this.#sql<JobRow[]>`select * from print_jobs where id = ${id} and organization_id = ${organizationId}`
    if (row === undefined) throw notFound()
    return jobOf(row)
  }

  async list(organizationId: string, body: PrintJobListBody): Promise<{ jobs: PrintJob[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = body.limit ?? 100
    const offset = body.offset ?? 0
    const where = () => sql`
      organization_id = ${organizationId}
      ${body.status === undefined ? sql`` : sql`and status = any(${body.status as string[]}::text[])`}
      ${body.printer_id === undefined ? sql`` : sql`and printer_id = ${body.printer_id}`}
      ${body.model_file_id === undefined ? sql`` : sql`and model_file_id = ${body.model_file_id}`}
      ${body.make_id === undefined ? sql`` : sql`and make_id = ${body.make_id}`}
      ${body.batch_id === undefined ? sql`` : sql`and batch_id = ${body.batch_id}`}
      ${body.search === undefined || body.search === '' ? sql`` : sql`and name ilike ${`%${escapeLike(body.search)}%`}`}`
    const [rows, [count]] = await Promise.all([
      sql<JobRow[]>`select * from print_jobs where ${where()} order by id desc limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from print_jobs where ${where()}`,
    ])
    return { jobs: rows.map(jobOf), total: Number(count!.total), limit, offset }
  }

  /**
   * cancelled / queued change the job now (a live task is cancelled with it: a later job:start for
   * it is refused); paused / printing leave a command on the running task for the bridge, and the
   * status follows when the bridge reports job:pause / job:unpause.
   */
  async changeStatus(organizationId: string, id: number, body: PrintJobStatusBody, now: Date): Promise<StatusChange> {
    return this.#sql.begin(async (tx) => {
      const row = await lockJob(tx, organizationId, id)
      const [task] =
        row.printer_task_id === null
          ? []
          : await tx<{ id: string; host_id: string; state: string; commands: TaskCommand[] }[]>`
              select t.id, coalesce(p.host_id, t.host_id) as host_id, t.state, t.commands from printer_tasks t left join printers p on p.id = t.printer_id
              where t.id = ${row.printer_task_id} for update of t`
      // A pause (or resume) the bridge has not carried out yet is taken back by asking for the other.
      const pending = task?.state === 'started' ? task.commands.map((c) => c.kind) : []
      if ((body.status === 'printing' && row.status === 'printing' && pending.includes('pause')) || (body.status === 'paused' && row.status === 'paused' && pending.includes('resume'))) {
        await addCommand(tx, task!.id, body.status === 'printing' ? 'resume' : 'pause', now, { takeBack: true })
        return { job: jobOf(row), task: { id: task!.id, hostId: task!.host_id } }
      }
      // Only a cancel the printer has not confirmed yet holds a requeue back; a job simply printing is refused by the lifecycle below.
      if (body.status === 'queued' && task?.state === 'started' && row.status === 'cancelled') {
        throw new ServiceError('job_in_progress', `job ${id}'s printer has not confirmed the cancel yet (its bridge reports job:finish with result cancelled); requeue it after that`)
      }
      const event: PrintJobEvent =
        body.status === 'cancelled'
          ? { type: 'CANCEL' }
          : body.status === 'queued'
            ? { type: 'REQUEUE', taskUnconfirmed: task?.state === 'unconfirmed' }
            : body.status === 'paused'
              ? { type: 'PAUSE' }
              : { type: 'RESUME' }
      const next = nextJobStatus(row.status, event)
      if (next === undefined) {
        const hint = body.status === 'queued' && row.status === 'dispatching' ? ' (its task must be unconfirmed: claimed and never reported started)' : ''
        throw new ServiceError('job_transition_invalid', `job ${id} is ${row.status}; it cannot become ${body.status}${hint}`)
      }
      if (event.type === 'PAUSE' || event.type === 'RESUME') {
        if (task === undefined || task.state !== 'started') throw new ServiceError('job_transition_invalid', `job ${id} is ${row.status} but has no running printer task to send ${event.type === 'PAUSE' ? 'pause' : 'resume'} to`)
        await addCommand(tx, task.id, event.type === 'PAUSE' ? 'pause' : 'resume', now)
        return { job: jobOf(row), task: { id: task.id, hostId: task.host_id } }
      }
      let touched: StatusChange['task'] = null
      if (task !== undefined) {
        if (task.state === 'started' && event.type === 'CANCEL') {
          // The printer is printing it: the bridge is told to stop (the job is cancelled now).
          await addCommand(tx, task.id, 'cancel', now)
          touched = { id: task.id, hostId: task.host_id }
        } else if (task.state === 'offered' || task.state === 'claimed' || task.state === 'unconfirmed') {
          await tx`update printer_tasks set state = 'cancelled', ended_at = ${now}, end_reason = ${event.type === 'CANCEL' ? 'job_cancelled' : 'requeued'}, updated_at = ${now} where id = ${task.id}`
          // A claimed task may have started on the printer without the start reaching us (claimed: not yet
          // reported; unconfirmed: never reported): its bridge is told to stop it, should it be printing.
          // A requeue is the operator saying it did not start; an offer was never taken.
          if (event.type === 'CANCEL' && task.state !== 'offered') await addCommand(tx, task.id, 'cancel', now)
          touched = { id: task.id, hostId: task.host_id }
        }
      }
      const requeue = event.type === 'REQUEUE'
      // The run that ended is charged before its task is let go (the deduction reads the task's slot mapping).
      if (requeue) await deductJobRun(tx, organizationId, id, now)
      const [updated] = await tx<JobRow[]>`
        update print_jobs set status = ${next}, updated_at = ${now},
          failure_reason = ${requeue ? null : (body.reason ?? row.failure_reason)},
          printer_id = ${requeue ? null : row.printer_id}, printer_task_id = ${requeue ? null : row.printer_task_id},
          verification = ${requeue ? null : row.verification}
        where id = ${id} returning *`
      return { job: jobOf(updated!), task: touched }
    })
  }

  /** Deletes a queued or ended job; an active one is refused (cancel it first). */
  async delete(organizationId: string, id: number): Promise<void> {
    await this.#sql.begin(async (tx) => {
      const row = await lockJob(tx, organizationId, id)
      if (isActive(row.status)) throw new ServiceError('job_in_progress', `job ${id} is ${row.status}: cancel it first`)
      // A cancelled job whose printer has not stopped yet keeps its task (and the cancel command on it) until the bridge confirms.
      const [running] = await tx<{ id: string }[]>`select id from printer_tasks where job_id = ${id} and state = 'started'`
      if (running !== undefined) throw new ServiceError('job_in_progress', `job ${id}'s printer has not confirmed the cancel yet; delete it once its bridge reports job:finish`)
      await tx`delete from print_jobs where id = ${id}`
    })
  }
}

export async function lockJob(tx: TransactionSql, organizationId: string, id: number): Promise<JobRow & { status: JobStatus }> {
  const [row] = await tx<JobRow[]>`select * from print_jobs where id = ${id} and organization_id = ${organizationId} for update`
  if (row === undefined) throw notFound()
  return row
}

/**
 * A command for the bridge on a task, until its matching event arrives. Repeating a kind keeps
 * the first (its id is what the bridge dedupes on); pause and resume replace each other; cancel
 * replaces both.
 */
async function addCommand(tx: TransactionSql, taskId: string, kind: TaskCommand['kind'], now: Date, options: { takeBack?: boolean } = {}): Promise<void> {
  const command: TaskCommand = { id: randomUUID(), kind, issued_at: now.toISOString() }
  const superseded = kind === 'cancel' ? ['pause', 'resume'] : kind === 'pause' ? ['resume'] : ['pause']
  // takeBack: the printer is already where `kind` leads (the other command was never carried out), so the other goes and nothing is added.
  const added = options.takeBack === true ? [] : [command]
  await tx`
    update printer_tasks set updated_at = ${now}, commands = (
      select coalesce(jsonb_agg(c order by n), '[]'::jsonb) from jsonb_array_elements(commands) with ordinality as e(c, n)
      where not (c->>'kind' = any(${superseded}::text[]))
    ) || case when commands @> ${tx.json([{ kind }])} then '[]'::jsonb else ${tx.json(added)}::jsonb end
    where id = ${taskId}`
}

/** A make's materials with the type and colour of each (a material since deleted has neither). */
export async function makeMaterialsIn(tx: TransactionSql, organizationId: string, chosen: readonly { filament_index: number; material_id: string }[]): Promise<MakeMaterial[]> {
  const ids = chosen.map((m) => m.material_id)
  const materials = await tx<{ id: string; type: string; color_hex: string | null }[]>`
    select id, type, color_hex from materials where organization_id = ${organizationId} and id = any(${ids}::uuid[])`
  const byId = new Map(materials.map((m) => [m.id, m]))
  return chosen.map((m) => ({ filament_index: m.filament_index, material_id: m.material_id, type: byId.get(m.material_id)?.type ?? null, color_hex: byId.get(m.material_id)?.color_hex ?? null }))
}

export function createdByOf(userId: string | null, keyId: string | null): string | null {
  return userId !== null ? `user:${userId}` : keyId !== null ? `api_key:${keyId}` : null
}

/** Who created what a request creates (a person or an API key), as jobs and batches record it. */
export function creatorOf(principal: Principal): string | null {
  if (principal.kind === 'member' || principal.kind === 'oauth') return createdByOf(principal.userId, null)
  return principal.kind === 'api_key' ? createdByOf(null, principal.keyId) : null
}

/** The Idempotency-Key header of a create (1-200 characters), if sent. */
export function idempotencyKeyOf(headers: Readonly<Record<string, string | undefined>>): string | undefined {
  const key = headers['idempotency-key']
  if (key !== undefined && (key.length === 0 || key.length > 200)) throw new ServiceError('validation_failed', 'the Idempotency-Key header must be 1-200 characters')
  return key
}
