/**
 * Printer configuration (docs/printers-and-events.md) and host assignment.
 * Members and keys with printers:read read (credentials only with
 * printers:write or as admin); admins and keys with printers:write change;
 * giving a printer a host, moving it or enabling it takes an admin or a key
 * with fleet:write, whatever the route.
 */
import {
  ConnectionStatusBody,
  FilamentAssignBody,
  FilamentAssignResultSchema,
  MaintenanceBody,
  MaintenanceResultSchema,
  TestConnectionResultSchema,
  HostAssignmentBody,
  HostAssignmentSchema,
  PrinterConfigListQuery,
  PrinterConfigListSchema,
  PrinterConfigOneSchema,
  PrinterParams,
  SuccessSchema,
  UpdatePrinterConfigBody,
  UpsertPrinterConfigBody,
  UpsertResultSchema,
} from '../../protocol/schemas/printers.js'
import { defineRoute, type Principal, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'
import { holdsScope, organizationOf } from '../auth/principal.js'
import { assertOwned } from '../auth/owned-ids.js'
import { ServiceError } from '../../protocol/errors.js'
import { maxProbeMs, probePort, probeTcp } from '../printers/reachability.js'
import type { ConnectionFence } from '../../actors/printer-actor.js'

/** What the printer configuration routes use of the node. */
export type PrinterConfigContext = Pick<Services, 'clock' | 'db' | 'hostBindings' | 'jobs' | 'live' | 'logger' | 'printerConfig' | 'printers'>

export const listPrinterConfigRoute = defineRoute({
  method: 'GET',
  path: '/v1/printer-config',
  operationId: 'listPrinterConfig',
  summary: "The organization's printers and how to reach them (what a bridge reads at start).",
  description:
    'Filters are exact matches. Printers without a serial number or any credential are left out unless include_incomplete=true. ' +
    '`host_id` and `assignment_epoch` tell a bridge which printers are its own and the epoch to send with their events. ' +
    'The printers\' own credentials (access_token, api_key) are shown only to organization admins and to API keys with printers:write ' +
    '(a paired bridge\'s key, which connects to the printers: only those of printers on its own host); for everyone else they are null and credentials_redacted is true.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:read' },
  schemas: { query: PrinterConfigListQuery },
  responses: { 200: { description: 'Printers.', schema: PrinterConfigListSchema } },
  handler: async (req, svc: PrinterConfigContext) => ({
    body: { printers: await svc.printerConfig.list(organizationOf(req.principal), req.query, await credentialAccess(req.principal, svc)) },
  }),
})

export const upsertPrinterConfigRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-config',
  operationId: 'upsertPrinterConfig',
  summary: 'Create a printer, or update the one with this id or serial number (upsert).',
  description:
    'Defaults on create: enabled false, printer_type bambu, secure true, timeout 30000, reconnect_interval 5000. ' +
    'A printer created (or first given a host) with host_id is assigned to that host at epoch 1; a printer already assigned ' +
    'to another host is moved only through PUT /v1/printers/{id}/host-assignment (400 printer_assigned_elsewhere). ' +
    'Giving a printer a host or enabling it changes the fleet: an API key needs fleet:write for that (403 insufficient_scope otherwise), ' +
    'so a bridge may report the printers it discovers (they stay disabled, on no host) until an admin puts them into service.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { body: UpsertPrinterConfigBody },
  responses: { 200: { description: '`updated` is false when the printer was created.', schema: UpsertResultSchema } },
  errors: ['printer_not_found', 'printer_assigned_elsewhere', 'serial_number_taken', 'api_key_host_mismatch'],
  handler: async (req, svc: PrinterConfigContext) => {
    const organizationId = organizationOf(req.principal)
    const { id, updated } = await svc.printerConfig.upsert(organizationId, req.body, { fleet: holdsScope(req.principal, 'fleet:write'), binding: await svc.hostBindings.bindingOf(req.principal) })
    await configChanged(svc, organizationId, id)
    return { body: { id, success: true, updated } }
  },
})

export const getPrinterConfigRoute = defineRoute({
  method: 'GET',
  path: '/v1/printer-config/{id}',
  operationId: 'getPrinterConfig',
  summary: 'One printer\'s configuration.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:read' },
  schemas: { params: PrinterParams },
  responses: { 200: { description: 'The printer.', schema: PrinterConfigOneSchema } },
  errors: ['printer_not_found'],
  handler: async (req, svc: PrinterConfigContext) => ({
    body: { printer: await svc.printerConfig.get(organizationOf(req.principal), req.params.id, await credentialAccess(req.principal, svc)) },
  }),
})

export const updatePrinterConfigRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/printer-config/{id}',
  operationId: 'updatePrinterConfig',
  summary: 'Change any configuration field except id and host_id.',
  description: 'Enabling a printer needs fleet:write for an API key (403 insufficient_scope otherwise), as on POST /v1/printer-config.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { params: PrinterParams, body: UpdatePrinterConfigBody },
  responses: { 200: { description: 'Changed.', schema: SuccessSchema } },
  errors: ['printer_not_found', 'serial_number_taken', 'api_key_host_mismatch'],
  handler: async (req, svc: PrinterConfigContext) => {
    const organizationId = organizationOf(req.principal)
    await svc.hostBindings.checkPrinter(req.principal, organizationId, req.params.id)
    await svc.printerConfig.update(organizationId, req.params.id, req.body, { fleet: holdsScope(req.principal, 'fleet:write') })
    await configChanged(svc, organizationId, req.params.id)
    return { body: { success: true } }
  },
})

export const deletePrinterConfigRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/printer-config/{id}',
  operationId: 'deletePrinter',
  summary: 'Take a printer out of the farm for good.',
  description:
    'Its state goes with it; its jobs keep their history without it; its stored events age out with the event retention. Refused with ' +
    '409 printer_busy {job, reason} while it prints or is paused, or holds a printer task (reason task_offered, task_claimed, task_unconfirmed or ' +
    'task_started: cancel or requeue the job first). Live dashboards drop its tile at once. Needs an admin or fleet:write.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'fleet:write', admin: true },
  schemas: { params: PrinterParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['printer_not_found', 'printer_busy'],
  handler: async (req, svc: PrinterConfigContext) => {
    const organizationId = organizationOf(req.principal)
    await svc.printerConfig.delete(organizationId, req.params.id)
    await configChanged(svc, organizationId, req.params.id)
    return { body: { success: true } }
  },
})

/**
 * The store changed under a printer: its actor (on whichever node) rereads it before its next
 * message, and live dashboards see the change now rather than at the printer's next event.
 */
export async function configChanged(svc: Pick<Services, 'live' | 'logger' | 'printers'>, organizationId: string, printerId: string): Promise<void> {
  await svc.printers.reload(printerId)
  await svc.live.printerConfigChanged(organizationId, printerId).catch((error: unknown) => svc.logger.warn('announcing a printer change failed', { printerId, error }))
}

export const assignHostRoute = defineRoute({
  method: 'PUT',
  path: '/v1/printers/{id}/host-assignment',
  operationId: 'assignPrinterHost',
  summary: 'Move a printer to a bridge host; the assignment epoch rises by one.',
  description:
    'Events that carry an older epoch, or come from another host, are refused from then on, so a bridge that lost the printer ' +
    'cannot overwrite what the new one reports. Re-assigning to the same host also raises the epoch (fencing off a stale instance).',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'fleet:write', admin: true },
  schemas: { params: PrinterParams, body: HostAssignmentBody },
  responses: { 200: { description: 'The new assignment.', schema: HostAssignmentSchema } },
  errors: ['printer_not_found'],
  // Through the printer's actor: the move is serialized with the events it fences.
  handler: async (req, svc: PrinterConfigContext) => {
    const moved = await svc.printers.assignHost(req.params.id, organizationOf(req.principal), req.body.hostId)
    // The old assignment's printer tasks are fenced now rather than at the next sweep tick (docs/print-jobs.md).
    await svc.jobs.dispatcher.sweep(new Date(svc.clock.now())).catch((error: unknown) => svc.logger.warn('printer task sweep after a host move failed; the next tick retries', { error: String(error) }))
    return { body: moved }
  },
})

export const connectionStatusRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/printer-config/{id}/connection-status',
  operationId: 'reportPrinterConnection',
  summary: "The bridge's link to the printer: connected (a sign of life, with an optional status word) or not (offline at once).",
  description:
    'Goes to the printer\'s actor like an event: is_connected true marks the printer online and restarts its presence timer ' +
    '(PRESENCE_TIMEOUT_MS); false marks it offline at once. Not part of the event log (it has no seqn). A `status` word is applied as ' +
    "the printer's status (it can start or end its job), so it needs `hostId` and `assignmentEpoch`, checked like an event's " +
    '(400 without them; 403 api_key_host_mismatch, 409 assignment_* when they are not the printer\'s current assignment).',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { params: PrinterParams, body: ConnectionStatusBody },
  responses: { 200: { description: 'Recorded.', schema: SuccessSchema } },
  errors: ['printer_not_found', 'printer_owner_unavailable', 'api_key_host_mismatch', 'printer_not_assigned', 'assignment_epoch_stale', 'assignment_epoch_unknown', 'assignment_other_host'],
  handler: async (req, svc: PrinterConfigContext) => {
    const at = Date.parse(req.body.last_heartbeat)
    // RFC 3339 allows a leap second (…:60) that JavaScript dates cannot represent.
    if (Number.isNaN(at)) throw new ServiceError('validation_failed', 'body.last_heartbeat is not a time this service can represent (a leap second?)')
    const { status, hostId, assignmentEpoch } = req.body
    await svc.hostBindings.checkPrinter(req.principal, organizationOf(req.principal), req.params.id)
    let fence: ConnectionFence | undefined
    // A status word can start or end the printer's job: only the bridge of its current assignment may send one (docs/printers-and-events.md).
    if (status !== undefined) {
      if (hostId === undefined || assignmentEpoch === undefined) {
        throw new ServiceError('validation_failed', 'body.status needs body.hostId and body.assignmentEpoch (the assignment the bridge holds), or send the status as a status event')
      }
      await svc.hostBindings.check(req.principal, hostId)
      fence = { hostId, assignmentEpoch }
    }
    await svc.printers.reportConnection(req.params.id, organizationOf(req.principal), req.body.is_connected, at, status, fence)
    return { body: { success: true } }
  },
})

export const testConnectionRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-config/{id}/test-connection',
  operationId: 'testPrinterConnection',
  summary: "Can the service open a TCP connection to the printer's address and protocol port?",
  description:
    `A bounded check: at most the printer's timeout, never more than ${maxProbeMs} ms. The port is the configured one, else the usual ` +
    'port of its protocol/type (Bambu MQTT 8883, or 1883 when not secure; Moonraker 7125; Snapmaker 8080; FlashForge 8899; HTTP 443/80). ' +
    'success false with `error` when unreachable (that is an answer, not a failure of the request).',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  emptyBodyAllowed: true,
  schemas: { params: PrinterParams },
  responses: { 200: { description: 'The outcome.', schema: TestConnectionResultSchema } },
  errors: ['printer_not_found', 'api_key_host_mismatch'],
  handler: async (req, svc: PrinterConfigContext) => {
    await svc.hostBindings.checkPrinter(req.principal, organizationOf(req.principal), req.params.id)
    const printer = await svc.printerConfig.get(organizationOf(req.principal), req.params.id, { credentials: false })
    return { body: await probeTcp(printer.ip_address, probePort(printer), Math.min(printer.timeout, maxProbeMs), svc.clock) }
  },
})

export const assignFilamentsRoute = defineRoute({
  method: 'POST',
  path: '/v1/printers/{id}/filaments/assign',
  operationId: 'assignPrinterFilaments',
  summary: "Record which filament is loaded in which slot (kept on the printer's actor; the queue matches jobs against it).",
  description:
    'Only the slots named change; a field left out keeps its value, null clears it. An assignment survives AMS reports of the same ' +
    'material type in that slot and is dropped when another material is reported there.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { params: PrinterParams, body: FilamentAssignBody },
  responses: { 200: { description: "The printer's slots now.", schema: FilamentAssignResultSchema } },
  errors: ['printer_not_found', 'material_not_found', 'print_job_not_found', 'printer_owner_unavailable', 'api_key_host_mismatch'],
  handler: async (req, svc: PrinterConfigContext) => {
    const positions = new Set<number>()
    for (const [index, slot] of req.body.slots.entries()) {
      if (positions.has(slot.position)) throw new ServiceError('validation_failed', `body.slots[${index}].position repeats slot ${slot.position}`)
      positions.add(slot.position)
    }
    const organizationId = organizationOf(req.principal)
    await svc.hostBindings.checkPrinter(req.principal, organizationId, req.params.id)
    const jobId = req.body.jobId ?? null
    // The printer first: another organization's printer is the answer, whatever its body names.
    await assertOwned(svc.db.sql, organizationId, 'printer', [{ field: 'the path\'s printer id', id: req.params.id }])
    await assertOwned(svc.db.sql, organizationId, 'material', req.body.slots.map((slot, i) => ({ field: `body.slots[${i}].materialId`, id: slot.materialId })))
    await assertOwned(svc.db.sql, organizationId, 'print_job', [{ field: 'body.jobId', id: jobId }])
    const slots = await svc.printers.assignFilaments(req.params.id, organizationId, req.body.slots, jobId)
    return { body: { success: true, jobId, slots } }
  },
})

export const maintenanceRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/printers/{id}/maintenance',
  operationId: 'setPrinterMaintenance',
  summary: 'Turn the maintenance flag on or off.',
  description:
    'Turning it on while a job is printing or paused answers 409 {job, reason, message} (reason job_printing or job_paused); ' +
    "turning it off always works. `organizationId`, when given, must be the request's organization.",
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { params: PrinterParams, body: MaintenanceBody },
  responses: { 200: { description: 'Set.', schema: MaintenanceResultSchema } },
  errors: ['printer_not_found', 'printer_busy', 'printer_owner_unavailable', 'api_key_host_mismatch'],
  handler: async (req, svc: PrinterConfigContext) => {
    const organizationId = organizationOf(req.principal)
    if (req.body.organizationId !== undefined && req.body.organizationId !== organizationId) {
      throw new ServiceError('validation_failed', "body.organizationId names another organization than the request's (x-organization-id or your only one)")
    }
    await svc.hostBindings.checkPrinter(req.principal, organizationId, req.params.id)
    await svc.printers.setMaintenance(req.params.id, organizationId, req.body.maintenance)
    return { body: { success: true, message: req.body.maintenance ? 'maintenance on' : 'maintenance off' } }
  },
})

export const printerConfigRoutes: readonly Route<RouteSchemas, PrinterConfigContext>[] = [
  listPrinterConfigRoute,
  upsertPrinterConfigRoute,
  getPrinterConfigRoute,
  updatePrinterConfigRoute,
  deletePrinterConfigRoute,
  assignHostRoute,
  connectionStatusRoute,
  testConnectionRoute,
  assignFilamentsRoute,
  maintenanceRoute,
]

/**
 * The printers' own credentials go to admins and to keys with printers:write; a paired bridge key
 * gets those of its own host's printers only (src/auth/host-binding.ts).
 */
async function credentialAccess(principal: Principal, svc: Pick<PrinterConfigContext, 'hostBindings'>): Promise<{ credentials: boolean; onlyHost?: string | null }> {
  const credentials = holdsScope(principal, 'printers:write')
  if (!credentials) return { credentials }
  const binding = await svc.hostBindings.bindingOf(principal)
  return binding === undefined ? { credentials } : { credentials, onlyHost: binding.host }
}
