/**
 * SKUs and batches (docs/makes.md): a product code made of
 * makes, ordered by the unit. An order creates one batch of queued jobs in one
 * transaction; the batch's progress is read back under /v1/batches. Any member
 * (or makes:read) reads SKUs; changing them is an admin's (or makes:write).
 * An order creates print jobs, so it takes what creating a job takes (an
 * admin, or print-jobs:write).
 */
import {
  BatchListQuery,
  BatchListSchema,
  BatchParams,
  BatchSchema,
  CreateSkuBody,
  OrderSchema,
  OrderSkuBody,
  SkuListQuery,
  SkuListSchema,
  SkuParams,
  SkuSchema,
  UpdateSkuBody,
} from '../../protocol/schemas/makes.js'
import { SuccessSchema } from '../../protocol/schemas/models.js'
import { organizationFor, organizationOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import { creatorOf, idempotencyKeyOf } from '../jobs/job-store.js'
import type { Services } from './route-context.js'

/** What the SKU routes use of the node. */
export type SkusContext = Pick<Services, 'queue' | 'skus'>

export const createSkuRoute = defineRoute({
  method: 'POST',
  path: '/v1/skus',
  operationId: 'createSku',
  summary: 'Add a SKU: a product code and the makes one unit needs (with how many of each).',
  description:
    'The code (letters, digits, `.`, `-`, `_`; it names the SKU in paths) is unique in the organization: a second one answers 409 sku_exists. ' +
    "Makes that belong to no SKU yet get this one as their `sku_id`. Answers 201 with the SKU.",
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'makes:write', admin: true },
  schemas: { body: CreateSkuBody },
  responses: { 201: { description: 'The SKU.', schema: SkuSchema } },
  errors: ['make_not_found', 'sku_exists'],
  handler: async (req, svc: SkusContext) => ({ status: 201, body: await svc.skus.create(organizationFor(req.principal, req.body), req.body) }),
})

export const listSkusRoute = defineRoute({
  method: 'GET',
  path: '/v1/skus',
  operationId: 'listSkus',
  summary: "The organization's SKUs, by code; `search` matches part of the code or name.",
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'makes:read' },
  schemas: { query: SkuListQuery },
  responses: { 200: { description: 'A page of SKUs.', schema: SkuListSchema } },
  handler: async (req, svc: SkusContext) => ({ body: await svc.skus.list(organizationOf(req.principal), req.query) }),
})

export const getSkuRoute = defineRoute({
  method: 'GET',
  path: '/v1/skus/{sku}',
  operationId: 'getSku',
  summary: 'One SKU by its code, with its makes.',
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'makes:read' },
  schemas: { params: SkuParams },
  responses: { 200: { description: 'The SKU.', schema: SkuSchema } },
  errors: ['sku_not_found'],
  handler: async (req, svc: SkusContext) => ({ body: await svc.skus.get(organizationOf(req.principal), req.params.sku) }),
})

export const updateSkuRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/skus/{sku}',
  operationId: 'updateSku',
  summary: "Change a SKU's name, description or makes (`makes` replaces the whole composition).",
  description: 'Batches already ordered keep the composition they were ordered with. The code itself does not change: create a new SKU for a new code.',
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'makes:write', admin: true },
  schemas: { params: SkuParams, body: UpdateSkuBody },
  responses: { 200: { description: 'The SKU as stored now.', schema: SkuSchema } },
  errors: ['sku_not_found', 'make_not_found'],
  handler: async (req, svc: SkusContext) => ({ body: await svc.skus.update(organizationFor(req.principal, req.body), req.params.sku, req.body) }),
})

export const deleteSkuRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/skus/{sku}',
  operationId: 'deleteSku',
  summary: 'Delete a SKU. Its batches and their jobs stay (the batch keeps the code it was ordered under).',
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'makes:write', admin: true },
  schemas: { params: SkuParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['sku_not_found'],
  handler: async (req, svc: SkusContext) => {
    await svc.skus.delete(organizationOf(req.principal), req.params.sku)
    return { body: { success: true } }
  },
})

export const orderSkuRoute = defineRoute({
  method: 'POST',
  path: '/v1/skus/{sku}/print-jobs',
  operationId: 'orderSku',
  summary: 'Print `quantity` units of a SKU: one batch of queued jobs, all created at once or none.',
  description:
    "Per make of the SKU: quantity × the make's quantity in the SKU × its quantity_to_print jobs, each with the make's required materials; at most 10,000 " +
    'jobs per order (400 order_too_large). Answers 201 with the batch and its jobs. With an Idempotency-Key header (1-200 characters), a retry with the ' +
    'same key answers 200 with the batch the first request created (even when the two raced), so a lost answer never prints an order twice. ' +
    "A failed job verified with `requeue_failed: true` (PATCH /v1/printers/{id}/ready) is queued again within its batch.",
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'print-jobs:write', admin: true },
  schemas: { params: SkuParams, body: OrderSkuBody },
  responses: {
    201: { description: 'The batch and its jobs, queued.', schema: OrderSchema },
    200: { description: 'The batch an earlier request with the same Idempotency-Key created.', schema: OrderSchema },
  },
  errors: ['sku_not_found', 'file_not_printable', 'order_too_large'],
  handler: async (req, svc: SkusContext) => {
    const organizationId = organizationFor(req.principal, req.body)
    const by = creatorOf(req.principal)
    const key = idempotencyKeyOf(req.headers)
    const { order, created } = await svc.skus.order(organizationId, req.params.sku, req.body, by, key)
    if (created) svc.queue.wake(organizationId)
    return { status: created ? 201 : 200, body: order }
  },
})

export const listBatchesRoute = defineRoute({
  method: 'GET',
  path: '/v1/batches',
  operationId: 'listBatches',
  summary: 'Orders of SKUs, newest first, each with its progress; `sku` gives one SKU\'s.',
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'print-jobs:read' },
  schemas: { query: BatchListQuery },
  responses: { 200: { description: 'A page of batches.', schema: BatchListSchema } },
  handler: async (req, svc: SkusContext) => ({ body: await svc.skus.batches(organizationOf(req.principal), req.query) }),
})

export const getBatchRoute = defineRoute({
  method: 'GET',
  path: '/v1/batches/{batchId}',
  operationId: 'getBatch',
  summary: 'One batch: what was ordered and its progress (printed, failed, cancelled, remaining, missing).',
  description: "Its jobs: POST /v1/print-jobs with `batch_id`.",
  tags: ['skus'],
  auth: { kind: 'organization', scope: 'print-jobs:read' },
  schemas: { params: BatchParams },
  responses: { 200: { description: 'The batch.', schema: BatchSchema } },
  errors: ['batch_not_found'],
  handler: async (req, svc: SkusContext) => ({ body: await svc.skus.batch(organizationOf(req.principal), req.params.batchId) }),
})

export const skuRoutes: readonly Route<RouteSchemas, SkusContext>[] = [
  createSkuRoute,
  listSkusRoute,
  getSkuRoute,
  updateSkuRoute,
  deleteSkuRoute,
  orderSkuRoute,
  listBatchesRoute,
  getBatchRoute,
] as Route<RouteSchemas, SkusContext>[]
