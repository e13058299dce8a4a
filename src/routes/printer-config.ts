/**
 * Printer configuration (SPEC part 4 group H) and host assignment (issue 4).
 * Members and keys with printers:read read; admins and keys with
 * printers:write change; moving a printer to another host takes an admin or
 * a key with fleet:write.
 */
import {
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
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from '../services.js'
import { organizationOf } from '../auth/principal.js'

export const listPrinterConfigRoute = defineRoute({
  method: 'GET',
  path: '/v1/printer-config',
  operationId: 'listPrinterConfig',
  summary: "The organization's printers and how to reach them (what a bridge reads at start).",
  description:
    'Filters are exact matches. Printers without a serial number or any credential are left out unless include_incomplete=true. ' +
    '`host_id` and `assignment_epoch` tell a bridge which printers are its own and the epoch to send with their events.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:read' },
  schemas: { query: PrinterConfigListQuery },
  responses: { 200: { description: 'Printers.', schema: PrinterConfigListSchema } },
  handler: async (req, svc: Services) => ({ body: { printers: await svc.printerConfig.list(organizationOf(req.principal), req.query) } }),
})

export const upsertPrinterConfigRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-config',
  operationId: 'upsertPrinterConfig',
  summary: 'Create a printer, or update the one with this id or serial number (upsert).',
  description:
    'Defaults on create: enabled false, printer_type bambu, secure true, timeout 30000, reconnect_interval 5000. ' +
    'A printer created (or first given a host) with host_id is assigned to that host at epoch 1; a printer already assigned ' +
    'to another host is moved only through PUT /v1/printers/{id}/host-assignment (409 printer_assigned_elsewhere).',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { body: UpsertPrinterConfigBody },
  responses: { 200: { description: '`updated` is false when the printer was created.', schema: UpsertResultSchema } },
  errors: ['printer_not_found', 'printer_assigned_elsewhere', 'serial_number_taken'],
  handler: async (req, svc: Services) => {
    const { id, updated } = await svc.printerConfig.upsert(organizationOf(req.principal), req.body)
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
  handler: async (req, svc: Services) => ({ body: { printer: await svc.printerConfig.get(organizationOf(req.principal), req.params.id) } }),
})

export const updatePrinterConfigRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/printer-config/{id}',
  operationId: 'updatePrinterConfig',
  summary: 'Change any configuration field except id and host_id.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { params: PrinterParams, body: UpdatePrinterConfigBody },
  responses: { 200: { description: 'Changed.', schema: SuccessSchema } },
  errors: ['printer_not_found', 'serial_number_taken'],
  handler: async (req, svc: Services) => {
    await svc.printerConfig.update(organizationOf(req.principal), req.params.id, req.body)
    return { body: { success: true } }
  },
})

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
  handler: async (req, svc: Services) => ({ body: await svc.printerConfig.assignHost(organizationOf(req.principal), req.params.id, req.body.hostId) }),
})

export const printerConfigRoutes: readonly Route<RouteSchemas, Services>[] = [
  listPrinterConfigRoute,
  upsertPrinterConfigRoute,
  getPrinterConfigRoute,
  updatePrinterConfigRoute,
  assignHostRoute,
]
