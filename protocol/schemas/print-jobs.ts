/**
 * Print jobs, printer tasks and the ready gate with the printer
 * routes `ready` and `operator-device-start` (docs/print-jobs.md).
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - `name` 1-200 characters; `priority` -100..100 (default 0, higher first);
 *   `plate` is the 1-based plate of the file to print (default 1, or the
 *   file's only sliced plate).
 * - Required materials: per filament the plate uses (as the slicer wrote
 *   them, else the file's project filaments), the material the make (when
 *   `make_id` is given) chose for it, else the slicer's type and colour:
 *   `{filament_index, type, color_hex, used_g, material_id}`,
 *   `filament_index` 0-based into the file's `project_filaments`.
 * - The list (`POST /v1/print-jobs`) takes its filters in the body, newest
 *   first; `search` matches part of the name.
 * - `PATCH …/status` takes `{status, reason}`; the answer is the job as
 *   stored now.
 * - Times are RFC 3339 strings.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { reasonCodes } from '../queue-match.js'

const strict = { additionalProperties: false } as const

/** The lifecycle's statuses (machines/print-job.ts holds the rules between them). */
export const jobStatuses = ['queued', 'dispatching', 'printing', 'paused', 'awaiting_verification', 'succeeded', 'failed', 'cancelled'] as const
export type JobStatus = (typeof jobStatuses)[number]
const Uuid = Type.String({ format: 'uuid' })
const Nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) => Type.Union([schema, Type.Null()], options)
const Time = Type.String({ format: 'date-time' })
const JobId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
const OrganizationField = Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." }))
const HostId = Type.String({ minLength: 1, maxLength: 200 })

export const JobStatusSchema = Type.Union(
  jobStatuses.map((s) => Type.Literal(s)),
  { description: 'queued → dispatching → printing ⇄ paused → awaiting_verification → succeeded | failed; cancelled from any state before awaiting_verification.' },
)

export const PrintOptionsSchema = Type.Object(
  {
    auto_assign: Type.Optional(Type.Boolean({ description: 'false: the job waits for a hand assignment (POST /v1/print-jobs/{id}/assign). Default true.' })),
    enable_ams: Type.Optional(Type.Boolean({ description: 'Print from the AMS (mapped slots). Default true.' })),
    bed_leveling: Type.Optional(Type.Boolean()),
    flow_calibration: Type.Optional(Type.Boolean()),
    timelapse: Type.Optional(Type.Boolean()),
  },
  { ...strict, description: 'Handed to the bridge with the task.' },
)

export const RequiredMaterialSchema = Type.Object({
  filament_index: Type.Integer({ minimum: 0, description: "0-based index into the file's project_filaments." }),
  type: Nullable(Type.String()),
  color_hex: Nullable(Type.String()),
  used_g: Nullable(Type.Number()),
  material_id: Nullable(Uuid),
})

export const CreatePrintJobBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    model_file_id: Uuid,
    print_options: Type.Optional(PrintOptionsSchema),
    make_id: Type.Optional(Uuid),
    priority: Type.Optional(Type.Integer({ minimum: -100, maximum: 100, description: 'Higher first; default 0.' })),
    plate: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, description: "1-based plate of the file; default 1 (or the file's only sliced plate)." })),
    organizationId: OrganizationField,
  },
  { ...strict, title: 'CreatePrintJob' },
)
export type CreatePrintJobBody = Static<typeof CreatePrintJobBody>

export const PrintJobListBody = Type.Object(
  {
    status: Type.Optional(Type.Array(JobStatusSchema, { minItems: 1, maxItems: jobStatuses.length, uniqueItems: true })),
    printer_id: Type.Optional(Uuid),
    model_file_id: Type.Optional(Uuid),
    make_id: Type.Optional(Uuid),
    batch_id: Type.Optional(Uuid),
    search: Type.Optional(Type.String({ maxLength: 120, description: 'Part of the name (case-insensitive).' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 100 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
    organizationId: OrganizationField,
  },
  { ...strict, title: 'PrintJobListFilters' },
)
export type PrintJobListBody = Static<typeof PrintJobListBody>

export const PrintJobParams = Type.Object({ id: Type.String({ pattern: '^[1-9][0-9]{0,14}$', maxLength: 15, description: 'The numeric job id.' }) }, strict)

export const PrintJobStatusBody = Type.Object(
  {
    status: Type.Union([Type.Literal('cancelled'), Type.Literal('queued'), Type.Literal('paused'), Type.Literal('printing')], {
      description: 'cancelled; queued (requeue a failed or cancelled job, or a dispatching one whose start was never confirmed); paused / printing (pause / resume command to the bridge).',
    }),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
    organizationId: OrganizationField,
  },
  { ...strict, title: 'PrintJobStatusChange' },
)
export type PrintJobStatusBody = Static<typeof PrintJobStatusBody>

export const AssignPrintJobBody = Type.Object({ printer_id: Uuid, organizationId: OrganizationField }, { ...strict, title: 'AssignPrintJob' })
export type AssignPrintJobBody = Static<typeof AssignPrintJobBody>

export const PartVerificationSchema = Type.Object(
  {
    part_name: Type.String({ minLength: 1, maxLength: 200 }),
    good_count: Type.Integer({ minimum: 0, maximum: 100_000 }),
    defective_count: Type.Integer({ minimum: 0, maximum: 100_000 }),
    action: Type.Union([Type.Literal('reprint'), Type.Literal('skip'), Type.Literal('accept')]),
  },
  strict,
)

/** Why a job waits (the smart queue's fixed reason codes; protocol/queue-match.ts decides them). */
export const QueueReasonSchema = Type.Object(
  {
    printer_id: Nullable(Uuid, { description: 'The printer the reason is about; null for a reason of the job itself (manual_assignment).' }),
    code: Type.Union(reasonCodes.map((c) => Type.Literal(c))),
    detail: Type.String({ description: 'What to change, as a sentence.' }),
  },
  { title: 'QueueReason' },
)

export const QueueExplanationSchema = Type.Object(
  {
    index: Type.Integer({ minimum: 1, description: '1-based place in the queue (jobs being dispatched first, then the queued ones in order).' }),
    printer_id: Nullable(Uuid, { description: 'The printer chosen or offered the job, if any.' }),
    summary: Type.String({ description: 'Why the job waits (or where it goes), in one sentence.' }),
    reason_counts: Type.Record(Type.String(), Type.Integer(), { description: 'Printers per reason code.' }),
    reasons: Type.Optional(Type.Array(QueueReasonSchema, { description: 'Every reason per printer (on GET of one job).' })),
  },
  { title: 'QueueExplanation' },
)
export type QueueExplanation = Static<typeof QueueExplanationSchema>

export const PrintJobSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Nullable(Type.String()),
    status: JobStatusSchema,
    source: Type.Union([Type.Literal('api'), Type.Literal('bridge')], { description: 'api: created here; bridge: first seen in a bridge job:start or printer report.' }),
    model_file_id: Nullable(Uuid),
    make_id: Nullable(Uuid),
    sku_id: Nullable(Uuid),
    batch_id: Nullable(Uuid),
    priority: Type.Integer(),
    position: Nullable(Type.Integer()),
    plate: Type.Integer(),
    print_options: Type.Record(Type.String(), Type.Unknown()),
    constraints: Type.Object({ required_materials: Type.Array(RequiredMaterialSchema) }),
    printer_id: Nullable(Uuid),
    printer_task_id: Nullable(Uuid),
    attempts: Type.Integer({ description: 'Dispatches so far.' }),
    progress: Nullable(Type.Number({ description: 'Percent, as the printer last reported it.' })),
    printer_state: Nullable(Type.String({ description: "The job as the printer reported it: printing, paused, finished, failed, cancelled." })),
    bridge_result: Nullable(Type.String({ description: "job:finish's result (success, failed, cancelled): a hint until an operator verifies the plate." })),
    failure_reason: Nullable(Type.String()),
    verification: Nullable(Type.String({ description: 'The ready-gate verdict: success, failed, cancelled, skipped.' })),
    part_verifications: Nullable(Type.Array(PartVerificationSchema)),
    created_at: Time,
    updated_at: Time,
    started_at: Nullable(Time),
    finished_at: Nullable(Time),
    queue: Type.Optional(Nullable(QueueExplanationSchema, { description: 'While queued or dispatching: its place and why it waits.' })),
  },
  { title: 'PrintJob' },
)
export type PrintJob = Static<typeof PrintJobSchema>

export const PrintJobListSchema = Type.Object({ jobs: Type.Array(PrintJobSchema), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() }, { title: 'PrintJobList' })

export const taskStates = ['offered', 'claimed', 'started', 'finished', 'cancelled', 'expired', 'unconfirmed'] as const
export type TaskState = (typeof taskStates)[number]

export const TaskCommandSchema = Type.Object({
  id: Uuid,
  kind: Type.Union([Type.Literal('cancel'), Type.Literal('pause'), Type.Literal('resume')]),
  issued_at: Time,
})
export type TaskCommand = Static<typeof TaskCommandSchema>

export const PrinterTaskSchema = Type.Object(
  {
    id: Uuid,
    job_id: Type.Integer(),
    printer_id: Uuid,
    host_id: Type.String(),
    assignment_epoch: Type.Integer(),
    state: Type.Union(taskStates.map((s) => Type.Literal(s))),
    file_id: Nullable(Uuid),
    file_name: Nullable(Type.String()),
    file_size: Nullable(Type.Integer()),
    file_sha256: Nullable(Type.String()),
    plate: Type.Integer(),
    ams_mapping: Type.Array(Type.Integer(), { description: 'Per project filament, the printer slot to print it from (−1: unused).' }),
    print_options: Type.Record(Type.String(), Type.Unknown()),
    claim_generation: Nullable(Uuid),
    commands: Type.Array(TaskCommandSchema, { description: 'Commands to carry out and answer with the matching event (cancel → job:finish result cancelled, pause → job:pause, resume → job:unpause).' }),
    offered_at: Time,
    offer_expires_at: Time,
    claimed_at: Nullable(Time),
    start_deadline_at: Nullable(Time),
    started_at: Nullable(Time),
    ended_at: Nullable(Time),
  },
  { title: 'PrinterTask' },
)
export type PrinterTask = Static<typeof PrinterTaskSchema>

export const HostTasksParams = Type.Object({ hostId: HostId }, strict)
export const HostTasksSchema = Type.Object({ tasks: Type.Array(PrinterTaskSchema) }, { title: 'HostTasks' })

export const TaskParams = Type.Object({ id: Uuid }, strict)

export const ClaimTaskBody = Type.Object(
  { hostId: HostId, assignmentEpoch: Type.Integer({ minimum: 0, maximum: 2_147_483_647 }), organizationId: OrganizationField },
  { ...strict, title: 'ClaimPrinterTask' },
)
export type ClaimTaskBody = Static<typeof ClaimTaskBody>

export const ClaimSchema = Type.Object(
  {
    task: PrinterTaskSchema,
    claim_generation: Uuid,
    printer_task_access_token: Uuid,
    download_url: Nullable(Type.String({ description: 'A signed URL of the file (short-lived; a retried claim returns a fresh one).' })),
  },
  { title: 'PrinterTaskClaim' },
)

export const AssignmentSchema = Type.Object({ job: PrintJobSchema, task: PrinterTaskSchema }, { title: 'PrintJobAssignment' })

export const readyEventTypes = ['operator:manual_verification:success', 'operator:manual_verification:failed', 'operator:manual_verification:cancelled', 'operator:manual_verification:skipped'] as const

export const failureReasons = [
  'blob_of_death', 'extrusion_issue', 'nozzle_clog', 'under_extrusion', 'over_extrusion', 'spaghetti', 'layer_shift',
  'bed_adhesion', 'stringing', 'warping', 'z_banding', 'filament_runout', 'power_failure', 'mechanical_failure', 'other',
] as const

export const PrinterReadyBody = Type.Object(
  {
    ready: Type.Boolean(),
    ready_source: Type.Optional(Nullable(Type.Literal('operator_override'))),
    ready_updated_source: Type.Optional(Type.Literal('operator_override')),
    metadata: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 64 }))),
    job_id: Type.Optional(Nullable(JobId)),
    event_type: Type.Optional(Nullable(Type.Union(readyEventTypes.map((e) => Type.Literal(e))))),
    failure_reason: Type.Optional(Nullable(Type.Union(failureReasons.map((r) => Type.Literal(r))))),
    organizationId: OrganizationField,
    requeue_failed: Type.Optional(Nullable(Type.Boolean())),
    part_verifications: Type.Optional(Nullable(Type.Array(PartVerificationSchema, { maxItems: 200 }))),
  },
  { ...strict, title: 'PrinterReady' },
)
export type PrinterReadyBody = Static<typeof PrinterReadyBody>

export const PrinterReadySchema = Type.Object(
  {
    success: Type.Literal(true),
    printer_id: Uuid,
    ready: Type.Boolean(),
    ready_source: Nullable(Type.String()),
    job: Nullable(PrintJobSchema),
    requeued_job: Nullable(PrintJobSchema),
  },
  { title: 'PrinterReadyAnswer' },
)

export const OperatorStartSchema = Type.Object({ success: Type.Literal(true), job: PrintJobSchema, task: PrinterTaskSchema }, { title: 'OperatorDeviceStart' })
