/**
 * Bambu Studio and OrcaSlicer 3MF projects, from the texts a caller took out
 * of the zip (bbs_3mf.cpp is the writer of all of them):
 * - `Metadata/slice_info.config`: the sliced plates (see slice-info.ts);
 * - `Metadata/project_settings.config`: the whole config as one JSON object,
 *   every scalar a string and every list an array of strings
 *   (`"printer_model": "Bambu Lab P1S"`, `"nozzle_diameter": ["0.4"]`,
 *   `"curr_bed_type": "Textured PEI Plate"`);
 * - `3D/3dmodel.model`: `<metadata name="Application">BambuStudio-01.09.00.70</metadata>`
 *   near the top;
 * - `Metadata/plate_<n>.gcode`: the plate's G-code, whose header names the
 *   slicer exactly and carries the config block (see gcode.ts).
 * An unsliced project has no slice_info plate: no plates, no filaments, no
 * active plate, and whatever its settings say about the printer.
 */
import { commentValues, configNozzles, configText, gcodeApplication, gcodeEstimate, gcodeLines, nozzleFields } from './gcode.js'
import { readSliceInfo, type SlicedPlate } from './slice-info.js'
import { SlicerMetadataError, type PlateSummary, type SlicerMetadata, type ThreeMfSources } from './types.js'
import { amount, applicationOf, guarded, items, limits, nozzleOf, round2, text, xmlText, type Application } from './values.js'

const maxSettingsBytes = 16 * 1024 * 1024
/** A model head is at most 64 KiB; the Application item sits in its first few hundred bytes. */
const maxModelHead = 256 * 1024
const maxHeads = 256

/** Bambu Studio numbers its releases in four parts, 01.09.00.70 (version.inc). */
const bambuVersion = /^\d+\.\d+\.\d+\.\d+$/

/**
 * Settings that are not a JSON object are ignored rather than an error:
 * slice_info alone says what was sliced, and a damaged settings file must not
 * hide that. What the settings would have said (printer, nozzle, bed) is null.
 */
function projectSettings(raw: string | undefined): ReadonlyMap<string, unknown> {
  if (raw === undefined || raw.length > maxSettingsBytes) return new Map()
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    return new Map()
  }
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? new Map(Object.entries(parsed)) : new Map()
}

function settingNozzles(value: unknown): number[] {
  const list: unknown[] = Array.isArray(value) ? value.slice(0, 16) : typeof value === 'string' ? items(value, /[,;]/, 16) : []
  return list.map(nozzleOf).filter((n): n is number => n !== null)
}

/**
 * OrcaSlicer writes `BambuStudio-` followed by its own three-part version
 * (bbs_3mf.cpp: "write BambuStudio tag to keep it compatible"); the four-part
 * form is Bambu Studio's own.
 */
function modelApplication(modelHead: string): Application | null {
  const head = modelHead.length > maxModelHead ? modelHead.slice(0, maxModelHead) : modelHead
  const match = /<metadata\s+name\s*=\s*["']Application["']\s*>([^<]{1,200})<\/metadata>/.exec(head)
  const app = match === null ? null : applicationOf(xmlText(match[1]) ?? '')
  if (app?.slicer === 'BambuStudio' && app.version !== null && !bambuVersion.test(app.version)) return { slicer: 'OrcaSlicer', version: app.version }
  return app
}

/** Only Bambu Studio fills slice_info's client version (OrcaSlicer's three-part version converts to ''). */
function clientApplication(version: string | null | undefined): Application | null {
  return version != null && bambuVersion.test(version) ? { slicer: 'BambuStudio', version } : null
}

interface PlateHead {
  app: Application | null
  values: ReadonlyMap<string, string>
}

interface PlateHeads {
  get(plate: number): PlateHead | undefined
  /** Plate numbers with a head, in order. */
  numbers: number[]
}

/** Heads are read only when asked for, and once: most 3MFs never need them. */
function plateHeads(heads: ReadonlyMap<number, string> | undefined): PlateHeads {
  if (heads !== undefined && !(heads instanceof Map)) throw new SlicerMetadataError('plateGcodeHeads must be a Map of plate numbers to text')
  const texts = new Map<number, string>()
  for (const [plate, head] of heads ?? []) {
    if (texts.size >= maxHeads) break
    if (Number.isInteger(plate) && plate >= 1 && plate <= limits.plateIndex && typeof head === 'string') texts.set(plate, head)
  }
  const read = new Map<number, PlateHead>()
  return {
    numbers: [...texts.keys()].sort((a, b) => a - b),
    get(plate) {
      const known = read.get(plate)
      if (known !== undefined) return known
      const head = texts.get(plate)
      if (head === undefined) return undefined
      const lines = gcodeLines(head, '').head
      const parsed = { app: gcodeApplication(lines), values: commentValues(lines) }
      read.set(plate, parsed)
      return parsed
    },
  }
}

/** The first head, in the order given, that names its slicer. */
function firstApplication(heads: PlateHeads, numbers: readonly number[]): Application | null {
  for (const plate of numbers) {
    const app = heads.get(plate)?.app
    if (app != null) return app
  }
  return null
}

function summaryOf(plate: SlicedPlate, head: () => PlateHead | undefined): PlateSummary {
  const predicted = amount(plate.meta.get('prediction'), limits.seconds)
  const fromHead = predicted === null ? head() : undefined
  const estimated = predicted !== null ? Math.round(predicted) : fromHead === undefined ? null : gcodeEstimate(fromHead.values)
  // Bambu leaves weight empty when it is 0; the filaments then say the same.
  const stated = amount(plate.meta.get('weight'), limits.grams)
  const weight = stated !== null ? round2(stated) : plate.filaments.length > 0 ? round2(plate.filaments.reduce((sum, f) => sum + f.used_g, 0)) : null
  return { index: plate.index, estimated_seconds: estimated, weight_g: weight, filaments: plate.filaments }
}

function textSource(value: unknown, name: string): string | undefined {
  if (value === undefined || typeof value === 'string') return value
  throw new SlicerMetadataError(`${name} must be text`)
}

function read(sources: ThreeMfSources): SlicerMetadata {
  if (typeof sources !== 'object' || sources === null) throw new SlicerMetadataError('no 3MF sources were given')
  const sliceInfo = textSource(sources.sliceInfo, 'sliceInfo')
  const modelHead = textSource(sources.modelHead, 'modelHead')
  const settings = projectSettings(textSource(sources.projectSettings, 'projectSettings'))
  const info = sliceInfo === undefined ? null : readSliceInfo(sliceInfo)
  const heads = plateHeads(sources.plateGcodeHeads)
  const sliced = info?.plates ?? []
  const plates = sliced.map((plate) => summaryOf(plate, () => heads.get(plate.index)))
  const active = plates[0]
  const activeMeta = sliced[0]?.meta
  // The active plate's head first, then the others by number.
  const headOrder = active !== undefined && heads.numbers.includes(active.index) ? [active.index, ...heads.numbers.filter((n) => n !== active.index)] : heads.numbers
  const configHead = headOrder[0] === undefined ? undefined : heads.get(headOrder[0])
  const headApp = firstApplication(heads, headOrder)
  const app = headApp ?? (modelHead === undefined ? null : modelApplication(modelHead)) ?? clientApplication(info?.clientVersion)
  const nozzles = [
    settingNozzles(settings.get('nozzle_diameter')),
    items(activeMeta?.get('nozzle_diameters'), /[,;\s]+/, 16).map(nozzleOf).filter((n): n is number => n !== null),
    configHead === undefined ? [] : configNozzles(configHead.values),
  ].find((list) => list.length > 0) ?? []
  return {
    metadata: {
      slicer: app?.slicer ?? null,
      slicer_version: app?.version ?? null,
      printer_model: text(settings.get('printer_model')) ?? (configHead === undefined ? null : configText(configHead.values, 'printer_model')),
      printer_model_id: xmlText(activeMeta?.get('printer_model_id'), 64),
      ...nozzleFields(nozzles),
      bed_type: text(settings.get('curr_bed_type')) ?? (configHead === undefined ? null : configText(configHead.values, 'curr_bed_type')),
      estimated_seconds: active?.estimated_seconds ?? null,
      weight_g: active?.weight_g ?? null,
      plates,
    },
    project_filaments: (active?.filaments ?? []).map((f) => ({ ...f })),
    activePlateNumber: active?.index ?? null,
  }
}

export function readThreeMfMetadata(sources: ThreeMfSources): SlicerMetadata {
  return guarded('the 3MF metadata', () => read(sources))
}
