/**
 * Small readers for untrusted report fields: a value of the wrong type, or out
 * of its range, is absent (never guessed at, never thrown on).
 */
import type { ReportTemperature } from './types.js'

export type Json = Record<string, unknown>

export const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v)
export const objectAt = (v: unknown, key: string): Json | undefined => (isObject(v) && isObject(v[key]) ? v[key] : undefined)

export function finite(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined
}

export function text(v: unknown, max = 200): string | undefined {
  if (typeof v !== 'string') return undefined
  const trimmed = v.trim()
  return trimmed.length === 0 ? undefined : trimmed.slice(0, max)
}

export const percent = (v: unknown): number | undefined => {
  const n = finite(v)
  return n === undefined ? undefined : Math.min(100, Math.max(0, n))
}

/** Whole, non-negative, at most `max` (ten years of seconds; ten million layers). */
export function whole(v: unknown, max: number): number | undefined {
  const n = finite(v)
  return n === undefined || n < 0 ? undefined : Math.min(max, Math.round(n))
}

export const maxSeconds = 10 * 366 * 24 * 3600
export const maxLayers = 10_000_000

/** Degrees Celsius a sensor can truthfully report. */
export function celsius(v: unknown): number | undefined {
  const n = finite(v)
  return n === undefined || n < -273.15 || n > 2000 ? undefined : n
}

/** `{actual?, target?}` from the given values; undefined when neither is usable. */
export function temperature(actual: unknown, target: unknown): ReportTemperature | undefined {
  const a = celsius(actual)
  const t = celsius(target)
  if (a === undefined && t === undefined) return undefined
  return { ...(a === undefined ? {} : { actual: a }), ...(t === undefined ? {} : { target: t }) }
}

/** `#RRGGBB` from `RRGGBB`, `RRGGBBAA`, with or without `#`; null otherwise. */
export function colorHex(v: unknown): string | null {
  if (typeof v !== 'string') return null
  const match = /^#?([0-9a-fA-F]{6})([0-9a-fA-F]{2})?$/.exec(v.trim())
  return match === null ? null : `#${match[1]!.toUpperCase()}`
}

/**
 * The fields that are not undefined, so a report lists only what it carried. A new object rather
 * than `delete` on the given one: deleting a property turns an object into a slow dictionary, and
 * every report of every event passes here.
 */
export function defined<T extends object>(value: T): T {
  const kept = {} as T
  for (const key in value) if (value[key] !== undefined) kept[key] = value[key]
  return kept
}
