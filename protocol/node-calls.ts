/**
 * The calls one node makes on another (docs/operations.md: a request that
 * lands on a node that does not own the entity's shard runs on the owner).
 * Another node is an edge too: each call has a schema for its arguments,
 * which the receiving node checks before anything runs, and one for its
 * result, which the calling node checks before it trusts the answer. The
 * TypeScript types of both sides are `Static<>` of these schemas, so the
 * sender, the receiver and the validator cannot drift apart.
 *
 * The frames travel as MessagePack (src/cluster/forwarder.ts), so the
 * schemas describe what MessagePack carries, not JSON: a Date crosses as a
 * Date (the timestamp extension), bytes as a Uint8Array, a Map as an empty
 * object (hence ingest's `jobOf` as [eventId, jobId] pairs), `undefined` as
 * an absent field (or nil inside an array, hence `null` results).
 *
 * Arguments are strict (no unknown field): they are what an actor runs on.
 * Results accept fields they do not name, so a node one version ahead in a
 * rolling restart may answer with more than this one reads.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import type { Phase } from './printer-reports/index.js'
import { IdentitySchema } from './display-mqtt.js'
import { BatchItemSchema, EventOutcomeSchema, maxEventsPerBatch, RefusedEventSchema } from './printer-events.js'
import { printerTypes } from './schemas/printers.js'
import { AmsSlotSchema, FilamentSlotSchema, HostAssignmentSchema } from './schemas/printers.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const HostId = Type.String({ minLength: 1, maxLength: 200 })

/** The host and epoch a bridge's connection report names with a status word, checked like an event's. */
export const ConnectionFenceSchema = Type.Object({ hostId: HostId, assignmentEpoch: Type.Integer({ minimum: 1 }) }, strict)
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])
/** What a `void` call answers: MessagePack carries `undefined` in the answer frame as nil. */
const Nothing = Type.Null()

/**
 * A Date, as MessagePack's timestamp extension decodes. Not JSON Schema: the
 * `instanceof` keyword is defined by the node-call validator
 * (protocol/schemas/validator.ts), and only there.
 */
export const DateValue = Type.Unsafe<Date>({ instanceof: 'Date' })

// ---- printers ----

/** One bridge event as the printer's actor takes it: a batch item without the batch's framing (hostId, epoch, persistedId). */
export const IncomingEventSchema = Type.Pick(BatchItemSchema, ['eventId', 'idempotencyKey', 'type', 'seqn', 'timestamp', 'deliveryAttempt', 'data'], strict)

export const IngestRequestSchema = Type.Object(
  {
    organizationId: Uuid,
    hostId: HostId,
    assignmentEpoch: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    events: Type.Array(IncomingEventSchema, { minItems: 1, maxItems: maxEventsPerBatch }),
  },
  strict,
)

const IngestResultSchema = Type.Object({
  processed: Type.Integer({ minimum: 0 }),
  failed: Type.Integer({ minimum: 0 }),
  stored: Type.Integer({ minimum: 0 }),
  duplicates: Type.Integer({ minimum: 0 }),
  refused: Type.Array(RefusedEventSchema),
  /** eventId → job id, as pairs: a Map does not survive MessagePack. */
  jobOf: Type.Array(Type.Tuple([Type.String(), Nullable(Type.Integer())])),
  outcomes: Type.Array(EventOutcomeSchema),
  lastSeqn: Nullable(Type.Integer({ minimum: 0 })),
})

const PrinterJobSchema = Type.Object({
  jobId: Type.Integer(),
  name: Nullable(Type.String()),
  progress: Nullable(Type.Number()),
  state: Type.Union(['printing', 'paused', 'finished', 'failed', 'cancelled'].map((s) => Type.Literal(s as 'printing' | 'paused' | 'finished' | 'failed' | 'cancelled'))),
  startedAt: Type.Number(),
  endedAt: Nullable(Type.Number()),
  remainingSeconds: Type.Optional(Nullable(Type.Number())),
  layer: Type.Optional(Nullable(Type.Number())),
  totalLayers: Type.Optional(Nullable(Type.Number())),
  openedByReport: Type.Optional(Type.Boolean()),
})

const TemperatureSchema = Type.Object({ actual: Nullable(Type.Number()), target: Nullable(Type.Number()) })
const ErrorSchema = Type.Object({ code: Type.String(), message: Nullable(Type.String()), at: Type.Number() })
const PhaseSchema = Type.Union(['idle', 'busy', 'printing', 'paused', 'finished', 'cancelled', 'error', 'offline'].map((p) => Type.Literal(p as Phase)))

const PrinterViewSchema = Type.Object({
  printerId: Uuid,
  organizationId: Uuid,
  name: Type.String(),
  printerType: Type.Union(printerTypes.map((t) => Type.Literal(t))),
  model: Nullable(Type.String()),
  readyGate: Type.Union([Type.Literal('open'), Type.Literal('awaiting_verification'), Type.Literal('held')]),
  online: Type.Boolean(),
  activity: Type.Union([Type.Literal('idle'), Type.Literal('printing'), Type.Literal('paused')]),
  hostId: Nullable(Type.String()),
  assignmentEpoch: Type.Integer({ minimum: 0 }),
  lastSeqn: Nullable(Type.Integer({ minimum: 0 })),
  updatedAt: Type.Number(),
  filamentJobId: Nullable(Type.Integer()),
  lastSeenAt: Nullable(Type.Number()),
  rawStatus: Nullable(Type.String()),
  phase: Nullable(PhaseSchema),
  job: Nullable(PrinterJobSchema),
  error: Nullable(ErrorSchema),
  acknowledgedError: Nullable(Type.String()),
  temperatures: Type.Object({ nozzle: TemperatureSchema, bed: TemperatureSchema, chamber: TemperatureSchema }),
  ams: Type.Array(AmsSlotSchema),
  filamentRunout: Type.Boolean(),
  maintenance: Type.Boolean(),
})

const PrinterOfOrganization = Type.Object({ printerId: Uuid, organizationId: Uuid }, strict)

// ---- displays ----

const StoredActivationSchema = Type.Object({
  displayId: Uuid,
  organizationId: Uuid,
  bindingEpoch: Type.Integer({ minimum: 1 }),
  credentialId: Uuid,
  generation: Type.Integer({ minimum: 0 }),
  desired: Nullable(IdentitySchema),
  payload: Nullable(Type.Object({ data: Type.String(), byteLength: Type.Integer({ minimum: 0 }) })),
  applied: Nullable(IdentitySchema),
  errorCode: Nullable(Type.String()),
  publishError: Nullable(Type.String()),
  publishAttempts: Type.Integer({ minimum: 0 }),
  session: Nullable(Type.Object({ id: Type.String(), generation: Type.Integer(), sequence: Type.Integer() })),
  updatedAt: DateValue,
})

export const AssignRequestSchema = Type.Object(
  {
    organizationId: Uuid,
    revisionId: Uuid,
    expectedBindingEpoch: Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }),
    expectedActivationGeneration: Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1 }),
  },
  strict,
)

const DisplayOfOrganization = Type.Object({ displayId: Uuid, organizationId: Uuid }, strict)

/**
 * Every node-to-node call: its name → the schema of its arguments and of its
 * result. The Forwarder compiles each once at start and types `call` and
 * `handle` by this table.
 */
export const nodeCalls = {
  'printer.ingest': {
    args: Type.Object({ printerId: Uuid, request: IngestRequestSchema }, strict),
    result: IngestResultSchema,
  },
  'printer.assignHost': {
    args: Type.Object({ printerId: Uuid, organizationId: Uuid, hostId: HostId }, strict),
    result: HostAssignmentSchema,
  },
  'printer.setMaintenance': {
    args: Type.Object({ printerId: Uuid, organizationId: Uuid, on: Type.Boolean() }, strict),
    result: Nothing,
  },
  'printer.assignFilaments': {
    args: Type.Object(
      {
        printerId: Uuid,
        organizationId: Uuid,
        slots: Type.Array(FilamentSlotSchema, { minItems: 1, maxItems: 64 }),
        jobId: Nullable(Type.Integer({ minimum: 1 })),
      },
      strict,
    ),
    result: Type.Array(AmsSlotSchema),
  },
  'printer.reportConnection': {
    args: Type.Object(
      {
        printerId: Uuid,
        organizationId: Uuid,
        connected: Type.Boolean(),
        /** The bridge's last heartbeat, ms since the Unix epoch. */
        at: Type.Number(),
        status: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
        /** With a status word: the bridge's host and epoch, checked like an event's. */
        fence: Type.Optional(ConnectionFenceSchema),
      },
      strict,
    ),
    result: Nothing,
  },
  'printer.view': { args: PrinterOfOrganization, result: PrinterViewSchema },
  'printer.acknowledgeError': { args: PrinterOfOrganization, result: Type.Object({ acknowledged: Nullable(ErrorSchema), view: PrinterViewSchema }) },
  'printer.reload': { args: Type.Object({ printerId: Uuid }, strict), result: Nothing },

  'display.assign': { args: Type.Object({ displayId: Uuid, request: AssignRequestSchema }, strict), result: StoredActivationSchema },
  'display.retry': { args: DisplayOfOrganization, result: StoredActivationSchema },
  'display.rebind': {
    args: DisplayOfOrganization,
    result: Type.Object({ current: StoredActivationSchema, username: Type.String(), password: Type.String() }),
  },
  /** The display changed in the store: its owner reloads its status feed and live view. */
  'display.changed': { args: DisplayOfOrganization, result: Nothing },
  /** The display was deleted: its owner drops its actor. */
  'display.forget': { args: DisplayOfOrganization, result: Nothing },
} as const satisfies NodeCallTable

export interface NodeCallSchemas {
  readonly args: TSchema
  readonly result: TSchema
}
export type NodeCallTable = Readonly<Record<string, NodeCallSchemas>>
export type NodeCalls = typeof nodeCalls
export type OpOf<Table extends NodeCallTable> = keyof Table & string
export type CallArgs<Table extends NodeCallTable, Op extends OpOf<Table>> = Static<Table[Op]['args']>
export type CallResult<Table extends NodeCallTable, Op extends OpOf<Table>> = Static<Table[Op]['result']>

export type NodeOp = OpOf<NodeCalls>
export type PrinterOp = Extract<NodeOp, `printer.${string}`>
export type DisplayOp = Extract<NodeOp, `display.${string}`>
export type NodeCallArgs<Op extends NodeOp> = CallArgs<NodeCalls, Op>
export type NodeCallResult<Op extends NodeOp> = CallResult<NodeCalls, Op>

// ---- the frames ----

const FrameId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })

/** [0, id, from, op, args]: `from` is the caller's node id (its answer channel); `args` is checked against the op's schema next. */
export const CallFrameSchema = Type.Tuple([
  Type.Literal(0),
  FrameId,
  Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$' }),
  Type.String({ minLength: 1, maxLength: 100 }),
  Type.Unknown(),
])
export type CallFrame = Static<typeof CallFrameSchema>

/**
 * A refusal carried back: a ServiceError's code (checked against this node's
 * registry on arrival: a code it does not know becomes a plain error), or
 * only a message for anything else.
 */
export const WireErrorSchema = Type.Object(
  {
    code: Type.Optional(Type.String({ maxLength: 100 })),
    message: Type.String(),
    extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  strict,
)
export type WireError = Static<typeof WireErrorSchema>

/** [1, id, true, result] or [1, id, false, error]: `result` is checked against the op's schema by the caller, which knows the op. */
export const AnswerFrameSchema = Type.Union([
  Type.Tuple([Type.Literal(1), FrameId, Type.Literal(true), Type.Unknown()]),
  Type.Tuple([Type.Literal(1), FrameId, Type.Literal(false), WireErrorSchema]),
])
export type AnswerFrame = Static<typeof AnswerFrameSchema>

export const FrameSchema = Type.Union([CallFrameSchema, AnswerFrameSchema])
export type Frame = Static<typeof FrameSchema>
