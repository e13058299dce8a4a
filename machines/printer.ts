/**
 * One printer as the service knows it: presence, what it is doing, its job,
 * its errors and its filament slots — driven by the bridge's events
 * (SPEC part 6) in seqn order.
 *
 * Presence is truthful (issue 4): a printer is online only while its bridge
 * keeps reporting. Any event marks it seen and restarts the `presenceTimeout`
 * delay; when the delay passes with nothing heard, the machine itself goes
 * offline. `client:disconnect` goes offline at once. The delay's length is the
 * runtime's configuration, and the clock is the runtime's (a simulated one in
 * tests): no timer or clock lives in this module (STYLE practice 2).
 *
 * Jobs get numeric ids from the store; the runtime reserves one and passes
 * it in `job:start` as `jobId`, so the machine stays pure.
 *
 * A batch of bridge events is one machine event (`events`): the pure reducer
 * `applyPrinterEvent` folds them in seqn order inside a single transition, so
 * a 100-event batch costs one transition and one presence-timer restart, not
 * a hundred (bench/ingest measured 17 µs per single-event transition, most
 * of it the timer).
 */
import { assign, setup } from 'xstate'
import type { PrinterEventType } from '../protocol/printer-events.js'

/** Errors remembered per printer (newest last). */
export const maxRememberedErrors = 20

export interface PrinterJob {
  jobId: number
  name: string | null
  progress: number | null
  state: 'printing' | 'paused' | 'finished' | 'failed'
  startedAt: number
  endedAt: number | null
}

export interface PrinterError {
  code: string
  message: string | null
  at: number
}

export interface AmsSlot {
  position: number
  materialType: string | null
  color: string | null
  remaining: number | null
  /** Set by POST /v1/printers/{id}/filaments/assign (the operator's or queue's choice); kept across AMS updates of the same slot. */
  materialId?: string | null
  vendor?: string | null
}

/** One slot of a filament assignment (SPEC part 4 group H). */
export interface FilamentAssignment {
  position: number
  materialId?: string | null | undefined
  materialType?: string | null | undefined
  color?: string | null | undefined
  vendor?: string | null | undefined
}

export interface PrinterContext {
  printerId: string
  /**
   * Every job the last transition created or changed, in its final state
   * then, for the runtime to persist. Includes a job that was still running
   * when a new job:start arrived, closed as failed at that moment (a printer
   * runs one job at a time): no ghost job stays "printing" forever.
   */
  changedJobs: PrinterJob[]
  /** The job the last filament assignment was made for, if any. */
  filamentJobId: number | null
  /** Timestamp (bridge clock, ms) of the newest event applied. */
  lastSeenAt: number | null
  /** The printer's own status word from its last status update (raw, classifier input). */
  rawStatus: string | null
  job: PrinterJob | null
  errors: PrinterError[]
  ams: AmsSlot[]
  filamentRunout: boolean
  maintenance: boolean
}

/** A bridge event as applied: its type, payload and time, plus a job id the runtime reserved for a job:start. */
export interface BridgeEvent {
  type: PrinterEventType
  data: Record<string, unknown>
  timestamp: number
  jobId?: number | undefined
}

export type PrinterMachineEvent =
  | BridgeEvent
  /** Several bridge events, already in seqn order, applied in one transition. */
  | { type: 'events'; events: readonly BridgeEvent[] }
  | { type: 'maintenance'; on: boolean }
  | { type: 'filaments'; slots: readonly FilamentAssignment[]; jobId: number | null }

export type PrinterInput = Partial<Omit<PrinterContext, 'printerId' | 'changedJobs'>> & { printerId: string }

const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v.slice(0, 500) : null)
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)

function slotsFrom(data: Record<string, unknown>): AmsSlot[] | undefined {
  const slots = data['slots'] ?? data['trays']
  if (!Array.isArray(slots)) return undefined
  const seen = new Set<number>()
  return slots.slice(0, 64).flatMap((raw, index) => {
    if (raw === null || typeof raw !== 'object') return []
    const s = raw as Record<string, unknown>
    const position = num(s['position']) ?? index
    // A slot is a whole number 0-63, once: anything else is not a slot.
    if (!Number.isInteger(position) || position < 0 || position > 63 || seen.has(position)) return []
    seen.add(position)
    return [
      {
        position,
        materialType: str(s['materialType'] ?? s['type']),
        color: str(s['color']),
        remaining: num(s['remaining']),
      },
    ]
  })
}


export const printerMachine = setup({
  types: {
    context: {} as PrinterContext,
    events: {} as PrinterMachineEvent,
    input: {} as PrinterInput,
  },
  delays: {
    /** Provided by the runtime (configured); this value only keeps the machine runnable alone. */
    presenceTimeout: 90_000,
  },
  guards: {
    isDisconnect: ({ event }) => event.type === 'client:disconnect' || (event.type === 'events' && event.events.at(-1)?.type === 'client:disconnect'),
    isBridgeEvent: ({ event }) => event.type !== 'maintenance' && event.type !== 'filaments' && (event.type !== 'events' || event.events.length > 0),
  },
  actions: {
    apply: assign(({ context, event }) => {
      switch (event.type) {
        case 'maintenance':
          return { maintenance: event.on, changedJobs: [] }
        case 'filaments':
          return { ams: assignFilaments(context.ams, event.slots), filamentJobId: event.jobId, changedJobs: [] }
        case 'events': {
          let next: PrinterContext = { ...context, changedJobs: [] }
          for (const e of event.events) next = applyPrinterEvent(next, e)
          return next
        }
        default:
          return applyPrinterEvent({ ...context, changedJobs: [] }, event)
      }
    }),
  },
}).createMachine({
  id: 'printer',
  type: 'parallel',
  context: ({ input }) => ({
    printerId: input.printerId,
    changedJobs: [],
    filamentJobId: input.filamentJobId ?? null,
    lastSeenAt: input.lastSeenAt ?? null,
    rawStatus: input.rawStatus ?? null,
    job: input.job ?? null,
    errors: input.errors ?? [],
    ams: input.ams ?? [],
    filamentRunout: input.filamentRunout ?? false,
    maintenance: input.maintenance ?? false,
  }),
  states: {
    presence: {
      // Hydrated printers start offline: only a fresh event proves the bridge is reporting now.
      initial: 'offline',
      states: {
        offline: {},
        online: {
          after: { presenceTimeout: 'offline' },
        },
      },
      on: {
        '*': [
          { guard: 'isDisconnect', target: '.offline', actions: 'apply' },
          // Any other bridge event: seen now, the presence timer starts again.
          { guard: 'isBridgeEvent', target: '.online', reenter: true, actions: 'apply' },
          { actions: 'apply' },
        ],
      },
    },
    activity: {
      initial: 'idle',
      states: {
        idle: { always: [{ guard: ({ context }) => context.job?.state === 'printing', target: 'printing' }, { guard: ({ context }) => context.job?.state === 'paused', target: 'paused' }] },
        printing: { always: [{ guard: ({ context }) => context.job?.state === 'paused', target: 'paused' }, { guard: ({ context }) => context.job?.state !== 'printing', target: 'idle' }] },
        paused: { always: [{ guard: ({ context }) => context.job?.state === 'printing', target: 'printing' }, { guard: ({ context }) => context.job?.state !== 'paused', target: 'idle' }] },
      },
    },
  },
})


/** Records a job's new state in `changedJobs` (latest wins per job). */
function withJobChange(context: PrinterContext, job: PrinterJob): PrinterJob[] {
  return [...context.changedJobs.filter((j) => j.jobId !== job.jobId), job]
}

/**
 * One bridge event applied to a printer's context (pure). Unknown or
 * malformed payload fields are ignored: a bridge event never invents state.
 */
export function applyPrinterEvent(context: PrinterContext, event: BridgeEvent): PrinterContext {
  const data = event.data
  const next: PrinterContext = { ...context, lastSeenAt: Math.max(context.lastSeenAt ?? 0, event.timestamp) }
  switch (event.type) {
    case 'printer:statusUpdate':
    case 'status': {
      const status = str(data['status'] ?? data['state'])
      if (status !== null) next.rawStatus = status
      break
    }
    case 'printer:error': {
      const code = str(data['code'] ?? data['errorCode']) ?? 'unknown'
      next.errors = [...context.errors, { code, message: str(data['message']), at: event.timestamp }].slice(-maxRememberedErrors)
      break
    }
    case 'printer:amsUpdate': {
      const slots = slotsFrom(data)
      if (slots !== undefined) next.ams = keepAssignments(context.ams, slots)
      break
    }
    case 'printer:filamentStateChanged': {
      const runout = data['runout'] ?? data['filamentRunout']
      if (typeof runout === 'boolean') next.filamentRunout = runout
      break
    }
    case 'job:start': {
      if (event.jobId === undefined) break // the runtime always reserves one; without it nothing is invented
      if (context.job !== null && context.job.endedAt === null && context.job.jobId !== event.jobId) {
        next.changedJobs = withJobChange(next, { ...context.job, state: 'failed', endedAt: event.timestamp })
      }
      next.job = { jobId: event.jobId, name: str(data['name'] ?? data['fileName']), progress: 0, state: 'printing', startedAt: event.timestamp, endedAt: null }
      next.errors = []
      break
    }
    case 'job:update': {
      const progress = num(data['progress'])
      // An ended job's progress is history: a late update does not change it.
      if (context.job && context.job.endedAt === null && progress !== null) next.job = { ...context.job, progress: Math.min(100, Math.max(0, progress)) }
      break
    }
    case 'job:pause':
      if (context.job?.state === 'printing') next.job = { ...context.job, state: 'paused' }
      break
    case 'job:unpause':
    case 'job:offlineRecovery':
      if (context.job?.state === 'paused' || context.job?.state === 'printing') next.job = { ...context.job, state: 'printing' }
      break
    case 'job:finish': {
      if (!context.job || context.job.endedAt !== null) break
      const failed = data['success'] === false || data['result'] === 'failed' || data['status'] === 'failed'
      next.job = { ...context.job, state: failed ? 'failed' : 'finished', progress: failed ? context.job.progress : 100, endedAt: event.timestamp }
      break
    }
    default:
      break
  }
  if (next.job !== null && next.job !== context.job) next.changedJobs = withJobChange(next, next.job)
  return next
}

/** An AMS report replaces the slots but keeps what was assigned to a slot that still holds the same material type. */
function keepAssignments(previous: readonly AmsSlot[], reported: AmsSlot[]): AmsSlot[] {
  const byPosition = new Map(previous.map((s) => [s.position, s]))
  return reported.map((slot) => {
    const before = byPosition.get(slot.position)
    if (before === undefined || (before.materialId == null && before.vendor == null)) return slot
    if (slot.materialType !== null && before.materialType !== null && slot.materialType !== before.materialType) return slot
    return { ...slot, materialId: before.materialId ?? null, vendor: before.vendor ?? null }
  })
}

function assignFilaments(previous: readonly AmsSlot[], assignments: readonly FilamentAssignment[]): AmsSlot[] {
  const slots = new Map(previous.map((s) => [s.position, s]))
  for (const a of assignments) {
    const before = slots.get(a.position) ?? { position: a.position, materialType: null, color: null, remaining: null }
    slots.set(a.position, {
      ...before,
      materialId: a.materialId === undefined ? (before.materialId ?? null) : a.materialId,
      materialType: a.materialType === undefined ? before.materialType : a.materialType,
      color: a.color === undefined ? before.color : a.color,
      vendor: a.vendor === undefined ? (before.vendor ?? null) : a.vendor,
    })
  }
  return [...slots.values()].sort((x, y) => x.position - y.position)
}
