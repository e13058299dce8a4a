/**
 * What the queue's matching reads from the store for one organization: its
 * waiting jobs with their files' slicer facts, and its printers with their
 * state, live task and loaded spools. Read outside any lock: the dispatch
 * transaction checks each chosen pair again under its locks
 * (src/queue/queue-dispatch.ts).
 */
import type { Sql, TransactionSql } from 'postgres'
import type { QueueJob, QueuePrinter, QueueSlot, RequiredFilament } from '../../protocol/queue-match.js'
import { statusOfProjection, statusProjection } from '../printers/printer-reads.js'
import type { PrinterRow } from '../printers/read-model.js'

export interface WaitingJobRow {
  id: string | number
  status: 'queued' | 'dispatching'
  priority: number
  position: number | null
  created_at: Date
  print_options: Record<string, unknown>
  required_materials: RequiredFilament[]
  printer_model: string | null
  nozzle_diameter: number | string | null
  project_count: number
  file_printable: boolean
  model_file_id: string | null
  plate: number
}

/** The queued jobs of an organization in queue order (the matching sorts again; the order bounds `limit`). */
export async function queuedJobs(sql: Sql | TransactionSql, organizationId: string, limit = 100_000, offset = 0, options: { automaticOnly?: boolean } = {}): Promise<QueueJob[]> {
  const rows = await sql<WaitingJobRow[]>`
    select ${jobColumns(sql)} from print_jobs j left join files f on f.id = j.model_file_id
    where j.organization_id = ${organizationId} and j.status = 'queued' ${options.automaticOnly === true ? automatic(sql) : sql``}
    order by j.priority desc, j.position nulls last, j.created_at, j.id
    limit ${limit} offset ${offset}`
  return rows.map(queueJobOf)
}

/** One job as the matching sees it, whatever its status (a hand assignment checks it like the queue). */
export async function queueJobById(sql: Sql | TransactionSql, organizationId: string, id: number): Promise<QueueJob | undefined> {
  const [row] = await sql<WaitingJobRow[]>`
    select ${jobColumns(sql)} from print_jobs j left join files f on f.id = j.model_file_id
    where j.id = ${id} and j.organization_id = ${organizationId}`
  return row === undefined ? undefined : queueJobOf(row)
}

/** Jobs the queue places itself (a pass never reads those that wait for a hand assignment). */
export const automatic = (sql: Sql | TransactionSql) => sql`and coalesce(j.print_options->>'auto_assign', 'true') <> 'false'`

const jobColumns = (sql: Sql | TransactionSql) => sql`
  j.id, j.status, j.priority, j.position, j.created_at, j.print_options, j.required_materials, j.model_file_id, j.plate,
  f.metadata->>'printer_model' as printer_model,
  case when jsonb_typeof(f.metadata->'nozzle_diameter') = 'number' then (f.metadata->>'nozzle_diameter')::float8 end as nozzle_diameter,
  case when jsonb_typeof(f.project_filaments) = 'array' then jsonb_array_length(f.project_filaments) else 0 end as project_count,
  (f.id is not null and f.deleted_at is null and f.purged_at is null) as file_printable`

export function queueJobOf(row: WaitingJobRow): QueueJob {
  return {
    id: Number(row.id),
    priority: row.priority,
    position: row.position,
    createdAt: row.created_at.getTime(),
    // A job whose file is gone cannot be printed anywhere: it waits for a hand decision.
    autoAssign: row.print_options['auto_assign'] !== false && row.file_printable,
    enableAms: row.print_options['enable_ams'] !== false,
    printerModel: row.printer_model,
    nozzleDiameter: row.nozzle_diameter === null ? null : Number(row.nozzle_diameter),
    projectFilaments: row.project_count,
    required: Array.isArray(row.required_materials) ? row.required_materials : [],
  }
}

export interface QueuePrinterRow {
  id: string
  enabled: boolean
  host_id: string | null
  assignment_epoch: number
  ready: boolean
  ready_source: string | null
  model: string | null
  capabilities: Record<string, unknown> | null
  online: boolean
  maintenance: boolean
  job: { jobId: number; state: string; endedAt: number | null } | null
  ams: { position: number; materialType?: string | null; color?: string | null; materialId?: string | null }[] | null
  live_task_state: string | null
  last_assigned_at: Date | null
  /** The part of the printer's state its display status is read from (src/printers/printer-reads.ts, statusProjection). */
  status_state: PrinterRow['state']
  spools: { slot: number; remaining_g: number; material_id: string; type: string; color_hex: string | null }[] | null
}

/**
 * The printers of an organization as the matching sees them: all of them, or those named.
 * Three plain reads (printers with their state, the live tasks, the loaded spools) merged
 * here: a correlated subquery per printer costs more than the rest of a pass on a big farm.
 */
export async function queuePrinterRows(sql: Sql | TransactionSql, organizationId: string, only?: { ids: readonly string[]; lock?: boolean }): Promise<QueuePrinterRow[]> {
  const some = only === undefined ? undefined : (only.ids as string[])
  const [printers, tasks, spools] = await Promise.all([
    sql<Omit<QueuePrinterRow, 'live_task_state' | 'spools'>[]>`
      select p.id, p.enabled, p.host_id, p.assignment_epoch, p.ready, p.ready_source, p.model, p.capabilities, p.last_assigned_at,
        coalesce(s.online, false) as online, coalesce((s.state->>'maintenance')::boolean, false) as maintenance,
        s.state->'job' as job, s.state->'ams' as ams, ${statusProjection(sql)} as status_state
      from printers p left join printer_state s on s.printer_id = p.id
      where p.organization_id = ${organizationId} ${some === undefined ? sql`` : sql`and p.id = any(${some}::uuid[])`}
      order by p.id ${only?.lock === true ? sql`for update of p` : sql``}`,
    sql<{ printer_id: string; state: string }[]>`
      select printer_id, state from printer_tasks
      where organization_id = ${organizationId} and state in ('offered', 'claimed', 'unconfirmed', 'started') ${some === undefined ? sql`` : sql`and printer_id = any(${some}::uuid[])`}`,
    sql<{ printer_id: string; slot: number; remaining_g: number; material_id: string; type: string; color_hex: string | null }[]>`
      select k.printer_id, k.slot, k.remaining_g, k.material_id, m.type, m.color_hex
      from spools k join materials m on m.id = k.material_id
      where k.organization_id = ${organizationId} and k.printer_id is not null ${some === undefined ? sql`` : sql`and k.printer_id = any(${some}::uuid[])`}`,
  ])
  const taskOf = new Map(tasks.map((t) => [t.printer_id, t.state]))
  const spoolsOf = new Map<string, NonNullable<QueuePrinterRow['spools']>>()
  for (const spool of spools) {
    let list = spoolsOf.get(spool.printer_id)
    if (list === undefined) spoolsOf.set(spool.printer_id, (list = []))
    list.push({ slot: spool.slot, remaining_g: Number(spool.remaining_g), material_id: spool.material_id, type: spool.type, color_hex: spool.color_hex })
  }
  return printers.map((p) => ({ ...p, live_task_state: taskOf.get(p.id) ?? null, spools: spoolsOf.get(p.id) ?? null }))
}

export async function queuePrinters(sql: Sql | TransactionSql, organizationId: string, now: number): Promise<QueuePrinter[]> {
  return (await queuePrinterRows(sql, organizationId)).map((row) => queuePrinterOf(row, now))
}

export function queuePrinterOf(row: QueuePrinterRow, now: number): QueuePrinter {
  const nozzle = row.capabilities?.['nozzle_diameter']
  return {
    id: row.id,
    enabled: row.enabled,
    online: row.online,
    maintenance: row.maintenance,
    ready: row.ready,
    readySource: row.ready_source,
    hostId: row.host_id,
    liveTaskState: row.live_task_state,
    runningJob: runningJobOf(row.job),
    model: row.model,
    nozzleDiameter: typeof nozzle === 'number' && Number.isFinite(nozzle) ? nozzle : null,
    lastUsedAt: row.last_assigned_at === null ? null : row.last_assigned_at.getTime(),
    slots: slotsOf(row.ams ?? [], row.spools ?? []),
    // `now` only tells COMPLETE and a recent cancel (IDLE) from WAITING: all three may take a job.
    status: statusOfProjection({ state: row.status_state, online: row.online }, now),
  }
}

/** The job printing or paused on a printer, from its state's job (null when none is open). */
export function runningJobOf(job: { jobId: number; state: string; endedAt: number | null } | null): QueuePrinter['runningJob'] {
  return job !== null && job.endedAt === null && (job.state === 'printing' || job.state === 'paused') ? { jobId: job.jobId, state: job.state } : null
}

/**
 * A slot as the printer reports it, completed by the spool an operator recorded there: the
 * report says what is physically loaded (type, colour), the spool says which material and how
 * many grams are left. A slot only a spool names (a printer without a filament system) counts too.
 */
function slotsOf(ams: NonNullable<QueuePrinterRow['ams']>, spools: NonNullable<QueuePrinterRow['spools']>): QueueSlot[] {
  const bySlot = new Map(spools.map((s) => [s.slot, s]))
  const slots: QueueSlot[] = []
  for (const a of ams) {
    if (typeof a.position !== 'number') continue
    const spool = bySlot.get(a.position)
    bySlot.delete(a.position)
    slots.push({
      position: a.position,
      type: a.materialType ?? spool?.type ?? null,
      color: a.color ?? spool?.color_hex ?? null,
      materialId: spool?.material_id ?? a.materialId ?? null,
      remainingG: spool?.remaining_g ?? null,
    })
  }
  for (const spool of bySlot.values()) {
    slots.push({ position: spool.slot, type: spool.type, color: spool.color_hex, materialId: spool.material_id, remainingG: spool.remaining_g })
  }
  return slots.sort((a, b) => a.position - b.position)
}
