/**
 * The overview of one model file (docs/files.md): the file,
 * how many of its jobs print and wait, the batches and makes that use it, its
 * project filaments with their labels, the SKUs it belongs to, and what the
 * caller may do with it now. One read, computed from the tables, never stored.
 *
 * Capabilities answer for the caller: the routes' own rules (print needs
 * print-jobs:write as an admin or a key, labels/delete/restore files:write,
 * reprocess a signed-in person) applied to the file's state. A deleted file
 * can only be restored, and not even that once purged or while its model is
 * deleted.
 */
import type { Sql } from 'postgres'
import type { ModelFileOverview } from '../../protocol/schemas/makes.js'
import type { Principal } from '../http/route.js'
import { fileNotFound, fileRecordOf, type FileRow } from './file-records.js'

/** Whether the caller passes a route's auth rule (src/http/route.ts RouteAuth, organization kind). */
function may(principal: Principal, scope: string | null, admin = false): boolean {
  if (principal.kind === 'member') return !admin || principal.role === 'admin'
  if (principal.kind === 'api_key') return scope !== null && principal.scopes.has(scope)
  if (principal.kind === 'oauth') return scope !== null && principal.scopes.has(scope) && (!admin || principal.role === 'admin')
  return false
}

export async function modelFileOverview(sql: Sql, organizationId: string, fileId: string, principal: Principal): Promise<ModelFileOverview> {
  const [file] = await sql<(FileRow & { model_deleted: boolean })[]>`
    select f.*, m.deleted_at is not null as model_deleted from files f join models m on m.id = f.model_id
    where f.organization_id = ${organizationId} and f.id = ${fileId}`
  if (file === undefined) throw fileNotFound()
  const [[counts], skus] = await Promise.all([
    sql<{ printing: string; queued: string; batches: string; makes: string }[]>`
      select
        (select count(*) from print_jobs where model_file_id = ${fileId} and status in ('printing', 'paused')) as printing,
        (select count(*) from print_jobs where model_file_id = ${fileId} and status in ('queued', 'dispatching')) as queued,
        (select count(distinct batch_id) from print_jobs where model_file_id = ${fileId} and batch_id is not null) as batches,
        (select count(*) from makes where model_file_id = ${fileId}) as makes`,
    sql<{ id: string; sku: string; name: string }[]>`
      select distinct s.id, s.sku, s.name from skus s join sku_makes sm on sm.sku_id = s.id join makes m on m.id = sm.make_id
      where m.model_file_id = ${fileId} order by s.sku limit 200`,
  ])
  const record = fileRecordOf(file)
  const active = file.deleted_at === null
  const filaments = (record.project_filaments ?? []).map((f, index) => ({
    index,
    id: f.id,
    type: typeof f.type === 'string' ? f.type : null,
    color_hex: typeof f.color_hex === 'string' ? f.color_hex : null,
    used_g: typeof f.used_g === 'number' ? f.used_g : null,
    label: f.label ?? null,
  }))
  return {
    file: record,
    counts: { printing: Number(counts!.printing), queued: Number(counts!.queued), batches: Number(counts!.batches), makes: Number(counts!.makes) },
    filaments,
    // SKUs are what makes:read opens: a key or token without it sees none.
    skus: principal.kind === 'member' || may(principal, 'makes:read') ? skus.map((s) => ({ id: s.id, sku: s.sku, name: s.name })) : [],
    capabilities: {
      can_print: active && may(principal, 'print-jobs:write', true),
      can_edit_labels: active && may(principal, 'files:write'),
      can_reprocess: active && may(principal, null),
      can_delete: active && may(principal, 'files:write'),
      can_restore: !active && file.purged_at === null && !file.model_deleted && may(principal, 'files:write'),
    },
  }
}
