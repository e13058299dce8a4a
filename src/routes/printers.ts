/**
 * Reading printers back: their state (the read model each printer's actor
 * keeps), their event history, and the operator's acknowledgement of an
 * error. Reads take printers:read (a bridge's key included) or any member;
 * the acknowledgement is a change (printers:write or an admin).
 */
import {
  AcknowledgeErrorBody,
  AcknowledgeErrorResultSchema,
  EventHistoryQuery,
  EventHistorySchema,
  PrinterListQuery,
  PrinterListSchema,
  PrinterOneSchema,
} from '../../protocol/schemas/printer-state.js'
import { PrinterParams } from '../../protocol/schemas/printers.js'
import { organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { printerStateOfView } from '../printers/read-model.js'
import type { Services } from './route-context.js'

/** What the printer read routes use of the node. */
export type PrintersContext = Pick<Services, 'clock' | 'hostBindings' | 'logger' | 'printerReads' | 'printers'>

export const listPrintersRoute = defineRoute({
  method: 'GET',
  path: '/v1/printers',
  operationId: 'listPrinters',
  summary: "The organization's printers with their live state: status, job, temperatures, filaments, errors.",
  description:
    'Sorted by name, then id. Filters: `status` (comma-separated display statuses), `host_id`, `online`, `search` (part of the name or ' +
    'serial number). `total` counts every printer the filters match. The state is what each printer\'s actor last committed; ' +
    '`last_seqn` tells a restarted bridge where its sequence stands (docs/printers-and-events.md).',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:read' },
  schemas: { query: PrinterListQuery },
  responses: { 200: { description: 'A page of printers.', schema: PrinterListSchema } },
  handler: async (req, svc: PrintersContext) => ({ body: await svc.printerReads.list(organizationOf(req.principal), req.query) }),
})

export const getPrinterRoute = defineRoute({
  method: 'GET',
  path: '/v1/printers/{id}',
  operationId: 'getPrinter',
  summary: "One printer's live state.",
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:read' },
  schemas: { params: PrinterParams },
  responses: { 200: { description: 'The printer.', schema: PrinterOneSchema } },
  errors: ['printer_not_found'],
  handler: async (req, svc: PrintersContext) => ({ body: { printer: await svc.printerReads.get(organizationOf(req.principal), req.params.id) } }),
})

export const printerEventHistoryRoute = defineRoute({
  method: 'GET',
  path: '/v1/printers/{id}/events',
  operationId: 'listPrinterEvents',
  summary: "A printer's stored events, a page at a time.",
  description:
    'In the order the printer produced them: assignment epoch, then seqn (for every applied event this is also the order of receipt; ' +
    'a late event appears at its seqn with applied false). Pass `next_cursor` as `after` for the next page; it is null on the last page. ' +
    'Events are kept for EVENT_RETENTION_DAYS after receipt.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:read' },
  schemas: { params: PrinterParams, query: EventHistoryQuery },
  responses: { 200: { description: 'A page of events.', schema: EventHistorySchema } },
  errors: ['printer_not_found'],
  handler: async (req, svc: PrintersContext) => ({ body: await svc.printerReads.history(organizationOf(req.principal), req.params.id, req.query) }),
})

export const acknowledgeErrorRoute = defineRoute({
  method: 'POST',
  path: '/v1/printers/{id}/error/acknowledge',
  operationId: 'acknowledgePrinterError',
  summary: "Clear the printer's standing error: the operator has seen to it.",
  description:
    'The printer leaves ERROR (its status follows the rest of its state). If it keeps repeating the same failure (a Bambu printer says ' +
    'FAILED until its next print), that error is not raised again; another error is. Without a standing error this changes nothing ' +
    'and answers acknowledged null.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  emptyBodyAllowed: true,
  schemas: { params: PrinterParams, body: AcknowledgeErrorBody },
  responses: { 200: { description: 'Cleared (or nothing to clear); the printer now.', schema: AcknowledgeErrorResultSchema } },
  errors: ['printer_not_found', 'printer_owner_unavailable', 'api_key_host_mismatch'],
  handler: async (req, svc: PrintersContext) => {
    await svc.hostBindings.checkPrinter(req.principal, organizationOf(req.principal), req.params.id)
    const { acknowledged, view } = await svc.printers.acknowledgeError(req.params.id, organizationOf(req.principal))
    if (acknowledged !== null) svc.logger.info('printer error acknowledged', { printerId: req.params.id, code: acknowledged.code, note: req.body.note })
    return {
      body: {
        success: true,
        acknowledged: acknowledged === null ? null : { code: acknowledged.code, message: acknowledged.message, at: new Date(acknowledged.at).toISOString() },
        printer: printerStateOfView(view, svc.clock.now()),
      },
    }
  },
})


export const printerRoutes: readonly Route<RouteSchemas, PrintersContext>[] = [listPrintersRoute, getPrinterRoute, printerEventHistoryRoute, acknowledgeErrorRoute]
