/**
 * `Metadata/slice_info.config`, as Bambu Studio and OrcaSlicer write it
 * (bbs_3mf.cpp, `_add_slice_info_config_file_to_archive`):
 *
 *   <config>
 *     <header><header_item key="X-BBL-Client-Version" value="01.09.00.70"/>…</header>
 *     <plate>                      one per sliced plate, none when nothing is sliced
 *       <metadata key="index" value="1"/>           also printer_model_id, nozzle_diameters,
 *       <metadata key="prediction" value="3723"/>   prediction (seconds), weight (grams, %.2f) …
 *       <object identify_id=… name=… skipped=…/>
 *       <filament id="1" tray_info_idx="GFA00" type="PLA" color="#FFFFFF" used_m="3.91" used_g="11.66" …/>
 *       <warning …/> <layer_filament_lists>…</layer_filament_lists>
 *     </plate>
 *   </config>
 *
 * Hostile text gives a SlicerMetadataError or plates, in bounded time: no
 * DOCTYPE is accepted (so no entity is ever declared, let alone expanded),
 * nesting is capped, and past 256 plates or 64 filaments a plate the rest is
 * not even kept in memory.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser'
import { colorOf } from './colors.js'
import { SlicerMetadataError, type ProjectFilament } from './types.js'
import { amount, limits, round2, wholeNumber, xmlText } from './values.js'

/** Far above the 4 MiB a caller takes out of the zip; bounds the time a parse can take. */
const maxBytes = 16 * 1024 * 1024
const maxPlates = 256
const maxFilaments = 64
const maxMetadata = 256

export interface SlicedPlate {
  index: number
  meta: ReadonlyMap<string, string>
  /** Filaments the plate uses, 0 g ones left out, in the order written. */
  filaments: ProjectFilament[]
}

export interface SliceInfo {
  /** `X-BBL-Client-Version`: Bambu Studio's four-part version; OrcaSlicer leaves it empty. */
  clientVersion: string | null
  /** By plate index, each index once. */
  plates: SlicedPlate[]
}

type Element = Record<string, unknown>

const isElement = (value: unknown): value is Element => typeof value === 'object' && value !== null && !Array.isArray(value)
const elements = (value: unknown): Element[] => (Array.isArray(value) ? value.filter(isElement) : isElement(value) ? [value] : [])

function parserFor(): XMLParser {
  let plates = 0
  let filaments = 0
  let metadata = 0
  return new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '',
    processEntities: false,
    htmlEntities: false,
    parseTagValue: false,
    parseAttributeValue: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    maxNestedTags: 16,
    jPath: false,
    isArray: (name) => name === 'plate' || name === 'filament' || name === 'metadata' || name === 'header_item',
    // Returning false leaves the element out of the result, so a flood of them costs no memory.
    updateTag: (name) => {
      if (name === 'plate') {
        filaments = 0
        metadata = 0
        return ++plates <= maxPlates
      }
      if (name === 'filament') return ++filaments <= maxFilaments
      if (name === 'metadata') return ++metadata <= maxMetadata
      return true
    },
  })
}

function parse(xml: string): unknown {
  if (xml.length > maxBytes) throw new SlicerMetadataError('slice_info.config is too large')
  if (/<!DOCTYPE/i.test(xml)) throw new SlicerMetadataError('slice_info.config declares a DOCTYPE, which no slicer writes')
  if (XMLValidator.validate(xml) !== true) throw new SlicerMetadataError('slice_info.config is not well-formed XML')
  try {
    return parserFor().parse(xml)
  } catch (error) {
    const message = error instanceof Error ? error.message : ''
    if (/nested/i.test(message)) throw new SlicerMetadataError('slice_info.config is nested too deeply')
    throw new SlicerMetadataError(`slice_info.config could not be read: ${message.slice(0, 120)}`)
  }
}

function filamentOf(element: Element): ProjectFilament | null {
  const slot = wholeNumber(element['id'], 1, limits.filamentSlot)
  const grams = amount(element['used_g'], limits.grams)
  if (slot === null || grams === null || round2(grams) === 0) return null
  return {
    id: String(slot),
    type: xmlText(element['type'], 64) ?? 'unknown',
    ...colorOf(xmlText(element['color'], 16)),
    used_m: round2(amount(element['used_m'], limits.metres) ?? 0),
    used_g: round2(grams),
  }
}

function plateOf(element: Element, position: number): SlicedPlate {
  const meta = new Map<string, string>()
  for (const item of elements(element['metadata'])) {
    const key = xmlText(item['key'], 64)
    const value = typeof item['value'] === 'string' ? item['value'] : null
    if (key !== null && value !== null && !meta.has(key)) meta.set(key, value.slice(0, 4096))
  }
  const filaments: ProjectFilament[] = []
  for (const item of elements(element['filament'])) {
    const filament = filamentOf(item)
    if (filament !== null && !filaments.some((f) => f.id === filament.id)) filaments.push(filament)
  }
  return { index: wholeNumber(meta.get('index'), 1, limits.plateIndex) ?? position + 1, meta, filaments }
}

export function readSliceInfo(xml: string): SliceInfo {
  const root = parse(xml)
  const config = isElement(root) ? root['config'] : undefined
  // `<config/>` or `<config></config>` is a project with nothing sliced.
  if (config === '') return { clientVersion: null, plates: [] }
  if (!isElement(config)) throw new SlicerMetadataError('slice_info.config has no <config> element')
  let clientVersion: string | null = null
  for (const header of elements(config['header'])) {
    for (const item of elements(header['header_item'])) {
      if (item['key'] === 'X-BBL-Client-Version' && clientVersion === null) clientVersion = xmlText(item['value'], 64)
    }
  }
  const byIndex = new Map<number, SlicedPlate>()
  elements(config['plate']).forEach((element, position) => {
    const plate = plateOf(element, position)
    if (!byIndex.has(plate.index)) byIndex.set(plate.index, plate)
  })
  return { clientVersion, plates: [...byIndex.values()].sort((a, b) => a.index - b.index) }
}
