/**
 * The queue of one organization: when its passes run. A pass (the runtime's
 * effect `pass`: read the waiting jobs and the printers, plan, dispatch) runs
 * a moment after a wake, so a burst of wakes (a hundred jobs created, a
 * fleet coming online) makes one pass; a wake during a pass makes exactly
 * one more after it; nothing waiting ends the actor (the next wake starts a
 * new one). Without wakes a pass still runs every `sweep` (a wake lost with
 * a node, a deadline nobody announced) and when the start stagger frees a
 * start. A failed pass is retried with a growing delay.
 */
import { assign, fromPromise, setup } from 'xstate'

export interface PassOutcome {
  /** Nothing waits: the actor may end. */
  empty: boolean
  /** When the queue must look again by itself (the stagger frees a start), ms from now; null: only at the sweep. */
  wakeInMs: number | null
}

export interface QueueContext {
  /** Woken while a pass ran: run one more. */
  dirty: boolean
  wakeInMs: number | null
  failures: number
}

export const queueMachine = setup({
  types: {
    context: {} as QueueContext,
    events: {} as { type: 'WAKE' },
  },
  delays: {
    /** Provided by the runtime; these values keep the machine runnable alone. */
    settle: 25,
    sweep: 30_000,
    staggerWake: ({ context }) => Math.max(0, context.wakeInMs ?? 30_000),
    retry: ({ context }) => Math.min(1_000 * 2 ** Math.max(0, context.failures - 1), 30_000),
  },
  actors: {
    /** Provided by the runtime: one pass of this organization's queue. */
    pass: fromPromise<PassOutcome>(async () => ({ empty: true, wakeInMs: null })),
  },
  guards: {
    dirty: ({ context }) => context.dirty,
    empty: ({ event }) => (event as unknown as { output: PassOutcome }).output.empty,
    staggered: ({ context }) => context.wakeInMs !== null,
  },
}).createMachine({
  id: 'queue',
  initial: 'settling',
  context: { dirty: false, wakeInMs: null, failures: 0 },
  states: {
    idle: {
      on: { WAKE: 'settling' },
      after: { sweep: 'running', staggerWake: { guard: 'staggered', target: 'running' } },
    },
    // A wake arriving here joins the pass about to run.
    settling: { after: { settle: 'running' } },
    running: {
      entry: assign({ dirty: false }),
      on: { WAKE: { actions: assign({ dirty: true }) } },
      invoke: {
        src: 'pass',
        onDone: [
          { guard: 'dirty', target: 'settling', actions: assign({ failures: 0, wakeInMs: ({ event }) => event.output.wakeInMs }) },
          { guard: 'empty', target: 'done' },
          { target: 'idle', actions: assign({ failures: 0, wakeInMs: ({ event }) => event.output.wakeInMs }) },
        ],
        onError: { target: 'failed', actions: assign({ failures: ({ context }) => context.failures + 1 }) },
      },
    },
    failed: { after: { retry: 'running' } },
    done: { type: 'final' },
  },
})
