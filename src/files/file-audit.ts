/**
 * Audit and cleanup of one model's storage (docs/files.md), and the sweep that removes deleted files' bytes after their
 * grace period.
 *
 * The audit compares the model's rows (active, and deleted but not yet
 * purged) with the objects under `{orgId}/{modelId}/`. Cleanup deletes a
 * path only when it is under that prefix and orphaned at the moment of
 * deletion: no row names it, and it is older than `uploadSettleMs` (an
 * upload stores its bytes a moment before its row; a young object may be
 * about to be claimed). Everything else is a failed deletion with a reason:
 * `outside_model`, `not_found` or `not_orphaned`.
 */
import type { Sql } from 'postgres'
import type { Logger } from '../observability/log.js'
import { assertObjectKey, type FileStore } from './file-store.js'
import type { FileRow } from './file-records.js'
import type { ModelStore } from '../models/model-store.js'

export const uploadSettleMs = 15 * 60_000

type AuditRow = Pick<FileRow, 'id' | 'filename' | 'file_path' | 'file_size' | 'file_type' | 'created_at' | 'metadata'>

export interface Audit {
  database_files: { id: string; filename: string; file_path: string; file_size: number; file_type: string; created_at: string; metadata: Record<string, unknown> }[]
  storage_files: { name: string; id: string; updated_at: string; created_at: string; last_accessed_at: string | null; metadata: { size: number } }[]
  orphaned_files: { name: string; path: string; size: number; last_modified: string }[]
  summary: { total_database_files: number; total_storage_files: number; total_orphaned_files: number }
}

export interface Cleanup {
  success: boolean
  deleted_files: string[]
  failed_deletions: { path: string; error: 'outside_model' | 'not_found' | 'not_orphaned'; message: string }[]
}

export class FileAudit {
  readonly #sql: Sql
  readonly #store: FileStore
  readonly #models: ModelStore
  readonly #logger: Logger

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, store: FileStore, models: ModelStore, logger: Logger, now: () => number) {
    this.#now = now
    this.#sql = sql
    this.#store = store
    this.#models = models
    this.#logger = logger
  }

  async audit(organizationId: string, modelId: string): Promise<Audit> {
    await this.#models.assertExists(organizationId, modelId)
    const rows = await this.#sql<AuditRow[]>`
      select id, filename, file_path, file_size, file_type, created_at, metadata from files
      where organization_id = ${organizationId} and model_id = ${modelId} and purged_at is null order by created_at, id`
    const objects = await this.#store.list(`${organizationId}/${modelId}/`)
    const named = new Set(rows.map((r) => r.file_path))
    const orphans = objects.filter((o) => !named.has(o.key))
    return {
      database_files: rows.map((r) => ({
        id: r.id,
        filename: r.filename,
        file_path: r.file_path,
        file_size: Number(r.file_size),
        file_type: r.file_type,
        created_at: r.created_at.toISOString(),
        metadata: r.metadata,
      })),
      storage_files: objects.map((o) => ({
        name: o.key,
        id: o.key,
        updated_at: new Date(o.modifiedAt).toISOString(),
        // Neither backend keeps a creation or access time apart from the last write.
        created_at: new Date(o.modifiedAt).toISOString(),
        last_accessed_at: null,
        metadata: { size: o.size },
      })),
      orphaned_files: orphans.map((o) => ({ name: o.key.split('/').at(-1)!, path: o.key, size: o.size, last_modified: new Date(o.modifiedAt).toISOString() })),
      summary: { total_database_files: rows.length, total_storage_files: objects.length, total_orphaned_files: orphans.length },
    }
  }

  async cleanup(organizationId: string, modelId: string, paths: readonly string[], now: number): Promise<Cleanup> {
    await this.#models.assertExists(organizationId, modelId)
    const prefix = `${organizationId}/${modelId}/`
    const answer: Cleanup = { success: true, deleted_files: [], failed_deletions: [] }
    const fail = (path: string, error: Cleanup['failed_deletions'][number]['error'], message: string): void => {
      answer.failed_deletions.push({ path, error, message })
    }
    for (const path of new Set(paths)) {
      if (!path.startsWith(prefix) || !isKey(path)) {
        fail(path, 'outside_model', `only paths under ${prefix} can be cleaned up from this model`)
        continue
      }
      // Checked and deleted while holding the model's row: an upload's row insert (which shares it) waits.
      const outcome = await this.#sql.begin(async (tx) => {
        await tx`select 1 from models where id = ${modelId} for update`
        const [row] = await tx`select id from files where file_path = ${path} and purged_at is null`
        if (row !== undefined) return 'not_orphaned' as const
        const object = await this.#store.stat(path)
        if (object === undefined) return 'not_found' as const
        if (now - object.modifiedAt < uploadSettleMs) return 'young' as const
        await this.#store.delete(path)
        return 'deleted' as const
      })
      if (outcome === 'deleted') answer.deleted_files.push(path)
      else if (outcome === 'not_found') fail(path, 'not_found', 'no object at this path')
      else if (outcome === 'young') fail(path, 'not_orphaned', `stored less than ${uploadSettleMs / 60_000} minutes ago: an upload may be about to claim it; try later`)
      else fail(path, 'not_orphaned', 'a file of the model still uses it (deleted files keep their bytes through the grace period)')
    }
    answer.success = answer.failed_deletions.length === 0
    if (answer.deleted_files.length > 0) this.#logger.info('orphaned files removed', { organizationId, modelId, count: answer.deleted_files.length })
    return answer
  }

  /** Removes the bytes of files deleted more than `graceDays` ago; their rows stay as tombstones (purged_at). */
  async purgeExpired(graceDays: number, now: number, batch = 100): Promise<number> {
    const cutoff = new Date(now - graceDays * 86_400_000)
    let purged = 0
    for (;;) {
      const rows = await this.#sql<Pick<FileRow, 'id' | 'file_path'>[]>`
        select id, file_path from files where deleted_at is not null and purged_at is null and deleted_at < ${cutoff}
        order by deleted_at limit ${batch}`
      if (rows.length === 0) return purged
      for (const row of rows) {
        // Marked first, so a restore racing the sweep either wins (nothing is purged) or answers file_purged;
        // it never brings back a file whose bytes are gone. Bytes left by a failed delete show as orphans in the audit.
        const marked = await this.#sql`update files set purged_at = ${new Date(this.#now())} where id = ${row.id} and deleted_at is not null and purged_at is null returning id`
        if (marked.length === 0) continue
        purged++
        try {
          await this.#store.delete(row.file_path)
        } catch (error) {
          this.#logger.warn("could not remove a purged file's bytes; the model's audit lists them as orphaned", { fileId: row.id, error })
        }
      }
    }
  }
}

function isKey(path: string): boolean {
  try {
    assertObjectKey(path)
    return true
  } catch {
    return false
  }
}
