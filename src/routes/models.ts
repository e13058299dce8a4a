/**
 * Models (docs/files.md) and the upload of their
 * files. Any member may create, change, delete and restore models and upload
 * files (the daily work of a farm's operators); API keys need models:read /
 * models:write, and files:write or models:write to upload (a paired bridge's
 * key has neither).
 */
import {
  CreateModelBody,
  FileSchema,
  ModelListQuery,
  ModelListSchema,
  ModelParams,
  ModelSchema,
  SuccessSchema,
  UpdateModelBody,
  UploadForm,
} from '../../protocol/schemas/models.js'
import { organizationOf, userIdOrNull } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the model routes use of the node. */
export type ModelsContext = Pick<Services, 'clock' | 'config' | 'files'>

export const createModelRoute = defineRoute({
  method: 'POST',
  path: '/v1/models',
  operationId: 'createModel',
  summary: 'Create a model (a design the farm prints); upload its files next.',
  tags: ['models'],
  auth: { kind: 'organization', scope: 'models:write' },
  schemas: { body: CreateModelBody },
  responses: { 201: { description: 'The model as stored.', schema: ModelSchema } },
  handler: async (req, svc: ModelsContext) => ({ status: 201, body: await svc.files.models.create(organizationOf(req.principal), userIdOrNull(req.principal), req.body) }),
})

export const listModelsRoute = defineRoute({
  method: 'GET',
  path: '/v1/models',
  operationId: 'listModels',
  summary: "The organization's models, by name.",
  description: '`search` matches part of the name or designer (case-insensitive); `tag` a tag of metadata.tags exactly. Deleted models are not listed.',
  tags: ['models'],
  auth: { kind: 'organization', scope: 'models:read' },
  schemas: { query: ModelListQuery },
  responses: { 200: { description: 'A page of models.', schema: ModelListSchema } },
  handler: async (req, svc: ModelsContext) => ({ body: await svc.files.models.list(organizationOf(req.principal), req.query) }),
})

export const getModelRoute = defineRoute({
  method: 'GET',
  path: '/v1/models/{modelId}',
  operationId: 'getModel',
  summary: 'One model.',
  tags: ['models'],
  auth: { kind: 'organization', scope: 'models:read' },
  schemas: { params: ModelParams },
  responses: { 200: { description: 'The model.', schema: ModelSchema } },
  errors: ['model_not_found'],
  handler: async (req, svc: ModelsContext) => ({ body: await svc.files.models.get(organizationOf(req.principal), req.params.modelId) }),
})

export const updateModelRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/models/{modelId}',
  operationId: 'updateModel',
  summary: 'Change a model: the fields sent replace the stored ones; metadata keys merge (null removes one).',
  tags: ['models'],
  auth: { kind: 'organization', scope: 'models:write' },
  schemas: { params: ModelParams, body: UpdateModelBody },
  responses: { 200: { description: 'The model as stored now.', schema: ModelSchema } },
  errors: ['model_not_found'],
  handler: async (req, svc: ModelsContext) => ({ body: await svc.files.models.update(organizationOf(req.principal), req.params.modelId, req.body) }),
})

export const deleteModelRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/models/{modelId}',
  operationId: 'deleteModel',
  summary: 'Delete a model (soft): it reads as not found and takes no uploads until restored; its files are kept.',
  tags: ['models'],
  auth: { kind: 'organization', scope: 'models:write' },
  schemas: { params: ModelParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['model_not_found'],
  handler: async (req, svc: ModelsContext) => {
    await svc.files.models.softDelete(organizationOf(req.principal), req.params.modelId)
    return { body: { success: true } }
  },
})

export const restoreModelRoute = defineRoute({
  method: 'POST',
  path: '/v1/models/{modelId}/restore',
  operationId: 'restoreModel',
  summary: 'Bring a deleted model back (its files as they were). Restoring an active model changes nothing.',
  tags: ['models'],
  auth: { kind: 'organization', scope: 'models:write' },
  emptyBodyAllowed: true,
  schemas: { params: ModelParams },
  responses: { 204: { description: 'The model is active.' } },
  errors: ['model_not_found'],
  handler: async (req, svc: ModelsContext) => {
    await svc.files.models.restore(organizationOf(req.principal), req.params.modelId)
    return { status: 204 }
  },
})

export const uploadFileRoute = defineRoute({
  method: 'POST',
  path: '/v1/models/{modelId}/files',
  operationId: 'uploadModelFile',
  summary: 'Upload a file of the model (multipart/form-data, one part named file).',
  description:
    'Streamed to storage, never held in memory; at most UPLOAD_LIMIT_BYTES (413 above, and nothing is kept). The name is made safe and ' +
    'versioned: `benchy.3mf` is stored as `benchy-v1.0.3mf`, the next upload of that name in this model as `benchy-v1.1.3mf`. The type ' +
    'is judged by content (model/3mf, application/gcode, model/stl, else as declared). The answer is the File with its slicer metadata ' +
    'already read (metadata.processing says whether that worked). An optional `tags` field (comma list) sets metadata.tags.',
  tags: ['models', 'files'],
  auth: { kind: 'organization', scope: ['files:write', 'models:write'] },
  schemas: { params: ModelParams },
  streamBody: { limitBytes: (svc: ModelsContext) => svc.config.uploadLimitBytes, overheadBytes: 64 * 1024, limitName: 'UPLOAD_LIMIT_BYTES', contentType: 'multipart/form-data', schema: UploadForm },
  responses: { 201: { description: 'The stored file.', schema: FileSchema } },
  errors: ['model_not_found', 'multipart_invalid', 'payload_too_large', 'file_storage_unavailable'],
  handler: async (req, svc: ModelsContext) => {
    const record = await svc.files.uploads.upload(
      {
        organizationId: organizationOf(req.principal),
        modelId: req.params.modelId,
        createdBy: userIdOrNull(req.principal),
        contentType: req.headers['content-type'],
        body: req.bodyStream!,
      },
      () => svc.clock.now(),
    )
    return { status: 201, body: record }
  },
})

export const modelRoutes: readonly Route<RouteSchemas, ModelsContext>[] = [
  createModelRoute,
  listModelsRoute,
  getModelRoute,
  updateModelRoute,
  deleteModelRoute,
  restoreModelRoute,
  uploadFileRoute,
] as Route<RouteSchemas, ModelsContext>[]
