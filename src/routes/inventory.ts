/**
 * The spool inventory (docs/inventory.md): spools, where they are loaded,
 * their grams and the ledger of every change. Any member (or an API key with
 * inventory:read) reads it; changing it is an admin's (or inventory:write),
 * as with materials.
 */
import {
  AdjustmentBody,
  AdjustmentResultSchema,
  CreateSpoolBody,
  LedgerQuery,
  LedgerSchema,
  SpoolListQuery,
  SpoolListSchema,
  SpoolParams,
  SpoolSchema,
  UpdateSpoolBody,
} from '../../protocol/schemas/inventory.js'
import { SuccessSchema } from '../../protocol/schemas/models.js'
import { assertOwned } from '../auth/owned-ids.js'
import { organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the inventory routes use of the node. */
export type InventoryContext = Pick<Services, 'clock' | 'db' | 'inventory' | 'queue'>

export const listSpoolsRoute = defineRoute({
  method: 'GET',
  path: '/v1/inventory',
  operationId: 'listSpools',
  summary: "The organization's spools, by material then label.",
  description:
    '`material_id` and `printer_id` filter exactly; `loaded=true` lists the spools loaded in a printer, `loaded=false` those on the shelf; ' +
    '`search` matches part of the label or location. Another organization\'s material_id or printer_id answers 404.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:read' },
  schemas: { query: SpoolListQuery },
  responses: { 200: { description: 'A page of spools.', schema: SpoolListSchema } },
  errors: ['material_not_found', 'printer_not_found'],
  handler: async (req, svc: InventoryContext) => {
    const organizationId = organizationOf(req.principal)
    await assertOwned(svc.db.sql, organizationId, 'material', [{ field: 'query.material_id', id: req.query.material_id }])
    await assertOwned(svc.db.sql, organizationId, 'printer', [{ field: 'query.printer_id', id: req.query.printer_id }])
    return { body: await svc.inventory.list(organizationId, req.query) }
  },
})

export const createSpoolRoute = defineRoute({
  method: 'POST',
  path: '/v1/inventory',
  operationId: 'createSpool',
  summary: 'Add a spool of a material, on the shelf or loaded in a printer slot.',
  description:
    '`remaining_g` defaults to `initial_g` and may not exceed it. To add it loaded, send `printer_id` with `slot` (the printer\'s filament slot, ' +
    '0-63: for an AMS, unit × 4 + tray); a slot that holds another spool answers 409 spool_slot_taken naming it.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { body: CreateSpoolBody },
  responses: { 201: { description: 'The spool as stored.', schema: SpoolSchema } },
  errors: ['material_not_found', 'printer_not_found', 'spool_slot_taken'],
  handler: async (req, svc: InventoryContext) => {
    const organizationId = organizationOf(req.principal)
    const spool = await svc.inventory.create(organizationId, req.body, new Date(svc.clock.now()))
    // A spool loaded into a slot is a material (and grams) the queue may have been waiting for.
    svc.queue.wake(organizationId)
    return { status: 201, body: spool }
  },
})

export const getSpoolRoute = defineRoute({
  method: 'GET',
  path: '/v1/inventory/{id}',
  operationId: 'getSpool',
  summary: 'One spool.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:read' },
  schemas: { params: SpoolParams },
  responses: { 200: { description: 'The spool.', schema: SpoolSchema } },
  errors: ['spool_not_found'],
  handler: async (req, svc: InventoryContext) => ({ body: await svc.inventory.get(organizationOf(req.principal), req.params.id) }),
})

export const updateSpoolRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/inventory/{id}',
  operationId: 'updateSpool',
  summary: 'Change a spool: label, location, material, or load it into a printer slot (both null: unload it).',
  description:
    'The fields sent replace the stored ones; null clears the label or location. `printer_id` and `slot` go together. Loading into a slot that ' +
    'holds another spool answers 409 spool_slot_taken with that spool\'s id: unload it first. Grams change only through adjustments and finished jobs.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { params: SpoolParams, body: UpdateSpoolBody },
  responses: { 200: { description: 'The spool as stored now.', schema: SpoolSchema } },
  errors: ['spool_not_found', 'material_not_found', 'printer_not_found', 'spool_slot_taken'],
  handler: async (req, svc: InventoryContext) => {
    const organizationId = organizationOf(req.principal)
    const spool = await svc.inventory.update(organizationId, req.params.id, req.body, new Date(svc.clock.now()))
    svc.queue.wake(organizationId)
    return { body: spool }
  },
})

export const deleteSpoolRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/inventory/{id}',
  operationId: 'deleteSpool',
  summary: 'Remove a spool (used up or thrown away), with its ledger.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { params: SpoolParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['spool_not_found'],
  handler: async (req, svc: InventoryContext) => {
    const organizationId = organizationOf(req.principal)
    await svc.inventory.delete(organizationId, req.params.id)
    svc.queue.wake(organizationId)
    return { body: { success: true } }
  },
})

export const adjustSpoolRoute = defineRoute({
  method: 'POST',
  path: '/v1/inventory/{id}/adjustments',
  operationId: 'adjustSpool',
  summary: 'Correct the grams left on a spool (weighed it, cleared a failed print by hand…), with the reason.',
  description:
    '`delta_g` is added to `remaining_g` (negative takes). A spool never goes below 0 g: the entry records what was applied and the shortfall. ' +
    'The answer is the ledger entry and the spool as it is now.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:write', admin: true },
  schemas: { params: SpoolParams, body: AdjustmentBody },
  responses: { 201: { description: 'The entry written and the spool.', schema: AdjustmentResultSchema } },
  errors: ['spool_not_found'],
  handler: async (req, svc: InventoryContext) => {
    const organizationId = organizationOf(req.principal)
    const entry = await svc.inventory.adjust(organizationId, req.params.id, req.body, new Date(svc.clock.now()))
    // More grams on a spool may let a job that waited for them go.
    svc.queue.wake(organizationId)
    return { status: 201, body: entry }
  },
})

export const spoolLedgerRoute = defineRoute({
  method: 'GET',
  path: '/v1/inventory/{id}/ledger',
  operationId: 'getSpoolLedger',
  summary: "Every change of a spool's grams, newest first: adjustments and the prints that used it.",
  description: 'An entry with `job_id` is the deduction of that print job (once per job); `shortfall_g` is what the spool did not have.',
  tags: ['inventory'],
  auth: { kind: 'organization', scope: 'inventory:read' },
  schemas: { params: SpoolParams, query: LedgerQuery },
  responses: { 200: { description: 'A page of ledger entries.', schema: LedgerSchema } },
  errors: ['spool_not_found'],
  handler: async (req, svc: InventoryContext) => ({ body: await svc.inventory.ledger(organizationOf(req.principal), req.params.id, req.query) }),
})

export const inventoryRoutes: readonly Route<RouteSchemas, InventoryContext>[] = [
  listSpoolsRoute,
  createSpoolRoute,
  getSpoolRoute,
  updateSpoolRoute,
  deleteSpoolRoute,
  adjustSpoolRoute,
  spoolLedgerRoute,
] as Route<RouteSchemas, InventoryContext>[]
