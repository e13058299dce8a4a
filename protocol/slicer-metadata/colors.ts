/**
 * Filament colours as slicers write them: Bambu Studio and OrcaSlicer
 * `#RRGGBB` or `#RRGGBBAA` (slice_info `color`, `filament_colour`), PrusaSlicer
 * `#RRGGBB`; the '#' is optional because printers report them without one.
 */
import type { ProjectFilament } from './types.js'

export type Colors = Pick<ProjectFilament, 'color_hex' | 'color_rgba'>

/**
 * A colour that cannot be read is opaque black, and the filament is still
 * listed: its slot, type and usage matter more than its colour, and black is
 * what the slicers themselves show for an unset one. Short forms like `#ABC`
 * count as unreadable, since no slicer writes them.
 */
export const unreadableColor: Colors = { color_hex: '#000000', color_rgba: '000000FF' }

export function colorOf(value: unknown): Colors {
  if (typeof value !== 'string' || value.length > 16) return { ...unreadableColor }
  const match = /^\s*#?([0-9a-fA-F]{6})([0-9a-fA-F]{2})?\s*$/.exec(value)
  if (match === null) return { ...unreadableColor }
  const rgb = match[1]!.toUpperCase()
  return { color_hex: `#${rgb}`, color_rgba: `${rgb}${(match[2] ?? 'FF').toUpperCase()}` }
}
