/** Small readers shared by the 3MF and G-code parsers: never NaN, never absurd. */
import type { ProjectFilament } from './types.js'

/** A finite number in [0, max], from a number or a numeric string; else null. */
export function amount(value: unknown, max = 1e9): number | null {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*[0-9]+(\.[0-9]+)?\s*$/.test(value) ? Number(value) : NaN
  return Number.isFinite(n) && n >= 0 && n <= max ? n : null
}

export const round2 = (n: number): number => Math.round(n * 100) / 100

/**
 * '#RRGGBB', '#RRGGBBAA' or without '#' → [#RRGGBB, RRGGBBAA]. A colour that is
 * not hex reads as black, opaque: the filament is still listed (its type and
 * usage matter more than its colour), and black is what slicers show for an
 * unset colour.
 */
export function colors(value: unknown): Pick<ProjectFilament, 'color_hex' | 'color_rgba'> {
  const match = typeof value === 'string' ? /^#?([0-9a-fA-F]{6})([0-9a-fA-F]{2})?$/.exec(value.trim()) : null
  if (match === null) return { color_hex: '#000000', color_rgba: '000000FF' }
  const rgb = match[1]!.toUpperCase()
  return { color_hex: `#${rgb}`, color_rgba: `${rgb}${(match[2] ?? 'FF').toUpperCase()}` }
}

/** '1d 2h 3m 4s', '2h 3m', '45s' → seconds; null when nothing matches. */
export function duration(text: string): number | null {
  const match = /^\s*(?:(\d{1,6})d\s*)?(?:(\d{1,6})h\s*)?(?:(\d{1,6})m\s*)?(?:(\d{1,6})s)?\s*$/.exec(text)
  if (match === null || match.slice(1).every((part) => part === undefined)) return null
  const [d, h, m, s] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number]
  return ((d * 24 + h) * 60 + m) * 60 + s
}

/** The application name and version, as in BambuStudio-01.09.00.70 or OrcaSlicer 2.1.1. */
export function application(text: string): { slicer: string; version: string | null } | null {
  const match = /^\s*([A-Za-z][A-Za-z0-9 _]*?)[- ]v?(\d[\w.+-]*)/.exec(text) ?? /^\s*([A-Za-z][A-Za-z0-9_]*)\s*$/.exec(text)
  if (match === null) return null
  return { slicer: match[1]!.trim().slice(0, 100), version: match[2]?.slice(0, 100) ?? null }
}
