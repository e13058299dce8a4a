/**
 * Bambu Studio and OrcaSlicer 3MF projects. What they write, and what is read:
 * - `Metadata/slice_info.config` (XML): one `<plate>` per sliced plate with
 *   `<metadata key value>` items (`index`, `prediction` in seconds, `weight`
 *   in grams, `printer_model_id`, `nozzle_diameters`) and one `<filament id
 *   type color used_m used_g>` per filament the plate uses;
 * - `Metadata/project_settings.config` (JSON): `printer_model` (the name),
 *   `nozzle_diameter` (one per nozzle), `curr_bed_type`;
 * - `3D/3dmodel.model`: `<metadata name="Application">` names the slicer;
 * - `Metadata/plate_<n>.gcode`: its header's `total estimated time`, when
 *   slice_info has no prediction.
 * An unsliced project has no slice_info: no plates, no filaments.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser'
import { SlicerMetadataError, type PlateSummary, type ProjectFilament, type SlicerMetadata } from './types.js'
import { amount, application, colors, duration, round2 } from './values.js'

export interface ThreeMfSources {
  sliceInfo?: string
  projectSettings?: string
  modelHead?: string
  plateGcodeHeads?: ReadonlyMap<number, string>
}

const maxPlates = 256
const maxFilaments = 64

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '',
  // Entities are never expanded: a DOCTYPE cannot make a small file large.
  processEntities: false,
  parseTagValue: false,
  parseAttributeValue: false,
  isArray: (name) => name === 'plate' || name === 'metadata' || name === 'filament' || name === 'header_item',
})

type Attributes = Record<string, unknown>

export function readThreeMfMetadata(sources: ThreeMfSources): SlicerMetadata {
  const settings = projectSettings(sources.projectSettings)
  const plates = sources.sliceInfo === undefined ? [] : slicedPlates(sources.sliceInfo, sources.plateGcodeHeads)
  const active = plates[0]
  const app = sources.modelHead === undefined ? null : applicationOf(sources.modelHead)
  const nozzles = (Array.isArray(settings['nozzle_diameter']) ? settings['nozzle_diameter'] : [settings['nozzle_diameter']]).map((n) => amount(n, 10)).filter((n): n is number => n !== null)
  const plateNozzles = (active?.meta['nozzle_diameters'] ?? '').split(/[,;\s]+/).map((n) => amount(n, 10)).filter((n): n is number => n !== null)
  const allNozzles = nozzles.length > 0 ? nozzles : plateNozzles
  return {
    metadata: {
      slicer: app?.slicer ?? (active !== undefined ? 'BambuStudio' : null),
      slicer_version: app?.version ?? null,
      printer_model: text(settings['printer_model']),
      printer_model_id: text(active?.meta['printer_model_id']) ?? text(settings['printer_model_id']),
      nozzle_diameter: allNozzles[0] ?? null,
      ...(allNozzles.length > 1 ? { nozzle_diameters: allNozzles.slice(0, 16) } : {}),
      bed_type: text(settings['curr_bed_type']) ?? text(active?.meta['curr_bed_type']),
      estimated_seconds: active?.summary.estimated_seconds ?? null,
      weight_g: active?.summary.weight_g ?? null,
      plates: plates.map((p) => p.summary),
    },
    project_filaments: active?.summary.filaments ?? [],
    activePlateNumber: active?.summary.index ?? null,
  }
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value.trim() !== '' ? value.trim().slice(0, 200) : null
}

/** A damaged settings file must not hide what slice_info says: it is ignored, not an error. */
function projectSettings(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined) return {}
  try {
    const parsed: unknown = JSON.parse(raw)
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

function applicationOf(modelHead: string): { slicer: string; version: string | null } | null {
  const match = /<metadata\s+name="Application"\s*>([^<]{1,200})<\/metadata>/.exec(modelHead)
  return match === null ? null : application(match[1]!)
}

function parseXml(xml: string, what: string): Record<string, unknown> {
  try {
    if (XMLValidator.validate(xml) !== true) throw new SlicerMetadataError(`${what} is not well-formed XML`)
    return parser.parse(xml) as Record<string, unknown>
  } catch (error) {
    if (error instanceof SlicerMetadataError) throw error
    throw new SlicerMetadataError(`${what} could not be read: ${(error as Error).message.slice(0, 200)}`)
  }
}

interface Plate {
  meta: Record<string, string>
  summary: PlateSummary
}

function slicedPlates(sliceInfo: string, gcodeHeads: ReadonlyMap<number, string> | undefined): Plate[] {
  const root = parseXml(sliceInfo, 'slice_info.config')['config']
  if (typeof root !== 'object' || root === null) throw new SlicerMetadataError('slice_info.config has no <config> element')
  const plates = ((root as Attributes)['plate'] ?? []) as unknown[]
  const read = plates.slice(0, maxPlates).flatMap((element, position): Plate[] => {
    if (typeof element !== 'object' || element === null) return []
    const meta: Record<string, string> = {}
    for (const item of (((element as Attributes)['metadata'] ?? []) as Attributes[]).slice(0, 200)) {
      if (typeof item?.['key'] === 'string' && typeof item['value'] === 'string') meta[item['key']] = item['value']
    }
    const index = amount(meta['index'], 10_000) ?? position + 1
    const filaments = ((((element as Attributes)['filament'] ?? []) as Attributes[]).slice(0, maxFilaments)).flatMap(filamentOf)
    const fromHead = gcodeHeads?.get(index)
    const estimated = amount(meta['prediction'], 1e8) ?? (fromHead === undefined ? null : headEstimate(fromHead))
    const weight = amount(meta['weight'], 1e7) ?? (filaments.length > 0 ? round2(filaments.reduce((sum, f) => sum + f.used_g, 0)) : null)
    return [{ meta, summary: { index: Math.trunc(index), estimated_seconds: estimated === null ? null : Math.round(estimated), weight_g: weight === null ? null : round2(weight), filaments } }]
  })
  return read.sort((a, b) => a.summary.index - b.summary.index)
}

function filamentOf(item: Attributes): ProjectFilament[] {
  if (typeof item !== 'object' || item === null) return []
  const id = amount(item['id'], 1_000)
  const usedG = amount(item['used_g'], 1e7) ?? 0
  if (id === null || usedG === 0) return []
  return [{ id: String(Math.trunc(id)), type: text(item['type']) ?? 'unknown', ...colors(item['color']), used_m: round2(amount(item['used_m'], 1e7) ?? 0), used_g: round2(usedG) }]
}

/** Bambu's plate G-code header: `; model printing time: 1h 0m 0s; total estimated time: 1h 2m 3s`. */
function headEstimate(head: string): number | null {
  const match = /total estimated time:\s*([0-9dhms ]{1,40})/.exec(head)
  return match === null ? null : duration(match[1]!)
}
