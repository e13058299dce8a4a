/**
 * The smart queue's routes: the waiting jobs in order, each with where it
 * goes or why it waits per printer, and reordering.
 *
 * Decisions where the design is silent:
 * - The list holds the jobs being dispatched (offered or claimed, first)
 *   and then the queued ones in queue order; `limit` 1-200 (default 50).
 * - Per job every reason per printer, at most `reasons_limit` (default 100,
 *   0-1000; `reasons_total` says how many there were) and always the count
 *   of printers per reason code: a 1,000-printer farm gets its answer in
 *   a page, not megabytes.
 * - Reordering sets `priority` and/or `position` (1-based within the
 *   priority): the job takes that place and the other queued jobs of the
 *   priority are numbered again around it.
 */
import { Type, type Static } from '@sinclair/typebox'
import { PrintJobSchema, QueueReasonSchema } from './print-jobs.js'

const strict = { additionalProperties: false } as const

export const QueueQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
    reasons_limit: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, default: 100, description: 'Reasons listed per job at most (reason_counts always covers all).' })),
  },
  strict,
)
export type QueueQuery = Static<typeof QueueQuery>

export const QueueMatchSchema = Type.Object(
  {
    printer_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], { description: 'The printer chosen (also while the job waits for the start stagger) or offered the job; null when none can take it.' }),
    ams_mapping: Type.Array(Type.Integer(), { description: 'Per project filament, the printer slot it prints from (-1: unused).' }),
    score: Type.Union([Type.Number(), Type.Null()], { description: 'Sum of the CIEDE2000 colour differences of the chosen slots (0: every colour exact).' }),
    reasons: Type.Array(QueueReasonSchema),
    reasons_total: Type.Integer({ minimum: 0 }),
    reason_counts: Type.Record(Type.String(), Type.Integer(), { description: 'Printers per reason code.' }),
  },
  { title: 'QueueMatch' },
)

export const QueueEntrySchema = Type.Object(
  {
    index: Type.Integer({ minimum: 1 }),
    job: PrintJobSchema,
    match: QueueMatchSchema,
    summary: Type.String({ description: 'Why the job waits (or where it goes), in one sentence.' }),
  },
  { title: 'QueueEntry' },
)
export type QueueEntry = Static<typeof QueueEntrySchema>

export const StaggerSchema = Type.Object(
  {
    max_starts: Type.Union([Type.Integer(), Type.Null()], { description: 'Starts allowed per window (null: no limit).' }),
    window_ms: Type.Integer(),
    starts_in_window: Type.Integer(),
    next_start_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the window allows another start, while it is full.' }),
  },
  { title: 'QueueStagger' },
)

export const QueueListSchema = Type.Object(
  {
    jobs: Type.Array(QueueEntrySchema),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
    printers: Type.Integer({ description: 'Printers in the organization.' }),
    stagger: StaggerSchema,
  },
  { title: 'Queue' },
)
export type QueueList = Static<typeof QueueListSchema>

export const QueueReorderParams = Type.Object({ jobId: Type.String({ pattern: '^[1-9][0-9]{0,14}$', maxLength: 15, description: 'The job id.' }) }, strict)

export const QueueReorderBody = Type.Object(
  {
    priority: Type.Optional(Type.Integer({ minimum: -100, maximum: 100, description: 'Higher first.' })),
    position: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: '1-based place within the priority.' })),
  },
  { ...strict, minProperties: 1, title: 'QueueReorder' },
)
export type QueueReorderBody = Static<typeof QueueReorderBody>
