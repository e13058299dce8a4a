/**
 * Print jobs (docs/print-jobs.md): create, list (filters in the
 * body), read one, status changes, delete, and the hand assignment to a
 * printer. Any member (or print-jobs:read) reads; changes are an admin's (or
 * print-jobs:write), like every change to the farm.
 */
import {
  AssignmentSchema,
  AssignPrintJobBody,
  CreatePrintJobBody,
  PrintJobListBody,
  PrintJobListSchema,
  PrintJobParams,
  PrintJobSchema,
  PrintJobStatusBody,
} from '../../protocol/schemas/print-jobs.js'
import { SuccessSchema } from '../../protocol/schemas/models.js'
import { assertOwned } from '../auth/owned-ids.js'
import { organizationFor, organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { creatorOf, idempotencyKeyOf } from '../jobs/job-store.js'
import { explainJobs } from '../queue/queue-view.js'
import type { Services } from './route-context.js'

/** What the print job routes use of the node. */
export type PrintJobsContext = Pick<Services, 'clock' | 'db' | 'hostBindings' | 'jobs' | 'queue'>

export const createPrintJobRoute = defineRoute({
  method: 'POST',
  path: '/v1/print-jobs/create',
  operationId: 'createPrintJob',
  summary: 'Queue a print of a model file (one plate), optionally as a make with its chosen materials.',
  description:
    "Required materials (`constraints.required_materials`): per filament the plate uses, the material the make (`make_id`) chose for it, else what the " +
    'slicer recorded. `print_options.auto_assign: false` keeps the job for a hand assignment (POST /v1/print-jobs/{id}/assign). Answers 201 with the job. ' +
    'With an Idempotency-Key header (1-200 characters), a retry with the same key answers 200 with the job the first request created, so a lost answer never queues a second print.',
  tags: ['print-jobs'],
  auth: { kind: 'organization', scope: 'print-jobs:write', admin: true },
  schemas: { body: CreatePrintJobBody },
  responses: { 201: { description: 'The job, queued.', schema: PrintJobSchema }, 200: { description: 'The job an earlier request with the same Idempotency-Key created.', schema: PrintJobSchema } },
  errors: ['file_not_found', 'file_not_printable', 'make_not_found'],
  handler: async (req, svc: PrintJobsContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    const by = creatorOf(req.principal)
    const key = idempotencyKeyOf(req.headers)
    const { job, created } = await svc.jobs.store.create(organizationId, req.body, by, key)
    if (created) svc.queue.wake(organizationId)
    return { status: created ? 201 : 200, body: job }
  },
})

export const listPrintJobsRoute = defineRoute({
  method: 'POST',
  path: '/v1/print-jobs',
  operationId: 'listPrintJobs',
  summary: 'List print jobs, newest first; the filters go in the body.',
  description:
    '`status` (any of), `printer_id`, `model_file_id`, `make_id`, `batch_id`, `search` (part of the name); `total` counts every match. ' +
    "Another organization's printer, file, make or batch id answers 404.",
  tags: ['print-jobs'],
  auth: { kind: 'organization', scope: 'print-jobs:read' },
  emptyBodyAllowed: true,
  schemas: { body: PrintJobListBody },
  responses: { 200: { description: 'A page of jobs.', schema: PrintJobListSchema } },
  errors: ['printer_not_found', 'file_not_found', 'make_not_found', 'batch_not_found'],
  handler: async (req, svc: PrintJobsContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    const { sql } = svc.db
    await assertOwned(sql, organizationId, 'printer', [{ field: 'body.printer_id', id: req.body.printer_id }])
    await assertOwned(sql, organizationId, 'model_file', [{ field: 'body.model_file_id', id: req.body.model_file_id }])
    await assertOwned(sql, organizationId, 'make', [{ field: 'body.make_id', id: req.body.make_id }])
    await assertOwned(sql, organizationId, 'batch', [{ field: 'body.batch_id', id: req.body.batch_id }])
    const page = await svc.jobs.store.list(organizationId, req.body)
    return { body: { ...page, jobs: await explainJobs(svc.db.sql, organizationId, page.jobs, svc.queue.settings, svc.clock.now(), false) } }
  },
})

export const getPrintJobRoute = defineRoute({
  method: 'GET',
  path: '/v1/print-jobs/{id}',
  operationId: 'getPrintJob',
  summary: 'One print job: status, printer, task, progress, verification; while it waits, its place in the queue and every reason per printer.',
  tags: ['print-jobs'],
  auth: { kind: 'organization', scope: 'print-jobs:read' },
  schemas: { params: PrintJobParams },
  responses: { 200: { description: 'The job.', schema: PrintJobSchema } },
  errors: ['print_job_not_found'],
  handler: async (req, svc: PrintJobsContext) => {
    const organizationId = organizationOf(req.principal)
    const job = await svc.jobs.store.get(organizationId, Number(req.params.id))
    return { body: (await explainJobs(svc.db.sql, organizationId, [job], svc.queue.settings, svc.clock.now(), true))[0]! }
  },
})

export const changePrintJobStatusRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/print-jobs/{id}/status',
  operationId: 'changePrintJobStatus',
  summary: 'Cancel, requeue, pause or resume a job.',
  description:
    '`cancelled` from queued, dispatching, printing or paused (a printing job is cancelled now and its bridge told to stop). `queued` requeues a ' +
    "failed or cancelled job, or a dispatching one whose claimed task never confirmed its start (its task is cancelled; a later job:start for it is refused). " +
    '`paused` / `printing` send a pause / resume command to the bridge; the status follows when the bridge reports it. Anything else is 409 ' +
    'job_transition_invalid naming both statuses.',
  tags: ['print-jobs'],
  auth: { kind: 'organization', scope: 'print-jobs:write', admin: true },
  schemas: { params: PrintJobParams, body: PrintJobStatusBody },
  responses: { 200: { description: 'The job as stored now.', schema: PrintJobSchema } },
  errors: ['print_job_not_found', 'job_transition_invalid', 'api_key_host_mismatch'],
  handler: async (req, svc: PrintJobsContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    await svc.hostBindings.checkJob(req.principal, organizationId, Number(req.params.id))
    const change = await svc.jobs.store.changeStatus(organizationId, Number(req.params.id), req.body, new Date(svc.clock.now()))
    if (change.task !== null) svc.jobs.dispatcher.notify(organizationId, change.task.hostId, change.task.id)
    svc.queue.wake(organizationId)
    return { body: change.job }
  },
})

export const deletePrintJobRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/print-jobs/{id}',
  operationId: 'deletePrintJob',
  summary: 'Delete a queued or ended job (409 job_in_progress while it is dispatching, printing or paused).',
  tags: ['print-jobs'],
  auth: { kind: 'organization', scope: 'print-jobs:write', admin: true },
  schemas: { params: PrintJobParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['print_job_not_found', 'job_in_progress', 'api_key_host_mismatch'],
  handler: async (req, svc: PrintJobsContext) => {
    const organizationId = organizationOf(req.principal)
    await svc.hostBindings.checkJob(req.principal, organizationId, Number(req.params.id))
    await svc.jobs.store.delete(organizationId, Number(req.params.id))
    svc.queue.wake(organizationId)
    return { body: { success: true } }
  },
})

export const assignPrintJobRoute = defineRoute({
  method: 'POST',
  path: '/v1/print-jobs/{id}/assign',
  operationId: 'assignPrintJob',
  summary: "Offer a queued job to a printer by hand: a printer task for the printer's bridge to claim.",
  description:
    'The printer must be eligible (enabled, online, not in maintenance, ready: its last job verified, nothing running or offered on it, a host ' +
    'assigned, and a status of WAITING, IDLE or COMPLETE: not ERROR, FILAMENT_RUNOUT, OFFLINE, RUNNING, PAUSED or UNKNOWN) and compatible as the queue sees it (printer model, nozzle, and, when the printer reports its slots or has spools recorded, each ' +
    "required material loaded within the colour tolerance; grams are the operator's call); otherwise 409 printer_not_eligible lists the reasons. The task is offered for TASK_OFFER_TTL_S; unclaimed, it expires and the job is queued again. " +
    'The same assignment repeated while its task is offered or claimed answers the same job and task (a retry after a lost answer).',
  tags: ['print-jobs'],
  auth: { kind: 'organization', scope: 'print-jobs:write', admin: true },
  schemas: { params: PrintJobParams, body: AssignPrintJobBody },
  responses: { 200: { description: 'The job (dispatching) and its task (offered).', schema: AssignmentSchema } },
  errors: ['print_job_not_found', 'printer_not_found', 'job_not_dispatchable', 'printer_not_eligible', 'file_not_printable', 'api_key_host_mismatch'],
  handler: async (req, svc: PrintJobsContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    await svc.hostBindings.checkPrinter(req.principal, organizationId, req.body.printer_id)
    return { body: await svc.jobs.dispatcher.assign(organizationId, Number(req.params.id), req.body.printer_id, new Date(svc.clock.now())) }
  },
})

export const printJobRoutes: readonly Route<RouteSchemas, PrintJobsContext>[] = [
  createPrintJobRoute,
  listPrintJobsRoute,
  getPrintJobRoute,
  changePrintJobStatusRoute,
  deletePrintJobRoute,
  assignPrintJobRoute,
] as Route<RouteSchemas, PrintJobsContext>[]
