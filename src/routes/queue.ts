/**
 * The smart queue: the waiting jobs in order with where each goes or why it
 * waits, and reordering. Reading is any member's (or print-jobs:read);
 * reordering an admin's (or print-jobs:write), like every job mutation.
 */
import { PrintJobSchema } from '../../protocol/schemas/print-jobs.js'
import { QueueListSchema, QueueQuery, QueueReorderBody, QueueReorderParams } from '../../protocol/schemas/queue.js'
import { organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { queueList } from '../queue/queue-view.js'
import { reorder } from '../queue/reorder.js'
import type { Services } from './route-context.js'

/** What the queue routes use of the node. */
export type QueueContext = Pick<Services, 'clock' | 'db' | 'queue'>

export const getQueueRoute = defineRoute({
  method: 'GET',
  path: '/v1/queue',
  operationId: 'getQueue',
  summary: 'The waiting jobs in order, each with the printer it goes to or why it waits on each printer.',
  description:
    'Jobs being dispatched (offered to or claimed by a bridge) come first, then the queued jobs: higher priority first, then position, then age. ' +
    "Each job's `match` names the printer the queue chose (also while the job waits for the start stagger) and the slot of each filament, " +
    'or lists every reason per printer it cannot go there, in fixed codes: printer_disabled, printer_offline, printer_busy, printer_not_ready, ' +
    'printer_maintenance, printer_model_mismatch, nozzle_mismatch, material_missing, material_insufficient, host_unassigned, stagger_wait, ' +
    'manual_assignment, start_unconfirmed. Fix a cause and the job is dispatched at the next pass, without anything else to do. ' +
    '`reasons_limit` bounds the reasons listed per job; `reason_counts` always counts them all.',
  tags: ['queue'],
  auth: { kind: 'organization', scope: 'print-jobs:read' },
  schemas: { query: QueueQuery },
  responses: { 200: { description: 'A page of the queue.', schema: QueueListSchema } },
  handler: async (req, svc: QueueContext) => {
    const page = { limit: req.query.limit ?? 50, offset: req.query.offset ?? 0, reasonsLimit: req.query.reasons_limit ?? 100 }
    return { body: await queueList(svc.db.sql, organizationOf(req.principal), svc.queue.settings, svc.clock.now(), page) }
  },
})

export const reorderQueueRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/queue/{jobId}',
  operationId: 'reorderQueue',
  summary: "Change a queued job's priority and/or its position within its priority.",
  description:
    'The job takes the 1-based `position` within the priority (past the end: last); the other queued jobs of that priority are numbered ' +
    'again around it in their current order. A new `priority` without `position` puts the job after the positioned jobs of that priority. ' +
    'Only a queued job can be reordered (409 job_not_queued).',
  tags: ['queue'],
  auth: { kind: 'organization', scope: 'print-jobs:write', admin: true },
  schemas: { params: QueueReorderParams, body: QueueReorderBody },
  responses: { 200: { description: 'The job as stored now.', schema: PrintJobSchema } },
  errors: ['print_job_not_found', 'job_not_queued'],
  handler: async (req, svc: QueueContext) => {
    const organizationId = organizationOf(req.principal)
    const job = await reorder(svc.db.sql, organizationId, Number(req.params.jobId), req.body, new Date(svc.clock.now()))
    svc.queue.wake(organizationId)
    return { body: job }
  },
})

export const queueRoutes: readonly Route<RouteSchemas, QueueContext>[] = [getQueueRoute, reorderQueueRoute]
