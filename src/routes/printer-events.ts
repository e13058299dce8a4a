/**
 * Printer events from bridges (part 6; docs/printers-and-events.md):
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
import type { Services } from './route-context.js'
import { organizationOf } from '../auth/principal.js'

/** What the printer event routes use of the node. */
export type PrinterEventsContext = Pick<Services, 'hostBindings' | 'printers'>

const ingestErrors: ErrorCode[] = [
  'api_key_host_mismatch',
  'printer_not_found',
  'printer_not_assigned',
  'assignment_epoch_stale',
  'assignment_epoch_unknown',
  'assignment_other_host',
  'printer_owner_unavailable',
]

const messages = {
  applied: 'stored and applied',
  late: 'stored, not applied: a higher seqn was applied before it arrived',
  duplicate: 'already stored (an earlier delivery); nothing changed',
} as const

export const postPrinterEventRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-events',
  operationId: 'postPrinterEvent',
  summary: 'One printer event from a bridge.',
  description:
    'The printer is named by a top-level `printerId` or, failing that, `data.printerId`. ' +
    'The event is fenced by hostId + assignmentEpoch (409 with a specific code), applied in seqn order, and answered only once stored. ' +
    '`outcome` says what happened (the seqn rules of docs/printers-and-events.md): applied; late (a new event at or below the highest applied seqn: ' +
    'stored in the history, not applied); duplicate (already stored: success, nothing applied again); refused (reason seqn_reused: ' +
    'another event holds that seqn; success false). `last_seqn` is the highest seqn applied in the current epoch. ' +
    '`jobId` is the job a job:* event belongs to; job:start creates one.',
  tags: ['printer events'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  errorBody: 'coded',
  schemas: { body: SinglePrinterEventSchema },
  responses: { 200: { description: 'Stored (or already stored).', schema: SingleEventResultSchema } },
  errors: ingestErrors,
  handler: async (req, svc: PrinterEventsContext) => {
    const event = req.body
    const printerId = printerOfSingleEvent(event)
    if (printerId === undefined) throw new ServiceError('validation_failed', 'body.printerId is required (or data.printerId): it names the printer the event is about')
    if (nestsDeeperThan(event.data, maxDataDepth)) throw new ServiceError('validation_failed', `body.data nests deeper than ${maxDataDepth} levels`)
    await svc.hostBindings.check(req.principal, event.hostId)
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
    const outcome = result.outcomes[0]!
    if (outcome.outcome === 'refused') return { body: { success: false, jobId: null, message: outcome.message ?? 'refused', outcome: 'refused' as const, reason: outcome.reason, last_seqn: result.lastSeqn } }
    // The same answer for a first delivery and its retries (the job id is read back for a duplicate).
    return { body: { success: true, jobId: result.jobOf.get(event.eventId) ?? null, message: messages[outcome.outcome], outcome: outcome.outcome, last_seqn: result.lastSeqn } }
  },
})

export const postPrinterEventBatchRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-events/batch',
  operationId: 'postPrinterEventBatch',
  summary: "A batch of one printer's events from a bridge (1-100).",
  description:
    "Every item carries the batch's hostId and assignmentEpoch; eventIds, seqns and idempotencyKeys do not repeat within a batch; " +
    'maxSeqn, when given, is the largest seqn. Events apply in seqn order. A retried batch (deliveryAttempt + 1) answers with the same counts as ' +
    'the first delivery and stores nothing twice. `events` gives each event\'s outcome: applied; late (new, but at or below the highest applied ' +
    'seqn: stored in the history, not applied); duplicate (already stored); refused (reason seqn_reused: another event holds that seqn). ' +
    '`processed` counts applied, late and duplicate events (the log holds them); `failed` counts refused ones (it never will; retrying ' +
    'does not change them). `last_seqn` is the highest seqn applied in the current epoch, where a restarted bridge continues.',
  tags: ['printer events'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  errorBody: 'coded',
  schemas: { body: PrinterEventBatchSchema },
  responses: { 200: { description: 'Stored; the counts.', schema: BatchResultSchema } },
  errors: ingestErrors,
  handler: async (req, svc: PrinterEventsContext) => {
    const batch = req.body
    const problem = checkBatch(batch)
    if (problem !== undefined) throw new ServiceError('validation_failed', describeBatchProblem(problem))
    await svc.hostBindings.check(req.principal, batch.hostId)
    const result = await svc.printers.ingest(batch.printerId, {
      organizationId: organizationOf(req.principal),
      hostId: batch.hostId,
      assignmentEpoch: batch.assignmentEpoch,
      events: batch.events,
    })
    return { body: { success: true, processed: result.processed, failed: result.failed, events: result.outcomes, refused: result.refused, last_seqn: result.lastSeqn } }
  },
})

export const printerEventRoutes: readonly Route<RouteSchemas, PrinterEventsContext>[] = [postPrinterEventRoute, postPrinterEventBatchRoute]
