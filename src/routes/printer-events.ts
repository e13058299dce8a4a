/**
 * Printer events from bridges (SPEC part 4 group H, part 6; DESIGN section 5):
 * validated, fenced and ordered by the printer's actor, stored by the group
 * commit, answered only after the commit. Error bodies carry `code`.
 *
 * Who may post: an API key with printers:write (what a paired bridge holds),
 * or an organization admin. The host is named by the events' hostId, and the
 * fence, not the credential, decides whether that host speaks for the printer.
 */
import {
  BatchResultSchema,
  checkBatch,
  describeBatchProblem,
  maxDataDepth,
  nestsDeeperThan,
  PrinterEventBatchSchema,
  printerOfSingleEvent,
  SingleEventResultSchema,
  SinglePrinterEventSchema,
} from '../../protocol/printer-events.js'
import { ServiceError, type ErrorCode } from '../../protocol/errors.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from '../services.js'
import { organizationOf } from '../auth/principal.js'

const ingestErrors: ErrorCode[] = [
  'printer_not_found',
  'printer_not_assigned',
  'assignment_epoch_stale',
  'assignment_epoch_unknown',
  'assignment_other_host',
  'printer_owner_unavailable',
]

export const postPrinterEventRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-events',
  operationId: 'postPrinterEvent',
  summary: 'One printer event from a bridge.',
  description:
    'The printer is named by a top-level `printerId` or, failing that, `data.printerId`. ' +
    'The event is fenced by hostId + assignmentEpoch (409 with a specific code), applied in seqn order, and answered only once stored. ' +
    'A duplicate (seqn at or below the high-water mark, or a known eventId / idempotencyKey) answers success without being applied again. ' +
    '`jobId` is the job a job:* event belongs to; job:start creates one.',
  tags: ['printer events'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  errorBody: 'coded',
  schemas: { body: SinglePrinterEventSchema },
  responses: { 200: { description: 'Stored (or already stored).', schema: SingleEventResultSchema } },
  errors: ingestErrors,
  handler: async (req, svc: Services) => {
    const event = req.body
    const printerId = printerOfSingleEvent(event)
    if (printerId === undefined) throw new ServiceError('validation_failed', 'body.printerId is required (or data.printerId): it names the printer the event is about')
    if (nestsDeeperThan(event.data, maxDataDepth)) throw new ServiceError('validation_failed', `body.data nests deeper than ${maxDataDepth} levels`)
    const result = await svc.printers.ingest(printerId, {
      organizationId: organizationOf(req.principal),
      hostId: event.hostId,
      assignmentEpoch: event.assignmentEpoch,
      events: [
        {
          eventId: event.eventId,
          idempotencyKey: event.idempotencyKey,
          type: event.eventType,
          seqn: event.seqn,
          timestamp: event.timestamp,
          deliveryAttempt: event.deliveryAttempt,
          data: event.data,
        },
      ],
    })
    const refused = result.refused[0]
    if (refused !== undefined) return { body: { success: false, jobId: null, message: refused.reason } }
    // The same answer for a first delivery and its retries (the job id is read back for a duplicate).
    return { body: { success: true, jobId: result.jobOf.get(event.eventId) ?? null, message: 'stored' } }
  },
})

export const postPrinterEventBatchRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-events/batch',
  operationId: 'postPrinterEventBatch',
  summary: "A batch of one printer's events from a bridge (1-100).",
  description:
    "Every item carries the batch's hostId and assignmentEpoch; eventIds, seqns and idempotencyKeys do not repeat within a batch; " +
    'maxSeqn, when given, is the largest seqn. Events apply in seqn order. A retried batch (deliveryAttempt + 1) answers exactly like ' +
    'the first delivery and stores nothing twice. `failed` counts events the log will never hold: a seqn at or below the high-water mark ' +
    'whose eventId is not the one stored there (arrived too late, or a reused seqn); retrying does not change them.',
  tags: ['printer events'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  errorBody: 'coded',
  schemas: { body: PrinterEventBatchSchema },
  responses: { 200: { description: 'Stored; the counts.', schema: BatchResultSchema } },
  errors: ingestErrors,
  handler: async (req, svc: Services) => {
    const batch = req.body
    const problem = checkBatch(batch)
    if (problem !== undefined) throw new ServiceError('validation_failed', describeBatchProblem(problem))
    const result = await svc.printers.ingest(batch.printerId, {
      organizationId: organizationOf(req.principal),
      hostId: batch.hostId,
      assignmentEpoch: batch.assignmentEpoch,
      events: batch.events,
    })
    return { body: { success: true, processed: result.processed, failed: result.failed, refused: result.refused } }
  },
})

export const printerEventRoutes: readonly Route<RouteSchemas, Services>[] = [postPrinterEventRoute, postPrinterEventBatchRoute]
