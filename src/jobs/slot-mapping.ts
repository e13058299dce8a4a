/**
 * The slot each of a job's filaments prints from on a printer chosen by hand. Pure.
 * (Whether the printer may take the job is the queue's own rule, protocol/queue-match.ts.)
 */
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'

/** A printer's loaded slots as its state holds them. */
export interface LoadedSlot {
  position: number
  materialType: string | null
  color: string | null
  materialId?: string | null
}

type RequiredMaterial = PrintJob['constraints']['required_materials'][number]

/**
 * Per project filament, the printer slot to print it from (−1: unused), in project-filament
 * order as Bambu printers take it. A hand assignment trusts the operator's choice of printer:
 * each filament takes the slot holding its material, else one of the same type and colour,
 * else the same type; −1 when none (the bridge then prints without mapping it). The queue's
 * matching (colour tolerance, grams) decides more strictly.
 */
export function slotMapping(required: readonly RequiredMaterial[], projectCount: number, slots: readonly LoadedSlot[]): number[] {
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
