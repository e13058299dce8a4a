/**
 * Organization isolation for ids a request names in its body or query: an id
 * of kind K must be a row of K in the caller's organization, else 404 with the
 * field named and nothing stored. One query per kind and request, whatever the
 * number of ids (a body's slots, a SKU's makes). Another organization's id and
 * one that does not exist answer alike: nothing tells them apart.
 */
import { ServiceError, type ErrorCode } from '../../protocol/errors.js'
import type { Queryable } from '../storage/database.js'

const kinds = {
  material: { table: 'materials', key: 'uuid', code: 'material_not_found', noun: 'material', list: 'GET /v1/materials' },
  printer: { table: 'printers', key: 'uuid', code: 'printer_not_found', noun: 'printer', list: 'GET /v1/printers' },
  print_job: { table: 'print_jobs', key: 'bigint', code: 'print_job_not_found', noun: 'print job', list: 'POST /v1/print-jobs' },
  model_file: { table: 'files', key: 'uuid', code: 'file_not_found', noun: 'model file', list: 'GET /v1/model-files' },
  make: { table: 'makes', key: 'uuid', code: 'make_not_found', noun: 'make', list: 'GET /v1/makes' },
  sku: { table: 'skus', key: 'uuid', code: 'sku_not_found', noun: 'SKU', list: 'GET /v1/skus' },
  batch: { table: 'batches', key: 'uuid', code: 'batch_not_found', noun: 'batch', list: 'GET /v1/batches' },
} as const satisfies Record<string, { table: string; key: 'uuid' | 'bigint'; code: ErrorCode; noun: string; list: string }>

export type OwnedKind = keyof typeof kinds

/** Refuses the first of `ids` (those not null) that is not a `kind` of `organizationId`, naming `field` (e.g. `body.slots[0].materialId`). */
export async function assertOwned(
  sql: Queryable,
  organizationId: string,
  kind: OwnedKind,
  named: readonly { field: string; id: string | number | null | undefined }[],
): Promise<void> {
  const wanted = named.filter((n): n is { field: string; id: string | number } => n.id !== null && n.id !== undefined)
  if (wanted.length === 0) return
  const { table, key, code, noun, list } = kinds[kind]
  const ids = [...new Set(wanted.map((n) => String(n.id).toLowerCase()))]
  // The ids passed their schemas (uuid format, integer), so the casts cannot fail; the primary key finds them.
  const rows =
    key === 'uuid'
      ? await sql<{ id: string }[]>`select id::text as id from ${sql(table)} where organization_id = ${organizationId} and id = any(${ids}::uuid[])`
      : await sql<{ id: string }[]>`select id::text as id from ${sql(table)} where organization_id = ${organizationId} and id = any(${ids}::bigint[])`
  const found = new Set(rows.map((r) => r.id))
  const missing = wanted.find((n) => !found.has(String(n.id).toLowerCase()))
  if (missing !== undefined) throw new ServiceError(code, `${missing.field}: no ${noun} ${String(missing.id)} in this organization (${list} lists them)`)
}
