/**
 * Models in the store (docs/files.md). A deleted
 * model reads as not found everywhere except its restore, and takes no
 * uploads; its files keep their rows (their restore answers 409 while the
 * model is deleted).
 */
import { randomUUID } from 'node:crypto'
import { ServiceError } from '../../protocol/errors.js'
import { metadataLimitBytes, type CreateModelBody, type ModelListQuery, type ModelRecord, type UpdateModelBody } from '../../protocol/schemas/models.js'
import type { Sql } from 'postgres'
import type { Queryable } from '../storage/database.js'
import { escapeLike } from '../storage/like.js'

interface ModelRow {
  id: string
  name: string
  source: string | null
  designer: string | null
  images: string[]
  source_url: string | null
  source_id: string | null
  metadata: Record<string, unknown>
  created_by: string | null
  created_at: Date
  updated_at: Date
  file_count: string | number
}

const notFound = (): ServiceError => new ServiceError('model_not_found', 'no such model in this organization')

export class ModelStore {
  readonly #sql: Sql

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  get sql(): Sql {
    return this.#sql
  }

  async create(organizationId: string, createdBy: string | null, body: CreateModelBody): Promise<ModelRecord> {
    const metadata = boundedMetadata(body.metadata ?? {})
    const sql = this.#sql
    const [row] = await sql<ModelRow[]>`
      insert into models (id, organization_id, name, source, designer, images, source_url, source_id, metadata, created_by)
      values (${randomUUID()}, ${organizationId}, ${body.name}, ${body.source ?? null}, ${body.designer ?? null}, ${sql.json(body.images ?? [])},
              ${body.sourceUrl ?? null}, ${body.sourceId ?? null}, ${sql.json(metadata as never)}, ${createdBy})
      returning *, 0 as file_count`
    return modelOf(row!)
  }

  async list(organizationId: string, query: ModelListQuery): Promise<{ models: ModelRecord[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = query.limit ?? 50
    const offset = query.offset ?? 0
    const pattern = query.search === undefined ? undefined : `%${escapeLike(query.search)}%`
    const where = sql`
      m.organization_id = ${organizationId} and m.deleted_at is null
      ${pattern === undefined ? sql`` : sql`and (m.name ilike ${pattern} or m.designer ilike ${pattern})`}
      ${query.tag === undefined ? sql`` : sql`and m.metadata->'tags' @> ${sql.json([query.tag])}`}`
    const [rows, [count]] = await Promise.all([
      sql<ModelRow[]>`
        select m.*, (select count(*) from files f where f.model_id = m.id and f.deleted_at is null) as file_count
        from models m where ${where}
        order by lower(m.name), m.id limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from models m where ${where}`,
    ])
    return { models: rows.map(modelOf), total: Number(count!.total), limit, offset }
  }

  async get(organizationId: string, id: string): Promise<ModelRecord> {
    const [row] = await this.#sql<ModelRow[]>`
      select m.*, (select count(*) from files f where f.model_id = m.id and f.deleted_at is null) as file_count
      from models m where m.organization_id = ${organizationId} and m.id = ${id} and m.deleted_at is null`
    if (row === undefined) throw notFound()
    return modelOf(row)
  }

  /** Throws model_not_found unless the model exists in this organization (deleted or not: its files' views stay readable). */
  async assertExists(organizationId: string, id: string): Promise<void> {
    const [row] = await this.#sql`select 1 from models where organization_id = ${organizationId} and id = ${id}`
    if (row === undefined) throw notFound()
  }

  /** Throws model_not_found unless the model exists, in this organization, and is not deleted. */
  async assertAvailable(tx: Queryable, organizationId: string, id: string, { lock = false } = {}): Promise<void> {
    const [row] = lock
      ? await tx`select 1 from models where organization_id = ${organizationId} and id = ${id} and deleted_at is null for share`
      : await tx`select 1 from models where organization_id = ${organizationId} and id = ${id} and deleted_at is null`
    if (row === undefined) throw notFound()
  }

  async update(organizationId: string, id: string, body: UpdateModelBody): Promise<ModelRecord> {
    await this.#sql.begin(async (tx) => {
      const [row] = await tx<ModelRow[]>`select * from models where organization_id = ${organizationId} and id = ${id} and deleted_at is null for update`
      if (row === undefined) throw notFound()
      const set: Record<string, unknown> = { updated_at: new Date(this.#now()) }
      if (body.name !== undefined) set['name'] = body.name
      if (body.source !== undefined) set['source'] = body.source
      if (body.designer !== undefined) set['designer'] = body.designer
      if (body.images !== undefined) set['images'] = tx.json(body.images)
      if (body.sourceUrl !== undefined) set['source_url'] = body.sourceUrl
      if (body.sourceId !== undefined) set['source_id'] = body.sourceId
      if (body.metadata !== undefined) set['metadata'] = tx.json(boundedMetadata(mergeMetadata(row.metadata, body.metadata)) as never)
      await tx`update models set ${tx(set)} where id = ${id}`
    })
    return this.get(organizationId, id)
  }

  async softDelete(organizationId: string, id: string): Promise<void> {
    const now = new Date(this.#now())
    const rows = await this.#sql`update models set deleted_at = ${now}, updated_at = ${now} where organization_id = ${organizationId} and id = ${id} and deleted_at is null returning id`
    if (rows.length === 0) throw notFound()
  }

  /** A deleted model comes back with its files as they were (deleted files stay deleted). Restoring an active model changes nothing. */
  async restore(organizationId: string, id: string): Promise<void> {
    const rows = await this.#sql`update models set deleted_at = null, updated_at = ${new Date(this.#now())} where organization_id = ${organizationId} and id = ${id} returning id`
    if (rows.length === 0) throw notFound()
  }
}

/** PATCH semantics for metadata: keys merge, a key set to null is removed. */
function mergeMetadata(stored: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const merged = { ...stored }
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete merged[key]
    else merged[key] = value
  }
  return merged
}

function boundedMetadata(metadata: Record<string, unknown>): Record<string, unknown> {
  if (Object.keys(metadata).length > 64) throw new ServiceError('validation_failed', 'metadata has more than 64 keys')
  const size = Buffer.byteLength(JSON.stringify(metadata))
  if (size > metadataLimitBytes) throw new ServiceError('validation_failed', `metadata is ${size} bytes as JSON; at most ${metadataLimitBytes}`)
  const tags = metadata['tags']
  if (tags !== undefined && (!Array.isArray(tags) || tags.length > 64 || tags.some((t) => typeof t !== 'string' || t.length < 1 || t.length > 64))) {
    throw new ServiceError('validation_failed', 'metadata.tags must be an array of at most 64 strings of 1-64 characters')
  }
  return metadata
}

function modelOf(row: ModelRow): ModelRecord {
  return {
    id: row.id,
    name: row.name,
    source: row.source,
    designer: row.designer,
    images: row.images,
    sourceUrl: row.source_url,
    sourceId: row.source_id,
    metadata: row.metadata,
    file_count: Number(row.file_count),
    created_by: row.created_by,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  }
}
