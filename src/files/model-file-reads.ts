/**
 * The model-files read model (docs/files.md; decisions in
 * protocol/schemas/model-files.ts): one model's files with views, filters
 * and facet counts, read straight from the tables (files, print_jobs, makes)
 * in one statement each, so a list and its counts agree.
 */
import type { PendingQuery, Row, Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import { commaValues, type ModelFileList, type ModelFileListQuery } from '../../protocol/schemas/model-files.js'
import type { FileRecord } from '../../protocol/schemas/models.js'
import { fileNotFound, fileRecordOf, type FileRow } from './file-records.js'
import { type ModelStore } from '../models/model-store.js'
import { escapeLike } from '../storage/like.js'

export class ModelFileReads {
  readonly #sql: Sql
  readonly #models: ModelStore

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, models: ModelStore, now: () => number) {
    this.#now = now
    this.#sql = sql
    this.#models = models
  }

  async list(organizationId: string, query: ModelFileListQuery): Promise<ModelFileList> {
    await this.#models.assertExists(organizationId, query.modelId)
    const sql = this.#sql
    const limit = query.limit ?? 100
    const offset = query.offset ?? 0
    const filters = commaValues(query.filters)
    const tags = commaValues(query.tags)
    const profiles = commaValues(query.printer_profiles)
    const types = commaValues(query.file_types)
    // Built afresh for each statement: a postgres.js fragment belongs to one query.
    const base = () => sql`f.organization_id = ${organizationId} and f.model_id = ${query.modelId} and ${query.view === 'active' ? sql`f.deleted_at is null` : sql`f.deleted_at is not null`}`
    const narrowed = () => {
      const { printing, queued, hasMakes, missingLabel } = conditions(sql)
      return sql`${base()}
      ${query.search === undefined || query.search.trim() === '' ? sql`` : sql`and f.filename ilike ${`%${escapeLike(query.search.trim())}%`}`}
      ${tags.length === 0 ? sql`` : sql`and f.metadata->'tags' ?| ${tags}::text[]`}
      ${profiles.length === 0 ? sql`` : sql`and f.metadata->>'printer_model' = any(${profiles}::text[])`}
      ${types.length === 0 ? sql`` : sql`and f.file_type = any(${types}::text[])`}
      ${filters.includes('printing') ? sql`and ${printing}` : sql``}
      ${filters.includes('queued') ? sql`and ${queued}` : sql``}
      ${filters.includes('has_makes') ? sql`and ${hasMakes}` : sql``}
      ${filters.includes('missing_label') ? sql`and ${missingLabel}` : sql``}`
    }
    const [rows, [count]] = await Promise.all([
      sql<FileRow[]>`select f.* from files f where ${narrowed()} order by f.created_at desc, f.id limit ${limit} offset ${offset}`,
      sql<{ total: string }[]>`select count(*) as total from files f where ${narrowed()}`,
    ])
    const answer: ModelFileList = { files: rows.map(fileRecordOf), total: Number(count!.total), limit, offset }
    if (offset === 0) answer.filter_options = await this.#options(base)
    return answer
  }

  async #options(where: () => PendingQuery<Row[]>): Promise<NonNullable<ModelFileList['filter_options']>> {
    const sql = this.#sql
    const { printing, queued, hasMakes, missingLabel } = conditions(sql)
    const [tags, profiles, types, [flags]] = await Promise.all([
      sql<{ value: string; count: string }[]>`
        select t.value, count(*) as count from files f cross join lateral jsonb_array_elements_text(
          case when jsonb_typeof(f.metadata->'tags') = 'array' then f.metadata->'tags' else '[]'::jsonb end) as t(value)
        where ${where()} group by t.value order by count(*) desc, t.value limit 200`,
      sql<{ value: string; count: string }[]>`
        select f.metadata->>'printer_model' as value, count(*) as count from files f
        where ${where()} and f.metadata->>'printer_model' is not null group by 1 order by count(*) desc, 1 limit 200`,
      sql<{ value: string; count: string }[]>`select f.file_type as value, count(*) as count from files f where ${where()} group by 1 order by count(*) desc, 1 limit 200`,
      sql<{ printing: string; queued: string; has_makes: string; missing_label: string }[]>`
        select count(*) filter (where ${printing}) as printing, count(*) filter (where ${queued}) as queued,
               count(*) filter (where ${hasMakes}) as has_makes, count(*) filter (where ${missingLabel}) as missing_label
        from files f where ${where()}`,
    ])
    const counts = (rows: { value: string; count: string }[]) => rows.map((r) => ({ value: r.value, count: Number(r.count) }))
    return {
      tags: counts(tags),
      printer_profiles: counts(profiles),
      file_types: counts(types),
      filters: { printing: Number(flags!.printing), queued: Number(flags!.queued), has_makes: Number(flags!.has_makes), missing_label: Number(flags!.missing_label) },
    }
  }

  async counts(organizationId: string, modelId: string): Promise<{ active: number; deleted: number }> {
    await this.#models.assertExists(organizationId, modelId)
    const [row] = await this.#sql<{ active: string; deleted: string }[]>`
      select count(*) filter (where deleted_at is null) as active, count(*) filter (where deleted_at is not null) as deleted
      from files where organization_id = ${organizationId} and model_id = ${modelId}`
    return { active: Number(row!.active), deleted: Number(row!.deleted) }
  }

  /**
   * Merges labels keyed by project filament id ("" clears one). A key that is
   * not a project filament of the file is refused, naming it; a deleted file
   * answers 409 file_deleted.
   */
  async setLabels(organizationId: string, fileId: string, labels: Record<string, string>): Promise<FileRecord> {
    const row = await this.#sql.begin(async (tx) => {
      const [file] = await tx<FileRow[]>`select * from files where organization_id = ${organizationId} and id = ${fileId} for update`
      if (file === undefined) throw fileNotFound()
      if (file.deleted_at !== null) throw new ServiceError('file_deleted', 'the file is deleted; restore it before labelling its filaments')
      const known = new Set(file.project_filaments.map((f) => f.id))
      const unknown = Object.keys(labels).filter((id) => !known.has(id))
      if (unknown.length > 0) {
        const have = known.size === 0 ? 'the file has no project filaments' : `its project filaments are ${[...known].join(', ')}`
        throw new ServiceError('validation_failed', `labels: ${unknown.slice(0, 5).map((id) => JSON.stringify(id)).join(', ')} not a project filament id of this file; ${have}`)
      }
      const merged: Record<string, string> = { ...file.filament_labels }
      for (const [id, label] of Object.entries(labels)) {
        if (label.trim() === '') delete merged[id]
        else merged[id] = label
      }
      const [updated] = await tx<FileRow[]>`update files set filament_labels = ${tx.json(merged)}, updated_at = ${new Date(this.#now())} where id = ${fileId} returning *`
      return updated!
    })
    return fileRecordOf(row as FileRow)
  }
}

/** The four filters as SQL conditions on `files f` (built per query: a fragment belongs to one statement). */
function conditions(sql: Sql) {
  return {
    // A job of the file is printing (or paused mid-print) / waiting in the queue (queued, or being handed to a printer).
    printing: sql`exists (select 1 from print_jobs j where j.model_file_id = f.id and j.status in ('printing', 'paused'))`,
    queued: sql`exists (select 1 from print_jobs j where j.model_file_id = f.id and j.status in ('queued', 'dispatching'))`,
    hasMakes: sql`exists (select 1 from makes m where m.model_file_id = f.id)`,
    // A project filament whose id has no (non-empty) label.
    missingLabel: sql`exists (select 1 from jsonb_array_elements(f.project_filaments) pf where coalesce(f.filament_labels->>(pf->>'id'), '') = '')`,
  }
}
