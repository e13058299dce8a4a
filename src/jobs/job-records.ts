/** Rows of print_jobs and printer_tasks as the API shows them. */
import type { JobStatus, PrintJob, PrinterTask, TaskCommand, TaskState } from '../../protocol/schemas/print-jobs.js'

export interface JobRow {
  id: string | number
  organization_id: string
  name: string | null
  status: JobStatus
  source: string
  state: string
  model_file_id: string | null
  make_id: string | null
  sku_id: string | null
  batch_id: string | null
  priority: number
  position: number | null
  plate: number
  print_options: Record<string, unknown>
  required_materials: PrintJob['constraints']['required_materials']
  printer_id: string | null
  printer_task_id: string | null
  attempts: number
  progress: number | null
  bridge_result: string | null
  failure_reason: string | null
  verification: string | null
  part_verifications: PrintJob['part_verifications']
  created_at: Date
  updated_at: Date
  started_at_ms: number | null
  ended_at_ms: number | null
}

export function jobOf(row: JobRow): PrintJob {
  const seenByPrinter = row.started_at_ms !== null
  return {
    id: Number(row.id),
    name: row.name,
    status: row.status,
    source: row.source === 'api' ? 'api' : 'bridge',
    model_file_id: row.model_file_id,
    make_id: row.make_id,
    sku_id: row.sku_id,
    batch_id: row.batch_id,
    priority: row.priority,
    position: row.position,
    plate: row.plate,
    print_options: row.print_options,
    constraints: { required_materials: row.required_materials },
    printer_id: row.printer_id,
    printer_task_id: row.printer_task_id,
    attempts: row.attempts,
    progress: seenByPrinter ? row.progress : null,
    printer_state: seenByPrinter ? row.state : null,
    bridge_result: row.bridge_result,
    failure_reason: row.failure_reason,
    verification: row.verification,
    part_verifications: row.part_verifications,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    started_at: row.started_at_ms === null ? null : new Date(row.started_at_ms).toISOString(),
    finished_at: row.ended_at_ms === null ? null : new Date(row.ended_at_ms).toISOString(),
  }
}

export interface TaskRow {
  id: string
  organization_id: string
  job_id: string | number
  printer_id: string
  host_id: string
  assignment_epoch: number
  state: TaskState
  file_id: string | null
  plate: number
  ams_mapping: number[]
  claim_generation: string | null
  commands: TaskCommand[]
  offered_at: Date
  offer_expires_at: Date
  claimed_at: Date | null
  start_deadline_at: Date | null
  started_at: Date | null
  ended_at: Date | null
  /** Joined from files and print_jobs where the query asks for them. */
  file_name?: string | null
  file_size?: string | number | null
  file_sha256?: string | null
  print_options?: Record<string, unknown> | null
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString())

export function taskOf(row: TaskRow): PrinterTask {
  return {
    id: row.id,
    job_id: Number(row.job_id),
    printer_id: row.printer_id,
    host_id: row.host_id,
    assignment_epoch: row.assignment_epoch,
    state: row.state,
    file_id: row.file_id,
    file_name: row.file_name ?? null,
    file_size: row.file_size === null || row.file_size === undefined ? null : Number(row.file_size),
    file_sha256: row.file_sha256 ?? null,
    plate: row.plate,
    ams_mapping: row.ams_mapping,
    print_options: row.print_options ?? {},
    claim_generation: row.claim_generation,
    commands: row.commands,
    offered_at: row.offered_at.toISOString(),
    offer_expires_at: row.offer_expires_at.toISOString(),
    claimed_at: iso(row.claimed_at),
    start_deadline_at: iso(row.start_deadline_at),
    started_at: iso(row.started_at),
    ended_at: iso(row.ended_at),
  }
}
