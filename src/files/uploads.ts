/**
 * Uploads (docs/files.md): a multipart body streamed
 * from the socket through busboy into the FileStore, never whole in memory.
 *
 * Order, so that nothing is lost and nothing half-made is seen:
 * 1. the model must be there before a byte is read;
 * 2. the version is taken (a counter row; never given twice, so a retried
 *    upload gets the next one rather than overwriting);
 * 3. the bytes are streamed into the store, hashed as they pass; the store
 *    makes them visible only when complete and durable;
 * 4. the metadata is read back from the stored bytes;
 * 5. the row is inserted, in a transaction that re-checks the model.
 * An upload that fails or is aborted anywhere before 5 deletes what 3 wrote;
 * a crash between 3 and 5 leaves an object no row names, which the model's
 * audit lists as orphaned and its cleanup removes.
 */
import busboy from 'busboy'
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import { ServiceError } from '../../protocol/errors.js'
import { sanitizeFileName, versionedFileName } from '../../protocol/file-names.js'
import type { FileRecord } from '../../protocol/schemas/models.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { extractMetadata } from './extract-metadata.js'
import { FileRecords, fileRecordOf } from './file-records.js'
import { FileStoreError, type FileStore } from './file-store.js'
import type { ModelStore } from '../models/model-store.js'

export interface UploadRequest {
  organizationId: string
  modelId: string
  createdBy: string | null
  contentType: string | undefined
  body: Readable
}

const headLength = 4096

export class Uploads {
  readonly #store: FileStore
  readonly #models: ModelStore
  readonly #records: FileRecords
  readonly #limitBytes: number
  readonly #logger: Logger
  readonly #counts

  constructor(deps: { store: FileStore; models: ModelStore; records: FileRecords; limitBytes: number; logger: Logger; metrics: MetricsRegistry }) {
    this.#store = deps.store
    this.#models = deps.models
    this.#records = deps.records
    this.#limitBytes = deps.limitBytes
    this.#logger = deps.logger
    this.#counts = {
      bytes: deps.metrics.counter('file_upload_bytes_total', 'Bytes of files stored by uploads.'),
      uploads: deps.metrics.counter('file_uploads_total', 'Uploads, by outcome (stored, refused, failed).', ['outcome']),
      seconds: deps.metrics.histogram('file_upload_duration_seconds', 'Time from the start of an upload to its stored row.', [], [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]),
      metadataFailures: deps.metrics.counter('file_metadata_failures_total', 'Files whose slicer metadata could not be read (stored with processing failed).'),
    }
  }

  async upload(request: UploadRequest, now: () => number): Promise<FileRecord> {
    const started = now()
    try {
      const record = await this.#upload(request)
      this.#counts.uploads.inc({ outcome: 'stored' })
      this.#counts.bytes.inc({}, record.file_size)
      this.#counts.seconds.observe({}, (now() - started) / 1000)
      if ((record.metadata as { processing?: { status?: string } }).processing?.status === 'failed') this.#counts.metadataFailures.inc()
      return record
    } catch (error) {
      this.#counts.uploads.inc({ outcome: error instanceof ServiceError && error.status < 500 ? 'refused' : 'failed' })
      throw error
    }
  }

  async #upload(request: UploadRequest): Promise<FileRecord> {
    const { organizationId, modelId, body } = request
    // Before a byte is read: an upload to a missing model costs nothing.
    await this.#models.assertAvailable(this.#models.sql, organizationId, modelId)
    if (request.contentType === undefined || !/^multipart\/form-data\s*;/i.test(request.contentType)) {
      throw new ServiceError('multipart_invalid', 'send the file as multipart/form-data with one part named file')
    }
    const received = await this.#receive(request)
    const { stored, key, finalName, filename, declaredType, head } = received
    try {
      const extracted = await extractMetadata({ store: this.#store, key, size: stored.size, head, filename, declaredType })
      const metadata = received.tags === undefined ? extracted.metadata : { ...extracted.metadata, tags: received.tags }
      const row = await this.#records.insert(
        {
          organizationId,
          modelId,
          filename,
          finalName,
          filePath: key,
          fileType: extracted.fileType,
          size: stored.size,
          sha256: stored.sha256,
          metadata,
          projectFilaments: extracted.projectFilaments,
          activePlateNumber: extracted.activePlateNumber,
          createdBy: request.createdBy,
        },
        (tx) => this.#models.assertAvailable(tx, organizationId, modelId, { lock: true }),
      )
      return fileRecordOf(row)
    } catch (error) {
      await this.#discard(key)
      throw error
    }
  }

  /**
   * Parses the multipart body and streams its one file part into the store.
   *
   * This promise owns every stream of the request: each one gets its error
   * listener in the same tick it is made (busboy may end a part, or the whole
   * form, while the store is still being opened), every failure goes through
   * `fail`, which keeps the first one, and the promise settles only once the
   * store has let go of the part, deleting what it wrote if anything failed.
   * What the client sent wrong becomes multipart_invalid; what the store
   * could not do keeps its own code.
   */
  #receive(request: UploadRequest): Promise<Received> {
    const { organizationId, modelId, body } = request
    return new Promise<Received>((resolve, reject) => {
      let parser: busboy.Busboy
      try {
        parser = busboy({
          headers: { 'content-type': request.contentType! },
          defParamCharset: 'utf8',
          limits: { files: 1, fields: 8, parts: 12, fieldSize: 4096, fieldNameSize: 100, headerPairs: 32 },
        })
      } catch (error) {
        reject(unreadable(error))
        return
      }
      let failure: unknown
      let tags: string[] | undefined
      let storing: Promise<Omit<Received, 'tags'>> | undefined
      let part: Readable | undefined
      let head: HeadCapture | undefined
      let finished = false
      let settled = false
      const fail = (error: unknown): void => {
        failure ??= error
        // The store learns it through the head it reads, whatever it is waiting for.
        head?.destroy(failure as Error)
        part?.destroy()
        body.unpipe(parser)
        // Read what is left so the answer can be sent; the dispatcher closes the connection after it.
        body.resume()
        settle()
      }
      const settle = (): void => {
        if (settled || (failure === undefined && !finished)) return
        settled = true
        const pending = storing ?? Promise.resolve(undefined)
        pending.then(
          async (got) => {
            if (failure !== undefined) {
              if (got !== undefined) await this.#discard(got.key)
              return reject(failure)
            }
            if (got === undefined) return reject(new ServiceError('multipart_invalid', 'the body has no part named file'))
            resolve({ ...got, tags })
          },
          (error: unknown) => reject(failure ?? error),
        )
      }
      body.on('error', (error) => fail(error))
      parser.on('file', (name, stream, info) => {
        // Before anything else: busboy destroys a part whose form ends early, possibly before the store reads it.
        stream.on('error', (error) => fail(unreadable(error)))
        if (name !== 'file' || storing !== undefined || failure !== undefined) {
          stream.resume()
          return fail(new ServiceError('multipart_invalid', name !== 'file' ? `unexpected file part '${name.slice(0, 100)}': the file goes in a part named file` : 'only one file per upload'))
        }
        part = stream
        head = new HeadCapture(headLength)
        // The store opens its file or checks its key before it reads: until then a failure waits here.
        head.on('error', () => undefined)
        stream.pipe(head)
        storing = this.#store_(organizationId, modelId, head, formFileName(info.filename ?? ''), info.mimeType)
        storing.catch((error: unknown) => fail(error))
      })
      parser.on('field', (name, value, info) => {
        if (name !== 'tags') return fail(new ServiceError('multipart_invalid', `unexpected field '${name.slice(0, 100)}': only file and tags are read`))
        if (info.valueTruncated) return fail(new ServiceError('validation_failed', 'tags: at most 4096 characters'))
        try {
          tags = parseTags(value)
        } catch (error) {
          fail(error)
        }
      })
      parser.on('partsLimit', () => fail(new ServiceError('multipart_invalid', 'too many parts: send one file part and at most a tags field')))
      parser.on('filesLimit', () => fail(new ServiceError('multipart_invalid', 'only one file per upload')))
      parser.on('fieldsLimit', () => fail(new ServiceError('multipart_invalid', 'too many fields: only tags is read')))
      parser.on('error', (error: Error) => fail(unreadable(error)))
      parser.on('close', () => {
        finished = true
        settle()
      })
      body.pipe(parser)
    })
  }

  async #store_(organizationId: string, modelId: string, head: HeadCapture, original: string, declaredType: string): Promise<Omit<Received, 'tags'>> {
    const sanitized = sanitizeFileName(original)
    const minor = await this.#records.nextVersion(modelId, sanitized.name)
    const finalName = versionedFileName(sanitized, minor)
    // the contract: {orgId}/{modelId}/{finalFileName}/{finalFileName}
    const key = `${organizationId}/${modelId}/${finalName}/${finalName}`
    try {
      const stored = await this.#store.put(key, head, { limitBytes: this.#limitBytes, contentType: declaredType })
      return { stored, key, finalName, filename: original === '' ? sanitized.name : original.slice(0, 1024), declaredType, head: head.head() }
    } catch (error) {
      if (error instanceof FileStoreError && error.reason === 'too_large') {
        throw new ServiceError('payload_too_large', `the upload exceeds the limit of ${this.#limitBytes} bytes (UPLOAD_LIMIT_BYTES)`)
      }
      if (error instanceof FileStoreError && error.reason === 'unavailable') throw new ServiceError('file_storage_unavailable', 'file storage did not answer; retry')
      throw error
    }
  }

  async #discard(key: string): Promise<void> {
    try {
      await this.#store.delete(key)
    } catch (error) {
      // Left as an orphan: the model's audit lists it and its cleanup removes it.
      this.#logger.warn('could not remove the bytes of a failed upload', { key, error })
    }
  }
}

interface Received {
  stored: { size: number; sha256: string }
  key: string
  finalName: string
  filename: string
  declaredType: string
  head: Buffer
  tags: string[] | undefined
}

/** Passes bytes through and keeps the first few (the type is judged by them). */
class HeadCapture extends Transform {
  readonly #limit: number
  readonly #chunks: Buffer[] = []
  #size = 0

  constructor(limit: number) {
    super()
    this.#limit = limit
  }

  head(): Buffer {
    return Buffer.concat(this.#chunks).subarray(0, this.#limit)
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.#size < this.#limit) {
      this.#chunks.push(Buffer.from(chunk.subarray(0, this.#limit - this.#size)))
      this.#size += Math.min(chunk.length, this.#limit - this.#size)
    }
    done(null, chunk)
  }
}

/** busboy's own words for a form it cannot read, as the client's error. */
function unreadable(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error
  return new ServiceError('multipart_invalid', `the multipart body cannot be read: ${error instanceof Error ? error.message : String(error)}`)
}

/**
 * Browsers and fetch's FormData write `"`, CR and LF in a file name as %22,
 * %0D and %0A (the HTML multipart encoding); they are read back here so
 * `a "b".3mf` keeps its quotes. Other percent signs are the name's own.
 */
function formFileName(raw: string): string {
  return raw.replace(/%22|%0D|%0A/gi, (escape) => String.fromCharCode(parseInt(escape.slice(1), 16)))
}

/** The upload's optional `tags` field: a comma list, stored as metadata.tags. */
export function parseTags(value: string): string[] {
  const tags = [...new Set(value.split(',').map((t) => t.trim()).filter((t) => t !== ''))]
  if (tags.length > 64 || tags.some((t) => t.length > 64)) throw new ServiceError('validation_failed', 'tags: at most 64 comma-separated tags of at most 64 characters')
  return tags
}
