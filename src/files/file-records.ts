/**
 * File rows ("File", part 3 "File" states; docs/files.md).
 * A row is written only after its bytes are safely stored, so a row always
 * names an object that exists (until the grace sweep purges a deleted one,
 * which it marks). Every read and change is scoped to the organization:
 * another organization's file is "not found", exactly like a missing one.
 */
import { randomUUID } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { FileRecord } from '../../protocol/schemas/models.js'
import type { ProjectFilament } from '../../protocol/slicer-metadata/index.js'
import type { Queryable } from '../storage/database.js'

export interface FileRow {
  id: string
  organization_id: string
  model_id: string
  filename: string
  final_name: string
  file_path: string
  file_type: string
  file_size: string | number
  sha256: string
  metadata: Record<string, unknown>
  project_filaments: ProjectFilament[]
  active_plate_number: number | null
  filament_labels: Record<string, string>
  created_by: string | null
  created_at: Date
  updated_at: Date
  deleted_at: Date | null
  purged_at: Date | null
}

export interface NewFile {
  organizationId: string
  modelId: string
  filename: string
  finalName: string
  filePath: string
  fileType: string
  size: number
  sha256: string
  metadata: Record<string, unknown>
  projectFilaments: ProjectFilament[]
  activePlateNumber: number | null
  createdBy: string | null
}

export const fileNotFound = (): ServiceError => new ServiceError('file_not_found', 'no such file in this organization')

export class FileRecords {
  readonly #sql: Sql

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(sql: Sql, now: () => number) {
    this.#now = now
    this.#sql = sql
  }

  /**
   * The next version of a sanitized name in a model: the counter row is bumped
   * in the statement that reads it, so concurrent uploads never share a
   * version, and one given to a file later deleted is never given again.
   */
  async nextVersion(modelId: string, name: string): Promise<number> {
    const [row] = await this.#sql<{ last_minor: number }[]>`
      insert into file_name_versions (model_id, name, last_minor) values (${modelId}, ${name}, 0)
      on conflict (model_id, name) do update set last_minor = file_name_versions.last_minor + 1
      returning last_minor`
    return row!.last_minor
  }

  /** Inserts the row of stored bytes, in the same transaction that checks the model is still there. */
  async insert(file: NewFile, assertModel: (tx: Queryable) => Promise<void>): Promise<FileRow> {
    return (await this.#sql.begin(async (tx) => {
      await assertModel(tx)
      const [row] = await tx<FileRow[]>`
        insert into files (id, organization_id, model_id, filename, final_name, file_path, file_type, file_size, sha256, metadata,
                           project_filaments, active_plate_number, created_by)
        values (${randomUUID()}, ${file.organizationId}, ${file.modelId}, ${file.filename}, ${file.finalName}, ${file.filePath}, ${file.fileType},
                ${file.size}, ${file.sha256}, ${tx.json(file.metadata as never)}, ${tx.json(file.projectFilaments as never)}, ${file.activePlateNumber},
                ${file.createdBy})
        returning *`
      return row!
    })) as FileRow
  }

  /** An active file (not deleted) of the organization, or file_not_found. */
  async active(organizationId: string, id: string): Promise<FileRow> {
    const row = await this.any(organizationId, id)
    if (row.deleted_at !== null) throw fileNotFound()
    return row
  }

  /** Active or deleted. */
  async any(organizationId: string, id: string): Promise<FileRow> {
    const [row] = await this.#sql<FileRow[]>`select * from files where organization_id = ${organizationId} and id = ${id}`
    if (row === undefined) throw fileNotFound()
    return row
  }

  /** Without an organization: for signed download URLs, whose signature names the file. */
  async byIdForDownload(id: string): Promise<FileRow | undefined> {
    const [row] = await this.#sql<FileRow[]>`select * from files where id = ${id} and deleted_at is null`
    return row
  }

  async softDelete(organizationId: string, id: string): Promise<void> {
    const now = new Date(this.#now())
    const rows = await this.#sql`
      update files set deleted_at = ${now}, updated_at = ${now}
      where organization_id = ${organizationId} and id = ${id} and deleted_at is null returning id`
    if (rows.length === 0) throw fileNotFound()
  }

  /** the contract: soft-deleted → active when the parent model is available; 409 otherwise; an active file stays as it is. */
  async restore(organizationId: string, id: string): Promise<void> {
    await this.#sql.begin(async (tx) => {
      const [row] = await tx<(Pick<FileRow, 'deleted_at' | 'purged_at'> & { model_deleted: boolean })[]>`
        select f.deleted_at, f.purged_at, m.deleted_at is not null as model_deleted
        from files f join models m on m.id = f.model_id
        where f.organization_id = ${organizationId} and f.id = ${id}
        for update of f`
      if (row === undefined) throw fileNotFound()
      if (row.deleted_at === null) return
      if (row.model_deleted) throw new ServiceError('model_unavailable', "the file's model is deleted; restore the model first")
      if (row.purged_at !== null) throw new ServiceError('file_purged', "the file's bytes were removed after its grace period; upload it again")
      await tx`update files set deleted_at = null, updated_at = ${new Date(this.#now())} where id = ${id}`
    })
  }
}

export function fileRecordOf(row: FileRow): FileRecord {
  const labels = row.filament_labels
  return {
    id: row.id,
    created_at: row.created_at.toISOString(),
    created_by: row.created_by,
    filename: row.filename,
    file_path: row.file_path,
    file_type: row.file_type,
    file_size: Number(row.file_size),
    sha256: row.sha256,
    model_id: row.model_id,
    metadata: row.metadata,
    activePlateNumber: row.active_plate_number,
    project_filaments: row.project_filaments.map((f) => (labels[f.id] === undefined ? f : { ...f, label: labels[f.id]! })),
    filament_labels: labels,
    deleted_at: row.deleted_at === null ? null : row.deleted_at.toISOString(),
  }
}
