/** What a slicer wrote about a print file, in the shape the File record carries (SPEC part 2 "File"). */
export interface ProjectFilament {
  /** The slicer's filament slot, 1-based, as a string. */
  id: string
  type: string
  /** #RRGGBB, upper case. */
  color_hex: string
  /** RRGGBBAA, upper case, no '#'. */
  color_rgba: string
  /** Metres. */
  used_m: number
  /** Grams. */
  used_g: number
}

export interface PlateSummary {
  index: number
  estimated_seconds: number | null
  weight_g: number | null
  filaments: ProjectFilament[]
}

export interface SlicerMetadata {
  metadata: {
    slicer: string | null
    slicer_version: string | null
    printer_model: string | null
    printer_model_id: string | null
    nozzle_diameter: number | null
    nozzle_diameters?: number[]
    bed_type: string | null
    estimated_seconds: number | null
    weight_g: number | null
    plates: PlateSummary[]
  }
  /** The active plate's filaments; those with 0 g used are left out. */
  project_filaments: ProjectFilament[]
  /** The sliced plate (the first of several); null when nothing was sliced. */
  activePlateNumber: number | null
}

export class SlicerMetadataError extends Error {
  override name = 'SlicerMetadataError'
}
