/**
 * The bridge's side of dispatch (docs/print-jobs.md): poll the host's printer
 * tasks, claim one; and the operator's side at the printer: the ready gate
 * and "it did start" (operator-device-start). Polling and claiming need
 * print:launch (paired bridge keys have it) or an admin; the ready gate and
 * the start confirmation are changes (printers:write or an admin).
 */
import {
  ClaimSchema,
  ClaimTaskBody,
  HostTasksParams,
  HostTasksSchema,
  OperatorStartSchema,
  PrinterReadyBody,
  PrinterReadySchema,
  PrinterTaskSchema,
  TaskParams,
} from '../../protocol/schemas/print-jobs.js'
import { PrinterParams } from '../../protocol/schemas/printers.js'
import { assertOwned } from '../auth/owned-ids.js'
import { organizationFor, organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { answerReadyGate } from '../jobs/ready-gate.js'
import { configChanged } from './printer-config.js'
import type { Services } from './route-context.js'

/** What the printer task routes use of the node. */
export type PrinterTasksContext = Pick<Services, 'clock' | 'db' | 'hostBindings' | 'jobs' | 'live' | 'logger' | 'printers'>

export const hostTasksRoute = defineRoute({
  method: 'GET',
  path: '/v1/hosts/{hostId}/printer-tasks',
  operationId: 'listHostPrinterTasks',
  summary: "The host's printer tasks to act on: offered, claimed, and started ones carrying commands.",
  description:
    'A bridge polls this (or follows the live topic host:{hostId}) and resumes from it after a restart. Only tasks of the current ' +
    "assignment of each printer are listed: a task fenced by a host move leaves the list. A claimed task shows its start_deadline_at.",
  tags: ['printer-tasks'],
  auth: { kind: 'organization', scope: 'print:launch', admin: true },
  schemas: { params: HostTasksParams },
  responses: { 200: { description: 'The tasks, oldest first.', schema: HostTasksSchema } },
  errors: ['api_key_host_mismatch'],
  handler: async (req, svc: PrinterTasksContext) => {
    await svc.hostBindings.check(req.principal, req.params.hostId)
    return { body: { tasks: await svc.jobs.dispatcher.hostTasks(organizationOf(req.principal), req.params.hostId) } }
  },
})

export const getTaskRoute = defineRoute({
  method: 'GET',
  path: '/v1/printer-tasks/{id}',
  operationId: 'getPrinterTask',
  summary: 'One printer task, in whatever state.',
  tags: ['printer-tasks'],
  auth: { kind: 'organization', scope: ['print:launch', 'print-jobs:read'] },
  schemas: { params: TaskParams },
  responses: { 200: { description: 'The task.', schema: PrinterTaskSchema } },
  errors: ['printer_task_not_found'],
  handler: async (req, svc: PrinterTasksContext) => ({ body: await svc.jobs.dispatcher.task(organizationOf(req.principal), req.params.id) }),
})

export const claimTaskRoute = defineRoute({
  method: 'POST',
  path: '/v1/printer-tasks/{id}/claim',
  operationId: 'claimPrinterTask',
  summary: 'Claim an offered task for the host that will print it.',
  description:
    'The first claim wins; a retried claim by the same host at the same epoch answers the same claim (with a fresh download_url). Another host ' +
    'or an older epoch → 409 assignment_other_host / assignment_epoch_stale; a task no longer offered → 409 task_not_claimable. Report the start ' +
    'as a job:start event whose data holds jobId, printerTaskId (and optionally claimGeneration) within start_deadline_at; file reads for ' +
    'the task carry print_job_id, printer_task_id, claim_generation and printer_task_access_token.',
  tags: ['printer-tasks'],
  auth: { kind: 'organization', scope: 'print:launch', admin: true },
  schemas: { params: TaskParams, body: ClaimTaskBody },
  responses: { 200: { description: 'The claim.', schema: ClaimSchema } },
  errors: ['printer_task_not_found', 'task_not_claimable', 'assignment_other_host', 'assignment_epoch_stale', 'assignment_epoch_unknown', 'api_key_host_mismatch'],
  handler: async (req, svc: PrinterTasksContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    await svc.hostBindings.check(req.principal, req.body.hostId)
    return { body: await svc.jobs.dispatcher.claim(organizationId, req.params.id, req.body, new Date(svc.clock.now())) }
  },
})

export const printerReadyRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/printers/{id}/ready',
  operationId: 'setPrinterReady',
  summary: "The ready gate: the operator's verdict on the printer's last job and whether the printer may take the next one.",
  description:
    'A printer whose job ended is not ready until this is answered. event_type operator:manual_verification:success → the job succeeded; ' +
    ':failed (with failure_reason) → failed, and requeue_failed queues a copy of it (in its batch); :cancelled → cancelled; :skipped → ' +
    'succeeded, verification skipped. Without job_id the printer\'s latest job awaiting verification is meant; no such job → 409 ' +
    'job_not_awaiting_verification. ready: false (ready_updated_source operator_override) holds the printer out of the queue; any ready: true lifts it.',
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  schemas: { params: PrinterParams, body: PrinterReadyBody },
  responses: { 200: { description: 'The printer and the job as stored now.', schema: PrinterReadySchema } },
  errors: ['printer_not_found', 'print_job_not_found', 'job_not_awaiting_verification', 'operator_only'],
  handler: async (req, svc: PrinterTasksContext) => {
    await svc.hostBindings.refuseBridgeKey(req.principal, "The ready gate's verdict")
    const organizationId = organizationFor(req.principal, req.body)
    // Named without a verdict, the job is not read; it must still be one of the organization's.
    await assertOwned(svc.db.sql, organizationId, 'print_job', [{ field: 'body.job_id', id: req.body.job_id }])
    const answer = await answerReadyGate(svc.db.sql, organizationId, req.params.id, req.body, new Date(svc.clock.now()))
    // The printer's actor rereads its gate, and dashboards see it now.
    await configChanged(svc, organizationId, req.params.id)
    return { body: answer }
  },
})

export const operatorDeviceStartRoute = defineRoute({
  method: 'POST',
  path: '/v1/printers/{id}/operator-device-start',
  operationId: 'operatorDeviceStart',
  summary: 'The operator confirms the printer started its task (the bridge never reported it): the job is printing.',
  description:
    "The printer's offered, claimed or unconfirmed task → started, its job → printing. No such task → 409 no_task_to_start; the task started already → 409 job_already_started. No body.",
  tags: ['printers'],
  auth: { kind: 'organization', scope: 'printers:write', admin: true },
  emptyBodyAllowed: true,
  schemas: { params: PrinterParams },
  responses: { 200: { description: 'The job and its task now.', schema: OperatorStartSchema } },
  errors: ['printer_not_found', 'no_task_to_start', 'job_already_started', 'job_transition_invalid', 'operator_only'],
  handler: async (req, svc: PrinterTasksContext) => {
    await svc.hostBindings.refuseBridgeKey(req.principal, 'Confirming that a print started')
    const started = await svc.jobs.dispatcher.operatorStart(organizationOf(req.principal), req.params.id, new Date(svc.clock.now()))
    return { body: { success: true as const, ...started } }
  },
})

export const printerTaskRoutes: readonly Route<RouteSchemas, PrinterTasksContext>[] = [
  hostTasksRoute,
  getTaskRoute,
  claimTaskRoute,
  printerReadyRoute,
  operatorDeviceStartRoute,
] as Route<RouteSchemas, PrinterTasksContext>[]
