/**
 * What a slicer wrote about a print file, in the shape the File record
 * carries ("File"), and the texts it is read from.
 */

/** The texts a caller has already taken out of a 3MF zip; every one may be missing. */
export interface ThreeMfSources {
  /** Text of `Metadata/slice_info.config` (Bambu Studio / OrcaSlicer XML), if the zip has it. */
  sliceInfo?: string
  /** Text of `Metadata/project_settings.config` (a JSON object of slicer settings), if present. */
  projectSettings?: string
  /** The first bytes (≤ 64 KiB, may end mid-line) of `3D/3dmodel.model` (XML with <metadata name="Application">…). */
  modelHead?: string
  /** The first ≤ 64 KiB of each sliced plate's G-code `Metadata/plate_<n>.gcode`, by plate number n. */
  plateGcodeHeads?: ReadonlyMap<number, string>
}

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
    /** Only when the printer has more than one nozzle. */
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

/** The one error the parsers throw; its message is a short sentence saying what is wrong. */
export class SlicerMetadataError extends Error {
  override name = 'SlicerMetadataError'
}
