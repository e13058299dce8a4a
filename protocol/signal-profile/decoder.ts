/**
 * Reads compiled profile bytes back and verifies every rule of the format
 * (compiler.ts documents the layout): what a display does before it applies a
 * profile, and what the service's tests use to check the compiler. Canonical
 * form is enforced too (ids in program order, no duplicate programs, flags as
 * derived), so two different byte strings never mean the same profile.
 */
import { displayStatuses } from '../display-status.js'
import { fromBase64, sha256Hex } from './bytes.js'
import { formatVersion, headerBytes, maxCompiledPatterns, maxDecodedBytes, minDecodedBytes, phaseBytes, recordBytes } from './compiler.js'
import { maxPhases, staleModes, tickMs } from './draft.js'

export interface DecodedChannels {
  red: number
  green: number
  blue: number
  white: number
  cct: number
}

export interface DecodedPattern {
  id: number
  traversals: number
  initial: DecodedChannels
  usesWhite: boolean
  usesCct: boolean
  phases: { durationMs: number; target: DecodedChannels; transition: 'step' | 'linear' }[]
}

export interface DecodedProfile {
  formatVersion: number
  brightnessCap: number
  /** Pattern id per status, keyed by status name. */
  bindings: Record<(typeof displayStatuses)[number], number>
  stale: { mode: (typeof staleModes)[number]; pattern: number }
  patterns: DecodedPattern[]
}

export type DecodeResult = { ok: true; profile: DecodedProfile } | { ok: false; reason: string }

const channels = (b: Uint8Array, at: number): DecodedChannels => ({ red: b[at]!, green: b[at + 1]!, blue: b[at + 2]!, white: b[at + 3]!, cct: b[at + 4]! })
const same = (a: DecodedChannels, b: DecodedChannels) => a.red === b.red && a.green === b.green && a.blue === b.blue && a.white === b.white && a.cct === b.cct

export function decodeProfile(bytes: Uint8Array): DecodeResult {
  const fail = (reason: string): DecodeResult => ({ ok: false, reason })
  if (bytes.length < minDecodedBytes || bytes.length > maxDecodedBytes) return fail(`length ${bytes.length} is outside ${minDecodedBytes}-${maxDecodedBytes}`)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (view.getUint16(0, true) !== formatVersion) return fail(`format_version ${view.getUint16(0, true)} is not ${formatVersion}`)
  if (view.getUint16(2, true) !== tickMs) return fail(`tick_ms ${view.getUint16(2, true)} is not ${tickMs}`)
  const count = bytes[4]!
  if (count < 1 || count > maxCompiledPatterns) return fail(`pattern_count ${count} is outside 1-${maxCompiledPatterns}`)
  if (bytes[5] !== displayStatuses.length) return fail(`status_count ${bytes[5]} is not ${displayStatuses.length}`)
  if (view.getUint16(18, true) !== bytes.length) return fail(`total_length ${view.getUint16(18, true)} does not match the ${bytes.length} bytes`)
  const mode = bytes[16]!
  if (mode >= staleModes.length) return fail(`stale_mode ${mode} is unknown`)
  const bindingIds = displayStatuses.map((_, s) => bytes[7 + s]!)
  if (bindingIds.some((id) => id >= count) || bytes[17]! >= count) return fail('a binding names a pattern id that is not in the program')

  const patterns: DecodedPattern[] = []
  let offset = headerBytes
  let previous: Uint8Array | undefined
  for (let r = 0; r < count; r++) {
    if (offset + recordBytes > bytes.length) return fail(`record ${r} runs past the end`)
    if (bytes[offset] !== r) return fail(`record ${r} has id ${bytes[offset]}: ids run 0..${count - 1} in order`)
    const phaseCount = bytes[offset + 1]!
    if (phaseCount > maxPhases) return fail(`record ${r} has ${phaseCount} phases (at most ${maxPhases})`)
    const end = offset + recordBytes + phaseCount * phaseBytes
    if (end > bytes.length) return fail(`record ${r} runs past the end`)
    const program = bytes.subarray(offset + 1, end)
    if (previous !== undefined && compare(previous, program) >= 0) return fail(`record ${r} is not after record ${r - 1} in program order (or repeats it)`)
    previous = program
    const traversals = bytes[offset + 2]!
    const initial = channels(bytes, offset + 3)
    const flags = bytes[offset + 8]!
    const phases: DecodedPattern['phases'] = []
    for (let p = 0; p < phaseCount; p++) {
      const at = offset + recordBytes + p * phaseBytes
      const ticks = view.getUint16(at, true)
      const transition = bytes[at + 7]!
      if (ticks < 1 || ticks * tickMs > 60_000) return fail(`record ${r} phase ${p} lasts ${ticks} ticks (1-1200)`)
      if (transition > 1) return fail(`record ${r} phase ${p} has transition ${transition} (0 step, 1 linear)`)
      phases.push({ durationMs: ticks * tickMs, target: channels(bytes, at + 2), transition: transition === 1 ? 'linear' : 'step' })
    }
    if (phaseCount === 0 && traversals !== 0) return fail(`record ${r} has no phases but traversals ${traversals}`)
    if (phaseCount > 0 && traversals !== 1 && !same(phases[phaseCount - 1]!.target, initial)) return fail(`record ${r} repeats but does not end where it starts`)
    if (phases.some((p) => p.target.cct !== initial.cct)) return fail(`record ${r} changes CCT`)
    const all = [initial, ...phases.map((p) => p.target)]
    const usesWhite = all.some((c) => c.white > 0)
    const usesCct = usesWhite && all.some((c) => c.cct > 0)
    if (flags !== ((usesWhite ? 1 : 0) | (usesCct ? 2 : 0))) return fail(`record ${r} has flags ${flags}, not what its channels say`)
    patterns.push({ id: r, traversals, initial, usesWhite, usesCct, phases })
    offset = end
  }
  if (offset !== bytes.length) return fail(`${bytes.length - offset} bytes after the last record`)
  const idx = (s: (typeof displayStatuses)[number]) => displayStatuses.indexOf(s)
  for (let s = idx('FILAMENT_RUNOUT'); s <= idx('WAITING'); s++) if (bindingIds[s] === bytes[17]) return fail(`the stale pattern is the program of ${displayStatuses[s]}`)
  const complete = bindingIds[idx('COMPLETE')]
  if (complete === bindingIds[idx('RUNNING')] || complete === bindingIds[idx('ERROR')]) return fail('COMPLETE shares its program with RUNNING or ERROR')
  const referenced = new Set([...bindingIds, bytes[17]!])
  if (referenced.size !== count) return fail('a compiled pattern is bound to nothing')
  return {
    ok: true,
    profile: {
      formatVersion,
      brightnessCap: bytes[6]!,
      bindings: Object.fromEntries(displayStatuses.map((s, i) => [s, bindingIds[i]!])) as DecodedProfile['bindings'],
      stale: { mode: staleModes[mode]!, pattern: bytes[17]! },
      patterns,
    },
  }
}

/** The device's check of a delivered profile: strict base64, the hash of the bytes, then the format. */
export function verifyProfile(base64: string, sha256: string): DecodeResult {
  if (base64.length > 1000) return { ok: false, reason: `data is ${base64.length} characters (at most 1000)` }
  const bytes = fromBase64(base64)
  if (bytes === undefined) return { ok: false, reason: 'data is not standard padded base64' }
  if (sha256Hex(bytes) !== sha256.toLowerCase()) return { ok: false, reason: 'sha256 does not match the bytes' }
  return decodeProfile(bytes)
}

function compare(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!
  return a.length - b.length
}
