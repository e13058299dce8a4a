/**
 * Whether a printer can take a job by hand now, with every reason it cannot
 * (the queue's own rules and codes, protocol/queue-match.ts); and the slot
 * each of a job's filaments prints from. Pure.
 */
import { eligibilityReasons as queueEligibility, type QueuePrinter, type Reason } from '../../protocol/queue-match.js'
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'
import { runningJobOf } from '../queue/queue-facts.js'

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

/** The printer as the queue's matching sees it (protocol/queue-match.ts decides eligibility, for hand assignments too). */
export function queuePrinterOfFacts(p: PrinterFacts): QueuePrinter {
  return {
    id: p.id,
    enabled: p.enabled,
    online: p.online,
    maintenance: p.maintenance,
    ready: p.ready,
    readySource: p.ready_source,
    hostId: p.host_id,
    liveTaskState: p.live_task_state,
    runningJob: runningJobOf(p.job),
    model: p.model,
    nozzleDiameter: null,
    lastUsedAt: null,
    slots: [],
  }
}

export function eligibilityReasons(p: PrinterFacts): Reason[] {
  return queueEligibility(queuePrinterOfFacts(p))
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
