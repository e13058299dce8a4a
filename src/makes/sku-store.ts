/**
 * SKUs, orders and batches (docs/makes.md). A SKU is a
 * product code made of makes; ordering N units creates one batch in one
 * transaction: per make, N × its quantity in the SKU × its quantity_to_print
 * queued jobs, each with the make's required materials. All of them or none.
 *
 * An order sent with an Idempotency-Key answers, when retried, the batch the
 * first request made: the key is unique per organization in the store, so
 * even two copies of the request racing each other make one batch.
 */
import { randomUUID } from 'node:crypto'
import type { Sql, TransactionSql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import { maxJobsPerOrder, type Batch, type BatchListQuery, type CreateSkuBody, type Order, type OrderSkuBody, type Sku, type SkuListQuery, type UpdateSkuBody } from '../../protocol/schemas/makes.js'
import type { PrintJob } from '../../protocol/schemas/print-jobs.js'
import { escapeLike } from '../storage/like.js'
import { jobOf, type JobRow } from '../jobs/job-records.js'
import { makeMaterialsIn } from '../jobs/job-store.js'
import { requiredMaterialsOf, type FileFacts } from '../jobs/requirements.js'
import type { MakeRow } from './make-store.js'

interface SkuRow {
  id: string
  sku: string
  name: string
  description: string | null
  created_at: Date
  updated_at: Date
}

interface BatchRow {
  id: string
  sku_id: string | null
  sku: string
  quantity: number
  jobs_ordered: number
  composition: Batch['composition']
  created_at: Date
}

interface Progress {
  printed: number
  failed: number
  cancelled: number
  remaining: number
}

const skuNotFound = (code: string): ServiceError => new ServiceError('sku_not_found', `no SKU ${JSON.stringify(code)} in this organization (GET /v1/skus lists them)`)
const batchNotFound = (): ServiceError => new ServiceError('batch_not_found', 'no such batch in this organization')

export class SkuStore {
  readonly #sql: Sql

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  async create(organizationId: string, body: CreateSkuBody): Promise<Sku> {
    assertEachOnce(body.makes)
    return this.#sql.begin(async (tx) => {
      await lockMakes(tx, organizationId, body.makes.map((m) => m.make_id))
      const id = randomUUID()
      const [row] = await tx<SkuRow[]>`
        insert into skus (id, organization_id, sku, name, description) values (${id}, ${organizationId}, ${body.sku}, ${body.name}, ${body.description ?? null})
        on conflict (organization_id, sku) do nothing returning *`
      if (row === undefined) throw new ServiceError('sku_exists', `the organization has a SKU ${JSON.stringify(body.sku)} already; choose another code or change that one (PATCH /v1/skus/{sku})`)
      await writeComposition(tx, id, body.makes)
      // A make made for no SKU yet becomes this one's.
      // The revision moves with it: an editor holding the make's old revision must not save the pointer away unseen.
      await tx`update makes set sku_id = ${id}, revision = revision + 1, updated_at = ${new Date(this.#now())} where id = any(${body.makes.map((m) => m.make_id)}::uuid[]) and sku_id is null`
      return skuOf(row, body.makes)
    })
  }

  /** Fields sent replace the stored ones; `makes` replaces the whole composition (batches already ordered keep theirs). */
  async update(organizationId: string, code: string, body: UpdateSkuBody): Promise<Sku> {
    if (body.makes !== undefined) assertEachOnce(body.makes)
    return this.#sql.begin(async (tx) => {
      const [current] = await tx<SkuRow[]>`select * from skus where organization_id = ${organizationId} and sku = ${code} for update`
      if (current === undefined) throw skuNotFound(code)
      if (body.makes !== undefined) {
        await lockMakes(tx, organizationId, body.makes.map((m) => m.make_id))
        await tx`delete from sku_makes where sku_id = ${current.id}`
        await writeComposition(tx, current.id, body.makes)
      }
      const [row] = await tx<SkuRow[]>`
        update skus set name = ${body.name ?? current.name},
          description = ${body.description === undefined ? current.description : body.description}, updated_at = ${new Date(this.#now())}
        where id = ${current.id} returning *`
      return skuOf(row!, await compositionOf(tx, current.id))
    })
  }

  async get(organizationId: string, code: string): Promise<Sku> {
    const [row] = await this.#sql<SkuRow[]>`select * from skus where organization_id = ${organizationId} and sku = ${code}`
    if (row === undefined) throw skuNotFound(code)
    return skuOf(row, await compositionOf(this.#sql, row.id))
  }

  async list(organizationId: string, query: SkuListQuery): Promise<{ skus: Sku[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = query.limit ?? 100
    const offset = query.offset ?? 0
    const search = query.search?.trim() ?? ''
    const where = () => sql`organization_id = ${organizationId}
      ${search === '' ? sql`` : sql`and (sku ilike ${`%${escapeLike(search)}%`} or name ilike ${`%${escapeLike(search)}%`})`}`
    const [rows, [count]] = await Promise.all([
      sql<SkuRow[]>`select * from skus where ${where()} order by sku limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from skus where ${where()}`,
    ])
    const parts = await sql<{ sku_id: string; make_id: string; quantity: number }[]>`
      select sku_id, make_id, quantity from sku_makes where sku_id = any(${rows.map((r) => r.id)}::uuid[]) order by position`
    return { skus: rows.map((r) => skuOf(r, parts.filter((p) => p.sku_id === r.id))), total: Number(count!.total), limit, offset }
  }

  /** Batches already ordered keep their jobs and their record (sku_id becomes null; `sku` keeps the code). */
  async delete(organizationId: string, code: string): Promise<void> {
    const [row] = await this.#sql`delete from skus where organization_id = ${organizationId} and sku = ${code} returning id`
    if (row === undefined) throw skuNotFound(code)
  }

  /**
   * One batch of jobs for `quantity` units. With an idempotency key, a retry answers the first batch
   * (`created: false`) whatever the retry's body says; a key is the organization's, for good.
   */
  async order(organizationId: string, code: string, body: OrderSkuBody, createdBy: string | null, idempotencyKey?: string): Promise<{ order: Order; created: boolean }> {
    if (idempotencyKey !== undefined) {
      const [existing] = await this.#sql<{ id: string }[]>`select id from batches where organization_id = ${organizationId} and idempotency_key = ${idempotencyKey}`
      if (existing !== undefined) return { order: await this.#orderOf(organizationId, existing.id), created: false }
    }
    const made = await this.#sql.begin(async (tx) => {
      const [sku] = await tx<SkuRow[]>`select * from skus where organization_id = ${organizationId} and sku = ${code} for share`
      if (sku === undefined) throw skuNotFound(code)
      const parts = await tx<(MakeRow & { quantity: number } & FileFacts & { deleted_at: Date | null; purged_at: Date | null })[]>`
        select m.*, sm.quantity, f.metadata, f.project_filaments, f.deleted_at, f.purged_at
        from sku_makes sm join makes m on m.id = sm.make_id join files f on f.id = m.model_file_id
        where sm.sku_id = ${sku.id} order by sm.position`
      if (parts.length === 0) throw new ServiceError('validation_failed', `SKU ${JSON.stringify(code)} has no makes; add some (PATCH /v1/skus/{sku}) before ordering it`)
      const unprintable = parts.filter((p) => p.deleted_at !== null || p.purged_at !== null)
      if (unprintable.length > 0) {
        throw new ServiceError('file_not_printable', `the file of make ${unprintable.map((p) => JSON.stringify(p.name)).join(', ')} is deleted: restore it or change the SKU's makes`)
      }
      const composition = parts.map((p) => ({ make_id: p.id, quantity: p.quantity, quantity_to_print: p.quantity_to_print, jobs: body.quantity * p.quantity * p.quantity_to_print }))
      const ordered = composition.reduce((sum, c) => sum + c.jobs, 0)
      if (ordered > maxJobsPerOrder) {
        throw new ServiceError('order_too_large', `this order would create ${ordered} jobs; one order creates at most ${maxJobsPerOrder}: order fewer units at a time`)
      }
      const batchId = randomUUID()
      const [batch] = await tx<{ id: string }[]>`
        insert into batches (id, organization_id, sku_id, sku, quantity, jobs_ordered, composition, idempotency_key, created_by)
        values (${batchId}, ${organizationId}, ${sku.id}, ${sku.sku}, ${body.quantity}, ${ordered}, ${tx.json(composition)}, ${idempotencyKey ?? null}, ${createdBy})
        on conflict (organization_id, idempotency_key) where idempotency_key is not null do nothing returning id`
      // The same key, ordered concurrently: that one's batch.
      if (batch === undefined) return { batchId: null }
      for (const part of parts) {
        const { plate, required } = requiredMaterialsOf(part, undefined, await makeMaterialsIn(tx, organizationId, part.materials))
        const count = body.quantity * part.quantity * part.quantity_to_print
        const name = `${sku.sku} · ${part.name}`
        await tx`
          insert into print_jobs (organization_id, name, state, status, source, model_file_id, make_id, sku_id, batch_id, priority, plate, print_options, required_materials, created_by)
          select ${organizationId}, ${name} || ' (' || g || '/' || ${count}::int || ')', 'queued', 'queued', 'api', ${part.model_file_id}, ${part.id}, ${sku.id}, ${batchId},
                 ${body.priority ?? 0}, ${plate}, ${tx.json({ auto_assign: true, enable_ams: true })}, ${tx.json(required as never)}, ${createdBy}
          from generate_series(1, ${count}::int) g order by g`
      }
      return { batchId }
    })
    if (made.batchId === null) {
      const [existing] = await this.#sql<{ id: string }[]>`select id from batches where organization_id = ${organizationId} and idempotency_key = ${idempotencyKey!}`
      return { order: await this.#orderOf(organizationId, existing!.id), created: false }
    }
    return { order: await this.#orderOf(organizationId, made.batchId), created: true }
  }

  async batch(organizationId: string, id: string): Promise<Batch> {
    const [row] = await this.#sql<BatchRow[]>`select * from batches where organization_id = ${organizationId} and id = ${id}`
    if (row === undefined) throw batchNotFound()
    const progress = await progressOf(this.#sql, [row.id])
    return batchOf(row, progress.get(row.id))
  }

  async batches(organizationId: string, query: BatchListQuery): Promise<{ batches: Batch[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = query.limit ?? 50
    const offset = query.offset ?? 0
    const where = () => sql`organization_id = ${organizationId} ${query.sku === undefined ? sql`` : sql`and sku = ${query.sku}`}`
    const [rows, [count]] = await Promise.all([
      sql<BatchRow[]>`select * from batches where ${where()} order by created_at desc, id limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from batches where ${where()}`,
    ])
    const progress = await progressOf(sql, rows.map((r) => r.id))
    return { batches: rows.map((r) => batchOf(r, progress.get(r.id))), total: Number(count!.total), limit, offset }
  }

  async #orderOf(organizationId: string, batchId: string): Promise<Order> {
    const batch = await this.batch(organizationId, batchId)
    const rows = await this.#sql<JobRow[]>`select * from print_jobs where organization_id = ${organizationId} and batch_id = ${batchId} order by id`
    const jobs: PrintJob[] = rows.map(jobOf)
    return { batch_id: batchId, batch, jobs }
  }
}

function assertEachOnce(makes: readonly { make_id: string }[]): void {
  const seen = new Set<string>()
  for (const m of makes) {
    const id = m.make_id.toLowerCase()
    if (seen.has(id)) throw new ServiceError('validation_failed', `body.makes: make ${m.make_id} is listed twice; give it once with the quantity one unit needs`)
    seen.add(id)
  }
}

/**
 * The makes must be the organization's; locked FOR KEY SHARE so none is deleted while the SKU takes
 * it, without blocking (or being blocked by) a make save, which locks FOR NO KEY UPDATE.
 */
async function lockMakes(tx: TransactionSql, organizationId: string, ids: readonly string[]): Promise<void> {
  const found = await tx<{ id: string }[]>`select id from makes where organization_id = ${organizationId} and id = any(${ids}::uuid[]) for key share`
  const known = new Set(found.map((m) => m.id))
  const unknown = ids.filter((id) => !known.has(id.toLowerCase()))
  if (unknown.length > 0) throw new ServiceError('make_not_found', `body.makes: no make ${unknown.join(', ')} in this organization (GET /v1/makes lists them)`)
}

async function writeComposition(tx: TransactionSql, skuId: string, makes: readonly { make_id: string; quantity: number }[]): Promise<void> {
  const rows = makes.map((m, i) => ({ sku_id: skuId, make_id: m.make_id, quantity: m.quantity, position: i + 1 }))
  await tx`insert into sku_makes ${tx(rows, 'sku_id', 'make_id', 'quantity', 'position')}`
}

async function compositionOf(sql: Sql | TransactionSql, skuId: string): Promise<{ make_id: string; quantity: number }[]> {
  return sql<{ make_id: string; quantity: number }[]>`select make_id, quantity from sku_makes where sku_id = ${skuId} order by position`
}

function skuOf(row: SkuRow, makes: readonly { make_id: string; quantity: number }[]): Sku {
  return {
    id: row.id,
    sku: row.sku,
    name: row.name,
    description: row.description,
    makes: makes.map((m) => ({ make_id: m.make_id, quantity: m.quantity })),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  }
}

async function progressOf(sql: Sql, batchIds: readonly string[]): Promise<Map<string, Progress>> {
  if (batchIds.length === 0) return new Map()
  const rows = await sql<{ batch_id: string; printed: string; failed: string; cancelled: string; remaining: string }[]>`
    select batch_id,
      count(*) filter (where status = 'succeeded') as printed,
      count(*) filter (where status = 'failed') as failed,
      count(*) filter (where status = 'cancelled') as cancelled,
      count(*) filter (where status in ('queued', 'dispatching', 'printing', 'paused', 'awaiting_verification')) as remaining
    from print_jobs where batch_id = any(${batchIds}::uuid[]) group by batch_id`
  return new Map(rows.map((r) => [r.batch_id, { printed: Number(r.printed), failed: Number(r.failed), cancelled: Number(r.cancelled), remaining: Number(r.remaining) }]))
}

function batchOf(row: BatchRow, progress: Progress = { printed: 0, failed: 0, cancelled: 0, remaining: 0 }): Batch {
  const missing = Math.max(0, row.jobs_ordered - progress.printed - progress.remaining)
  return {
    id: row.id,
    sku_id: row.sku_id,
    sku: row.sku,
    quantity: row.quantity,
    composition: row.composition,
    progress: { ordered: row.jobs_ordered, ...progress, missing, complete: progress.printed >= row.jobs_ordered },
    created_at: row.created_at.toISOString(),
  }
}
