/**
 * Reprocessing a file's metadata (docs/files.md),
 * with durable receipts. A request is a row in file_commands before it is
 * answered (202), so it survives a restart; at most one per file is queued or
 * running (a partial unique index), so a second request returns the same
 * command. Any node runs them: a worker claims one queued command at a time
 * with `for update skip locked`, so two nodes never run the same one. A
 * command left running by a node that died is queued again after
 * `staleRunningMs` (rereading metadata twice is harmless; losing the command
 * is not).
 */
import type { Clock } from '../../actors/clock.js'
import { randomUUID } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { LiveOperations, ReprocessReceipt } from '../../protocol/schemas/model-files.js'
import type { Logger } from '../observability/log.js'
import { extractMetadata } from './extract-metadata.js'
import { fileNotFound, type FileRow } from './file-records.js'
import type { FileStore } from './file-store.js'

interface CommandRow {
  id: string
  organization_id: string
  file_id: string
  kind: 'reprocess'
  status: ReprocessReceipt['status']
  error: string | null
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
}

export interface ReprocessOptions {
  pollMs?: number
  staleRunningMs?: number
}

const headBytes = 4096

export class Reprocessor {
  readonly #sql: Sql
  readonly #store: FileStore
  readonly #logger: Logger
  readonly #pollMs: number
  readonly #staleRunningMs: number
  readonly #clock: Clock
  #timer: unknown
  #running: Promise<void> | undefined
  #again = false
  #stopped = false

  /** `clock`: the node's (its polls and the staleness of a command run on it). */
  constructor(sql: Sql, store: FileStore, logger: Logger, clock: Clock, options: ReprocessOptions = {}) {
    this.#sql = sql
    this.#clock = clock
    this.#store = store
    this.#logger = logger
    this.#pollMs = options.pollMs ?? 5_000
    this.#staleRunningMs = options.staleRunningMs ?? 10 * 60_000
  }

  start(): void {
    this.#timer = this.#clock.setInterval(() => this.kick(), this.#pollMs)
    this.kick()
  }

  async stop(): Promise<void> {
    this.#stopped = true
    this.#clock.clearInterval(this.#timer)
    await this.#running
  }

  /** Queues a reprocess of an active file, or answers the one already queued or running. */
  async request(organizationId: string, fileId: string): Promise<{ command_id: string; file_id: string; status: ReprocessReceipt['status'] }> {
    const command = await this.#sql.begin(async (tx) => {
      const [file] = await tx<Pick<FileRow, 'deleted_at'>[]>`select deleted_at from files where organization_id = ${organizationId} and id = ${fileId} for update`
      if (file === undefined) throw fileNotFound()
      if (file.deleted_at !== null) throw new ServiceError('file_deleted', 'the file is deleted; restore it before reprocessing')
      const [pending] = await tx<CommandRow[]>`select * from file_commands where file_id = ${fileId} and kind = 'reprocess' and status in ('queued', 'running')`
      if (pending !== undefined) return pending
      const [created] = await tx<CommandRow[]>`
        insert into file_commands (id, organization_id, file_id, kind, status) values (${randomUUID()}, ${organizationId}, ${fileId}, 'reprocess', 'queued') returning *`
      return created!
    })
    this.kick()
    return { command_id: command.id, file_id: command.file_id, status: command.status }
  }

  async receipt(organizationId: string, fileId: string, commandId: string): Promise<ReprocessReceipt> {
    const [row] = await this.#sql<CommandRow[]>`select * from file_commands where organization_id = ${organizationId} and file_id = ${fileId} and id = ${commandId}`
    if (row === undefined) throw new ServiceError('command_not_found', 'no reprocess command with that id for this file')
    return receiptOf(row)
  }

  /**
   * Queued and running commands, and failures nothing later has resolved: a failed command no
   * later command of the same file replaced, and an active file whose metadata could not be read
   * at upload and that no command has reprocessed since (kind `upload`, no command id): a broken
   * file stays in sight until it is reprocessed successfully or deleted.
   */
  async liveOperations(organizationId: string): Promise<LiveOperations> {
    const rows = await this.#sql<{ id: string | null; file_id: string; model_id: string; kind: 'reprocess' | 'upload'; status: ReprocessReceipt['status']; error: string | null; created_at: Date }[]>`
      select * from (
        select c.id, c.file_id, f.model_id, c.kind, c.status, c.error, c.created_at from file_commands c join files f on f.id = c.file_id
        where c.organization_id = ${organizationId}
          and (c.status in ('queued', 'running')
               or (c.status = 'failed' and not exists (
                 select 1 from file_commands later where later.file_id = c.file_id and later.kind = c.kind and later.created_at > c.created_at)))
        union all
        select null, f.id, f.model_id, 'upload', 'failed', coalesce(f.metadata->'processing'->>'error', 'the metadata could not be read'), f.created_at from files f
        where f.organization_id = ${organizationId} and f.deleted_at is null and f.purged_at is null
          and f.metadata->'processing'->>'status' = 'failed'
          and not exists (select 1 from file_commands c where c.file_id = f.id)
      ) operations
      order by created_at desc limit 500`
    return {
      operations: rows.map((r) => ({ command_id: r.id, file_id: r.file_id, model_id: r.model_id, kind: r.kind, status: r.status, error: r.error, created_at: r.created_at.toISOString() })),
    }
  }

  /** Runs what is queued now (coalesced: a kick while running runs once more after). */
  kick(): void {
    if (this.#stopped) return
    if (this.#running !== undefined) {
      this.#again = true
      return
    }
    this.#running = this.#drain()
      .catch((error: unknown) => this.#logger.warn('reprocessing failed to run; retried on the next poll', { error }))
      .finally(() => {
        this.#running = undefined
        if (this.#again && !this.#stopped) {
          this.#again = false
          this.kick()
        }
      })
  }

  async #drain(): Promise<void> {
    await this.#sql`
      update file_commands set status = 'queued', started_at = null
      where status = 'running' and started_at < ${new Date(this.#clock.now())}::timestamptz - ${this.#staleRunningMs / 1000} * interval '1 second'`
    for (let n = 0; n < 100 && !this.#stopped; n++) {
      const [command] = await this.#sql<CommandRow[]>`
        update file_commands set status = 'running', started_at = ${new Date(this.#clock.now())}
        where id = (select id from file_commands where status = 'queued' order by created_at for update skip locked limit 1)
        returning *`
      if (command === undefined) return
      await this.#run(command)
    }
  }

  async #run(command: CommandRow): Promise<void> {
    let error: string | null = null
    try {
      const [file] = await this.#sql<FileRow[]>`select * from files where id = ${command.file_id}`
      if (file === undefined || file.deleted_at !== null) throw new Error('the file was deleted before it was reprocessed')
      const size = Number(file.file_size)
      const head = size === 0 ? Buffer.alloc(0) : await readHead(this.#store, file.file_path, Math.min(size, headBytes))
      const extracted = await extractMetadata({ store: this.#store, key: file.file_path, size, head, filename: file.filename, declaredType: file.file_type })
      const tags = file.metadata['tags']
      const metadata = tags === undefined ? extracted.metadata : { ...extracted.metadata, tags }
      await this.#sql`
        update files set metadata = ${this.#sql.json(metadata as never)}, project_filaments = ${this.#sql.json(extracted.projectFilaments as never)},
          active_plate_number = ${extracted.activePlateNumber}, file_type = ${extracted.fileType}, updated_at = ${new Date(this.#clock.now())}
        where id = ${file.id}`
      const processing = (metadata as { processing?: { status?: string; error?: string } }).processing
      if (processing?.status === 'failed') error = processing.error ?? 'the metadata could not be read'
    } catch (failure) {
      error = (failure as Error).message.slice(0, 500)
    }
    await this.#sql`update file_commands set status = ${error === null ? 'succeeded' : 'failed'}, error = ${error}, finished_at = ${new Date(this.#clock.now())} where id = ${command.id}`
  }
}

async function readHead(store: FileStore, key: string, length: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of await store.get(key, { start: 0, end: length - 1 })) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

function receiptOf(row: CommandRow): ReprocessReceipt {
  return { command_id: row.id, file_id: row.file_id, status: row.status, error: row.error, created_at: row.created_at.toISOString(), finished_at: row.finished_at?.toISOString() ?? null }
}
