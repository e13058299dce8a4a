/**
 * The spool inventory (docs/inventory.md) in the store. Every read and change
 * is scoped to the organization; another organization's spool, material or
 * printer is "not found". `remaining_g` changes only through the ledger
 * (src/inventory/spool-ledger.ts): an adjustment here, or a finished job's
 * deduction (src/inventory/deduction.ts).
 *
 * A printer slot holds one spool: the partial unique index says so; the
 * check before it names the spool in the slot (409 spool_slot_taken), and
 * the index's own refusal, when two loads race, is answered the same way.
 */
import { randomUUID } from 'node:crypto'
import type { Sql, TransactionSql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { AdjustmentBody, AdjustmentResult, CreateSpoolBody, LedgerEntry, LedgerQuery, Spool, SpoolListQuery, UpdateSpoolBody } from '../../protocol/schemas/inventory.js'
import { escapeLike } from '../storage/like.js'
import { ledgerEntryOf, maxSpoolGrams, roundGrams, writeLedgerEntry, type LedgerRow } from './spool-ledger.js'

interface SpoolRow {
  id: string
  organization_id: string
  material_id: string
  material_name: string
  material_type: string
  material_color_hex: string | null
  label: string | null
  initial_g: number
  remaining_g: number
  location: string | null
  printer_id: string | null
  slot: number | null
  created_at: Date
  updated_at: Date
}

type Queryable = Sql | TransactionSql

const notFound = (): ServiceError => new ServiceError('spool_not_found', 'no such spool in this organization')

/** A spool with its material's name, type and colour. */
const selectSpools = (sql: Queryable) => sql`
  select s.*, m.name as material_name, m.type as material_type, m.color_hex as material_color_hex
  from spools s join materials m on m.id = s.material_id`

export class SpoolStore {
  readonly #sql: Sql

  constructor(sql: Sql) {
    this.#sql = sql
  }

  async list(organizationId: string, query: SpoolListQuery): Promise<{ spools: Spool[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    const limit = query.limit ?? 100
    const offset = query.offset ?? 0
    const pattern = query.search === undefined ? undefined : `%${escapeLike(query.search)}%`
    const where = () => sql`
      s.organization_id = ${organizationId}
      ${query.material_id === undefined ? sql`` : sql`and s.material_id = ${query.material_id}`}
      ${query.printer_id === undefined ? sql`` : sql`and s.printer_id = ${query.printer_id}`}
      ${query.loaded === undefined ? sql`` : query.loaded ? sql`and s.printer_id is not null` : sql`and s.printer_id is null`}
      ${pattern === undefined ? sql`` : sql`and (s.label ilike ${pattern} or s.location ilike ${pattern})`}`
    const [rows, [count]] = await Promise.all([
      sql<SpoolRow[]>`${selectSpools(sql)} where ${where()} order by lower(m.name), lower(s.label) nulls last, s.created_at, s.id limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from spools s where ${where()}`,
    ])
    return { spools: rows.map(spoolOf), total: Number(count!.total), limit, offset }
  }

  async get(organizationId: string, id: string): Promise<Spool> {
    return spoolOf(await readSpool(this.#sql, organizationId, id))
  }

  /** The material (and the printer, when loading) must be the organization's. */
  async create(organizationId: string, body: CreateSpoolBody, now: Date): Promise<Spool> {
    const remaining = body.remaining_g ?? body.initial_g
    if (remaining > body.initial_g) throw new ServiceError('validation_failed', `body.remaining_g (${remaining}) is above body.initial_g (${body.initial_g})`)
    const load = loadOf(body.printer_id, body.slot)
    const id = randomUUID()
    await this.#write(organizationId, id, load, async (tx) => {
      await assertMaterial(tx, organizationId, body.material_id)
      if (load !== undefined && load !== null) await this.#assertSlotFree(tx, organizationId, load, id)
      await tx`
        insert into spools (id, organization_id, material_id, label, initial_g, remaining_g, location, printer_id, slot, created_at, updated_at)
        values (${id}, ${organizationId}, ${body.material_id}, ${body.label ?? null}, ${body.initial_g}, ${roundGrams(remaining)}, ${body.location ?? null},
                ${load?.printerId ?? null}, ${load?.slot ?? null}, ${now}, ${now})`
    })
    return this.get(organizationId, id)
  }

  /** Fields sent replace the stored ones; printer_id and slot together load (or, both null, unload) the spool. */
  async update(organizationId: string, id: string, body: UpdateSpoolBody, now: Date): Promise<Spool> {
    const load = loadOf(body.printer_id, body.slot)
    await this.#write(organizationId, id, load, async (tx) => {
      await lockSpool(tx, organizationId, id)
      if (body.material_id !== undefined) await assertMaterial(tx, organizationId, body.material_id)
      if (load !== undefined && load !== null) await this.#assertSlotFree(tx, organizationId, load, id)
      const set: Record<string, unknown> = { updated_at: now }
      if (body.label !== undefined) set['label'] = body.label
      if (body.location !== undefined) set['location'] = body.location
      if (body.material_id !== undefined) set['material_id'] = body.material_id
      if (load !== undefined) {
        set['printer_id'] = load?.printerId ?? null
        set['slot'] = load?.slot ?? null
      }
      await tx`update spools set ${tx(set)} where id = ${id}`
    })
    return this.get(organizationId, id)
  }

  /** Its ledger goes with it. */
  async delete(organizationId: string, id: string): Promise<void> {
    const deleted = await this.#sql`delete from spools where organization_id = ${organizationId} and id = ${id} returning id`
    if (deleted.length === 0) throw notFound()
  }

  /** One transaction: the spool's row locked, the floor at 0 applied, the entry written. */
  async adjust(organizationId: string, id: string, body: AdjustmentBody, now: Date): Promise<AdjustmentResult> {
    const delta = roundGrams(body.delta_g)
    if (delta === 0) throw new ServiceError('validation_failed', 'body.delta_g must not be 0 (grams, to the milligram)')
    const entry = await this.#sql.begin(async (tx) => {
      const spool = await lockSpool(tx, organizationId, id)
      if (spool.remaining_g + delta > maxSpoolGrams) {
        throw new ServiceError('validation_failed', `body.delta_g would take the spool to ${roundGrams(spool.remaining_g + delta)} g; a spool holds at most ${maxSpoolGrams} g`)
      }
      const written = await writeLedgerEntry(tx, { organizationId, spoolId: id, remaining: spool.remaining_g, delta, reason: body.reason, job: null, now })
      // An entry without a job never meets the per-job unique index.
      return written!.entry
    })
    return { entry, spool: await this.get(organizationId, id) }
  }

  /** Newest first. */
  async ledger(organizationId: string, id: string, query: LedgerQuery): Promise<{ entries: LedgerEntry[]; total: number; limit: number; offset: number }> {
    const sql = this.#sql
    await readSpool(sql, organizationId, id)
    const limit = query.limit ?? 100
    const offset = query.offset ?? 0
    const [rows, [count]] = await Promise.all([
      sql<LedgerRow[]>`
        select id, spool_id, delta_g, applied_g, shortfall_g, reason, job_id, created_at from spool_ledger
        where spool_id = ${id} and organization_id = ${organizationId} order by created_at desc, id desc limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from spool_ledger where spool_id = ${id} and organization_id = ${organizationId}`,
    ])
    return { entries: rows.map(ledgerEntryOf), total: Number(count!.total), limit, offset }
  }

  /** 409 naming the spool already in the slot (this spool itself may stay where it is). */
  async #assertSlotFree(tx: TransactionSql, organizationId: string, load: Load, spoolId: string): Promise<void> {
    await assertPrinter(tx, organizationId, load.printerId)
    const [other] = await tx<{ id: string }[]>`select id from spools where printer_id = ${load.printerId} and slot = ${load.slot} and id <> ${spoolId}`
    if (other !== undefined) throw slotTaken(load, other.id)
  }

  /**
   * Runs a write. What a concurrent writer changed between our checks and the write answers as the
   * check would have: a load that lost the race for the slot (the unique index), a material or
   * printer deleted meanwhile (its foreign key).
   */
  async #write(organizationId: string, spoolId: string, load: Load | null | undefined, write: (tx: TransactionSql) => Promise<void>): Promise<void> {
    try {
      await this.#sql.begin(write)
    } catch (error) {
      const e = error as { code?: string; constraint_name?: string }
      if (e.code === '23503' && e.constraint_name === 'spools_material_id_fkey') throw new ServiceError('material_not_found', 'the material was deleted meanwhile', { cause: error })
      if (e.code === '23503' && e.constraint_name === 'spools_printer_id_fkey') throw new ServiceError('printer_not_found', 'the printer was deleted meanwhile', { cause: error })
      if (load === undefined || load === null || e.code !== '23505' || e.constraint_name !== 'spools_one_per_slot') throw error
      const [other] = await this.#sql<{ id: string }[]>`
        select id from spools where organization_id = ${organizationId} and printer_id = ${load.printerId} and slot = ${load.slot} and id <> ${spoolId}`
      throw slotTaken(load, other?.id ?? null)
    }
  }
}

interface Load {
  printerId: string
  slot: number
}

/** undefined: the body leaves the spool where it is; null: unload; else load. */
function loadOf(printerId: string | null | undefined, slot: number | null | undefined): Load | null | undefined {
  if (printerId === undefined && slot === undefined) return undefined
  if (printerId === undefined || slot === undefined || (printerId === null) !== (slot === null)) {
    throw new ServiceError('validation_failed', 'body.printer_id and body.slot go together: send both to load the spool, both null to unload it')
  }
  return printerId === null || slot === null ? null : { printerId, slot }
}

function slotTaken(load: Load, otherId: string | null): ServiceError {
  return new ServiceError('spool_slot_taken', `slot ${load.slot} of printer ${load.printerId} holds spool ${otherId ?? '(another)'}: unload it first`, { extra: { spool_id: otherId } })
}

async function readSpool(sql: Queryable, organizationId: string, id: string): Promise<SpoolRow> {
  const [row] = await sql<SpoolRow[]>`${selectSpools(sql)} where s.organization_id = ${organizationId} and s.id = ${id}`
  if (row === undefined) throw notFound()
  return row
}

async function lockSpool(tx: TransactionSql, organizationId: string, id: string): Promise<{ remaining_g: number }> {
  const [row] = await tx<{ remaining_g: number }[]>`select remaining_g from spools where organization_id = ${organizationId} and id = ${id} for update`
  if (row === undefined) throw notFound()
  return row
}

async function assertMaterial(tx: TransactionSql, organizationId: string, materialId: string): Promise<void> {
  const [row] = await tx`select id from materials where organization_id = ${organizationId} and id = ${materialId}`
  if (row === undefined) throw new ServiceError('material_not_found', `no material ${materialId} in this organization (GET /v1/materials lists them)`)
}

async function assertPrinter(tx: TransactionSql, organizationId: string, printerId: string): Promise<void> {
  const [row] = await tx`select id from printers where organization_id = ${organizationId} and id = ${printerId}`
  if (row === undefined) throw new ServiceError('printer_not_found', `no printer ${printerId} in this organization`)
}

function spoolOf(row: SpoolRow): Spool {
  return {
    id: row.id,
    material_id: row.material_id,
    material: { name: row.material_name, type: row.material_type, color_hex: row.material_color_hex },
    label: row.label,
    initial_g: row.initial_g,
    remaining_g: row.remaining_g,
    location: row.location,
    printer_id: row.printer_id,
    slot: row.slot,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  }
}
