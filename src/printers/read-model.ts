/**
 * The printer read model (PrinterState): built from what the printer's actor
 * committed, whether it comes from the actor itself (a live change) or from
 * its persisted copy (a REST read, a snapshot). One builder, so the REST
 * API, the live feed and the status displays never disagree.
 */
import type { PrinterView } from '../../actors/printer-actor.js'
import { readyGateOf, type PersistedPrinterState, type PrinterIdentity } from '../../actors/printer-persistence.js'
import { emptyTemperatures, type AmsSlot, type PrinterJob } from '../../machines/printer.js'
import { displayStatusOf, type DisplayStatus } from '../../protocol/display-status.js'
import type { PrinterType } from '../../protocol/printer-reports/index.js'
import type { PrinterState } from '../../protocol/schemas/printer-state.js'

/** Everything the read model needs besides the state: who the printer is and where it reports from. */
export interface PrinterFacts extends PrinterIdentity {
  id: string
  hostId: string | null
  assignmentEpoch: number
  lastSeqn: number | null
  online: boolean
  /** ms since the Unix epoch. */
  updatedAt: number
}

/** A printer_state row as stored by any version of the service: what an older one did not store starts empty. */
export function normalizeState(raw: Partial<PersistedPrinterState> & { errors?: PersistedPrinterState['error'][] } | null): PersistedPrinterState {
  const state = raw ?? {}
  return {
    filamentJobId: state.filamentJobId ?? null,
    lastSeenAt: state.lastSeenAt ?? null,
    rawStatus: state.rawStatus ?? null,
    phase: state.phase ?? null,
    job: state.job ?? null,
    error: state.error !== undefined ? state.error : (state.errors?.at(-1) ?? null),
    acknowledgedError: state.acknowledgedError ?? null,
    temperatures: state.temperatures ?? emptyTemperatures,
    ams: state.ams ?? [],
    filamentRunout: state.filamentRunout ?? false,
    maintenance: state.maintenance ?? false,
  }
}

const iso = (ms: number): string => new Date(Math.min(Math.max(ms, -8.64e15), 8.64e15)).toISOString()

export function printerStateOf(facts: PrinterFacts, state: PersistedPrinterState, now: number): PrinterState {
  const status = displayStatusOf({ ...state, online: facts.online }, now)
  return {
    id: facts.id,
    name: facts.name,
    printer_type: facts.printerType,
    model: facts.model,
    host_id: facts.hostId,
    assignment_epoch: facts.assignmentEpoch,
    last_seqn: facts.lastSeqn,
    online: facts.online,
    last_seen_at: state.lastSeenAt === null ? null : iso(state.lastSeenAt),
    status,
    raw_status: state.rawStatus,
    maintenance: state.maintenance,
    // The gate, as everywhere (docs/printers-and-events.md, reading printers back); "can take a job now" is the queue's reasons.
    ready: facts.readyGate === 'open',
    ready_gate: facts.readyGate,
    error: state.error === null ? null : { code: state.error.code, message: state.error.message, at: iso(state.error.at) },
    job: state.job === null ? null : jobOf(state.job),
    temperatures: state.temperatures,
    filaments: state.ams.map(filamentOf),
    updated_at: iso(facts.updatedAt),
  }
}

export function printerStateOfView(view: PrinterView, now: number): PrinterState {
  const { printerId, hostId, assignmentEpoch, lastSeqn, online, updatedAt, name, printerType, model, readyGate } = view
  return printerStateOf({ id: printerId, hostId, assignmentEpoch, lastSeqn, online, updatedAt, name, printerType, model, readyGate }, normalizeState(view), now)
}

/** A printers row joined with its printer_state row (null before the printer's first event). */
export interface PrinterRow {
  id: string
  name: string
  printer_type: PrinterType
  model: string | null
  host_id: string | null
  assignment_epoch: number
  state: (Partial<PersistedPrinterState> & { errors?: PersistedPrinterState['error'][] }) | null
  online: boolean | null
  seqn_epoch: number | null
  high_water_seqn: string | number | null
  ready: boolean
  ready_source: string | null
  updated_at: Date
}

export function printerStateOfRow(row: PrinterRow, now: number): PrinterState {
  const highWater = row.high_water_seqn === null ? -1 : Number(row.high_water_seqn)
  return printerStateOf(
    {
      id: row.id,
      name: row.name,
      printerType: row.printer_type,
      model: row.model,
      readyGate: readyGateOf(row.ready, row.ready_source),
      hostId: row.host_id,
      assignmentEpoch: row.assignment_epoch,
      // A new epoch starts a new sequence: the last one's mark is not this epoch's.
      lastSeqn: row.seqn_epoch === row.assignment_epoch && highWater >= 0 ? highWater : null,
      online: row.online ?? false,
      updatedAt: row.updated_at.getTime(),
    },
    normalizeState(row.state),
    now,
  )
}

/** Only the display status of a row (the status filter and the gauges read a narrow projection of the state). */
export function statusOfRow(row: Pick<PrinterRow, 'state' | 'online'>, now: number): DisplayStatus {
  return displayStatusOf({ ...normalizeState(row.state), online: row.online ?? false }, now)
}

function jobOf(job: PrinterJob): NonNullable<PrinterState['job']> {
  const whole = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? null : Math.max(0, Math.round(v)))
  return {
    id: job.jobId,
    name: job.name,
    state: job.state,
    progress: job.progress === null ? null : Math.min(100, Math.max(0, job.progress)),
    remaining_seconds: whole(job.remainingSeconds),
    layer: whole(job.layer),
    total_layers: whole(job.totalLayers),
    started_at: iso(job.startedAt),
    ended_at: job.endedAt === null ? null : iso(job.endedAt),
  }
}

/** `#RRGGBB` from `RRGGBB`, `#RRGGBB`, `RRGGBBAA` (Bambu) or `#RRGGBBAA`; null for anything else. */
export function colorHex(color: string | null): string | null {
  if (color === null) return null
  const match = /^#?([0-9a-f]{6})([0-9a-f]{2})?$/i.exec(color.trim())
  return match === null ? null : `#${match[1]!.toUpperCase()}`
}

function filamentOf(slot: AmsSlot): PrinterState['filaments'][number] {
  return { slot: slot.position, type: slot.materialType, color_hex: colorHex(slot.color), remaining_percent: slot.remaining, material_id: slot.materialId ?? null }
}
