/**
 * What a farm reads back about its printers: the state read model (GET
 * /v1/printers, GET /v1/printers/{id}, the live feed's printer frames), the
 * event history and the error acknowledgement. One schema serves REST, the
 * live feed and the OpenAPI document, so a dashboard reads the same fields
 * whichever way it asks.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - Times are RFC 3339 strings (`last_seen_at`, `error.at`, `job.started_at`
 *   are the bridge's clock; `updated_at` is the service's).
 * - `ready_gate` is the plate check of docs/print-jobs.md: `open`, or
 *   `awaiting_verification` from a job's end until an operator answers
 *   PATCH /v1/printers/{id}/ready, or `held` by an operator.
 * - `ready` is the gate, as in every answer that shows it (the ready gate's PATCH, the queue): true
 *   for a new printer and after an operator's verdict, false from a job's end until that verdict or
 *   while an operator holds the printer. Whether the printer can take a job now is the queue's to
 *   say (its reasons per printer name the status, the gate and the rest).
 * - Filament colours are `#RRGGBB` (an alpha channel is dropped); a colour
 *   that is not hex is null.
 * - History pages run in the order the printer produced its events
 *   (assignment epoch, then seqn), which is the order of receipt for every
 *   applied event; a late event is listed at its seqn with applied false.
 *   Ordering by receipt would need a fourth index on the event log, paid on
 *   every insert of the hot path; this order reads the primary key.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { displayStatuses } from '../display-status.js'
import { printerEventTypes } from '../printer-events.js'
import { printerTypes } from './printers.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const Nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) => Type.Union([schema, Type.Null()], options)
const Time = Type.String({ format: 'date-time' })

export const DisplayStatusSchema = Type.Union(
  displayStatuses.map((s) => Type.Literal(s)),
  { description: 'One of the nine display statuses (docs/printers-and-events.md, "Printer status").' },
)

const TemperatureSchema = Type.Object({ actual: Nullable(Type.Number()), target: Nullable(Type.Number()) }, { description: 'Degrees Celsius; null until reported.' })

export const PrinterStateSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    printer_type: Type.Union(printerTypes.map((t) => Type.Literal(t))),
    model: Nullable(Type.String()),
    host_id: Nullable(Type.String()),
    assignment_epoch: Type.Integer({ minimum: 0 }),
    last_seqn: Nullable(Type.Integer({ minimum: 0 }), {
      description: 'The highest seqn applied in the current assignment epoch; null before its first event. A bridge that restarts continues above it.',
    }),
    online: Type.Boolean({ description: 'The bridge reported within the presence timeout.' }),
    last_seen_at: Nullable(Time),
    status: DisplayStatusSchema,
    raw_status: Nullable(Type.String(), { description: "The printer's own status word, exactly as last reported." }),
    maintenance: Type.Boolean(),
    ready: Type.Boolean({
      description:
        "The ready gate: true for a new printer and after an operator's verdict on its last job; false from a job's end until that verdict (ready_gate awaiting_verification) or while an operator holds it (held). Whether it can take a job now also depends on its status and the rest: GET /v1/queue explains it.",
    }),
    ready_gate: Type.Union([Type.Literal('open'), Type.Literal('awaiting_verification'), Type.Literal('held')], {
      description: "open; awaiting_verification: a job ended and an operator has not verified the plate (PATCH /v1/printers/{id}/ready); held: an operator holds the printer out of dispatch.",
    }),
    error: Nullable(
      Type.Object({ code: Type.String(), message: Nullable(Type.String()), at: Time }),
      { description: 'The standing error; cleared by a healthy report or POST /v1/printers/{id}/error/acknowledge.' },
    ),
    job: Nullable(
      Type.Object({
        id: Type.Integer(),
        name: Nullable(Type.String()),
        state: Type.Union(['printing', 'paused', 'finished', 'failed', 'cancelled'].map((s) => Type.Literal(s))),
        progress: Nullable(Type.Number({ minimum: 0, maximum: 100 })),
        remaining_seconds: Nullable(Type.Integer({ minimum: 0 })),
        layer: Nullable(Type.Integer({ minimum: 0 })),
        total_layers: Nullable(Type.Integer({ minimum: 0 })),
        started_at: Time,
        ended_at: Nullable(Time),
      }),
      { description: 'The current job, or the last one.' },
    ),
    temperatures: Type.Object({ nozzle: TemperatureSchema, bed: TemperatureSchema, chamber: TemperatureSchema }),
    filaments: Type.Array(
      Type.Object({
        slot: Type.Integer({ minimum: 0, maximum: 63 }),
        type: Nullable(Type.String()),
        color_hex: Nullable(Type.String({ pattern: '^#[0-9A-F]{6}$' })),
        remaining_percent: Nullable(Type.Number()),
        material_id: Nullable(Type.String()),
      }),
    ),
    updated_at: Time,
  },
  { title: 'PrinterState' },
)
export type PrinterState = Static<typeof PrinterStateSchema>

const statusList = displayStatuses.join(',')
export const PrinterListQuery = Type.Object(
  {
    status: Type.Optional(
      Type.String({
        maxLength: 200,
        pattern: `^(${displayStatuses.join('|')})(,(${displayStatuses.join('|')}))*$`,
        description: `Comma-separated display statuses (any of ${statusList}).`,
      }),
    ),
    host_id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    online: Type.Optional(Type.Boolean()),
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Part of the name or serial number (case-insensitive).' })),
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 100 }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
  },
  strict,
)
export type PrinterListQuery = Static<typeof PrinterListQuery>

export const PrinterListSchema = Type.Object(
  { printers: Type.Array(PrinterStateSchema), total: Type.Integer({ minimum: 0 }), limit: Type.Integer(), offset: Type.Integer() },
  { title: 'PrinterList' },
)
export const PrinterOneSchema = Type.Object({ printer: PrinterStateSchema }, { title: 'PrinterResponse' })

export const EventHistoryQuery = Type.Object(
  {
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_-]+$', description: 'The next_cursor of the previous page.' })),
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
    type: Type.Optional(Type.Union(printerEventTypes.map((t) => Type.Literal(t)), { description: 'Only events of this type.' })),
  },
  strict,
)

export const HistoryEventSchema = Type.Object(
  {
    eventId: Type.String(),
    type: Type.String(),
    seqn: Type.Integer(),
    assignmentEpoch: Type.Integer(),
    timestamp: Type.Number({ description: "The bridge's time of the event (ms since the Unix epoch)." }),
    received_at: Time,
    data: Type.Object({}, { additionalProperties: true }),
    applied: Type.Boolean({ description: 'Applied in seqn order (false: it arrived late, after higher seqns; stored, not applied).' }),
    jobId: Nullable(Type.Integer()),
  },
  { title: 'PrinterHistoryEvent' },
)

export const EventHistorySchema = Type.Object(
  { events: Type.Array(HistoryEventSchema), next_cursor: Nullable(Type.String(), { description: 'Pass as `after` for the next page; null on the last page.' }) },
  { title: 'PrinterEventHistory' },
)

export const AcknowledgeErrorBody = Type.Object(
  { note: Type.Optional(Type.String({ maxLength: 500, description: 'Why, for the log.' })) },
  { ...strict, title: 'AcknowledgeErrorRequest' },
)

export const AcknowledgeErrorResultSchema = Type.Object(
  {
    success: Type.Boolean(),
    acknowledged: Nullable(Type.Object({ code: Type.String(), message: Nullable(Type.String()), at: Time }), { description: 'The error that was cleared; null when there was none.' }),
    printer: PrinterStateSchema,
  },
  { title: 'AcknowledgeErrorResult' },
)

/** The cursor of a history page: the last (epoch, seqn) shown, opaque to clients. */
export function encodeHistoryCursor(epoch: number, seqn: number): string {
  return Buffer.from(`${epoch}.${seqn}`).toString('base64url')
}

export function decodeHistoryCursor(cursor: string): { epoch: number; seqn: number } | undefined {
  const match = /^(\d{1,10})\.(\d{1,16})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'))
  if (match === null) return undefined
  const epoch = Number(match[1])
  const seqn = Number(match[2])
  return Number.isSafeInteger(epoch) && Number.isSafeInteger(seqn) ? { epoch, seqn } : undefined
}
