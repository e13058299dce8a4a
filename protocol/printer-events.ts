/**
 * Printer events from bridges: the event types, the single and
 * batch request schemas with the documented limits, and the checks a schema
 * cannot express. Pure: no I/O.
 *
 * Decisions made here (documented in the OpenAPI descriptions) (documented in the OpenAPI description):
 * - seqn is a non-negative safe integer, assignmentEpoch an integer >= 1,
 *   timestamp a non-negative number (ms since the Unix epoch): the documented contract says
 *   "number", and ordering and fencing need integers.
 * - hostId is 1-200 characters, persistedId at most 200, data at most the
 *   request body limit: every input is bounded.
 * - The single-event route names its printer with a top-level `printerId`
 *   (the single-event table has none; the route is not declared
 *   strict, so the field is an addition, not a change), or `data.printerId`.
 * - Inside one batch an eventId, a seqn or an idempotencyKey may appear once: a repeat is a
 *   bridge bug, refused with the item named, not silently merged.
 */
import { Type, type Static } from '@sinclair/typebox'

export const printerEventTypes = [
  'status',
  'message',
  'rawMessage',
  'client:connect',
  'client:disconnect',
  'client:error',
  'printer:dataUpdate',
  'printer:deltaUpdate',
  'printer:statusUpdate',
  'printer:amsUpdate',
  'printer:filamentStateChanged',
  'printer:error',
  'job:update',
  'job:start',
  'job:pause',
  'job:offlineRecovery',
  'job:unpause',
  'job:finish',
  'heartbeat',
  'file:uploadStart',
  'file:uploadComplete',
  'file:uploadError',
  'detection:failure',
  'detection:warning',
  'detection:bedEmpty',
  'detection:complete',
] as const

export type PrinterEventType = (typeof printerEventTypes)[number]

/** docs/operations.md: events per batch. */
export const maxEventsPerBatch = 100

/**
 * How deep event data may nest (decided here): bridges send flat telemetry;
 * a 4,000-level document would only exhaust the serializer's stack.
 */
export const maxDataDepth = 32

/** True when a JSON value nests objects/arrays deeper than `max` (iterative: no recursion to exhaust). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]]
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!
    if (v === null || typeof v !== 'object') continue
    if (depth > max) return true
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1])
  }
  return false
}

const Id200 = Type.String({ minLength: 1, maxLength: 200 })
const EventTypeSchema = Type.Union(
  printerEventTypes.map((t) => Type.Literal(t)),
  { description: 'One of the 26 printer event types (docs/printers-and-events.md, "Event types").' },
)
const Seqn = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: "Bridge's per-printer sequence number; events apply in seqn order." })
export const Epoch = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: "The host assignment's epoch, as read from GET /v1/printer-config." })
/** Up to the largest time a JS Date holds (year 275760): a runaway value cannot poison ordering or presence. */
const Timestamp = Type.Number({ minimum: 0, maximum: 8.64e15, description: 'Milliseconds since the Unix epoch.' })
const DeliveryAttempt = Type.Integer({ minimum: 1, maximum: 1_000_000, description: '1 on first delivery, +1 on each retry.' })
const Data = Type.Object({}, { additionalProperties: true, description: 'Free-form event payload.' })
export const HostId = Type.String({ minLength: 1, maxLength: 200 })

export const SinglePrinterEventSchema = Type.Object(
  {
    printerId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The printer (or data.printerId).' })),
    eventId: Id200,
    idempotencyKey: Type.Optional(Id200),
    eventType: EventTypeSchema,
    data: Data,
    seqn: Seqn,
    hostId: HostId,
    assignmentEpoch: Epoch,
    deliveryAttempt: DeliveryAttempt,
    timestamp: Timestamp,
  },
  { title: 'PrinterEvent' },
)
export type SinglePrinterEvent = Static<typeof SinglePrinterEventSchema>

export const BatchItemSchema = Type.Object(
  {
    eventId: Id200,
    idempotencyKey: Type.Optional(Id200),
    persistedId: Type.Optional(Type.String({ maxLength: 200 })),
    type: EventTypeSchema,
    timestamp: Timestamp,
    seqn: Seqn,
    hostId: HostId,
    assignmentEpoch: Epoch,
    deliveryAttempt: DeliveryAttempt,
    data: Data,
  },
  { additionalProperties: false, title: 'PrinterEventBatchItem' },
)
export type BatchItem = Static<typeof BatchItemSchema>

export const PrinterEventBatchSchema = Type.Object(
  {
    printerId: Type.String({ minLength: 1, maxLength: 200 }),
    events: Type.Array(BatchItemSchema, { minItems: 1, maxItems: maxEventsPerBatch }),
    timestamp: Timestamp,
    hostId: HostId,
    assignmentEpoch: Epoch,
    batchId: Type.Optional(Id200),
    idempotencyKey: Type.Optional(Id200),
    delta: Type.Optional(Type.Object({}, { additionalProperties: true })),
    maxSeqn: Type.Optional(Seqn),
  },
  { additionalProperties: false, title: 'PrinterEventBatch' },
)
export type PrinterEventBatch = Static<typeof PrinterEventBatchSchema>

export type BatchProblem = { index: number | undefined; field: string; reason: string }

/**
 * What the schema cannot say about a batch: every item carries the batch's
 * hostId and assignmentEpoch (fencing is per batch), eventIds and
 * seqns do not repeat, and maxSeqn, when given, is the largest seqn.
 */
export function checkBatch(batch: PrinterEventBatch): BatchProblem | undefined {
  const eventIds = new Set<string>()
  const seqns = new Set<number>()
  const keys = new Set<string>()
  let max = -1
  for (const [index, item] of batch.events.entries()) {
    if (item.hostId !== batch.hostId) return { index, field: 'hostId', reason: `differs from the batch's hostId '${batch.hostId}'` }
    if (item.assignmentEpoch !== batch.assignmentEpoch) {
      return { index, field: 'assignmentEpoch', reason: `differs from the batch's assignmentEpoch ${batch.assignmentEpoch}` }
    }
    if (eventIds.has(item.eventId)) return { index, field: 'eventId', reason: `repeats an eventId earlier in this batch` }
    if (seqns.has(item.seqn)) return { index, field: 'seqn', reason: `repeats a seqn earlier in this batch` }
    if (item.idempotencyKey !== undefined && keys.has(item.idempotencyKey)) {
      return { index, field: 'idempotencyKey', reason: `repeats an idempotencyKey earlier in this batch` }
    }
    if (nestsDeeperThan(item.data, maxDataDepth)) return { index, field: 'data', reason: `nests deeper than ${maxDataDepth} levels` }
    eventIds.add(item.eventId)
    seqns.add(item.seqn)
    if (item.idempotencyKey !== undefined) keys.add(item.idempotencyKey)
    if (item.seqn > max) max = item.seqn
  }
  if (batch.delta !== undefined && nestsDeeperThan(batch.delta, maxDataDepth)) return { index: undefined, field: 'delta', reason: `nests deeper than ${maxDataDepth} levels` }
  if (batch.maxSeqn !== undefined && batch.maxSeqn !== max) {
    return { index: undefined, field: 'maxSeqn', reason: `is ${batch.maxSeqn} but the largest seqn in the batch is ${max}` }
  }
  return undefined
}

export function describeBatchProblem(problem: BatchProblem): string {
  return problem.index === undefined ? `body.${problem.field} ${problem.reason}` : `body.events[${problem.index}].${problem.field} ${problem.reason}`
}

/** The single route's printer: top-level printerId, else data.printerId when it is a usable string. */
export function printerOfSingleEvent(event: SinglePrinterEvent): string | undefined {
  if (event.printerId !== undefined) return event.printerId
  const fromData = (event.data as Record<string, unknown>)['printerId']
  return typeof fromData === 'string' && fromData.length >= 1 && fromData.length <= 200 ? fromData : undefined
}

export const RefusedEventSchema = Type.Object(
  { eventId: Type.String(), seqn: Type.Integer(), reason: Type.String() },
  { title: 'RefusedPrinterEvent' },
)

/** Why an event was refused (the only refusal of a single event inside an accepted batch). */
export const refusalReasons = ['seqn_reused', 'task_fenced', 'task_claim_mismatch', 'task_unknown', 'job_already_started'] as const

export const EventOutcomeSchema = Type.Object(
  {
    eventId: Type.String(),
    seqn: Type.Integer(),
    outcome: Type.Union([Type.Literal('applied'), Type.Literal('late'), Type.Literal('duplicate'), Type.Literal('refused')], {
      description:
        'applied: new, applied in seqn order. late: new, but its seqn is at or below the highest applied one; stored in the history, not applied. ' +
        'duplicate: already stored (by an earlier delivery); nothing changed. refused: not stored, see reason.',
    }),
    reason: Type.Optional(Type.Union(refusalReasons.map((r) => Type.Literal(r)), {
        description:
          'seqn_reused: another event is stored at this seqn. task_fenced: a job:start for a printer task that was cancelled, expired, requeued or belongs to an older assignment. ' +
          "task_claim_mismatch: the job:start's claimGeneration is not the task's claim. task_unknown: no such task for this printer. " +
          'job_already_started: the task has started already (a second job:start changes nothing).',
      })),
    message: Type.Optional(Type.String()),
  },
  { title: 'PrinterEventOutcome' },
)

const LastSeqn = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
  description: 'The highest seqn applied in the current assignment epoch, after this request (null before the first).',
})

export const BatchResultSchema = Type.Object(
  {
    success: Type.Boolean({ description: 'True when the batch was taken; see failed.' }),
    processed: Type.Integer({ description: 'Events of the batch the log now holds: applied, late and duplicate ones (a retry answers like the first delivery).' }),
    failed: Type.Integer({ description: 'Refused events: the log does not hold them and never will; retrying does not change them.' }),
    events: Type.Array(EventOutcomeSchema, { description: 'One per event of the batch, in the order sent.' }),
    refused: Type.Array(RefusedEventSchema, { description: 'The refused events again, with the reason in words.' }),
    last_seqn: LastSeqn,
  },
  { title: 'PrinterEventBatchResult' },
)

export const SingleEventResultSchema = Type.Object(
  {
    success: Type.Boolean({ description: 'True when the event is stored (now or by an earlier delivery).' }),
    jobId: Type.Union([Type.Integer(), Type.Null()], { description: 'The job a job:* event belongs to (job:start creates it), or the job a report opened; null otherwise.' }),
    message: Type.String(),
    outcome: Type.Index(EventOutcomeSchema, ['outcome']),
    reason: Type.Optional(Type.Union(refusalReasons.map((r) => Type.Literal(r)))),
    last_seqn: LastSeqn,
  },
  { title: 'PrinterEventResult' },
)
