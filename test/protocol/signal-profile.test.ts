import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { fromBase64, sha256Hex, toBase64 } from '../../protocol/signal-profile/bytes.js'
import { compileDraft, maxDecodedBytes, minDecodedBytes } from '../../protocol/signal-profile/compiler.js'
import { decodeProfile, verifyProfile } from '../../protocol/signal-profile/decoder.js'
import { defaultDraft, type Channels, type Draft } from '../../protocol/signal-profile/draft.js'
import { displayStatuses } from '../../protocol/display-status.js'

const clone = <T>(v: T): T => structuredClone(v)
const rgb = (red: number, green = 0, blue = 0, white = 0, cct = 0): Channels => ({ red, green, blue, white, cct })
const refused = (draft: unknown, message: RegExp) => {
  try {
    compileDraft(draft)
  } catch (error) {
    return (error as { code?: string }).code === 'MQTT_DISPLAY_REQUEST_INVALID' && message.test((error as Error).message) ? true : (error as Error).message
  }
  return 'compiled'
}

/** Ten distinct eight-phase programs, one per status plus the stale one: the largest profile. */
function largest(): Draft {
  const ids = [...displayStatuses.map((s) => s.toLowerCase()), 'stale']
  const patterns = ids.map((id, n) => {
    const base = rgb(n * 20, 0, 0)
    const phases = Array.from({ length: 8 }, (_, p) => ({ durationMs: 50 * (p + 1), target: p === 7 ? base : rgb(n * 20, p * 30, 0), transition: 'linear' as const }))
    return { id, name: id, program: { initial: base, phases, traversals: 0 } }
  })
  return {
    name: 'largest',
    brightnessCap: 255,
    patterns,
    bindings: Object.fromEntries(displayStatuses.map((s) => [s, s.toLowerCase()])) as Draft['bindings'],
    stale: { mode: 'all_pixels', pattern: 'stale' },
  }
}

t.test('bytes - SHA-256 and base64 agree with node:crypto and Buffer', async (t) => {
  for (const size of [0, 1, 2, 3, 55, 56, 63, 64, 65, 119, 750, 1000]) {
    const data = new Uint8Array(randomBytes(size))
    t.equal(sha256Hex(data), createHash('sha256').update(data).digest('hex'), `sha256 of ${size} bytes`)
    t.equal(toBase64(data), Buffer.from(data).toString('base64'), `base64 of ${size} bytes`)
    t.same(fromBase64(toBase64(data)), data)
  }
  t.equal(fromBase64('AB=='.replace('B', 'C')), undefined, 'non-canonical trailing bits are refused')
  t.equal(fromBase64('AAA'), undefined, 'unpadded is refused')
  t.equal(fromBase64('AA-_'), undefined, 'the URL alphabet is refused')
})

t.test('compiler - the default draft compiles to the documented layout and decodes back', async (t) => {
  const compiled = compileDraft(defaultDraft())
  const phases = [2, 2, 2, 0, 0, 0, 0, 0, 0]
  t.equal(compiled.byteLength, 20 + phases.reduce((n, p) => n + 9 + 8 * p, 0), 'size = 20 + Σ(9 + 8·phases)')
  t.equal(compiled.bytes.length, compiled.byteLength)
  const view = new DataView(compiled.bytes.buffer)
  t.same([view.getUint16(0, true), view.getUint16(2, true), compiled.bytes[4], compiled.bytes[5], compiled.bytes[6], view.getUint16(18, true)], [1, 50, 9, 9, 200, compiled.byteLength])
  const decoded = decodeProfile(compiled.bytes)
  t.ok(decoded.ok, decoded.ok ? 'decodes' : decoded.reason)
  if (!decoded.ok) return
  t.equal(decoded.profile.stale.mode, 'per_pixel')
  t.equal(decoded.profile.stale.pattern, decoded.profile.bindings.UNKNOWN, 'stale may share the UNKNOWN program')
  const complete = decoded.profile.patterns[decoded.profile.bindings.COMPLETE]!
  t.match(complete, { traversals: 0, initial: { red: 0, green: 160, blue: 60 }, phases: [{ durationMs: 1000, transition: 'linear' }, { durationMs: 1000 }] })
  t.same(compiled.requirements, { decodedBytes: compiled.byteLength, maxPhases: 2, usesWhite: false, usesCct: false })
  t.same(verifyProfile(compiled.base64, compiled.sha256), decoded, 'the device-side check reads the same')
})

t.test('compiler - sizes at both limits: the largest profile is 750 bytes and 1,000 base64 characters; the format floor is 29', async (t) => {
  const compiled = compileDraft(largest())
  t.equal(compiled.byteLength, maxDecodedBytes)
  t.equal(maxDecodedBytes, 750)
  t.equal(compiled.base64.length, 1000)
  t.ok(decodeProfile(compiled.bytes).ok)
  t.equal(minDecodedBytes, 29)
  const tooShort = decodeProfile(new Uint8Array(28))
  t.match(tooShort, { ok: false, reason: /length 28/ })
  // One pattern, no phases: 29 bytes, structurally whole, but its stale program is every status's program.
  const single = new Uint8Array(29)
  const v = new DataView(single.buffer)
  v.setUint16(0, 1, true)
  v.setUint16(2, 50, true)
  single[4] = 1
  single[5] = 9
  v.setUint16(18, 29, true)
  t.match(decodeProfile(single), { ok: false, reason: /stale pattern is the program of FILAMENT_RUNOUT/ }, 'so the smallest valid profile has two patterns')
  // Nine bindings and the stale pattern: at most ten programs can ever be referenced, so
  // the documented ten-pattern bound holds by construction (the compiler still checks it).
  const extra = largest()
  extra.patterns.push({ id: 'extra', name: 'x', program: { initial: rgb(1, 2, 3), phases: [], traversals: 0 } })
  t.equal(decodeProfile(compileDraft(extra).bytes).ok && compileDraft(extra).bytes[4], 10, 'an eleventh library pattern that nothing references is not compiled')
})

t.test('compiler - output depends on the programs only: reordering and renaming change nothing', async (t) => {
  const base = compileDraft(defaultDraft())
  const shuffled = clone(defaultDraft())
  shuffled.patterns.reverse()
  shuffled.name = 'another name'
  const renamed = clone(shuffled)
  for (const p of renamed.patterns) {
    const fresh = `x_${p.id}`
    for (const s of displayStatuses) if (renamed.bindings[s] === p.id) renamed.bindings[s] = fresh
    if (renamed.stale.pattern === p.id) renamed.stale.pattern = fresh
    p.id = fresh
    p.name = `renamed ${p.name}`
  }
  for (const draft of [shuffled, renamed]) {
    const again = compileDraft(draft)
    t.equal(again.sha256, base.sha256)
    t.same(again.bytes, base.bytes)
  }
})

t.test('compiler - byte-identical programs are one record; unreferenced patterns are not compiled', async (t) => {
  const draft = clone(defaultDraft())
  draft.patterns.push({ id: 'blue_again', name: 'the same blue', program: clone(draft.patterns.find((p) => p.id === 'running')!.program) })
  draft.patterns.push({ id: 'unused', name: 'not bound', program: { initial: rgb(9, 9, 9), phases: [], traversals: 0 } })
  draft.bindings.WAITING = 'blue_again'
  const compiled = compileDraft(draft)
  const decoded = decodeProfile(compiled.bytes)
  if (!decoded.ok) return t.fail(decoded.reason)
  t.equal(decoded.profile.bindings.WAITING, decoded.profile.bindings.RUNNING, 'RUNNING and WAITING share one record')
  t.equal(decoded.profile.patterns.length, 8, 'the nine default programs minus the merged one; the unused one is left out')
  t.notOk(decoded.profile.patterns.some((p) => p.initial.red === 9), 'no trace of the unused pattern')
})

t.test('compiler - record ids follow the order of the program bytes', async (t) => {
  const decoded = decodeProfile(compileDraft(defaultDraft()).bytes)
  if (!decoded.ok) return t.fail(decoded.reason)
  const keys = decoded.profile.patterns.map((p) => [p.phases.length, p.traversals, p.initial.red, p.initial.green, p.initial.blue])
  const sorted = [...keys].sort((a, b) => {
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!
    return 0
  })
  t.same(keys, sorted)
})

t.test('compiler - stale rules: never the program of FILAMENT_RUNOUT through WAITING; IDLE or UNKNOWN may share it; modes encode 0-2', async (t) => {
  for (const status of ['FILAMENT_RUNOUT', 'ERROR', 'COMPLETE', 'OFFLINE', 'PAUSED', 'RUNNING', 'WAITING'] as const) {
    const draft = clone(defaultDraft())
    draft.stale.pattern = draft.bindings[status]
    t.equal(refused(draft, new RegExp(`draft.stale.pattern must not have the same program as the pattern bound to ${status}`)), true, status)
  }
  for (const [mode, code] of [['per_pixel', 0], ['all_pixels', 1], ['first_pixel', 2]] as const) {
    const draft = clone(defaultDraft())
    draft.stale = { mode, pattern: 'idle' }
    t.equal(compileDraft(draft).bytes[16], code, mode)
  }
  const missing = clone(defaultDraft())
  missing.stale.pattern = 'nope'
  t.equal(refused(missing, /draft.stale.pattern names pattern 'nope'/), true)
})

t.test('compiler - COMPLETE never shares its program with RUNNING or ERROR', async (t) => {
  for (const other of ['RUNNING', 'ERROR'] as const) {
    const draft = clone(defaultDraft())
    draft.bindings.COMPLETE = draft.bindings[other]
    t.equal(refused(draft, new RegExp(`draft.bindings.COMPLETE must not have the same program as draft.bindings.${other}`)), true, other)
  }
})

t.test('compiler - program rules: closure of repeating programs, constant CCT, no traversals without phases', async (t) => {
  const open = clone(defaultDraft())
  open.patterns[0]!.program.phases[1]!.target = rgb(1, 1, 1)
  t.equal(refused(open, /draft.patterns\[0\].program.phases\[1\].target must equal draft.patterns\[0\].program.initial/), true, 'continuous and open')
  const once = clone(open)
  once.patterns[0]!.program.traversals = 1
  t.ok(compileDraft(once), 'a program that runs once may end anywhere')
  const twice = clone(open)
  twice.patterns[0]!.program.traversals = 2
  t.equal(refused(twice, /repeating program \(traversals 2\)/), true)
  const cct = clone(defaultDraft())
  cct.patterns[0]!.program.phases[0]!.target.cct = 10
  t.equal(refused(cct, /phases\[0\].target.cct must equal draft.patterns\[0\].program.initial.cct/), true)
  const still = clone(defaultDraft())
  still.patterns[3]!.program.traversals = 3
  t.equal(refused(still, /draft.patterns\[3\].program.traversals must be 0 for a program without phases/), true)
})

t.test('compiler - every schema rule is a 400 naming the field', async (t) => {
  const cases: [string, (d: any) => void, RegExp][] = [
    ['unknown top-level field', (d) => (d.extra = 1), /draft must not have property 'extra'|extra/],
    ['unknown channel field', (d) => (d.patterns[0].program.initial.alpha = 1), /alpha/],
    ['channel above 255', (d) => (d.patterns[0].program.initial.red = 256), /draft.patterns\[0\].program.initial.red/],
    ['brightness cap below 0', (d) => (d.brightnessCap = -1), /draft.brightnessCap/],
    ['duration not a multiple of 50', (d) => (d.patterns[0].program.phases[0].durationMs = 75), /durationMs/],
    ['duration 0', (d) => (d.patterns[0].program.phases[0].durationMs = 0), /durationMs/],
    ['duration over 60 s', (d) => (d.patterns[0].program.phases[0].durationMs = 60_050), /durationMs/],
    ['nine phases', (d) => (d.patterns[0].program.phases = Array.from({ length: 9 }, () => d.patterns[0].program.phases[0])), /phases/],
    ['traversals 256', (d) => (d.patterns[0].program.traversals = 256), /traversals/],
    ['unknown transition', (d) => (d.patterns[0].program.phases[0].transition = 'ease'), /transition/],
    ['a status without binding', (d) => delete d.bindings.IDLE, /IDLE/],
    ['an unknown status', (d) => (d.bindings.SLEEPING = 'idle'), /SLEEPING/],
    ['a binding to an undefined pattern', (d) => (d.bindings.IDLE = 'ghost'), /draft.bindings.IDLE names pattern 'ghost'/],
    ['a repeated pattern id', (d) => d.patterns.push(clone(d.patterns[0])), /draft.patterns\[9\].id 'runout' repeats/],
    ['a bad pattern id', (d) => (d.patterns[0].id = 'has space'), /draft.patterns\[0\].id/],
    ['65 library patterns', (d) => (d.patterns = Array.from({ length: 65 }, (_, i) => ({ ...clone(d.patterns[3]), id: `p${i}` }))), /patterns/],
    ['an unknown stale mode', (d) => (d.stale.mode = 'blink'), /stale.mode/],
    ['not an object', () => undefined, /draft/],
  ]
  for (const [name, mutate, message] of cases) {
    const draft: any = clone(defaultDraft())
    mutate(draft)
    t.equal(refused(name === 'not an object' ? 'text' : draft, message), true, name)
  }
})

t.test('compiler - capability requirements come from the compiled bytes', async (t) => {
  const white = clone(defaultDraft())
  white.patterns[6]!.program.initial = rgb(0, 0, 0, 180, 0)
  t.match(compileDraft(white).requirements, { usesWhite: true, usesCct: false })
  const cct = clone(defaultDraft())
  cct.patterns[6]!.program.initial = rgb(0, 0, 0, 180, 90)
  t.match(compileDraft(cct).requirements, { usesWhite: true, usesCct: true })
  const cctWithoutWhite = clone(defaultDraft())
  cctWithoutWhite.patterns[6]!.program.initial = rgb(10, 0, 0, 0, 90)
  t.match(compileDraft(cctWithoutWhite).requirements, { usesWhite: false, usesCct: false }, 'CCT mixes nothing without white')
  t.equal(compileDraft(largest()).requirements.maxPhases, 8)
})

t.test('decoder - tampered bytes are refused with the reason', async (t) => {
  const good = compileDraft(defaultDraft())
  const tamper = (at: number, value: number) => {
    const b = new Uint8Array(good.bytes)
    b[at] = value
    return decodeProfile(b)
  }
  t.match(tamper(0, 2), { ok: false, reason: /format_version/ })
  t.match(tamper(2, 51), { ok: false, reason: /tick_ms/ })
  t.match(tamper(4, 11), { ok: false, reason: /pattern_count/ })
  t.match(tamper(5, 8), { ok: false, reason: /status_count/ })
  t.match(tamper(16, 3), { ok: false, reason: /stale_mode/ })
  t.match(tamper(7, 12), { ok: false, reason: /binding names a pattern id/ })
  t.match(tamper(18, good.byteLength + 1), { ok: false, reason: /total_length/ })
  t.match(tamper(20, 5), { ok: false, reason: /record 0 has id 5/ })
  t.match(tamper(28, 2), { ok: false, reason: /flags/ })
  t.match(decodeProfile(new Uint8Array([...good.bytes, 0])), { ok: false })
  t.match(verifyProfile(good.base64, '0'.repeat(64)), { ok: false, reason: /sha256/ })
  t.match(verifyProfile(good.base64.slice(0, -1), good.sha256), { ok: false, reason: /base64/ })
  t.match(verifyProfile(good.base64, good.sha256.toUpperCase()), { ok: true }, 'hex case does not matter')
})
