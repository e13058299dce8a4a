/**
 * Stored file names (docs/files.md):
 * the client's name made safe to be one segment of a storage key, then a
 * `-vX.Y` version before the recognised extension (`benchy.3mf` →
 * `benchy-v1.0.3mf`). Pure, so the rules are tested without storage.
 */
import { utf8Length } from './display-mqtt.js'

/** Longest, most specific first: `.gcode.3mf` is one extension, not `.3mf`. */
const recognisedExtensions = ['.gcode.3mf', '.3mf', '.gcode', '.bgcode', '.stl', '.step'] as const
export const maxNameBytes = 200

export interface SanitizedName {
  /** The safe name: what versions are counted by. */
  name: string
  stem: string
  /** As sent (case kept), or '' when the name has no recognised extension. */
  extension: string
}

/**
 * Base name only (a client's path means nothing here), no NUL or control
 * characters, no leading dots (no hidden files, never `.` or `..`), at most
 * 200 UTF-8 bytes cut at a character boundary with the extension kept; an
 * empty result is `file`.
 */
export function sanitizeFileName(original: string): SanitizedName {
  const base = original.split(/[\\/]/).at(-1) ?? ''
  // eslint-disable-next-line no-control-regex
  const clean = base.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').replace(/^[.\s]+/, '').trimEnd()
  const lower = clean.toLowerCase()
  const ext = recognisedExtensions.find((e) => lower.endsWith(e) && lower.length > e.length)
  const extension = ext === undefined ? '' : clean.slice(clean.length - ext.length)
  let stem = clean.slice(0, clean.length - extension.length)
  stem = cutToBytes(stem, maxNameBytes - utf8Length(extension))
  if (stem.replace(/[.\s]/g, '') === '') return extension === '' ? { name: 'file', stem: 'file', extension: '' } : { name: `file${extension}`, stem: 'file', extension }
  return { name: stem + extension, stem, extension }
}

/** `benchy.3mf`, minor 2 → `benchy-v1.2.3mf`; no extension → `passwd-v1.0`. */
export function versionedFileName(sanitized: SanitizedName, minor: number): string {
  return `${sanitized.stem}-v1.${minor}${sanitized.extension}`
}

/** At most `limit` UTF-8 bytes, never splitting a character (a surrogate pair included). */
function cutToBytes(text: string, limit: number): string {
  if (utf8Length(text) <= limit) return text
  let bytes = 0
  let end = 0
  for (const char of text) {
    const size = utf8Length(char)
    if (bytes + size > limit) break
    bytes += size
    end += char.length
  }
  return text.slice(0, end)
}
