/**
 * What a job needs loaded on the printer ("Matching"; docs/print-jobs.md):
 * per filament of the plate it prints, the type and colour (and grams): the
 * material the job's make chose for it, otherwise the slicer's own record of
 * the file. Pure.
 */
import { ServiceError } from '../../protocol/errors.js'
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'

type RequiredMaterial = PrintJob['constraints']['required_materials'][number]

interface SlicerFilament {
  id?: string
  type?: string
  color_hex?: string
  used_g?: number
}

export interface FileFacts {
  metadata: { plates?: { index: number; filaments?: SlicerFilament[] }[] } & Record<string, unknown>
  project_filaments: SlicerFilament[]
}

export interface MakeMaterial {
  filament_index: number
  material_id: string
  type: string | null
  color_hex: string | null
}

/**
 * The plate to print (the one asked for, else the file's only sliced plate, else 1) and its
 * requirements. A plate the file does not have is refused when the file lists its plates.
 */
export function requiredMaterialsOf(file: FileFacts, askedPlate: number | undefined, make: readonly MakeMaterial[] | undefined): { plate: number; required: RequiredMaterial[] } {
  const plates = Array.isArray(file.metadata.plates) ? file.metadata.plates : []
  const plate = askedPlate ?? (plates.length === 1 ? plates[0]!.index : 1)
  const onPlate = plates.find((p) => p.index === plate)
  if (plates.length > 0 && onPlate === undefined) {
    throw new ServiceError('validation_failed', `body.plate ${plate} is not a plate of this file (it has plate ${plates.map((p) => p.index).join(', ')})`)
  }
  const project = Array.isArray(file.project_filaments) ? file.project_filaments : []
  const indexOf = (f: SlicerFilament, fallback: number): number => {
    const at = project.findIndex((p) => p.id !== undefined && p.id === f.id)
    if (at >= 0) return at
    const slot = Number(f.id)
    return Number.isInteger(slot) && slot >= 1 ? slot - 1 : fallback
  }
  // The plate's own filaments when the slicer listed them (a plate may use fewer than the project).
  const used: { index: number; filament: SlicerFilament }[] =
    onPlate?.filaments !== undefined && onPlate.filaments.length > 0
      ? onPlate.filaments.map((f, i) => ({ index: indexOf(f, i), filament: f }))
      : project.map((f, i) => ({ index: i, filament: f }))
  // A make replaces the material of the filaments it names; the plate's other filaments print as sliced,
  // and a filament the plate does not use is not required, whatever the make chose for it.
  const chosen = new Map((make ?? []).map((m) => [m.filament_index, m]))
  return {
    plate,
    required: used
      .sort((a, b) => a.index - b.index)
      .map((u) => {
        const grams = typeof u.filament.used_g === 'number' ? u.filament.used_g : null
        const m = chosen.get(u.index)
        if (m !== undefined) return { filament_index: u.index, type: m.type, color_hex: m.color_hex, used_g: grams, material_id: m.material_id }
        return {
          filament_index: u.index,
          type: typeof u.filament.type === 'string' ? u.filament.type : null,
          color_hex: typeof u.filament.color_hex === 'string' ? u.filament.color_hex : null,
          used_g: grams,
          material_id: null,
        }
      }),
  }
}
