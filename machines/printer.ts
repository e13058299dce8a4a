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
}

export interface PrinterContext {
  printerId: string
  /**
   * A job that was still running when a new job:start arrived, closed as
   * failed at that moment (a printer runs one job at a time); the runtime
   * persists it and clears this. No ghost job stays "printing" forever.
   */
  supersededJob: PrinterJob | null
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

/** An event as applied to the machine: the bridge's type, payload and time, plus a job id the runtime reserved. */
export type PrinterMachineEvent =
  | { type: PrinterEventType; data: Record<string, unknown>; timestamp: number; jobId?: number }
  | { type: 'maintenance'; on: boolean }

export type PrinterInput = Partial<Omit<PrinterContext, 'printerId'>> & { printerId: string }

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
    isDisconnect: ({ event }) => event.type === 'client:disconnect',
  },
  actions: {
    apply: assign(({ context, event }) => {
      if (event.type === 'maintenance') return { maintenance: event.on }
      const data = event.data
      const next: Partial<PrinterContext> = { lastSeenAt: Math.max(context.lastSeenAt ?? 0, event.timestamp) }
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
          if (slots !== undefined) next.ams = slots
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
            next.supersededJob = { ...context.job, state: 'failed', endedAt: event.timestamp }
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
      return next
    }),
  },
}).createMachine({
  id: 'printer',
  type: 'parallel',
  context: ({ input }) => ({
    printerId: input.printerId,
    supersededJob: input.supersededJob ?? null,
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
          { guard: ({ event }) => event.type !== 'maintenance', target: '.online', reenter: true, actions: 'apply' },
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

