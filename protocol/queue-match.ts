/**
 * The smart queue's matching, pure: what a job needs and what the printers
 * are in; which printer takes which job, with the slot of each filament, or
 * every reason a job waits, per printer, in a fixed vocabulary of codes.
 *
 * Decisions (documented in docs/queue.md):
 * - A printer can take a job when it is eligible (enabled, online, not in
 *   maintenance, ready, nothing running or offered, a host assigned, and a
 *   status of WAITING, IDLE or COMPLETE: a jammed, erroring or unheard
 *   printer gets no new job) and
 *   compatible: the file's printer model (when both are known, compared
 *   case-insensitively, spaces and punctuation ignored), the nozzle diameter
 *   (when both are known), and per required filament a loaded slot of the
 *   same material: the material id when the job names one, else the type
 *   (case-insensitive) and the colour, exact first, else the nearest within
 *   the tolerance (CIEDE2000 ΔE), with enough grams on the slot's spool when
 *   a spool is recorded there (unknown grams never refuse a printer).
 * - Several filaments may print from one slot (as slicers allow); their
 *   grams add up against that slot's spool.
 * - Among the printers that can take a job, the closest colours win (the
 *   lowest sum of ΔE), then the least recently used, then the id: a farm
 *   prefers the exact spool, and spreads wear among equals.
 * - Jobs are placed in queue order (higher priority, then position, then
 *   age); a job never takes a printer that a job ahead of it took in the same
 *   plan. A job whose printer is chosen while the start budget is spent
 *   keeps that printer reserved and waits (`stagger_wait`).
 */
import { deltaE2000, labOfHex } from './colour-difference.js'
import type { DisplayStatus } from './display-status.js'

export const reasonCodes = [
  'printer_disabled',
  'printer_offline',
  'printer_error',
  'printer_state_unknown',
  'printer_busy',
  'printer_not_ready',
  'printer_maintenance',
  'printer_model_mismatch',
  'nozzle_mismatch',
  'material_missing',
  'material_insufficient',
  'host_unassigned',
  'stagger_wait',
  'manual_assignment',
  'start_unconfirmed',
] as const
export type ReasonCode = (typeof reasonCodes)[number]

export interface Reason {
  /** The printer the reason is about; null for a reason of the job itself (manual_assignment). */
  printer_id: string | null
  code: ReasonCode
  /** A sentence saying what to change. */
  detail: string
}

export interface RequiredFilament {
  /** 0-based index into the file's project filaments. */
  filament_index: number
  type: string | null
  color_hex: string | null
  used_g: number | null
  material_id: string | null
}

export interface QueueJob {
  id: number
  priority: number
  /** 1-based within its priority; null = after the positioned ones, by age. */
  position: number | null
  /** ms since the epoch. */
  createdAt: number
  /** false: the job waits for a hand assignment. */
  autoAssign: boolean
  /** false: printed without the filament system; no material is matched and the mapping is empty. */
  enableAms: boolean
  printerModel: string | null
  nozzleDiameter: number | null
  /** The file's number of project filaments (the length of the mapping). */
  projectFilaments: number
  required: readonly RequiredFilament[]
}

export interface QueueSlot {
  /** The printer's slot number (an AMS: unit × 4 + tray). */
  position: number
  type: string | null
  /** #RRGGBB or RRGGBBAA as printers report it; null when unknown. */
  color: string | null
  /** The material an operator or a spool says is loaded. */
  materialId: string | null
  /** Grams left on the spool recorded in this slot; null when no spool is recorded. */
  remainingG: number | null
}

export interface QueuePrinter {
  id: string
  enabled: boolean
  online: boolean
  maintenance: boolean
  ready: boolean
  /** 'operator_override' when an operator holds the printer out of the queue. */
  readySource: string | null
  hostId: string | null
  /** The state of its live task (offered, claimed, unconfirmed, started), if any. */
  liveTaskState: string | null
  /** The job printing or paused on it (from its own reports), if any. */
  runningJob: { jobId: number; state: string } | null
  model: string | null
  nozzleDiameter: number | null
  /** When it was last given a job (ms); null = never. */
  lastUsedAt: number | null
  slots: readonly QueueSlot[]
  /** Its display status from its own reports (protocol/display-status.ts). */
  status: DisplayStatus
}

export interface MatchOptions {
  /** Largest CIEDE2000 ΔE accepted between the colour asked for and the one loaded. */
  colorTolerance: number
}

export type Compatibility = { ok: true; amsMapping: number[]; score: number } | { ok: false; reasons: Reason[] }

/** Why a printer cannot take any job now, whatever the job needs. */
export function eligibilityReasons(p: QueuePrinter): Reason[] {
  const reasons: Reason[] = []
  const add = (code: ReasonCode, detail: string) => reasons.push({ printer_id: p.id, code, detail })
  if (!p.enabled) add('printer_disabled', 'the printer is disabled (PATCH /v1/printer-config/{id} {enabled: true})')
  if (p.hostId === null) add('host_unassigned', 'no bridge host is assigned to the printer')
  if (!p.online) add('printer_offline', 'the printer is offline (its bridge is not reporting)')
  else if (p.status === 'OFFLINE') add('printer_offline', 'the printer says it is offline (its bridge reports, but the printer is disconnected from it)')
  if (p.status === 'ERROR') add('printer_error', 'the printer reports an error: clear it at the printer (or acknowledge it, POST /v1/printers/{id}/error/acknowledge) before it takes a job')
  else if (p.status === 'FILAMENT_RUNOUT') add('printer_error', 'the printer ran out of filament: load filament and clear the runout at the printer')
  else if (p.status === 'UNKNOWN') add('printer_state_unknown', 'nothing has been heard from the printer yet: its state is unknown')
  if (p.maintenance) add('printer_maintenance', 'the printer is in maintenance')
  if (!p.ready) {
    add('printer_not_ready', p.readySource === 'operator_override' ? 'an operator holds the printer out of the queue' : "the printer's last job has not been verified (PATCH /v1/printers/{id}/ready)")
  }
  if (p.liveTaskState === 'unconfirmed') add('start_unconfirmed', "the printer's claimed task never confirmed its start: say it started or requeue its job")
  else if (p.liveTaskState !== null) add('printer_busy', `the printer's task is ${p.liveTaskState} (one job at a time)`)
  else if (p.runningJob !== null) add('printer_busy', `the printer is ${p.runningJob.state} job ${p.runningJob.jobId}`)
  else if (p.status === 'RUNNING' || p.status === 'PAUSED') add('printer_busy', `the printer reports it is ${p.status === 'RUNNING' ? 'printing' : 'paused'}`)
  return reasons
}

/** A slot as the matcher compares it: type lower case, colour as an interned id (-1: none or unreadable). */
interface SlotKey {
  slot: QueueSlot
  type: string | null
  colour: number
}

/** A required filament as the matcher compares it (colour -2: any colour; -1: unreadable). */
interface NeedKey {
  need: RequiredFilament
  type: string | null
  colour: number
  grams: number
}

/**
 * A matcher keeps what repeats across the pairs of one plan (slots and requirements in
 * comparable form, colours read, colour differences); make one per plan or per request.
 * Reasons are only written when asked for (`compatibility`); a plan asks `fit`.
 */
export class Matcher {
  readonly #tolerance: number
  readonly #colourIds = new Map<string, number>()
  readonly #labs: ({ L: number; a: number; b: number } | null)[] = []
  readonly #deltas = new Map<number, number>()
  readonly #slots = new WeakMap<QueuePrinter, SlotKey[]>()
  readonly #needs = new WeakMap<QueueJob, NeedKey[]>()
  readonly #models = new Map<string, string>()
  readonly #scratch: number[] = []
  #best: SlotKey | undefined
  #bestDelta = Infinity
  #short: SlotKey | undefined

  constructor(options: MatchOptions) {
    this.#tolerance = options.colorTolerance
  }

  get tolerance(): number {
    return this.#tolerance
  }

  /** The mapping and score when the printer's model, nozzle and loaded materials suit the job; undefined otherwise. Writes no reasons. */
  fit(job: QueueJob, printer: QueuePrinter): { amsMapping: number[]; score: number } | undefined {
    if (!this.#sameModel(job, printer) || !sameNozzle(job, printer)) return undefined
    if (!job.enableAms) return { amsMapping: [], score: 0 }
    const slots = this.#slotKeys(printer)
    const needs = this.#needKeys(job)
    // Chosen slots go to a scratch array first: most pairs of a plan do not fit, and allocate nothing.
    const chosen = this.#scratch
    let planned: Map<number, number> | undefined
    let score = 0
    for (let i = 0; i < needs.length; i++) {
      const need = needs[i]!
      this.#bestSlot(need, slots, planned)
      const best = this.#best
      if (best === undefined) return undefined
      chosen[i] = best.slot.position
      score += this.#bestDelta
      if (need.grams > 0 && best.slot.remainingG !== null) (planned ??= new Map()).set(best.slot.position, (planned.get(best.slot.position) ?? 0) + need.grams)
    }
    const mapping = new Array<number>(mappingLength(job)).fill(-1)
    for (let i = 0; i < needs.length; i++) mapping[needs[i]!.need.filament_index] = chosen[i]!
    return { amsMapping: mapping, score }
  }

  /** Whether the printer's model, nozzle and loaded materials suit the job (not whether it is free), with every reason it does not. */
  compatibility(job: QueueJob, printer: QueuePrinter): Compatibility {
    let reasons: Reason[] | undefined
    const refuse = (code: ReasonCode, detail: string) => (reasons ??= []).push({ printer_id: printer.id, code, detail })
    if (!this.#sameModel(job, printer)) refuse('printer_model_mismatch', `the file is sliced for ${job.printerModel}; the printer is a ${printer.model}`)
    if (!sameNozzle(job, printer)) refuse('nozzle_mismatch', `the file is sliced for a ${job.nozzleDiameter} mm nozzle; the printer has ${printer.nozzleDiameter} mm`)
    if (!job.enableAms) return reasons === undefined ? { ok: true, amsMapping: [], score: 0 } : { ok: false, reasons }
    const slots = this.#slotKeys(printer)
    const mapping = new Array<number>(mappingLength(job)).fill(-1)
    let planned: Map<number, number> | undefined
    let score = 0
    for (const need of this.#needKeys(job)) {
      this.#bestSlot(need, slots, planned)
      const best = this.#best
      const delta = this.#bestDelta
      const short = this.#short
      if (best === undefined) {
        const n = need.need
        if (short !== undefined) {
          refuse('material_insufficient', `slot ${short.slot.position} has ${round(short.slot.remainingG!)} g of ${describe(n)} left; filament ${n.filament_index + 1} needs ${round(need.grams)} g`)
        } else {
          refuse('material_missing', `no slot holds ${describe(n)} (filament ${n.filament_index + 1})${n.color_hex !== null ? ` within ΔE ${this.#tolerance}` : ''}`)
        }
        continue
      }
      mapping[need.need.filament_index] = best.slot.position
      score += delta
      if (need.grams > 0 && best.slot.remainingG !== null) (planned ??= new Map()).set(best.slot.position, (planned.get(best.slot.position) ?? 0) + need.grams)
    }
    return reasons === undefined ? { ok: true, amsMapping: mapping, score } : { ok: false, reasons }
  }

  /** Every reason the printer cannot take the job now; empty when it can. */
  explain(job: QueueJob, printer: QueuePrinter): Reason[] {
    const reasons = eligibilityReasons(printer)
    const fit = this.compatibility(job, printer)
    return fit.ok ? reasons : reasons.concat(fit.reasons)
  }

  /**
   * The closest slot holding the material with enough grams (exact colour first) into #best and
   * #bestDelta, and the first that holds it but is short into #short (fields, not a returned
   * object: this runs for every slot of every pair a plan looks at).
   */
  #bestSlot(need: NeedKey, slots: readonly SlotKey[], planned: Map<number, number> | undefined): void {
    let best: SlotKey | undefined
    let bestDelta = Infinity
    let short: SlotKey | undefined
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!
      const delta = this.#slotDelta(need, slot)
      if (delta < 0) continue
      const remaining = slot.slot.remainingG
      if (remaining !== null && need.grams > 0 && remaining < need.grams + (planned?.get(slot.slot.position) ?? 0)) {
        short ??= slot
        continue
      }
      if (delta < bestDelta) {
        best = slot
        bestDelta = delta
        if (delta === 0) break
      }
    }
    this.#best = best
    this.#bestDelta = bestDelta
    this.#short = short
  }

  /** The colour difference of a slot that holds the needed material (0: exact), or -1 when it does not. */
  #slotDelta(need: NeedKey, slot: SlotKey): number {
    const n = need.need
    if (n.material_id !== null && slot.slot.materialId !== null && n.material_id === slot.slot.materialId) return 0
    if (slot.type === null) return -1
    if (need.type !== null && need.type !== slot.type) return -1
    if (need.colour === -2) return 0
    if (need.colour === -1 || slot.colour === -1) return -1
    if (need.colour === slot.colour) return 0
    const key = need.colour < slot.colour ? need.colour * 1_048_576 + slot.colour : slot.colour * 1_048_576 + need.colour
    let delta = this.#deltas.get(key)
    if (delta === undefined) {
      const a = this.#labs[need.colour]!
      const b = this.#labs[slot.colour]!
      delta = a === null || b === null ? Infinity : deltaE2000(a, b)
      this.#deltas.set(key, delta)
    }
    return delta <= this.#tolerance ? delta : -1
  }

  #slotKeys(printer: QueuePrinter): SlotKey[] {
    let keys = this.#slots.get(printer)
    if (keys === undefined) {
      keys = printer.slots.map((slot) => ({ slot, type: slot.type === null ? null : typeKey(slot.type), colour: slot.color === null ? -1 : this.#colour(slot.color) }))
      this.#slots.set(printer, keys)
    }
    return keys
  }

  #needKeys(job: QueueJob): NeedKey[] {
    let keys = this.#needs.get(job)
    if (keys === undefined) {
      keys = job.required.map((need) => ({
        need,
        type: need.type === null ? null : typeKey(need.type),
        colour: need.color_hex === null ? -2 : this.#colour(need.color_hex),
        grams: need.used_g !== null && need.used_g > 0 ? need.used_g : 0,
      }))
      this.#needs.set(job, keys)
    }
    return keys
  }

  /** An id per distinct colour (RRGGBB), -1 for one that cannot be read. */
  #colour(raw: string): number {
    let id = this.#colourIds.get(raw)
    if (id !== undefined) return id
    const rgb = rgbKey(raw)
    if (rgb === undefined) id = -1
    else {
      id = this.#colourIds.get(rgb)
      if (id === undefined) {
        id = this.#labs.length
        this.#labs.push(labOfHex(rgb) ?? null)
        this.#colourIds.set(rgb, id)
      }
    }
    this.#colourIds.set(raw, id)
    return id
  }

  #sameModel(job: QueueJob, printer: QueuePrinter): boolean {
    if (job.printerModel === null || printer.model === null) return true
    const asked = this.#modelKey(job.printerModel)
    const is = this.#modelKey(printer.model)
    // A blank model on either side says nothing; a vendor's prefix may be left out ("P1S" = "Bambu Lab P1S").
    return asked === '' || is === '' || asked === is || (asked.length < is.length ? is.endsWith(asked) : asked.endsWith(is))
  }

  #modelKey(model: string): string {
    let key = this.#models.get(model)
    if (key === undefined) {
      key = modelKey(model)
      this.#models.set(model, key)
    }
    return key
  }
}

function sameNozzle(job: QueueJob, printer: QueuePrinter): boolean {
  return job.nozzleDiameter === null || printer.nozzleDiameter === null || Math.abs(job.nozzleDiameter - printer.nozzleDiameter) <= 0.001
}

/** Queue order: higher priority first, then position (positioned before unpositioned), then age, then id. */
export function queueOrder(a: QueueJob, b: QueueJob): number {
  if (a.priority !== b.priority) return b.priority - a.priority
  if (a.position !== b.position) {
    if (a.position === null) return 1
    if (b.position === null) return -1
    return a.position - b.position
  }
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt
  return a.id - b.id
}

export interface PlanOptions extends MatchOptions {
  /** How many starts the stagger allows now (Infinity: no limit). */
  startsAvailable: number
  /** The jobs whose reasons are wanted per printer (a page of GET /v1/queue); others get none, only their placement. */
  explain?: (jobId: number) => boolean
  /** Stop after this many jobs in queue order (a page needs only the jobs up to its end). */
  upTo?: number
}

export interface JobMatch {
  job_id: number
  /** The printer chosen (also while it waits for the stagger), else null. */
  printer_id: string | null
  ams_mapping: number[]
  /** The sum of the colour differences of the chosen slots (0: every colour exact); null when none is chosen. */
  score: number | null
  /** Why the job is not dispatched, per printer; only for explained jobs. */
  reasons: Reason[]
}

export interface Plan {
  /** The jobs to dispatch now, in queue order. */
  assignments: { jobId: number; printerId: string; amsMapping: number[] }[]
  /** Every planned job in queue order (up to `upTo`). */
  matches: JobMatch[]
  /** Starts held back by the stagger. */
  staggered: number
}

/**
 * Places the jobs (in any order: sorted here) on the printers, greedily in queue order: each
 * job takes the best free compatible printer. See Planner.
 */
export function planQueue(jobs: readonly QueueJob[], printers: readonly QueuePrinter[], options: PlanOptions): Plan {
  const ordered = [...jobs].sort(queueOrder)
  const planner = new Planner(printers, options)
  const matches = planner.place(ordered.slice(0, Math.min(ordered.length, options.upTo ?? Infinity)), options.explain)
  return { assignments: planner.assignments, matches, staggered: planner.staggered }
}

/**
 * A plan built job by job, in queue order, so a pass can read the queue a page at a time and
 * stop once nothing more can be placed. A job whose requirements found no free printer marks
 * them hopeless for the rest of the plan (the free printers only get fewer), which keeps a plan
 * of 10,000 jobs on 1,000 printers to one scan of the free printers per distinct requirement.
 */
export class Planner {
  readonly assignments: Plan['assignments'] = []
  staggered = 0
  readonly #matcher: Matcher
  readonly #printers: readonly QueuePrinter[]
  /** Free printers, least recently used first (never used before any used one), then by id. */
  readonly #free: QueuePrinter[]
  /** The free printers not yet taken, as a linked list over #free (taking one is O(1), order kept). */
  readonly #next: Int32Array
  readonly #previous: Int32Array
  #head = 0
  #left: number
  readonly #taken = new Map<string, number>()
  readonly #hopeless = new Set<string>()
  #startsAvailable: number

  constructor(printers: readonly QueuePrinter[], options: MatchOptions & { startsAvailable: number }) {
    this.#matcher = new Matcher(options)
    this.#printers = printers
    this.#free = printers
      .filter((p) => eligibilityReasons(p).length === 0)
      .sort((a, b) => (a.lastUsedAt ?? -Infinity) - (b.lastUsedAt ?? -Infinity) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    this.#left = this.#free.length
    this.#next = new Int32Array(this.#free.length + 1)
    this.#previous = new Int32Array(this.#free.length + 1)
    for (let i = 0; i <= this.#free.length; i++) {
      this.#next[i] = i + 1
      this.#previous[i] = i - 1
    }
    this.#startsAvailable = options.startsAvailable
  }

  /** Free printers no job has taken yet. */
  get freeLeft(): number {
    return this.#left
  }

  /** Whether a later job could still be dispatched (a printer free and a start allowed). */
  get canDispatch(): boolean {
    return this.#left > 0 && this.#startsAvailable > 0
  }

  /** Places the next jobs of the queue, in the order given (queue order, after the jobs placed before). */
  place(jobs: readonly QueueJob[], explain?: (jobId: number) => boolean): JobMatch[] {
    const matches: JobMatch[] = []
    for (const job of jobs) {
      const explained = explain?.(job.id) ?? false
      const match: JobMatch = { job_id: job.id, printer_id: null, ams_mapping: [], score: null, reasons: [] }
      matches.push(match)
      if (!job.autoAssign) {
        if (explained) match.reasons.push({ printer_id: null, code: 'manual_assignment', detail: 'the job waits for a hand assignment (POST /v1/print-jobs/{id}/assign)' })
        continue
      }
      const chosen = this.#choose(job)
      if (chosen !== undefined) {
        const printer = this.#free[chosen.index]!
        this.#take(chosen.index)
        this.#taken.set(printer.id, job.id)
        match.printer_id = printer.id
        match.ams_mapping = chosen.mapping
        match.score = chosen.score
        if (this.#startsAvailable > 0) {
          this.#startsAvailable--
          this.assignments.push({ jobId: job.id, printerId: printer.id, amsMapping: chosen.mapping })
        } else {
          this.staggered++
          if (explained) match.reasons.push({ printer_id: printer.id, code: 'stagger_wait', detail: 'the printer is chosen; the job starts when the start stagger allows another start' })
        }
        continue
      }
      if (explained) match.reasons = explainWaiting(this.#matcher, job, this.#printers, this.#taken)
    }
    return matches
  }

  /** The best free printer for the job: the closest colours, then the least recently used. */
  #choose(job: QueueJob): { index: number; mapping: number[]; score: number } | undefined {
    if (this.#left === 0) return undefined
    const key = requirementKey(job)
    if (this.#hopeless.has(key)) return undefined
    let chosen: { index: number; mapping: number[]; score: number } | undefined
    for (let at = this.#head; at < this.#free.length; at = this.#next[at]!) {
      const fit = this.#matcher.fit(job, this.#free[at]!)
      if (fit === undefined || (chosen !== undefined && fit.score >= chosen.score)) continue
      chosen = { index: at, mapping: fit.amsMapping, score: fit.score }
      if (fit.score === 0) break
    }
    if (chosen === undefined) this.#hopeless.add(key)
    return chosen
  }

  #take(i: number): void {
    const previous = this.#previous[i]!
    const next = this.#next[i]!
    if (previous >= 0) this.#next[previous] = next
    else this.#head = next
    this.#previous[next] = previous
    this.#left--
  }
}

/** Every reason a job that found no printer waits, per printer. */
function explainWaiting(matcher: Matcher, job: QueueJob, printers: readonly QueuePrinter[], taken: ReadonlyMap<string, number>): Reason[] {
  const reasons: Reason[] = []
  for (const printer of printers) {
    const own = matcher.explain(job, printer)
    const ahead = taken.get(printer.id)
    if (ahead !== undefined && own.length === 0) reasons.push({ printer_id: printer.id, code: 'printer_busy', detail: `the printer is kept for job ${ahead}, ahead in the queue` })
    else for (const r of own) reasons.push(r)
  }
  return reasons
}

/** The number of printers per reason code (a printer with several reasons counts once for each). */
export function reasonCounts(reasons: readonly Reason[]): Partial<Record<ReasonCode, number>> {
  const counts: Partial<Record<ReasonCode, number>> = {}
  const seen = new Set<string>()
  for (const r of reasons) {
    const key = `${r.code} ${r.printer_id ?? ''}`
    if (seen.has(key)) continue
    seen.add(key)
    counts[r.code] = (counts[r.code] ?? 0) + 1
  }
  return counts
}

const phrases: Record<ReasonCode, string> = {
  printer_disabled: 'disabled',
  printer_offline: 'offline',
  printer_error: 'in error or out of filament',
  printer_state_unknown: 'of unknown state',
  printer_busy: 'busy',
  printer_not_ready: 'not ready (plate not verified or held)',
  printer_maintenance: 'in maintenance',
  printer_model_mismatch: 'of another model',
  nozzle_mismatch: 'with another nozzle',
  material_missing: 'without its material',
  material_insufficient: 'short of filament',
  host_unassigned: 'without a bridge host',
  stagger_wait: '',
  manual_assignment: '',
  start_unconfirmed: 'with an unconfirmed start',
}

/** One sentence for a person: why the job waits (or where it goes). */
export function summaryOf(match: JobMatch, printerCount: number, status: 'queued' | 'dispatching' = 'queued'): string {
  if (status === 'dispatching') return match.reasons.some((r) => r.code === 'start_unconfirmed') ? 'claimed, but its start was never confirmed: say it started or requeue it' : 'offered to its printer'
  if (match.reasons.some((r) => r.code === 'manual_assignment')) return 'waits for a hand assignment'
  if (match.printer_id !== null) return match.reasons.some((r) => r.code === 'stagger_wait') ? 'printer chosen; waiting for the start stagger' : 'being dispatched'
  if (printerCount === 0) return 'no printers yet'
  const counts = Object.entries(reasonCounts(match.reasons)) as [ReasonCode, number][]
  if (counts.length === 0) return 'waiting for the next queue pass'
  // More printers first; equal counts in the codes' own order (printer state, then fit, then materials).
  counts.sort((a, b) => b[1] - a[1] || reasonCodes.indexOf(a[0]) - reasonCodes.indexOf(b[0]))
  return `no printer can take it: ${counts.map(([code, n]) => `${n} ${phrases[code]}`).join(', ')}`
}

/** The same requirements give the same answers on the same printers. */
function requirementKey(job: QueueJob): string {
  const required = job.enableAms ? job.required.map((r) => [r.filament_index, r.material_id, r.type === null ? null : typeKey(r.type), r.color_hex === null ? null : (rgbKey(r.color_hex) ?? '?'), r.used_g]) : []
  return JSON.stringify([job.printerModel === null ? '' : modelKey(job.printerModel), job.nozzleDiameter, job.enableAms, mappingLength(job), required])
}

function mappingLength(job: QueueJob): number {
  let length = job.projectFilaments
  for (const r of job.required) if (r.filament_index + 1 > length) length = r.filament_index + 1
  return length
}

/** "Bambu Lab X1 Carbon" = "bambu lab x1-carbon": case, spaces and punctuation do not count. */
function modelKey(model: string): string {
  return model.toLowerCase().replace(/[^a-z0-9]/g, '')
}

/** Types compare case-insensitively, surrounding spaces ignored ("pla" = "PLA "). */
function typeKey(type: string): string {
  return type.trim().toLowerCase()
}

/** RRGGBB upper case, from #RRGGBB, RRGGBB, #RRGGBBAA or RRGGBBAA; undefined otherwise. */
function rgbKey(raw: string): string | undefined {
  const color = raw.trim()
  const hex = color.charCodeAt(0) === 35 ? color.slice(1) : color
  if (hex.length !== 6 && hex.length !== 8) return undefined
  if (!/^[0-9a-fA-F]+$/.test(hex)) return undefined
  return hex.slice(0, 6).toUpperCase()
}

function describe(need: RequiredFilament): string {
  const parts = [need.type ?? 'any material', need.color_hex ?? ''].filter((p) => p !== '')
  return need.material_id !== null ? `${parts.join(' ')} (material ${need.material_id})` : parts.join(' ')
}

const round = (g: number): number => Math.round(g * 10) / 10
