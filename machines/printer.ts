/**
 * One printer as the service knows it: presence, what it is doing, its job,
 * its errors and its filament slots — driven by the bridge's events
 * in seqn order.
 *
 * Presence is truthful: a printer is online only while its bridge
 * keeps reporting. Any event marks it seen and restarts the `presenceTimeout`
 * delay; when the delay passes with nothing heard, the machine itself goes
 * offline. `client:disconnect` goes offline at once. The delay's length is the
 * runtime's configuration, and the clock is the runtime's (a simulated one in
 * tests): no timer or clock lives in this module (STYLE practice 2).
 *
 * Jobs get numeric ids from the store: a job the reducer opens takes a
 * placeholder id, and the runtime sends the store's ids (`jobIds`) before it
 * writes anything, so the machine stays pure. The state and its rules are in
 * machines/printer-state.ts.
 *
 * A batch of bridge events is one machine event (`events`): the pure reducer
 * `applyPrinterEvents` folds them in seqn order inside a single transition, so
 * a 100-event batch costs one transition and one presence-timer restart, not
 * a hundred (bench/ingest measured 17 µs per single-event transition, most
 * of it the timer).
 */
import { assign, setup } from 'xstate'
import { acknowledgeError, applyPrinterEvents, assignFilaments, emptyTemperatures, resolveJobIds, type BridgeEvent, type FilamentAssignment, type PrinterContext, type PrinterError } from './printer-state.js'

export * from './printer-state.js'

export type PrinterMachineEvent =
  | BridgeEvent
  /** Several bridge events, already in seqn order, applied in one transition. */
  | { type: 'events'; events: readonly BridgeEvent[] }
  | { type: 'maintenance'; on: boolean }
  | { type: 'filaments'; slots: readonly FilamentAssignment[]; jobId: number | null }
  /** The operator saw the error (POST /v1/printers/{id}/error/acknowledge): it no longer holds the printer in ERROR. */
  | { type: 'acknowledgeError' }
  /** The store's ids for the jobs the last transition opened (placeholder → id). */
  | { type: 'jobIds'; ids: ReadonlyMap<number, number> }

/** Hydrated state may come from an older version of the service: what it lacks starts empty. */
export type PrinterInput = Partial<Omit<PrinterContext, 'printerId' | 'changedJobs' | 'eventJobs'>> & {
  printerId: string
  /** The state of an older version: its errors since the last job start (the newest one stands). */
  errors?: readonly PrinterError[] | undefined
}

const stateOnly = new Set(['maintenance', 'filaments', 'acknowledgeError', 'jobIds'])

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
    isBridgeEvent: ({ event }) => !stateOnly.has(event.type) && (event.type !== 'events' || event.events.length > 0),
  },
  actions: {
    apply: assign(({ context, event }) => {
      switch (event.type) {
        case 'maintenance':
          return { maintenance: event.on, changedJobs: [], eventJobs: [] }
        case 'filaments':
          return { ams: assignFilaments(context.ams, event.slots), filamentJobId: event.jobId, changedJobs: [], eventJobs: [] }
        case 'acknowledgeError':
          return { ...acknowledgeError(context), changedJobs: [], eventJobs: [] }
        case 'jobIds':
          // Not a new transition of its own: it completes the last one (its changed jobs stay listed).
          return resolveJobIds(context, event.ids)
        case 'events':
          return applyPrinterEvents(context, event.events)
        default:
          return applyPrinterEvents(context, [event])
      }
    }),
  },
}).createMachine({
  id: 'printer',
  type: 'parallel',
  context: ({ input }) => ({
    printerId: input.printerId,
    printerType: input.printerType ?? 'bambu',
    changedJobs: [],
    eventJobs: [],
    filamentJobId: input.filamentJobId ?? null,
    lastSeenAt: input.lastSeenAt ?? null,
    rawStatus: input.rawStatus ?? null,
    phase: input.phase ?? null,
    job: input.job ?? null,
    error: input.error !== undefined ? input.error : (input.errors?.at(-1) ?? null),
    acknowledgedError: input.acknowledgedError ?? null,
    temperatures: input.temperatures ?? emptyTemperatures,
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
