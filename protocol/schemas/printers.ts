/**
 * Printer configuration (docs/printers-and-events.md)
 * and host assignment.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - Bounds on every field (names 200, addresses 255, credentials 512
 *   characters; port 1-65535; timeout 100 ms-10 min; reconnect 100 ms-1 h).
 * - POST /v1/printer-config upserts: by `id` when given, else by
 *   `serial_number` within the organization, else it creates.
 * - A printer is "incomplete" while it lacks a serial number or any
 *   credential (access_token or api_key): a bridge cannot connect to it, so
 *   lists leave it out unless include_incomplete=true.
 * - host_id is set on create or upsert only while the printer is unassigned;
 *   moving it is PUT /v1/printers/{id}/host-assignment, which raises the epoch.
 * - Least privilege: the printers' own credentials are read only by those who
 *   connect to printers (admins, keys with printers:write); giving a printer a
 *   host or enabling it changes the fleet and needs fleet:write (or an admin)
 *   on every route, so a bridge may report printers it discovered (created
 *   disabled, on no host) but not put them into service.
 */
import { Type, type Static } from '@sinclair/typebox'
import { Epoch, HostId } from '../printer-events.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })

export const printerTypes = ['bambu', 'prusa_connect', 'octoprint', 'klipper', 'snapmaker', 'flashforge'] as const
export const communicationProtocols = ['mqtt', 'http', 'websocket', 'serial'] as const

const PrinterType = Type.Union(printerTypes.map((t) => Type.Literal(t)))
const Protocol = Type.Union(communicationProtocols.map((p) => Type.Literal(p)))

/** The configurable fields, each optional; create adds `required`. */
const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  ip_address: Type.String({ minLength: 1, maxLength: 255, pattern: '^\\S+$', description: 'IP address or host name on the farm network.' }),
  serial_number: Type.String({ minLength: 1, maxLength: 100 }),
  model: Type.String({ maxLength: 100 }),
  access_token: Type.String({ maxLength: 512, description: 'The printer\'s own credential (e.g. a LAN access code); stored sealed.' }),
  enabled: Type.Boolean(),
  discovery_method: Type.String({ maxLength: 50 }),
  discovered_at: Type.String({ format: 'date-time' }),
  printer_type: PrinterType,
  api_key: Type.String({ maxLength: 512, description: 'Printer-side API key (OctoPrint, Moonraker...); stored sealed.' }),
  port: Type.Integer({ minimum: 1, maximum: 65535 }),
  communication_protocol: Protocol,
  capabilities: Type.Object({}, { additionalProperties: true }),
  secure: Type.Boolean(),
  timeout: Type.Integer({ minimum: 100, maximum: 600_000, description: 'Milliseconds.' }),
  reconnect_interval: Type.Integer({ minimum: 100, maximum: 3_600_000, description: 'Milliseconds.' }),
}

const optionalFields = Type.Partial(Type.Object(fields)).properties

export const UpsertPrinterConfigBody = Type.Object(
  {
    ...optionalFields,
    id: Type.Optional(Uuid),
    name: fields.name,
    ip_address: fields.ip_address,
    host_id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { ...strict, title: 'UpsertPrinterConfigRequest' },
)
export type UpsertPrinterConfigBody = Static<typeof UpsertPrinterConfigBody>

/** Any configuration field except id and host_id (docs/printers-and-events.md). */
export const UpdatePrinterConfigBody = Type.Partial(Type.Object(fields), {
  ...strict,
  minProperties: 1,
  title: 'UpdatePrinterConfigRequest',
  description: 'host_id changes through PUT /v1/printers/{id}/host-assignment.',
})
export type UpdatePrinterConfigBody = Static<typeof UpdatePrinterConfigBody>

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()])

export const PrinterConfigSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    ip_address: Type.String(),
    serial_number: Nullable(Type.String()),
    model: Nullable(Type.String()),
    access_token: Nullable(Type.String()),
    organization_id: Uuid,
    enabled: Type.Boolean(),
    host_id: Nullable(Type.String()),
    assignment_epoch: Type.Integer({ description: '0 until first assigned; bridges send it with their events.' }),
    discovery_method: Nullable(Type.String()),
    discovered_at: Nullable(Type.String({ format: 'date-time' })),
    printer_type: PrinterType,
    api_key: Nullable(Type.String()),
    port: Type.Union([Type.Integer(), Type.Null()]),
    communication_protocol: Type.Union([Protocol, Type.Null()]),
    capabilities: Type.Object({}, { additionalProperties: true }),
    secure: Type.Boolean(),
    timeout: Type.Integer(),
    reconnect_interval: Type.Integer(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    credentials_redacted: Type.Boolean({
      description:
        'True when access_token and api_key are withheld from this caller (null whether set or not): they are shown only to organization admins ' +
        'and to API keys with printers:write, such as a paired bridge, which connects to the printers.',
    }),
  },
  { title: 'PrinterConfig' },
)
export type PrinterConfig = Static<typeof PrinterConfigSchema>

export const PrinterConfigListQuery = Type.Object(
  {
    host_id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    serial_number: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    ip_address: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    include_incomplete: Type.Boolean({ default: false, description: 'Include printers without a serial number or credential.' }),
    enabled_only: Type.Boolean({ default: false }),
    organizationId: Type.Optional(Uuid),
  },
  strict,
)

export const PrinterParams = Type.Object({ id: Uuid })
export const PrinterConfigListSchema = Type.Object({ printers: Type.Array(PrinterConfigSchema) }, { title: 'PrinterConfigList' })
export const PrinterConfigOneSchema = Type.Object({ printer: PrinterConfigSchema }, { title: 'PrinterConfigResponse' })
export const UpsertResultSchema = Type.Object({ id: Uuid, success: Type.Boolean(), updated: Type.Boolean() }, { title: 'PrinterConfigUpsertResult' })
export const SuccessSchema = Type.Object({ success: Type.Boolean() }, { title: 'Success' })

export const HostAssignmentBody = Type.Object({ hostId: Type.String({ minLength: 1, maxLength: 200 }) }, { ...strict, title: 'HostAssignmentRequest' })
export const HostAssignmentSchema = Type.Object(
  { printerId: Uuid, hostId: Type.String(), assignmentEpoch: Type.Integer({ minimum: 1 }) },
  { title: 'HostAssignment' },
)

/** PATCH /v1/printer-config/{id}/connection-status: the bridge's view of its link to the printer. */
export const ConnectionStatusBody = Type.Object(
  {
    is_connected: Type.Boolean(),
    last_heartbeat: Type.String({ format: 'date-time', description: 'When the bridge last heard from the printer.' }),
    status: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "The printer's status word, as a status event would carry it. It can start or end the printer's job, so it is taken only with hostId and assignmentEpoch, fenced like an event.",
      }),
    ),
    hostId: Type.Optional({ ...HostId, description: "The bridge's host; required with status." }),
    assignmentEpoch: Type.Optional({ ...Epoch, description: 'The host assignment epoch the bridge holds; required with status.' }),
  },
  { ...strict, title: 'ConnectionStatusRequest' },
)

export const TestConnectionResultSchema = Type.Object(
  {
    success: Type.Boolean(),
    error: Type.Optional(Type.String({ description: 'Why the printer could not be reached (refused, timed out, unresolvable).' })),
    host: Type.String(),
    port: Type.Integer(),
    elapsedMs: Type.Number(),
  },
  { title: 'TestConnectionResult' },
)

const NullableString = Type.Union([Type.String({ maxLength: 200 }), Type.Null()])
export const FilamentSlotSchema = Type.Object(
  {
    // the contract: "position (number)"; decided: a whole slot number 0-63, like the AMS slots of a printer event.
    position: Type.Integer({ minimum: 0, maximum: 63 }),
    materialId: Type.Optional(Type.Union([Type.String({ format: 'uuid', description: 'A material of the organization (GET /v1/materials).' }), Type.Null()])),
    materialType: Type.Optional(NullableString),
    color: Type.Optional(NullableString),
    vendor: Type.Optional(NullableString),
  },
  { ...strict, title: 'FilamentSlotAssignment' },
)

export const FilamentAssignBody = Type.Object(
  {
    slots: Type.Array(FilamentSlotSchema, { minItems: 1, maxItems: 64 }),
    jobId: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'A print job of the organization the slots were loaded for.' }), Type.Null()])),
  },
  { ...strict, title: 'FilamentAssignRequest' },
)

export const AmsSlotSchema = Type.Object(
  {
    position: Type.Integer(),
    materialType: Type.Union([Type.String(), Type.Null()]),
    color: Type.Union([Type.String(), Type.Null()]),
    remaining: Type.Union([Type.Number(), Type.Null()]),
    materialId: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    vendor: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  },
  { title: 'AmsSlot' },
)

export const FilamentAssignResultSchema = Type.Object(
  { success: Type.Boolean(), jobId: Type.Union([Type.Integer(), Type.Null()]), slots: Type.Array(AmsSlotSchema) },
  { title: 'FilamentAssignResult' },
)

export const MaintenanceBody = Type.Object(
  {
    maintenance: Type.Boolean(),
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })),
  },
  { ...strict, title: 'MaintenanceRequest' },
)

export const MaintenanceResultSchema = Type.Object({ success: Type.Boolean(), message: Type.String() }, { title: 'MaintenanceResult' })
