/**
 * Signal-profile compiler: authoring draft → compiled format version 1
 * (docs/displays.md). Pure and deterministic: the same profile, however
 * its patterns are named or ordered, compiles to the same bytes.
 *
 * Byte layout (little-endian, unsigned, no padding, no strings):
 *
 *   Header, 20 bytes
 *     0   u16  format_version   1
 *     2   u16  tick_ms          50 (phase durations are counted in ticks)
 *     4   u8   pattern_count    1-10
 *     5   u8   status_count     9
 *     6   u8   brightness_cap   0-255
 *     7   u8×9 bindings         pattern record id per status, in the contract order
 *                               FILAMENT_RUNOUT, ERROR, COMPLETE, OFFLINE,
 *                               PAUSED, RUNNING, WAITING, IDLE, UNKNOWN
 *     16  u8   stale_mode       0 per_pixel, 1 all_pixels, 2 first_pixel
 *     17  u8   stale_pattern    pattern record id
 *     18  u16  total_length     the whole program's byte length (29-750)
 *
 *   Pattern record, 9 + 8·phases bytes, pattern_count times, by id
 *     0   u8   id               0..pattern_count-1, = rank of its program bytes
 *     1   u8   phase_count      0-8
 *     2   u8   traversals       0 continuous, else 1-255 runs
 *     3   u8×5 initial          red, green, blue, white, cct
 *     8   u8   flags            bit 0: white output used, bit 1: CCT used
 *     9   phase × phase_count, 8 bytes each:
 *           0  u16  duration_ticks   1-1200 (50 ms to 60 s)
 *           2  u8×5 target           red, green, blue, white, cct
 *           7  u8   transition       0 step, 1 linear
 *
 * A record's "program bytes" are the record without its id (bytes 1..).
 * Records are deduplicated on them and numbered in their lexicographic
 * order, so the compiled bytes depend on the programs only. Sizes: 20 +
 * Σ(9 + 8·phases): 29 (one pattern, no phases) to 750 (ten of eight phases).
 *
 * Rules decided here and enforced:
 * - Phases: 0-8; a program without phases is a constant colour and must
 *   have traversals 0. Each phase lasts 50 ms to 60 s, in 50 ms steps.
 * - Closure: a program that repeats (traversals 0 or ≥ 2, with phases) ends
 *   its last phase on its initial channels, so a repetition never jumps.
 * - Constant CCT: a program's CCT is the same in its initial channels and in
 *   every phase (CCT is a mix coordinate many controllers cannot animate).
 * - COMPLETE: its program differs from the programs of RUNNING and ERROR,
 *   so a finished print never looks like one printing or one failed.
 * - Stale: the stale pattern is always compiled, and its program differs
 *   from every program bound to FILAMENT_RUNOUT through WAITING.
 * - White is "used" when any white channel is above 0; CCT is "used" when a
 *   program that uses white has a CCT above 0 (without white, CCT mixes nothing).
 */
import { ServiceError } from '../errors.js'
import { displayStatuses } from '../display-status.js'
import { compileBodyValidator } from '../schemas/validator.js'
import { sha256Hex, toBase64 } from './bytes.js'
import { DraftSchema, staleModes, tickMs, type Channels, type Draft, type Program } from './draft.js'

export const formatVersion = 1
/** Recorded with every published revision (docs/oauth.md). */
export const compilerVersion = '1.0.0'
export const headerBytes = 20
export const recordBytes = 9
export const phaseBytes = 8
export const maxCompiledPatterns = 10
export const minDecodedBytes = headerBytes + recordBytes
export const maxDecodedBytes = headerBytes + maxCompiledPatterns * (recordBytes + 8 * phaseBytes)

export interface CapabilityRequirements {
  decodedBytes: number
  maxPhases: number
  usesWhite: boolean
  usesCct: boolean
}

export interface CompiledProfile {
  bytes: Uint8Array
  base64: string
  sha256: string
  byteLength: number
  requirements: CapabilityRequirements
}

const validateDraft = compileBodyValidator(DraftSchema)

function invalid(message: string): never {
  throw new ServiceError('MQTT_DISPLAY_REQUEST_INVALID', message)
}

const channelOrder = ['red', 'green', 'blue', 'white', 'cct'] as const
const channelBytes = (c: Channels): number[] => channelOrder.map((k) => c[k])

/** Checks one program against the rules above; `where` names it in messages. */
function checkProgram(program: Program, where: string): void {
  const phases = program.phases
  if (phases.length === 0 && program.traversals !== 0) invalid(`${where}.traversals must be 0 for a program without phases (a constant colour)`)
  const repeats = phases.length > 0 && program.traversals !== 1
  if (repeats) {
    const last = phases[phases.length - 1]!.target
    const closes = channelOrder.every((k) => last[k] === program.initial[k])
    if (!closes) invalid(`${where}.phases[${phases.length - 1}].target must equal ${where}.initial: a repeating program (traversals ${program.traversals}) must end where it starts`)
  }
  for (const [i, phase] of phases.entries()) {
    if (phase.target.cct !== program.initial.cct) invalid(`${where}.phases[${i}].target.cct must equal ${where}.initial.cct: CCT is constant within a program`)
  }
}

/** The record without its id: what deduplication and ordering compare. */
function programBytes(program: Program): number[] {
  const channels = [program.initial, ...program.phases.map((p) => p.target)]
  const usesWhite = channels.some((c) => c.white > 0)
  const usesCct = usesWhite && channels.some((c) => c.cct > 0)
  const out = [program.phases.length, program.traversals, ...channelBytes(program.initial), (usesWhite ? 1 : 0) | (usesCct ? 2 : 0)]
  for (const phase of program.phases) {
    const ticks = phase.durationMs / tickMs
    out.push(ticks & 0xff, ticks >> 8, ...channelBytes(phase.target), phase.transition === 'linear' ? 1 : 0)
  }
  return out
}

function compareBytes(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!
  return a.length - b.length
}

/** Validates and compiles a draft; throws 400 MQTT_DISPLAY_REQUEST_INVALID naming the field at fault. */
export function compileDraft(input: unknown): CompiledProfile {
  const result = validateDraft(input)
  if (!result.ok) invalid(result.reason.replace(/^body/, 'draft'))
  const draft: Draft = result.value

  const byId = new Map<string, { index: number; program: Program }>()
  for (const [index, pattern] of draft.patterns.entries()) {
    if (byId.has(pattern.id)) invalid(`draft.patterns[${index}].id '${pattern.id}' repeats an earlier pattern's id`)
    byId.set(pattern.id, { index, program: pattern.program })
  }
  const referenced = (id: string, where: string) => {
    const found = byId.get(id)
    if (found === undefined) invalid(`${where} names pattern '${id}', which the draft does not define`)
    return found
  }
  const bound = displayStatuses.map((status) => referenced(draft.bindings[status], `draft.bindings.${status}`))
  const stale = referenced(draft.stale.pattern, 'draft.stale.pattern')

  // Only referenced patterns are compiled (and checked); an unused library pattern may be a work in progress.
  const unique = new Map<string, number[]>()
  const keyOf = new Map<number, string>()
  for (const { index, program } of [...bound, stale]) {
    if (keyOf.has(index)) continue
    checkProgram(program, `draft.patterns[${index}].program`)
    const bytes = programBytes(program)
    const key = bytes.join(',')
    keyOf.set(index, key)
    unique.set(key, bytes)
  }
  const programs = [...unique.values()].sort(compareBytes)
  if (programs.length > maxCompiledPatterns) {
    invalid(`draft.bindings and draft.stale reference ${programs.length} distinct programs; at most ${maxCompiledPatterns} compile (reuse patterns or make them identical)`)
  }
  const idOf = new Map(programs.map((bytes, id) => [bytes.join(','), id]))
  const recordOf = (index: number) => idOf.get(keyOf.get(index)!)!

  const bindings = bound.map((b) => recordOf(b.index))
  const staleId = recordOf(stale.index)
  const statusIndex = (s: (typeof displayStatuses)[number]) => displayStatuses.indexOf(s)
  for (let s = statusIndex('FILAMENT_RUNOUT'); s <= statusIndex('WAITING'); s++) {
    if (bindings[s] === staleId) invalid(`draft.stale.pattern must not have the same program as the pattern bound to ${displayStatuses[s]}: a stale feed must look different from any live status`)
  }
  for (const other of ['RUNNING', 'ERROR'] as const) {
    if (bindings[statusIndex('COMPLETE')] === bindings[statusIndex(other)]) invalid(`draft.bindings.COMPLETE must not have the same program as draft.bindings.${other}: a finished print must look different`)
  }

  const total = headerBytes + programs.reduce((n, p) => n + 1 + p.length, 0)
  const bytes = new Uint8Array(total)
  const view = new DataView(bytes.buffer)
  view.setUint16(0, formatVersion, true)
  view.setUint16(2, tickMs, true)
  bytes[4] = programs.length
  bytes[5] = displayStatuses.length
  bytes[6] = draft.brightnessCap
  bindings.forEach((id, s) => (bytes[7 + s] = id))
  bytes[16] = staleModes.indexOf(draft.stale.mode)
  bytes[17] = staleId
  view.setUint16(18, total, true)
  let offset = headerBytes
  for (const [id, program] of programs.entries()) {
    bytes[offset++] = id
    bytes.set(program, offset)
    offset += program.length
  }

  return {
    bytes,
    base64: toBase64(bytes),
    sha256: sha256Hex(bytes),
    byteLength: total,
    requirements: requirementsOf(bytes),
  }
}

/** What a controller must support to run these bytes, read from the bytes themselves. */
export function requirementsOf(bytes: Uint8Array): CapabilityRequirements {
  let offset = headerBytes
  let maxPhases = 0
  let usesWhite = false
  let usesCct = false
  for (let r = 0; r < bytes[4]!; r++) {
    const phases = bytes[offset + 1]!
    const flags = bytes[offset + 8]!
    maxPhases = Math.max(maxPhases, phases)
    usesWhite ||= (flags & 1) !== 0
    usesCct ||= (flags & 2) !== 0
    offset += recordBytes + phases * phaseBytes
  }
  return { decodedBytes: bytes.length, maxPhases, usesWhite, usesCct }
}
