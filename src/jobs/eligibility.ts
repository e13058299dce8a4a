/**
 * Whether a printer can take a job now (DESIGN section 14, "Eligible
 * printer"), with every reason it cannot, in the queue's fixed codes; and
 * the slot each of a job's filaments prints from. Pure.
 */
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'

export interface PrinterFacts {
  id: string
  enabled: boolean
  online: boolean
  maintenance: boolean
  ready: boolean
  ready_source: string | null
  host_id: string | null
  model: string | null
  capabilities: Record<string, unknown>
  /** The printer's job as its state holds it (open while endedAt is null). */
  job: { jobId: number; state: string; endedAt: number | null } | null
  ams: { position: number; materialType: string | null; color: string | null; materialId?: string | null }[]
  /** The state of its live task (offered, claimed, unconfirmed, started), if any. */
  live_task_state: string | null
}

export interface Reason {
  printer_id: string
  code: 'printer_disabled' | 'printer_offline' | 'printer_busy' | 'printer_not_ready' | 'printer_maintenance' | 'host_unassigned' | 'start_unconfirmed'
  detail: string
}

export function eligibilityReasons(p: PrinterFacts): Reason[] {
  const reasons: Reason[] = []
  const add = (code: Reason['code'], detail: string) => reasons.push({ printer_id: p.id, code, detail })
  if (!p.enabled) add('printer_disabled', 'the printer is disabled (PATCH /v1/printer-config/{id} {enabled: true})')
  if (p.host_id === null) add('host_unassigned', 'no bridge host is assigned to the printer')
  if (!p.online) add('printer_offline', 'the printer is offline (its bridge is not reporting)')
  if (p.maintenance) add('printer_maintenance', 'the printer is in maintenance')
  if (!p.ready) {
    add('printer_not_ready', p.ready_source === 'operator_override' ? 'an operator holds the printer out of the queue' : "the printer's last job has not been verified (PATCH /v1/printers/{id}/ready)")
  }
  if (p.live_task_state === 'unconfirmed') add('start_unconfirmed', "the printer's claimed task never confirmed its start: say it started or requeue its job")
  else if (p.live_task_state !== null) add('printer_busy', `the printer has a ${p.live_task_state} task`)
  else if (p.job !== null && p.job.endedAt === null && (p.job.state === 'printing' || p.job.state === 'paused')) add('printer_busy', `the printer is ${p.job.state} job ${p.job.jobId}`)
  return reasons
}

type RequiredMaterial = PrintJob['constraints']['required_materials'][number]

/**
 * Per project filament, the printer slot to print it from (−1: unused), in project-filament
 * order as Bambu printers take it. A hand assignment trusts the operator's choice of printer:
 * each filament takes the slot holding its material, else one of the same type and colour,
 * else the same type; −1 when none (the bridge then prints without mapping it). The queue's
 * matching (colour tolerance, grams) decides more strictly.
 */
export function slotMapping(required: readonly RequiredMaterial[], projectCount: number, slots: PrinterFacts['ams']): number[] {
  const length = Math.max(projectCount, ...required.map((r) => r.filament_index + 1), 0)
  const mapping = new Array<number>(length).fill(-1)
  const same = (a: string | null | undefined, b: string | null | undefined) => a != null && b != null && a.toLowerCase() === b.toLowerCase()
  const colourOf = (c: string | null) => (c === null ? null : c.replace(/^#/, '').slice(0, 6))
  for (const r of required) {
    const slot =
      slots.find((s) => r.material_id !== null && s.materialId === r.material_id) ??
      slots.find((s) => same(s.materialType, r.type) && same(colourOf(s.color), colourOf(r.color_hex))) ??
      slots.find((s) => same(s.materialType, r.type))
    if (slot !== undefined) mapping[r.filament_index] = slot.position
  }
  return mapping
}
