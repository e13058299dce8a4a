/**
 * Small readers shared by the 3MF and G-code parsers. A number that leaves
 * them is finite, non-negative and within what a real print can reach; a text
 * is trimmed, free of control characters and bounded. Anything else is null,
 * so a hostile file yields gaps, never NaN, Infinity or a megabyte of "name".
 */
import { SlicerMetadataError } from './types.js'

/** Upper bounds of a believable print: beyond them a value is a lie or an attack. */
export const limits = {
  /** About three years. */
  seconds: 1e8,
  /** 100 kg of filament. */
  grams: 1e5,
  /** 100 km of filament. */
  metres: 1e5,
  millimetres: 1e8,
  /** The widest nozzle anyone sells is far below 5 mm. */
  nozzle: 5,
  plateIndex: 10_000,
  filamentSlot: 1_000,
} as const

/** Slicers write plain decimals (`%.2f`, `std::to_string`); exponents and signs are not theirs. */
const plainNumber = /^\s*(?:\d{1,15}(?:\.\d{0,15})?|\.\d{1,15})\s*$/

/** A finite number in [0, max] from a number or a plain decimal string; else null. */
export function amount(value: unknown, max: number): number | null {
  let n: number
  if (typeof value === 'number') n = value
  else if (typeof value === 'string' && value.length <= 40 && plainNumber.test(value)) n = Number(value)
  else return null
  return Number.isFinite(n) && n >= 0 && n <= max ? n : null
}

/** A whole number in [min, max]; `3723.000000` counts, `1.5` does not. */
export function wholeNumber(value: unknown, min: number, max: number): number | null {
  const n = amount(value, max)
  return n !== null && Number.isInteger(n) && n >= min ? n : null
}

/** A nozzle diameter: a zero-width nozzle is as absurd as a 10 mm one. */
export function nozzleOf(value: unknown): number | null {
  const n = amount(value, limits.nozzle)
  return n !== null && n > 0 ? n : null
}

export const round2 = (n: number): number => Math.round(n * 100) / 100

/**
 * Seconds from the slicers' `1d 2h 3m 4s` (any leading parts may be absent,
 * as in `2h 3m`, `45s` or `3m 0s`); null when the text is anything else or
 * past the bound.
 */
export function duration(text: string | undefined): number | null {
  if (text === undefined || text.length > 60) return null
  const match = /^\s*(?:(\d{1,9})\s*d\s*)?(?:(\d{1,9})\s*h\s*)?(?:(\d{1,9})\s*m\s*)?(?:(\d{1,9})\s*s)?\s*$/.exec(text)
  if (match === null || match.slice(1).every((part) => part === undefined)) return null
  const [d, h, m, s] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number]
  const seconds = ((d * 24 + h) * 60 + m) * 60 + s
  return seconds <= limits.seconds ? seconds : null
}

/** A trimmed text without control characters, at most `max` characters; empty is null. */
export function text(value: unknown, max = 200): string | null {
  if (typeof value !== 'string') return null
  const cleaned = value.slice(0, max * 4).replace(/[\u0000-\u001f\u007f]/g, '').trim()
  return cleaned === '' ? null : cleaned.slice(0, max).trim()
}

const predefined: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" }

/** An XML text with the five predefined entities decoded, in one pass: nothing expands beyond them. */
export function xmlText(value: unknown, max?: number): string | null {
  if (typeof value !== 'string') return null
  return text(value.replace(/&(lt|gt|amp|quot|apos);/g, (_, name: string) => predefined[name] ?? ''), max)
}

/** Slicers quote a list item holding spaces or separators (`"Generic PLA";"Bambu PLA"`). */
export function unquote(value: string): string {
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value
}

/** The items of a separated list, trimmed and unquoted, at most `max` of them. */
export function items(value: string | undefined, separator: string | RegExp, max: number): string[] {
  if (value === undefined || value.trim() === '') return []
  return value.split(separator, max).map((item) => unquote(item.trim()))
}

/** The numbers of a separated list; an unreadable item stays in place as null. */
export function amounts(value: string | undefined, separator: string | RegExp, max: number, bound: number): (number | null)[] {
  return items(value, separator, max).map((item) => amount(item, bound))
}

export interface Application {
  slicer: string
  version: string | null
}

/**
 * The application and version from `BambuStudio-01.09.00.70`,
 * `OrcaSlicer 2.1.1` or `PrusaSlicer 2.7.1+linux-x64-GTK3`; a bare name has
 * no version.
 */
export function applicationOf(raw: string): Application | null {
  const value = text(raw, 160)
  if (value === null) return null
  const versioned = /^([A-Za-z][A-Za-z0-9 _.]{0,63}?)[- ]v?(\d[0-9A-Za-z.+_-]{0,63})$/.exec(value)
  if (versioned !== null) return { slicer: versioned[1]!.trim(), version: versioned[2]! }
  const bare = /^[A-Za-z][A-Za-z0-9 _.-]{0,63}$/.exec(value)
  return bare === null ? null : { slicer: bare[0].trim(), version: null }
}

/**
 * Runs a reader so that it throws nothing but a SlicerMetadataError: a stack
 * overflow or an input nobody foresaw becomes one too, marked "unexpected".
 */
export function guarded<T>(what: string, read: () => T): T {
  try {
    return read()
  } catch (error) {
    if (error instanceof SlicerMetadataError) throw error
    const detail = error instanceof Error ? error.message.slice(0, 120) : 'no detail'
    throw new SlicerMetadataError(`${what} could not be read (unexpected: ${detail})`)
  }
}
