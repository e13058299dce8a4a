/**
 * The model-files read model (docs/files.md; decisions in
 * protocol/schemas/model-files.ts). Bearer or x-api-key: reads need
 * files:read, label changes files:write. Reprocessing takes a signed-in
 * person (bearer token only): it is an operator's decision, not a
 * bridge's.
 */
import {
  FilamentLabelsBody,
  LiveOperationsSchema,
  ModelFileCountsQuery,
  ModelFileCountsSchema,
  ModelFileListQuery,
  ModelFileListSchema,
  ReceiptParams,
  ReprocessAcceptedSchema,
  ReprocessReceiptSchema,
} from '../../protocol/schemas/model-files.js'
import { FileParams, FileSchema } from '../../protocol/schemas/models.js'
import { ModelFileOverviewSchema } from '../../protocol/schemas/makes.js'
import { modelFileOverview } from '../files/model-file-overview.js'
import { Type } from '@sinclair/typebox'
import { organizationOf } from '../auth/principal.js'
import { fileRecordOf } from '../files/file-records.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the model file routes use of the node. */
export type ModelFilesContext = Pick<Services, 'db' | 'files'>

const OrganizationQuery = Type.Object({ organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })) }, { additionalProperties: false })

export const liveOperationsRoute = defineRoute({
  method: 'GET',
  path: '/v1/model-files/live-operations',
  operationId: 'listModelFileOperations',
  summary: 'Model-file operations going on now, and failures not yet resolved.',
  description:
    'Queued and running reprocess commands of the organization, failed ones that no later command of the same file has replaced, and active files whose ' +
    'metadata could not be read at upload and that nothing has reprocessed since (kind upload, command_id null, status failed): a broken file stays ' +
    'listed until it is reprocessed successfully or deleted.',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { query: OrganizationQuery },
  responses: { 200: { description: 'The operations, newest first.', schema: LiveOperationsSchema } },
  handler: async (req, svc: ModelFilesContext) => ({ body: await svc.files.reprocessor.liveOperations(organizationOf(req.principal)) }),
})

export const listModelFilesRoute = defineRoute({
  method: 'GET',
  path: '/v1/model-files',
  operationId: 'listModelFiles',
  summary: "One model's files: the active or the deleted view, with search, filters and (on the first page) filter options.",
  description:
    'Newest first. `filters` must all hold; `tags`, `printer_profiles` and `file_types` match any listed value. `filter_options` ' +
    '(offset 0 only) count the view before the filters narrow it. Another organization\'s modelId answers 404.',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { query: ModelFileListQuery },
  responses: { 200: { description: 'A page of files.', schema: ModelFileListSchema } },
  errors: ['model_not_found'],
  handler: async (req, svc: ModelFilesContext) => ({ body: await svc.files.reads.list(organizationOf(req.principal), req.query) }),
})

export const modelFileCountsRoute = defineRoute({
  method: 'GET',
  path: '/v1/model-files/counts',
  operationId: 'countModelFiles',
  summary: "Exact counts of a model's active and deleted files.",
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { query: ModelFileCountsQuery },
  responses: { 200: { description: 'The counts.', schema: ModelFileCountsSchema } },
  errors: ['model_not_found'],
  handler: async (req, svc: ModelFilesContext) => ({ body: await svc.files.reads.counts(organizationOf(req.principal), req.query.modelId) }),
})

export const getModelFileRoute = defineRoute({
  method: 'GET',
  path: '/v1/model-files/{fileId}',
  operationId: 'getModelFile',
  summary: 'One file, active or deleted (deleted_at says which).',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { params: FileParams },
  responses: { 200: { description: 'The file.', schema: FileSchema } },
  errors: ['file_not_found'],
  handler: async (req, svc: ModelFilesContext) => ({ body: fileRecordOf(await svc.files.records.any(organizationOf(req.principal), req.params.fileId)) }),
})

export const filamentLabelsRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/model-files/{fileId}/filament-labels',
  operationId: 'setFilamentLabels',
  summary: "Label the file's project filaments (by their id); labels merge, \"\" clears one.",
  description: 'Keys must be ids of the file\'s project_filaments (400 names the others). Active files only: a deleted file answers 409 file_deleted.',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:write' },
  schemas: { params: FileParams, body: FilamentLabelsBody },
  responses: { 200: { description: 'The file with its labels.', schema: FileSchema } },
  errors: ['file_not_found', 'file_deleted'],
  handler: async (req, svc: ModelFilesContext) => ({ body: await svc.files.reads.setLabels(organizationOf(req.principal), req.params.fileId, req.body.labels) }),
})

export const reprocessRoute = defineRoute({
  method: 'POST',
  path: '/v1/model-files/{fileId}/reprocess',
  operationId: 'reprocessModelFile',
  summary: "Read the file's slicer metadata again (after an upgrade of the service, or a failure).",
  description:
    'Answers 202 with the command at once; the work runs in the background. While one is queued or running, asking again answers the same ' +
    'command. The receipt (GET …/reprocess/{commandId}) is durable: it survives restarts. Signed-in people only (no API keys).',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: null },
  emptyBodyAllowed: true,
  schemas: { params: FileParams },
  responses: { 202: { description: 'Queued (or already queued or running).', schema: ReprocessAcceptedSchema } },
  errors: ['file_not_found', 'file_deleted'],
  handler: async (req, svc: ModelFilesContext) => ({ status: 202, body: await svc.files.reprocessor.request(organizationOf(req.principal), req.params.fileId) }),
})

export const reprocessReceiptRoute = defineRoute({
  method: 'GET',
  path: '/v1/model-files/{fileId}/reprocess/{commandId}',
  operationId: 'getReprocessReceipt',
  summary: 'The receipt of a reprocess command: queued, running, succeeded or failed (with the error).',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { params: ReceiptParams },
  responses: { 200: { description: 'The receipt.', schema: ReprocessReceiptSchema } },
  errors: ['command_not_found'],
  handler: async (req, svc: ModelFilesContext) => ({ body: await svc.files.reprocessor.receipt(organizationOf(req.principal), req.params.fileId, req.params.commandId) }),
})

export const modelFileOverviewRoute = defineRoute({
  method: 'GET',
  path: '/v1/model-files/{fileId}/overview',
  operationId: 'getModelFileOverview',
  summary: 'One file at a glance: its jobs printing and waiting, batches, makes, filaments with labels, SKUs, and what you may do with it now.',
  description:
    "`counts.queued` counts jobs queued or being dispatched, `counts.printing` printing or paused. `capabilities` answer for the caller: a deleted file " +
    'has every capability false but `can_restore` (false too once purged or while its model is deleted).',
  tags: ['model-files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { params: FileParams },
  responses: { 200: { description: 'The overview.', schema: ModelFileOverviewSchema } },
  errors: ['file_not_found'],
  handler: async (req, svc: ModelFilesContext) => ({ body: await modelFileOverview(svc.db.sql, organizationOf(req.principal), req.params.fileId, req.principal) }),
})

export const modelFileRoutes: readonly Route<RouteSchemas, ModelFilesContext>[] = [
  liveOperationsRoute,
  listModelFilesRoute,
  modelFileCountsRoute,
  getModelFileRoute,
  filamentLabelsRoute,
  reprocessRoute,
  reprocessReceiptRoute,
  modelFileOverviewRoute,
] as Route<RouteSchemas, ModelFilesContext>[]
