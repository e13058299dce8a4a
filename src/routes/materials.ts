/**
 * Materials (docs/inventory.md): the catalogue jobs require and spools hold.
 * Any member (or an API key with inventory:read) reads it; changing it is an
 * admin's (or inventory:write), since job requirements and matching rest on it.
 */
import { CreateMaterialBody, MaterialListQuery, MaterialListSchema, MaterialParams, MaterialSchema, UpdateMaterialBody } from '../../protocol/schemas/materials.js'
import { SuccessSchema } from '../../protocol/schemas/models.js'
import { organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the materials routes use of the node. */
export type MaterialsContext = Pick<Services, 'materials'>

export const listMaterialsRoute = defineRoute({
  method: 'GET',
  path: '/v1/materials',
  operationId: 'listMaterials',
  summary: "The organization's materials, by name.",
  description: '`type` filters exactly (case-insensitive); `search` matches part of the name or vendor.',
  tags: ['materials'],
  auth: { kind: 'organization', scope: 'inventory:read' },
  schemas: { query: MaterialListQuery },
  responses: { 200: { description: 'A page of materials.', schema: MaterialListSchema } },
  handler: async (req, svc: MaterialsContext) => ({ body: await svc.materials.list(organizationOf(req.principal), req.query) }),
})

export const createMaterialRoute = defineRoute({
  method: 'POST',
  path: '/v1/materials',
  operationId: 'createMaterial',
  summary: 'Add a material (a filament: type, colour, vendor, diameter, temperatures, cost).',
  tags: ['materials'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { body: CreateMaterialBody },
  responses: { 201: { description: 'The material as stored.', schema: MaterialSchema } },
  handler: async (req, svc: MaterialsContext) => ({ status: 201, body: await svc.materials.create(organizationOf(req.principal), req.body) }),
})

export const getMaterialRoute = defineRoute({
  method: 'GET',
  path: '/v1/materials/{materialId}',
  operationId: 'getMaterial',
  summary: 'One material.',
  tags: ['materials'],
  auth: { kind: 'organization', scope: 'inventory:read' },
  schemas: { params: MaterialParams },
  responses: { 200: { description: 'The material.', schema: MaterialSchema } },
  errors: ['material_not_found'],
  handler: async (req, svc: MaterialsContext) => ({ body: await svc.materials.get(organizationOf(req.principal), req.params.materialId) }),
})

export const updateMaterialRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/materials/{materialId}',
  operationId: 'updateMaterial',
  summary: 'Change a material: the fields sent replace the stored ones (null clears an optional one).',
  tags: ['materials'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { params: MaterialParams, body: UpdateMaterialBody },
  responses: { 200: { description: 'The material as stored now.', schema: MaterialSchema } },
  errors: ['material_not_found'],
  handler: async (req, svc: MaterialsContext) => ({ body: await svc.materials.update(organizationOf(req.principal), req.params.materialId, req.body) }),
})

export const deleteMaterialRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/materials/{materialId}',
  operationId: 'deleteMaterial',
  summary: 'Delete a material no make uses (409 material_in_use otherwise).',
  tags: ['materials'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { params: MaterialParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['material_not_found', 'material_in_use'],
  handler: async (req, svc: MaterialsContext) => {
    await svc.materials.delete(organizationOf(req.principal), req.params.materialId)
    return { body: { success: true } }
  },
})

export const materialRoutes: readonly Route<RouteSchemas, MaterialsContext>[] = [
  listMaterialsRoute,
  createMaterialRoute,
  getMaterialRoute,
  updateMaterialRoute,
  deleteMaterialRoute,
] as Route<RouteSchemas, MaterialsContext>[]
