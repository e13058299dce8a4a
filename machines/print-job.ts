/**
 * A print job's lifecycle (docs/print-jobs.md):
 *
 *   queued → dispatching → printing ⇄ paused → awaiting_verification → succeeded | failed
 *
 * and `cancelled` from any state before awaiting_verification. The job's
 * status lives in PostgreSQL; every writer asks this machine what an event
 * does to the stored status (`nextJobStatus`) inside the transaction that
 * holds the row, so the rules live here once. The group commit of bridge
 * events, which cannot run a function per row, takes the same rules as data
 * (`jobStatusRule`: the statuses an event applies in, and the one it leads
 * to), derived from this machine.
 *
 * Pure (STYLE practice 2): no I/O, no clock.
 *
 * Decisions where the design is silent:
 * - A job ends on the printer (`FINISH`) in awaiting_verification whatever the
 *   bridge's result says, success or failure: only the operator who looked at
 *   the plate gives the verdict (`VERIFY`); the bridge's result is kept as a
 *   hint. A finish the bridge reports as cancelled ends the job cancelled.
 * - `CANCEL` of a printing or paused job cancels it at once; the bridge is
 *   told through a command on the task, and its job:finish then changes
 *   nothing here.
 * - Jobs first seen in bridge events start in `printing` (or wherever the
 *   printer's report put them): they were never queued.
 */
import { setup, type SnapshotFrom } from 'xstate'
import { pureTransition } from './transition.js'

import { jobStatuses, type JobStatus } from '../protocol/schemas/print-jobs.js'

export { jobStatuses, type JobStatus }

/** A verdict of the ready gate (PATCH /v1/printers/{id}/ready event_type without its prefix). */
export type Verdict = 'success' | 'failed' | 'cancelled' | 'skipped'

export type PrintJobEvent =
  /** A task was offered to a printer's host. */
  | { type: 'DISPATCH' }
  /** The offer ended unclaimed (expired, or fenced by a host move): nothing can have started. */
  | { type: 'OFFER_WITHDRAWN' }
  /** The bridge's job:start linked to the task, or an operator said it started. */
  | { type: 'START' }
  | { type: 'PAUSE' }
  | { type: 'RESUME' }
  /** The printer ended the job (job:finish, or its report). */
  | { type: 'FINISH'; result: 'success' | 'failed' | 'cancelled' }
  | { type: 'VERIFY'; verdict: Verdict }
  | { type: 'CANCEL' }
  /** Back to the queue; from dispatching only when the claimed task never confirmed its start. */
  | { type: 'REQUEUE'; taskUnconfirmed?: boolean }

export type PrintJobEventType = PrintJobEvent['type']

export const printJobMachine = setup({
  types: {
    events: {} as PrintJobEvent,
  },
  guards: {
    cancelledByPrinter: ({ event }) => event.type === 'FINISH' && event.result === 'cancelled',
    verdictIs: ({ event }, verdicts: readonly Verdict[]) => event.type === 'VERIFY' && verdicts.includes(event.verdict),
    taskUnconfirmed: ({ event }) => event.type === 'REQUEUE' && event.taskUnconfirmed === true,
  },
}).createMachine({
  id: 'printJob',
  initial: 'queued',
  states: {
    queued: {
      on: { DISPATCH: 'dispatching', CANCEL: 'cancelled' },
    },
    dispatching: {
      on: {
        START: 'printing',
        OFFER_WITHDRAWN: 'queued',
        CANCEL: 'cancelled',
        REQUEUE: { guard: 'taskUnconfirmed', target: 'queued' },
      },
    },
    printing: {
      on: {
        PAUSE: 'paused',
        FINISH: [{ guard: 'cancelledByPrinter', target: 'cancelled' }, { target: 'awaiting_verification' }],
        CANCEL: 'cancelled',
      },
    },
    paused: {
      on: {
        RESUME: 'printing',
        FINISH: [{ guard: 'cancelledByPrinter', target: 'cancelled' }, { target: 'awaiting_verification' }],
        CANCEL: 'cancelled',
      },
    },
    awaiting_verification: {
      on: {
        VERIFY: [
          { guard: { type: 'verdictIs', params: ['success', 'skipped'] }, target: 'succeeded' },
          { guard: { type: 'verdictIs', params: ['failed'] }, target: 'failed' },
          { guard: { type: 'verdictIs', params: ['cancelled'] }, target: 'cancelled' },
        ],
      },
    },
    succeeded: {},
    failed: { on: { REQUEUE: 'queued' } },
    cancelled: { on: { REQUEUE: 'queued' } },
  },
})

type PrintJobSnapshot = SnapshotFrom<typeof printJobMachine>

function snapshotAt(status: JobStatus): PrintJobSnapshot {
  return printJobMachine.resolveState({ value: status, context: undefined as never })
}

/** The status an event leads to from `status`, or undefined when the machine refuses it there. */
export function nextJobStatus(status: JobStatus, event: PrintJobEvent): JobStatus | undefined {
  const snapshot = snapshotAt(status)
  if (!snapshot.can(event)) return undefined
  const [next] = pureTransition(printJobMachine, snapshot, event)
  return next.value as JobStatus
}

/** Whether the job has ended on the printer (the plate holds what it printed until verified). */
export const isFinal = (status: JobStatus): boolean => status === 'succeeded' || status === 'failed' || status === 'cancelled'

/** A job the printer is working on: it holds the printer. */
export const isActive = (status: JobStatus): boolean => status === 'dispatching' || status === 'printing' || status === 'paused'

/**
 * An event's effect as data, for a writer that applies it in SQL: the
 * statuses it applies in and the status it leads to (one target per event,
 * checked here, so the rule is a plain `case when status = any(from)`).
 */
export interface JobStatusRule {
  from: JobStatus[]
  to: JobStatus
}

export function jobStatusRule(event: PrintJobEvent): JobStatusRule | undefined {
  const from: JobStatus[] = []
  let to: JobStatus | undefined
  for (const status of jobStatuses) {
    const next = nextJobStatus(status, event)
    if (next === undefined) continue
    if (to !== undefined && next !== to) throw new Error(`event ${event.type} leads to ${to} and ${next}: not one rule`)
    to = next
    from.push(status)
  }
  return to === undefined ? undefined : { from, to }
}
