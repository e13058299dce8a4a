/**
 * Makes in the store (docs/inventory.md): a model file with a material per
 * project filament, saved only as a whole, in one transaction, guarded by its
 * revision. A save never reads or changes the inventory: a make says what to
 * load, the spools say what is loaded, and the queue compares the two.
 *
 * Rows are locked file first, then the make, then materials and the SKU, so
 * two saves of one file queue behind each other instead of deadlocking. File
 * and make are locked FOR NO KEY UPDATE: an order inserting jobs that refer
 * to them (a KEY SHARE lock) is never blocked by a save, so a save waiting for
 * the SKU an order holds cannot close a cycle; SKU changes take the makes
 * FOR KEY SHARE for the same reason.
 */
import { randomUUID } from 'node:crypto'
import type { Sql, TransactionSql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { Make, MakeListQuery, SaveMakeBody } from '../../protocol/schemas/makes.js'

export interface MakeRow {
  id: string
  organization_id: string
  model_file_id: string
  name: string
  materials: { filament_index: number; material_id: string }[]
  sku_id: string | null
  quantity_to_print: number
  is_default: boolean
  revision: number
  created_at: Date
  updated_at: Date
}

export function makeOf(row: MakeRow): Make {
  return {
    id: row.id,
    model_file_id: row.model_file_id,
    name: row.name,
    materials: row.materials.map((m) => ({ filament_index: m.filament_index, material_id: m.material_id })),
    sku_id: row.sku_id,
    quantity_to_print: row.quantity_to_print,
    is_default: row.is_default,
    revision: row.revision,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  }
}

export const makeNotFound = (): ServiceError => new ServiceError('make_not_found', 'no such make in this organization')

export class MakeStore {
  readonly #sql: Sql

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  /**
   * Creates (no make_id) or updates (make_id + expected_revision) the make of a file. An update
   * replaces the make with what is sent: a field left out takes its default (quantity_to_print 1,
   * is_default false, sku_id null), as in a create, so a save never half-merges two editors' forms. Everything the
   * save checks that depends on other rows is checked inside the transaction that writes, with those
   * rows locked, so a refusal at any step leaves no trace.
   */
  async save(organizationId: string, fileId: string, body: SaveMakeBody): Promise<{ make: Make; created: boolean }> {
    const materials = [...body.materials].sort((a, b) => a.filament_index - b.filament_index)
    const repeated = materials.find((m, i) => i > 0 && materials[i - 1]!.filament_index === m.filament_index)
    if (repeated !== undefined) throw new ServiceError('validation_failed', `body.materials: filament_index ${repeated.filament_index} is given twice; name each filament once`)
    if (body.make_id !== undefined && body.expected_revision === undefined) {
      throw new ServiceError('validation_failed', 'body.expected_revision is required with body.make_id: send the revision of the make you read (GET /v1/makes/{id})')
    }
    return this.#sql.begin(async (tx) => {
      const [file] = await tx<{ project_filaments: unknown[]; deleted_at: Date | null }[]>`
        select project_filaments, deleted_at from files where id = ${fileId} and organization_id = ${organizationId} for no key update`
      if (file === undefined) throw new ServiceError('file_not_found', 'no such model file in this organization')
      if (file.deleted_at !== null) throw new ServiceError('file_deleted', 'the file is deleted; restore it (POST /v1/files/{fileId}/restore) before saving a make of it')
      const filaments = Array.isArray(file.project_filaments) ? file.project_filaments.length : 0
      const outside = materials.filter((m) => m.filament_index >= filaments)
      if (outside.length > 0) {
        const have = filaments === 0 ? 'the file has no project filaments' : `the file has ${filaments} (indexes 0-${filaments - 1})`
        throw new ServiceError('validation_failed', `body.materials: filament_index ${outside.map((m) => m.filament_index).join(', ')} is not a project filament of this file; ${have}`)
      }
      await assertMaterials(tx, organizationId, materials.map((m) => m.material_id))
      const now = new Date(this.#now())
      const id = body.make_id ?? randomUUID()
      if (body.is_default === true) {
        // One default per file (a partial unique index, checked at each statement): the old one steps down first.
        await tx`update makes set is_default = false, updated_at = ${now} where model_file_id = ${fileId} and is_default and id <> ${id}`
      }
      let row: MakeRow
      let created: boolean
      let previousSku: string | null = null
      if (body.make_id === undefined) {
        const [inserted] = await tx<MakeRow[]>`
          insert into makes (id, organization_id, model_file_id, name, materials, sku_id, quantity_to_print, is_default, revision, created_at, updated_at)
          values (${id}, ${organizationId}, ${fileId}, ${body.name}, ${tx.json(materials)}, ${body.sku_id ?? null},
                  ${body.quantity_to_print ?? 1}, ${body.is_default ?? false}, 1, ${now}, ${now})
          returning *`
        row = inserted!
        created = true
      } else {
        const [current] = await tx<MakeRow[]>`select * from makes where id = ${body.make_id} and organization_id = ${organizationId} for no key update`
        if (current === undefined) throw makeNotFound()
        if (current.model_file_id !== fileId.toLowerCase()) throw new ServiceError('make_not_found', `make ${body.make_id} is a make of another file (${current.model_file_id}); save it under that file`)
        if (current.revision !== body.expected_revision) {
          throw new ServiceError('make_revision_conflict', `the make is at revision ${current.revision}, not ${body.expected_revision}: read it again and apply your change to that revision`, {
            extra: { revision: current.revision },
          })
        }
        previousSku = current.sku_id
        const [updated] = await tx<MakeRow[]>`
          update makes set name = ${body.name}, materials = ${tx.json(materials)},
            sku_id = ${body.sku_id ?? null}, quantity_to_print = ${body.quantity_to_print ?? 1}, is_default = ${body.is_default ?? false},
            revision = revision + 1, updated_at = ${now}
          where id = ${current.id} returning *`
        row = updated!
        created = false
      }
      // Joining is what changing the make's SKU does: re-saving a make whose SKU later dropped it does not put it back.
      if (row.sku_id !== null && (created || row.sku_id !== previousSku)) await joinSku(tx, organizationId, row.sku_id, row.id)
      return { make: makeOf(row), created }
    })
  }

  async get(organizationId: string, id: string): Promise<Make> {
    const [row] = await this.#sql<MakeRow[]>`select * from makes where id = ${id} and organization_id = ${organizationId}`
    if (row === undefined) throw makeNotFound()
    return makeOf(row)
  }

  async list(organizationId: string, query: MakeListQuery): Promise<{ makes: Make[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = query.limit ?? 100
    const offset = query.offset ?? 0
    const where = () => sql`
      organization_id = ${organizationId}
      ${query.model_file_id === undefined ? sql`` : sql`and model_file_id = ${query.model_file_id}`}
      ${query.sku_id === undefined ? sql`` : sql`and (sku_id = ${query.sku_id} or id in (select make_id from sku_makes where sku_id = ${query.sku_id}))`}`
    const [rows, [count]] = await Promise.all([
      sql<MakeRow[]>`select * from makes where ${where()} order by is_default desc, created_at, id limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from makes where ${where()}`,
    ])
    return { makes: rows.map(makeOf), total: Number(count!.total), limit, offset }
  }

  /**
   * Refused while a SKU is made of it or a job that has not ended prints it (409 make_in_use, naming
   * them); a job awaiting verification counts, since a failed verdict may requeue it with its make.
   */
  async delete(organizationId: string, id: string): Promise<void> {
    await this.#sql.begin(async (tx) => {
      const [row] = await tx<{ id: string }[]>`select id from makes where id = ${id} and organization_id = ${organizationId} for update`
      if (row === undefined) throw makeNotFound()
      const skus = await tx<{ sku: string }[]>`select s.sku from sku_makes sm join skus s on s.id = sm.sku_id where sm.make_id = ${id} order by s.sku limit 11`
      const [jobs] = await tx<{ count: string }[]>`
        select count(*) as count from print_jobs where make_id = ${id} and status in ('queued', 'dispatching', 'printing', 'paused', 'awaiting_verification')`
      const active = Number(jobs!.count)
      if (skus.length > 0 || active > 0) {
        const users = [
          skus.length > 0 ? `SKU ${skus.slice(0, 10).map((s) => s.sku).join(', ')}${skus.length > 10 ? ' and more' : ''}` : '',
          active > 0 ? `${active} job(s) not yet ended` : '',
        ].filter((u) => u !== '')
        throw new ServiceError('make_in_use', `${users.join(' and ')} use this make; remove it from the SKU (or cancel the jobs) first`, {
          extra: { skus: skus.slice(0, 10).map((s) => s.sku), active_jobs: active },
        })
      }
      await tx`delete from makes where id = ${id}`
    })
  }
}

/** Every material must be the organization's; they are locked so a concurrent delete waits for this save (and then sees the make). */
async function assertMaterials(tx: TransactionSql, organizationId: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  const wanted = [...new Set(ids.map((id) => id.toLowerCase()))]
  const found = await tx<{ id: string }[]>`select id from materials where organization_id = ${organizationId} and id = any(${wanted}::uuid[]) for share`
  const known = new Set(found.map((m) => m.id))
  const unknown = wanted.filter((id) => !known.has(id))
  if (unknown.length > 0) throw new ServiceError('material_not_found', `body.materials: no material ${unknown.join(', ')} in this organization (GET /v1/materials lists them)`)
}

/**
 * The make's SKU gets it (quantity 1, after its other makes) unless it has it already. Checked last,
 * after the make is written: an unknown SKU undoes the whole save.
 */
async function joinSku(tx: TransactionSql, organizationId: string, skuId: string, makeId: string): Promise<void> {
  const [sku] = await tx<{ id: string }[]>`select id from skus where id = ${skuId} and organization_id = ${organizationId} for update`
  if (sku === undefined) throw new ServiceError('sku_not_found', `body.sku_id: no SKU ${skuId} in this organization (GET /v1/skus lists them)`)
  await tx`
    insert into sku_makes (sku_id, make_id, quantity, position)
    values (${skuId}, ${makeId}, 1, (select coalesce(max(position), 0) + 1 from sku_makes where sku_id = ${skuId}))
    on conflict (sku_id, make_id) do nothing`
}
