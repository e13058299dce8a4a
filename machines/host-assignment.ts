/**
 * Which bridge host may speak for a printer, and what it has already said.
 *
 * A printer is assigned to one host at a time; every assignment raises the
 * assignment epoch, so events from a host that lost the printer (an older
 * epoch) are refused even if that host is still running (docs/printers-and-events.md,
 * fencing). The same context keeps the seqn high-water mark and a bounded
 * window of recent eventIds and idempotency keys, so retried deliveries are
 * recognised and not applied twice.
 *
 * Pure (STYLE practice 2): no I/O, no clock. The runtime persists through the
 * named action `persistAssignment`, and sends EVENTS_APPLIED only after the
 * events it classified with `classifyEvents` have been committed — so the
 * context never runs ahead of the store.
 */
import { assign, setup } from 'xstate'
import { RecentWindow } from './recent-window.js'

export { idempotencyWindow, RecentWindow } from './recent-window.js'

export interface HostAssignmentContext {
  printerId: string
  /** null until the printer is first assigned. */
  hostId: string | null
  /** 0 until the first assignment; +1 on every assignment. */
  assignmentEpoch: number
  /** Highest seqn applied in the current epoch; -1 before its first event (seqns are per epoch). */
  highWaterSeqn: number
  /** The eventIds and idempotency keys applied last (./recent-window.ts). */
  recent: RecentWindow
}

export type HostAssignmentInput = Partial<Omit<HostAssignmentContext, 'printerId'>> & { printerId: string }

export type HostAssignmentEvent =
  | { type: 'ASSIGN'; hostId: string }
  | { type: 'EVENTS_APPLIED'; highWaterSeqn: number; eventIds: readonly string[]; idempotencyKeys: readonly string[] }

export interface PersistAssignmentParams {
  printerId: string
  hostId: string
  assignmentEpoch: number
}

export const hostAssignmentMachine = setup({
  types: {
    context: {} as HostAssignmentContext,
    events: {} as HostAssignmentEvent,
    input: {} as HostAssignmentInput,
  },
  actions: {
    /** The effect: the runtime provides it (write hostId + assignmentEpoch to the store). */
    persistAssignment: (_args, _params: PersistAssignmentParams) => undefined,
    assignHost: assign(({ context, event }) => {
      if (event.type !== 'ASSIGN') return {}
      // A new epoch starts a new sequence: the new host's bridge numbers its own events.
      return { hostId: event.hostId, assignmentEpoch: context.assignmentEpoch + 1, highWaterSeqn: -1 }
    }),
    recordApplied: assign(({ context, event }) => {
      if (event.type !== 'EVENTS_APPLIED') return {}
      return {
        highWaterSeqn: Math.max(context.highWaterSeqn, event.highWaterSeqn),
        recent: context.recent.with(event.eventIds, event.idempotencyKeys),
      }
    }),
  },
  guards: {
    isAssigned: ({ context }) => context.hostId !== null,
  },
}).createMachine({
  id: 'hostAssignment',
  context: ({ input }) => ({
    printerId: input.printerId,
    hostId: input.hostId ?? null,
    assignmentEpoch: input.assignmentEpoch ?? 0,
    highWaterSeqn: input.highWaterSeqn ?? -1,
    recent: input.recent ?? RecentWindow.empty,
  }),
  initial: 'hydrated',
  states: {
    hydrated: {
      always: [{ guard: 'isAssigned', target: 'assigned' }, { target: 'unassigned' }],
    },
    unassigned: {
      on: { ASSIGN: { target: 'assigned', actions: ['assignHost', persist()] } },
    },
    assigned: {
      on: {
        // Every assignment raises the epoch, even to the same host: re-assigning
        // fences off a stale instance of that host's bridge too.
        ASSIGN: { actions: ['assignHost', persist()] },
        EVENTS_APPLIED: { actions: 'recordApplied' },
      },
    },
  },
})

function persist() {
  return {
    type: 'persistAssignment' as const,
    params: ({ context }: { context: HostAssignmentContext }): PersistAssignmentParams => ({
      printerId: context.printerId,
      hostId: context.hostId!,
      assignmentEpoch: context.assignmentEpoch,
    }),
  }
}

/** Why a batch is refused by the fence (hostId + assignmentEpoch). */
export type FenceRefusal = 'unassigned' | 'stale_epoch' | 'unknown_epoch' | 'other_host'

/**
 * The host-assignment fence. An epoch below the current one is stale (the
 * printer moved on, whichever host sends it); one above it was never issued;
 * at the current epoch only the current host may speak.
 */
export function checkFence(context: HostAssignmentContext, hostId: string, assignmentEpoch: number): FenceRefusal | undefined {
  if (context.hostId === null) return 'unassigned'
  if (assignmentEpoch < context.assignmentEpoch) return 'stale_epoch'
  if (assignmentEpoch > context.assignmentEpoch) return 'unknown_epoch'
  if (hostId !== context.hostId) return 'other_host'
  return undefined
}

export interface SequencedEvent {
  eventId: string
  seqn: number
  idempotencyKey?: string | undefined
}

export interface Classified<E extends SequencedEvent> {
  /** To apply, in seqn order. */
  apply: E[]
  /** Already applied (seqn at or below the high-water mark, or a known eventId / idempotency key). */
  duplicates: E[]
  /** Of `duplicates`, those at or below the mark whose eventId and key the window no longer holds: duplicates or late events, only the log can tell. */
  forgotten: E[]
  /** Missing seqns: recorded, never invented (docs/printers-and-events.md). */
  gaps: { after: number; before: number }[]
  /** The high-water mark once `apply` is committed. */
  highWaterSeqn: number
}

/** Orders a batch and separates what is new from what was already applied. */
export function classifyEvents<E extends SequencedEvent>(context: HostAssignmentContext, events: readonly E[]): Classified<E> {
  const recent = context.recent
  const apply: E[] = []
  const duplicates: E[] = []
  const forgotten: E[] = []
  for (const event of [...events].sort((a, b) => a.seqn - b.seqn)) {
    const remembered = recent.hasEventId(event.eventId) || (event.idempotencyKey !== undefined && recent.hasKey(event.idempotencyKey))
    if (remembered) duplicates.push(event)
    else if (event.seqn <= context.highWaterSeqn) duplicates.push(event), forgotten.push(event)
    else apply.push(event)
  }
  const gaps: { after: number; before: number }[] = []
  let previous = context.highWaterSeqn
  for (const event of apply) {
    // Before the first event ever (-1) the bridge may start anywhere: no gap is claimed.
    if (previous >= 0 && event.seqn > previous + 1) gaps.push({ after: previous, before: event.seqn })
    previous = event.seqn
  }
  return { apply, duplicates, forgotten, gaps, highWaterSeqn: Math.max(context.highWaterSeqn, previous) }
}
