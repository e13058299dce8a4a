/**
 * The materials catalogue (docs/inventory.md) in the store. Every read and
 * change is scoped to the organization; another organization's material is
 * "not found". A material a make uses or a spool holds is not deleted (409
 * material_in_use).
 */
import { randomUUID } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { CreateMaterialBody, Material, MaterialListQuery, UpdateMaterialBody } from '../../protocol/schemas/materials.js'
import { escapeLike } from '../storage/like.js'

interface MaterialRow {
  id: string
  name: string
  type: string
  color_hex: string | null
  vendor: string | null
  diameter_mm: number
  density_g_cm3: number | null
  nozzle_temp_min_c: number | null
  nozzle_temp_max_c: number | null
  cost_per_kg: number | null
  created_at: Date
  updated_at: Date
}

const notFound = (): ServiceError => new ServiceError('material_not_found', 'no such material in this organization')

export class MaterialStore {
  readonly #sql: Sql

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  async create(organizationId: string, body: CreateMaterialBody): Promise<Material> {
    assertTemperatures(body.nozzle_temp_min_c ?? null, body.nozzle_temp_max_c ?? null)
    const [row] = await this.#sql<MaterialRow[]>`
      insert into materials (id, organization_id, name, type, color_hex, vendor, diameter_mm, density_g_cm3, nozzle_temp_min_c, nozzle_temp_max_c, cost_per_kg)
      values (${randomUUID()}, ${organizationId}, ${body.name}, ${body.type}, ${body.color_hex?.toUpperCase() ?? null}, ${body.vendor ?? null},
              ${body.diameter_mm ?? 1.75}, ${body.density_g_cm3 ?? null}, ${body.nozzle_temp_min_c ?? null}, ${body.nozzle_temp_max_c ?? null}, ${body.cost_per_kg ?? null})
      returning *`
    return materialOf(row!)
  }

  async list(organizationId: string, query: MaterialListQuery): Promise<{ materials: Material[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = query.limit ?? 100
    const offset = query.offset ?? 0
    const where = () => sql`
      organization_id = ${organizationId}
      ${query.type === undefined ? sql`` : sql`and lower(type) = ${query.type.toLowerCase()}`}
      ${query.search === undefined ? sql`` : sql`and (name ilike ${`%${escapeLike(query.search)}%`} or vendor ilike ${`%${escapeLike(query.search)}%`})`}`
    const [rows, [count]] = await Promise.all([
      sql<MaterialRow[]>`select * from materials where ${where()} order by lower(name), id limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from materials where ${where()}`,
    ])
    return { materials: rows.map(materialOf), total: Number(count!.total), limit, offset }
  }

  async get(organizationId: string, id: string): Promise<Material> {
    const [row] = await this.#sql<MaterialRow[]>`select * from materials where organization_id = ${organizationId} and id = ${id}`
    if (row === undefined) throw notFound()
    return materialOf(row)
  }

  async update(organizationId: string, id: string, body: UpdateMaterialBody): Promise<Material> {
    const row = await this.#sql.begin(async (tx) => {
      const [current] = await tx<MaterialRow[]>`select * from materials where organization_id = ${organizationId} and id = ${id} for update`
      if (current === undefined) throw notFound()
      const min = body.nozzle_temp_min_c !== undefined ? body.nozzle_temp_min_c : current.nozzle_temp_min_c
      const max = body.nozzle_temp_max_c !== undefined ? body.nozzle_temp_max_c : current.nozzle_temp_max_c
      assertTemperatures(min, max)
      const set: Record<string, unknown> = { updated_at: new Date(this.#now()) }
      for (const [key, value] of Object.entries(body)) if (value !== undefined) set[key] = key === 'color_hex' && typeof value === 'string' ? value.toUpperCase() : value
      const [updated] = await tx<MaterialRow[]>`update materials set ${tx(set)} where id = ${id} returning *`
      return updated!
    })
    return materialOf(row as MaterialRow)
  }

  /** Refused while a make uses it (the make's materials name it) or a spool holds it. */
  async delete(organizationId: string, id: string): Promise<void> {
    await this.#sql.begin(async (tx) => {
      const [row] = await tx`select id from materials where organization_id = ${organizationId} and id = ${id} for update`
      if (row === undefined) throw notFound()
      const [uses] = await tx<{ makes: string; spools: string }[]>`
        select
          (select count(*) from makes where organization_id = ${organizationId}
            and exists (select 1 from jsonb_array_elements(materials) m where m->>'material_id' = ${id})) as makes,
          (select count(*) from spools where material_id = ${id}) as spools`
      const makes = Number(uses!.makes)
      const spools = Number(uses!.spools)
      if (makes > 0 || spools > 0) {
        const users = [makes > 0 ? `${makes} make(s)` : '', spools > 0 ? `${spools} spool(s) in the inventory` : ''].filter((u) => u !== '').join(' and ')
        throw new ServiceError('material_in_use', `${users} use this material; change them to another material (or delete them) first`, { extra: { makes, spools } })
      }
      await tx`delete from materials where id = ${id}`
    })
  }
}

function assertTemperatures(min: number | null, max: number | null): void {
  if (min !== null && max !== null && min > max) throw new ServiceError('validation_failed', `nozzle_temp_min_c (${min}) is above nozzle_temp_max_c (${max})`)
}

function materialOf(row: MaterialRow): Material {
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    color_hex: row.color_hex,
    vendor: row.vendor,
    diameter_mm: row.diameter_mm,
    density_g_cm3: row.density_g_cm3,
    nozzle_temp_min_c: row.nozzle_temp_min_c,
    nozzle_temp_max_c: row.nozzle_temp_max_c,
    cost_per_kg: row.cost_per_kg,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  }
}
