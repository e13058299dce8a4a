/**
 * Makes ('s make save; docs/files.md): a model file with the
 * material chosen for each of its project filaments. Saved only as a whole,
 * through the file's full-workshop route, in one transaction guarded by the
 * make's revision; read and deleted under /v1/makes. Any member (or
 * makes:read) reads; saving and deleting are an admin's (or makes:write):
 * what a make says decides what the farm prints with.
 */
import { MakeListQuery, MakeListSchema, MakeParams, MakeSchema, SaveMakeBody } from '../../protocol/schemas/makes.js'
import { FileParams, SuccessSchema } from '../../protocol/schemas/models.js'
import { assertOwned } from '../auth/owned-ids.js'
import { organizationFor, organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the make routes use of the node. */
export type MakesContext = Pick<Services, 'db' | 'makes'>

export const saveMakeRoute = defineRoute({
  method: 'POST',
  path: '/v1/model-files/{fileId}/full-workshop/makes',
  operationId: 'saveMake',
  summary: 'Create or update a make of the file (its name, a material per project filament, prints per unit, default, SKU), all at once.',
  description:
    'Without `make_id` a make is created (revision 1, answer 201). With `make_id`, `expected_revision` must be the revision you read: the make is ' +
    'replaced by what you send (fields left out take their defaults, as in a create) and takes the next revision (200); someone else\'s save in between answers 409 make_revision_conflict and changes nothing. ' +
    "`filament_index` is the 0-based index into the file's project_filaments; filaments not named print with what the slicer recorded. " +
    "`is_default: true` makes it the file's default (the old default stops being one). A new or changed `sku_id` adds the make to that SKU (quantity 1) unless it has it. " +
    'Every check runs in the transaction that writes: a refusal at any step leaves nothing changed. The inventory is never read or changed here.',
  tags: ['makes'],
  auth: { kind: 'organization', scope: 'makes:write', admin: true },
  schemas: { params: FileParams, body: SaveMakeBody },
  responses: { 201: { description: 'The make, created.', schema: MakeSchema }, 200: { description: 'The make, updated.', schema: MakeSchema } },
  errors: ['file_not_found', 'file_deleted', 'make_not_found', 'make_revision_conflict', 'material_not_found', 'sku_not_found'],
  handler: async (req, svc: MakesContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    const { make, created } = await svc.makes.save(organizationId, req.params.fileId, req.body)
    return { status: created ? 201 : 200, body: make }
  },
})

export const listMakesRoute = defineRoute({
  method: 'GET',
  path: '/v1/makes',
  operationId: 'listMakes',
  summary: "The organization's makes; `model_file_id` gives one file's (its default first), `sku_id` a SKU's.",
  description: "Another organization's model_file_id or sku_id answers 404.",
  tags: ['makes'],
  auth: { kind: 'organization', scope: 'makes:read' },
  schemas: { query: MakeListQuery },
  responses: { 200: { description: 'A page of makes.', schema: MakeListSchema } },
  errors: ['file_not_found', 'sku_not_found'],
  handler: async (req, svc: MakesContext) => {
    const organizationId = organizationOf(req.principal)
    await assertOwned(svc.db.sql, organizationId, 'model_file', [{ field: 'query.model_file_id', id: req.query.model_file_id }])
    await assertOwned(svc.db.sql, organizationId, 'sku', [{ field: 'query.sku_id', id: req.query.sku_id }])
    return { body: await svc.makes.list(organizationId, req.query) }
  },
})

export const getMakeRoute = defineRoute({
  method: 'GET',
  path: '/v1/makes/{makeId}',
  operationId: 'getMake',
  summary: 'One make, with the revision an update must name.',
  tags: ['makes'],
  auth: { kind: 'organization', scope: 'makes:read' },
  schemas: { params: MakeParams },
  responses: { 200: { description: 'The make.', schema: MakeSchema } },
  errors: ['make_not_found'],
  handler: async (req, svc: MakesContext) => ({ body: await svc.makes.get(organizationOf(req.principal), req.params.makeId) }),
})

export const deleteMakeRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/makes/{makeId}',
  operationId: 'deleteMake',
  summary: 'Delete a make no SKU is made of and no unfinished job prints.',
  description: 'A SKU made of it or a job of it that has not ended (queued to awaiting verification) answers 409 make_in_use naming them. Ended jobs keep their record (make_id becomes null).',
  tags: ['makes'],
  auth: { kind: 'organization', scope: 'makes:write', admin: true },
  schemas: { params: MakeParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['make_not_found', 'make_in_use'],
  handler: async (req, svc: MakesContext) => {
    await svc.makes.delete(organizationOf(req.principal), req.params.makeId)
    return { body: { success: true } }
  },
})

export const makeRoutes: readonly Route<RouteSchemas, MakesContext>[] = [saveMakeRoute, listMakesRoute, getMakeRoute, deleteMakeRoute] as Route<RouteSchemas, MakesContext>[]
