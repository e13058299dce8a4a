/**
 * Dispatch, exactly once (docs/print-jobs.md): a queued job becomes one
 * printer task offered to the printer's host; the bridge polls, claims it
 * (fenced by host and assignment epoch), reads the file with the claim's
 * parameters and reports the start as a job:start naming the task
 * (src/jobs/task-links.ts). The partial unique indexes of printer_tasks make
 * "one live task per job" and "one live task per printer" facts of the store,
 * not of this code's care.
 *
 * Task states: offered → claimed → started → finished, or cancelled
 * (requeue, cancel, host move of an offer), expired (offer unclaimed for
 * TASK_OFFER_TTL_S: the job is queued again), unconfirmed (claimed, no start
 * within TASK_START_DEADLINE_S, or claimed when the printer moved: never
 * re-offered by itself; an operator says it started or requeues it).
 *
 * Rows are locked job first, then printer, then task, in every writer.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto'
import type { Static } from '@sinclair/typebox'
import type { Sql, TransactionSql } from 'postgres'
import { nextJobStatus } from '../../machines/print-job.js'
import { ServiceError } from '../../protocol/errors.js'
import type { ClaimSchema, ClaimTaskBody, PrintJob, PrinterTask } from '../../protocol/schemas/print-jobs.js'
import type { Counter } from '../observability/metrics.js'
import { lockJob } from './job-store.js'
import { jobOf, taskOf, type JobRow, type TaskRow } from './job-records.js'
import { slotMapping, type LoadedSlot } from './slot-mapping.js'
import { Matcher, eligibilityReasons } from '../../protocol/queue-match.js'
import { queueJobById, queuePrinterOf, queuePrinterRows } from '../queue/queue-facts.js'

export interface DispatchOptions {
  offerTtlSeconds: number
  startDeadlineSeconds: number
  /** Keys of the task access tokens: [0] derives, every one verifies (key rotation). */
  tokenKeys: readonly Buffer[]
  /** Largest CIEDE2000 colour difference a hand assignment accepts (the queue's tolerance). */
  colorTolerance: number
  /** A signed URL of a file (the claim's download_url). */
  downloadUrl: (fileId: string, sha256: string, nowMs: number) => string
  metrics?: DispatchMetrics | undefined
}

export interface DispatchMetrics {
  tasks: Counter
  claimConflicts: Counter
}

/** Told after every committed change of a task (the live host topic follows it). */
export type TaskListener = (organizationId: string, hostId: string, taskId: string) => void

/** A claim as the claim route answers it (its schema is the one definition). */
export type Claim = Static<typeof ClaimSchema>

/** The four query parameters of docs/files.md content routes. */
export interface TaskReadParameters {
  print_job_id?: string | undefined
  printer_task_id?: string | undefined
  claim_generation?: string | undefined
  printer_task_access_token?: string | undefined
}

const liveStates = ['offered', 'claimed', 'unconfirmed', 'started'] as const

export class Dispatcher {
  readonly #sql: Sql
  readonly #options: DispatchOptions
  readonly #listeners: TaskListener[] = []

  constructor(sql: Sql, options: DispatchOptions) {
    this.#sql = sql
    this.#options = options
  }

  onTaskChange(listener: TaskListener): void {
    this.#listeners.push(listener)
  }

  /** Tells the listeners (after a commit). */
  notify(organizationId: string, hostId: string, taskId: string): void {
    for (const listener of this.#listeners) listener(organizationId, hostId, taskId)
  }

  /**
   * Offers a queued job to a printer (the hand assignment; the queue uses the same path): the
   * printer must be eligible (docs/print-jobs.md: enabled, online, not in maintenance, ready, nothing
   * running or offered, a host assigned), else 409 printer_not_eligible with the reasons.
   */
  async assign(organizationId: string, jobId: number, printerId: string, now: Date): Promise<{ job: PrintJob; task: PrinterTask }> {
    const result = await this.#sql.begin(async (tx) => {
      const job = await lockJob(tx, organizationId, jobId)
      // The same assignment again (a retry after a lost answer): the task it made, unchanged.
      if (job.status === 'dispatching' && job.printer_id === printerId && job.printer_task_id !== null) {
        const [task] = await tx<TaskRow[]>`
          select t.*, f.final_name as file_name, f.file_size, f.sha256 as file_sha256 from printer_tasks t left join files f on f.id = t.file_id
          where t.id = ${job.printer_task_id} and t.state in ('offered', 'claimed')`
        if (task !== undefined) return { job: jobOf(job), task: taskOf({ ...task, print_options: job.print_options }), hostId: task.host_id, repeated: true }
      }
      const next = nextJobStatus(job.status, { type: 'DISPATCH' })
      if (next === undefined) throw new ServiceError('job_not_dispatchable', `job ${jobId} is ${job.status}; only a queued job can be assigned`)
      const printer = await lockPrinter(tx, organizationId, printerId)
      // The queue's own facts and rules (protocol/queue-match.ts): a hand assignment may not send a job where the queue would not.
      const [facts] = await queuePrinterRows(tx, organizationId, { ids: [printerId] })
      const queuePrinter = queuePrinterOf(facts!, now.getTime())
      const reasons = eligibilityReasons(queuePrinter)
      if (reasons.length > 0) {
        const status = reasons.some((r) => r.code === 'printer_error' || r.code === 'printer_state_unknown' || r.code === 'printer_busy') ? ` (status ${queuePrinter.status})` : ''
        throw new ServiceError('printer_not_eligible', `printer ${printerId} cannot take a job now${status}: ${reasons.map((r) => r.detail).join('; ')}`, { extra: { reasons, printer_status: queuePrinter.status } })
      }
      const [file] = await tx<{ id: string; project_filaments: unknown[]; final_name: string; file_size: string; sha256: string }[]>`
        select id, project_filaments, final_name, file_size, sha256 from files where id = ${job.model_file_id} and deleted_at is null and purged_at is null`
      if (file === undefined) throw new ServiceError('file_not_printable', `job ${jobId}'s file is deleted or gone: restore it or create the job from another file`)
      // The queue's own checks (model, nozzle, loaded materials), and its slot mapping. A printer that reports no slot
      // at all (no filament system, no spool recorded) is the operator's call: its materials are not checked.
      const queueJob = await queueJobById(tx, organizationId, jobId)
      // Grams are the operator's call too (a spool's record may lag what is on it): only type and colour are checked.
      const checked = { ...queueJob!, enableAms: queueJob!.enableAms && queuePrinter.slots.length > 0, required: queueJob!.required.map((r) => ({ ...r, used_g: null })) }
      const matcher = new Matcher({ colorTolerance: this.#options.colorTolerance })
      const fit = matcher.fit(checked, queuePrinter)
      if (fit === undefined) {
        const compatibility = matcher.compatibility(checked, queuePrinter)
        const refusals = compatibility.ok ? [] : compatibility.reasons
        throw new ServiceError('printer_not_eligible', `printer ${printerId} cannot print job ${jobId}: ${refusals.map((r) => r.detail).join('; ')}`, { extra: { reasons: refusals } })
      }
      const mapping = job.print_options['enable_ams'] === false ? [] : queuePrinter.slots.length === 0 ? slotMapping(job.required_materials, file.project_filaments.length, printer.ams) : fit.amsMapping
      const taskId = randomUUID()
      const expires = new Date(now.getTime() + this.#options.offerTtlSeconds * 1000)
      const [task] = await tx<TaskRow[]>`
        insert into printer_tasks (id, organization_id, job_id, printer_id, host_id, assignment_epoch, file_id, plate, ams_mapping, state, offered_at, offer_expires_at, updated_at)
        values (${taskId}, ${organizationId}, ${jobId}, ${printerId}, ${printer.host_id!}, ${printer.assignment_epoch}, ${file.id}, ${job.plate}, ${tx.json(mapping)}, 'offered', ${now}, ${expires}, ${now})
        returning *`
      const [updated] = await tx<JobRow[]>`
        update print_jobs set status = ${next}, printer_id = ${printerId}, printer_task_id = ${taskId}, attempts = attempts + 1, failure_reason = null, updated_at = ${now}
        where id = ${jobId} returning *`
      // The queue prefers the printer least recently given a job (hand assignments count).
      await tx`update printers set last_assigned_at = ${now} where id = ${printerId}`
      const fileFacts = { file_name: file.final_name, file_size: file.file_size, file_sha256: file.sha256 }
      return { job: jobOf(updated!), task: taskOf({ ...task!, ...fileFacts, print_options: updated!.print_options }), hostId: printer.host_id!, repeated: false }
    }).catch((error: unknown) => {
      // The store's own guard: another task went live on the printer between our check and insert.
      if ((error as { code?: string; constraint_name?: string }).code === '23505' && (error as { constraint_name?: string }).constraint_name === 'printer_tasks_one_live_per_printer') {
        throw new ServiceError('printer_not_eligible', `printer ${printerId} has just been given another task`, { extra: { reasons: [{ printer_id: printerId, code: 'printer_busy', detail: 'the printer has a task already' }] } })
      }
      throw error
    })
    if (!result.repeated) {
      this.#options.metrics?.tasks.inc({ event: 'offered' })
      this.notify(organizationId, result.hostId, result.task.id)
    }
    return { job: result.job, task: result.task }
  }

  /**
   * The host's offered and claimed tasks, started ones while they carry commands (a restarted bridge
   * resumes from this), and cancelled ones while their cancel stands (a claimed task cancelled: the
   * printer may be printing it without the start having reached us).
   */
  async hostTasks(organizationId: string, hostId: string): Promise<PrinterTask[]> {
    const rows = await this.#sql<TaskRow[]>`
      select t.*, f.final_name as file_name, f.file_size, f.sha256 as file_sha256, j.print_options
      from printer_tasks t
      join printers p on p.id = t.printer_id
      join print_jobs j on j.id = t.job_id
      left join files f on f.id = t.file_id
      where t.organization_id = ${organizationId} and p.host_id = ${hostId}
        and ((t.state in ('offered', 'claimed') and t.host_id = p.host_id and t.assignment_epoch = p.assignment_epoch)
          -- A running print's commands go to whichever host has the printer now (it may have moved mid-print);
          -- so does the cancel of a claimed task that may have started unreported (cleared by the sweep).
          or (t.state in ('started', 'cancelled') and t.commands <> '[]'::jsonb))
      order by t.offered_at, t.id`
    return rows.map(taskOf)
  }

  /**
   * The first claim wins; the same host at the same epoch claiming again gets the same claim
   * (with a fresh download URL). Another host or epoch meets the fence first (409
   * assignment_other_host / assignment_epoch_stale / assignment_epoch_unknown).
   */
  async claim(organizationId: string, taskId: string, body: ClaimTaskBody, now: Date): Promise<Claim> {
    const claimed = await this.#sql.begin(async (tx) => {
      const [owner] = await tx<{ job_id: string; printer_id: string }[]>`select job_id, printer_id from printer_tasks where id = ${taskId} and organization_id = ${organizationId}`
      if (owner === undefined) throw taskNotFound()
      await tx`select id from print_jobs where id = ${owner.job_id} for update`
      const [printer] = await tx<{ host_id: string | null; assignment_epoch: number }[]>`select host_id, assignment_epoch from printers where id = ${owner.printer_id} for share`
      const [task] = await tx<TaskRow[]>`select * from printer_tasks where id = ${taskId} for update`
      if (printer === undefined || task === undefined) throw taskNotFound()
      const fence = fenceOf(printer, body)
      if (fence !== undefined) {
        this.#options.metrics?.claimConflicts.inc({ reason: fence.code })
        throw fence
      }
      let row: TaskRow | undefined = task
      if (task.assignment_epoch !== printer.assignment_epoch || !(task.state === 'offered' || task.state === 'claimed')) {
        this.#options.metrics?.claimConflicts.inc({ reason: 'task_not_claimable' })
        throw new ServiceError('task_not_claimable', `task ${taskId} is ${task.assignment_epoch !== printer.assignment_epoch ? 'of an older assignment' : task.state}; poll GET /v1/hosts/${body.hostId}/printer-tasks for the current ones`)
      }
      // The sweep expires an offer after its time; until it has run, a late claim must not take it.
      if (task.state === 'offered' && task.offer_expires_at <= now) {
        this.#options.metrics?.claimConflicts.inc({ reason: 'task_not_claimable' })
        throw new ServiceError('task_not_claimable', `task ${taskId}'s offer expired at ${task.offer_expires_at.toISOString()}; poll GET /v1/hosts/${body.hostId}/printer-tasks for the current ones`)
      }
      let fresh = false
      if (task.state === 'offered') {
        const deadline = new Date(now.getTime() + this.#options.startDeadlineSeconds * 1000)
        ;[row] = await tx<TaskRow[]>`
          update printer_tasks set state = 'claimed', claim_generation = ${randomUUID()}, claimed_at = ${now}, start_deadline_at = ${deadline}, updated_at = ${now}
          where id = ${taskId} returning *`
        fresh = true
      }
      const [extra] = await tx<{ file_name: string | null; file_size: string | null; file_sha256: string | null; print_options: Record<string, unknown> }[]>`
        select f.final_name as file_name, f.file_size, f.sha256 as file_sha256, j.print_options
        from print_jobs j left join files f on f.id = ${row!.file_id} where j.id = ${row!.job_id}`
      return { row: { ...row!, ...extra! }, fresh }
    })
    if (claimed.fresh) {
      this.#options.metrics?.tasks.inc({ event: 'claimed' })
      this.notify(organizationId, claimed.row.host_id, taskId)
    }
    const task = taskOf(claimed.row)
    const generation = claimed.row.claim_generation!
    return {
      task,
      claim_generation: generation,
      printer_task_access_token: accessToken(this.#options.tokenKeys[0]!, taskId, generation),
      download_url: task.file_id === null || task.file_sha256 === null ? null : this.#options.downloadUrl(task.file_id, task.file_sha256, now.getTime()),
    }
  }

  /**
   * A file read carrying task parameters must match the live claim of a task for this file, of the
   * printer's current host and epoch: a wrong claim_generation or job, or a task fenced by a host
   * move → 409 task_claim_mismatch, a wrong token → 403.
   * Answers whether the parameters were given (and matched).
   */
  async checkTaskRead(organizationId: string, fileId: string, params: TaskReadParameters): Promise<boolean> {
    const given = params.printer_task_id !== undefined || params.claim_generation !== undefined || params.printer_task_access_token !== undefined || params.print_job_id !== undefined
    if (!given) return false
    if (params.printer_task_id === undefined || params.claim_generation === undefined || params.printer_task_access_token === undefined) {
      throw new ServiceError('validation_failed', 'a task-bound read needs printer_task_id, claim_generation and printer_task_access_token together (print_job_id optional)')
    }
    const [task] = await this.#sql<{ job_id: string; file_id: string | null; state: string; claim_generation: string | null; current: boolean }[]>`
      select t.job_id, t.file_id, t.state, t.claim_generation, (p.assignment_epoch = t.assignment_epoch and p.host_id is not distinct from t.host_id) as current
      from printer_tasks t join printers p on p.id = t.printer_id
      where t.id = ${params.printer_task_id} and t.organization_id = ${organizationId}`
    if (task === undefined || task.file_id !== fileId) throw taskNotFound()
    const token = Buffer.from(params.printer_task_access_token.toLowerCase())
    const generation = task.claim_generation
    const tokenMatches = generation !== null && this.#options.tokenKeys.some((key) => {
      const expected = Buffer.from(accessToken(key, params.printer_task_id!, generation))
      return expected.length === token.length && timingSafeEqual(expected, token)
    })
    if (generation === null || generation !== params.claim_generation.toLowerCase() || !['claimed', 'started', 'unconfirmed'].includes(task.state)) {
      throw new ServiceError('task_claim_mismatch', `claim_generation is not task ${params.printer_task_id}'s live claim (the task is ${task.state})`)
    }
    // A host move fences every task of the old assignment: its claim reads nothing more.
    if (!task.current) throw new ServiceError('task_claim_mismatch', `task ${params.printer_task_id} belongs to an older assignment of its printer (it was moved to another host or epoch)`)
    if (params.print_job_id !== undefined && params.print_job_id !== String(task.job_id)) throw new ServiceError('task_claim_mismatch', `print_job_id is not task ${params.printer_task_id}'s job`)
    if (!tokenMatches) throw new ServiceError('task_access_denied', "printer_task_access_token is not this claim's token")
    return true
  }

  /**
   * The operator says the printer started (POST /v1/printers/{id}/operator-device-start): its
   * offered, claimed or unconfirmed task → started, the job → printing.
   */
  async operatorStart(organizationId: string, printerId: string, now: Date): Promise<{ job: PrintJob; task: PrinterTask }> {
    const result = await this.#sql.begin(async (tx) => {
      const [printer] = await tx<{ id: string }[]>`select id from printers where id = ${printerId} and organization_id = ${organizationId}`
      if (printer === undefined) throw new ServiceError('printer_not_found', 'no such printer in this organization')
      const [live] = await tx<{ id: string; job_id: string; state: string }[]>`
        select id, job_id, state from printer_tasks where printer_id = ${printerId} and state = any(${liveStates as unknown as string[]}::text[])`
      if (live === undefined) throw new ServiceError('no_task_to_start', 'the printer has no offered, claimed or unconfirmed task')
      const job = await lockJob(tx, organizationId, Number(live.job_id))
      const [task] = await tx<TaskRow[]>`select * from printer_tasks where id = ${live.id} for update`
      // Read again under the locks: the sweep, a cancel or the bridge's own start may have changed it since.
      if (task!.state === 'started') throw new ServiceError('job_already_started', `job ${job.id} has started already`)
      if (task!.state !== 'offered' && task!.state !== 'claimed' && task!.state !== 'unconfirmed') {
        throw new ServiceError('no_task_to_start', `the printer's task was ${task!.state} meanwhile; nothing to confirm`)
      }
      const next = nextJobStatus(job.status, { type: 'START' })
      if (next === undefined) throw new ServiceError('job_transition_invalid', `job ${job.id} is ${job.status}; it cannot start`)
      const [startedTask] = await tx<TaskRow[]>`
        update printer_tasks set state = 'started', started_at = ${now}, end_reason = 'operator_device_start', updated_at = ${now} where id = ${task!.id} returning *`
      const [updated] = await tx<JobRow[]>`
        update print_jobs set status = ${next}, state = 'printing', started_at_ms = coalesce(started_at_ms, ${now.getTime()}), updated_at = ${now} where id = ${job.id} returning *`
      return { job: jobOf(updated!), task: taskOf(startedTask!) }
    })
    this.#options.metrics?.tasks.inc({ event: 'started' })
    this.notify(organizationId, result.task.host_id, result.task.id)
    return result
  }

  /**
   * Deadlines and fences, on every node (each change is conditional on the row it reads, under
   * its lock, so two nodes sweeping at once change each task once): offers past their time
   * expire and their jobs are queued again; claims past the start deadline become unconfirmed;
   * tasks of an assignment the printer has left are fenced (an offer cancelled, its job queued;
   * a claim unconfirmed).
   */
  async sweep(now: Date): Promise<number> {
    const due = await this.#sql<{ id: string; job_id: string; organization_id: string }[]>`
      select t.id, t.job_id, t.organization_id from printer_tasks t join printers p on p.id = t.printer_id
      where (t.state = 'offered' and (t.offer_expires_at <= ${now} or p.assignment_epoch <> t.assignment_epoch or p.host_id is distinct from t.host_id))
         or (t.state = 'claimed' and (t.start_deadline_at <= ${now} or p.assignment_epoch <> t.assignment_epoch or p.host_id is distinct from t.host_id))
      limit 1000`
    let changed = 0
    for (const candidate of due) {
      const outcome = await this.#sql.begin(async (tx) => {
        const job = await lockJob(tx, candidate.organization_id, Number(candidate.job_id)).catch(() => undefined)
        const [task] = await tx<(TaskRow & { printer_epoch: number; printer_host: string | null })[]>`
          select t.*, p.assignment_epoch as printer_epoch, p.host_id as printer_host from printer_tasks t join printers p on p.id = t.printer_id where t.id = ${candidate.id} for update of t`
        if (job === undefined || task === undefined) return undefined
        const moved = task.printer_epoch !== task.assignment_epoch || task.printer_host !== task.host_id
        if (task.state === 'offered' && (moved || task.offer_expires_at <= now)) {
          const state = moved ? 'cancelled' : 'expired'
          await tx`update printer_tasks set state = ${state}, ended_at = ${now}, end_reason = ${moved ? 'host_moved' : 'offer_expired'}, updated_at = ${now} where id = ${task.id}`
          const next = nextJobStatus(job.status, { type: 'OFFER_WITHDRAWN' })
          if (next !== undefined && job.printer_task_id === task.id) {
            await tx`update print_jobs set status = ${next}, printer_id = null, printer_task_id = null, updated_at = ${now} where id = ${job.id}`
          }
          return { task, event: state }
        }
        if (task.state === 'claimed' && (moved || (task.start_deadline_at !== null && task.start_deadline_at <= now))) {
          await tx`update printer_tasks set state = 'unconfirmed', end_reason = ${moved ? 'host_moved' : 'start_deadline'}, updated_at = ${now} where id = ${task.id}`
          return { task, event: 'unconfirmed' }
        }
        return undefined
      })
      if (outcome === undefined) continue
      changed++
      this.#options.metrics?.tasks.inc({ event: outcome.event })
      this.notify(candidate.organization_id, outcome.task.host_id, outcome.task.id)
    }
    // A cancelled claim's cancel stands while the printer might be printing it: once its bridge has had an
    // offer's time to poll and the printer shows no print under way, or after a day whatever it shows.
    const grace = new Date(now.getTime() - this.#options.offerTtlSeconds * 1000)
    const dayAgo = new Date(now.getTime() - 86_400_000)
    await this.#sql`
      update printer_tasks t set commands = '[]'::jsonb, updated_at = ${now}
      from printers p left join printer_state s on s.printer_id = p.id
      where p.id = t.printer_id and t.state = 'cancelled' and t.commands <> '[]'::jsonb
        and (t.ended_at <= ${dayAgo} or (t.ended_at <= ${grace} and (coalesce(jsonb_typeof(s.state->'job'), 'null') = 'null' or s.state->'job'->>'endedAt' is not null)))`
    return changed
  }

  async task(organizationId: string, taskId: string): Promise<PrinterTask> {
    const [row] = await this.#sql<TaskRow[]>`
      select t.*, f.final_name as file_name, f.file_size, f.sha256 as file_sha256, j.print_options
      from printer_tasks t join print_jobs j on j.id = t.job_id left join files f on f.id = t.file_id
      where t.id = ${taskId} and t.organization_id = ${organizationId}`
    if (row === undefined) throw taskNotFound()
    return taskOf(row)
  }
}

/** Locks the printer (a hand assignment's second lock, after the job's) and reads where it reports from and what it holds. */
async function lockPrinter(tx: TransactionSql, organizationId: string, printerId: string): Promise<{ host_id: string | null; assignment_epoch: number; ams: LoadedSlot[] }> {
  const [printer] = await tx<{ host_id: string | null; assignment_epoch: number; ams: LoadedSlot[] }[]>`
    select p.host_id, p.assignment_epoch, coalesce(s.state->'ams', '[]'::jsonb) as ams
    from printers p left join printer_state s on s.printer_id = p.id
    where p.id = ${printerId} and p.organization_id = ${organizationId}
    for update of p`
  if (printer === undefined) throw new ServiceError('printer_not_found', 'no such printer in this organization')
  return printer
}

function fenceOf(printer: { host_id: string | null; assignment_epoch: number }, body: ClaimTaskBody): ServiceError | undefined {
  if (body.assignmentEpoch < printer.assignment_epoch) {
    return new ServiceError('assignment_epoch_stale', `assignmentEpoch ${body.assignmentEpoch} is stale: the printer is at epoch ${printer.assignment_epoch} now (it was moved)`)
  }
  if (body.assignmentEpoch > printer.assignment_epoch) return new ServiceError('assignment_epoch_unknown', `assignmentEpoch ${body.assignmentEpoch} was never issued for this printer`)
  if (printer.host_id !== body.hostId) return new ServiceError('assignment_other_host', `the printer is assigned to another host at epoch ${printer.assignment_epoch}`)
  return undefined
}

/** The claim's access token: derived, never stored (HMAC of task and claim, shaped as a UUID). */
function accessToken(key: Buffer, taskId: string, claimGeneration: string): string {
  const bytes = createHmac('sha256', key).update(`printer-task\n${taskId}\n${claimGeneration}`).digest().subarray(0, 16)
  bytes[6] = (bytes[6]! & 0x0f) | 0x40
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const hex = bytes.toString('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

function taskNotFound(): ServiceError {
  return new ServiceError('printer_task_not_found', 'no such printer task in this organization')
}
