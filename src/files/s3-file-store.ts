/**
 * Files in S3-compatible object storage (AWS S3, MinIO, Ceph, R2…), signed
 * with SigV4 by aws4fetch (DESIGN section 3: no SDK, no dependencies).
 *
 * A put streams the body through a hash and sends it as one PUT when it is
 * at most `partBytes`, else as a multipart upload of `partBytes` parts sent
 * one after the other, so memory holds at most one part whatever the file
 * size, and a slow bucket slows the sender down. Any failure (the source
 * erroring, the limit, the bucket) aborts the multipart upload: S3 shows an
 * object only once it is complete, so nothing partial is ever visible.
 */
import { AwsClient } from 'aws4fetch'
import { XMLParser } from 'fast-xml-parser'
import { createHash } from 'node:crypto'
import { Readable, Transform, type TransformCallback } from 'node:stream'
import type { ReadableStream as NodeWebStream } from 'node:stream/web'
import type { FilesS3Settings } from '../config.js'
import { assertObjectKey, FileStoreError, type ByteRange, type FileStore, type PutResult, type StoredObject } from './file-store.js'

const partBytes = 8 * 1024 * 1024
const requestTimeoutMs = 30_000
const xml = new XMLParser({ parseTagValue: false, isArray: (name) => name === 'Contents' })

export class S3FileStore implements FileStore {
  readonly kind = 's3' as const
  readonly #settings: FilesS3Settings
  readonly #client: AwsClient

  constructor(settings: FilesS3Settings) {
    this.#settings = settings
    this.#client = new AwsClient({ accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey, region: settings.region, service: 's3' })
  }

  async put(key: string, body: Readable, options: { limitBytes?: number; contentType?: string } = {}): Promise<PutResult> {
    assertObjectKey(key)
    const limit = options.limitBytes ?? Number.MAX_SAFE_INTEGER
    // Names carry a version the database hands out once, so this is a guard against a bug, not a lock.
    if ((await this.stat(key)) !== undefined) {
      body.destroy()
      throw new FileStoreError('key_taken', `an object already exists at ${key}`)
    }
    const hash = createHash('sha256')
    let size = 0
    let pending: Buffer[] = []
    let pendingBytes = 0
    let uploadId: string | undefined
    const parts: string[] = []
    const contentType = options.contentType ?? 'application/octet-stream'
    const sendPart = async (): Promise<void> => {
      uploadId ??= await this.#createUpload(key, contentType)
      const part = Buffer.concat(pending, pendingBytes)
      pending = []
      pendingBytes = 0
      const res = await this.#send('PUT', key, { partNumber: String(parts.length + 1), uploadId }, { body: part })
      parts.push(res.headers.get('etag') ?? '')
    }
    try {
      for await (const chunk of body) {
        const buffer = chunk as Buffer
        size += buffer.length
        if (size > limit) throw new FileStoreError('too_large', `more than ${limit} bytes`)
        hash.update(buffer)
        pending.push(buffer)
        pendingBytes += buffer.length
        if (pendingBytes >= partBytes) await sendPart()
      }
      if (uploadId === undefined) {
        await this.#send('PUT', key, {}, { body: Buffer.concat(pending, pendingBytes), headers: { 'content-type': contentType } })
      } else {
        if (pendingBytes > 0) await sendPart()
        const list = parts.map((etag, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${escapeXml(etag)}</ETag></Part>`).join('')
        await this.#send('POST', key, { uploadId }, { body: `<CompleteMultipartUpload>${list}</CompleteMultipartUpload>`, headers: { 'content-type': 'application/xml' } })
      }
      return { size, sha256: hash.digest('hex') }
    } catch (error) {
      body.destroy()
      if (uploadId !== undefined) await this.#send('DELETE', key, { uploadId }).catch(() => undefined)
      throw error
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    assertObjectKey(key)
    const headers: Record<string, string> = range === undefined ? {} : { range: `bytes=${range.start}-${range.end}` }
    const res = await this.#send('GET', key, {}, { headers })
    const body = res.body === null ? Readable.from([]) : Readable.fromWeb(res.body as unknown as NodeWebStream<Uint8Array>)
    if (range === undefined) return body
    // Some S3-compatible stores ignore a Range (200, the whole object) or overshoot it (s3rver answers
    // bytes=0-0 with everything): exactly the bytes asked for are passed on either way.
    return body.pipe(new ByteWindow(res.status === 206 ? 0 : range.start, range.end - range.start + 1))
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    assertObjectKey(key)
    try {
      const res = await this.#send('HEAD', key)
      return { key, size: Number(res.headers.get('content-length') ?? 0), modifiedAt: Date.parse(res.headers.get('last-modified') ?? '') || 0 }
    } catch (error) {
      if (error instanceof FileStoreError && error.reason === 'not_found') return undefined
      throw error
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    assertObjectKey(prefix, { prefix: true })
    const found: StoredObject[] = []
    let token: string | undefined
    do {
      const query: Record<string, string> = { 'list-type': '2', prefix: this.#settings.prefix + prefix }
      if (token !== undefined) query['continuation-token'] = token
      const res = await this.#send('GET', '', query)
      const parsed = xml.parse(await res.text()) as { ListBucketResult?: { Contents?: { Key?: string; Size?: string; LastModified?: string }[]; IsTruncated?: string; NextContinuationToken?: string } }
      const result = parsed.ListBucketResult ?? {}
      for (const item of result.Contents ?? []) {
        if (typeof item.Key !== 'string') continue
        found.push({ key: item.Key.slice(this.#settings.prefix.length), size: Number(item.Size ?? 0), modifiedAt: Date.parse(item.LastModified ?? '') || 0 })
      }
      token = result.IsTruncated === 'true' ? result.NextContinuationToken : undefined
    } while (token !== undefined)
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  }

  async delete(key: string): Promise<boolean> {
    if ((await this.stat(key)) === undefined) return false
    await this.#send('DELETE', key)
    return true
  }

  async close(): Promise<void> {}

  async #createUpload(key: string, contentType: string): Promise<string> {
    const res = await this.#send('POST', key, { uploads: '' }, { headers: { 'content-type': contentType } })
    const id = (xml.parse(await res.text()) as { InitiateMultipartUploadResult?: { UploadId?: string } }).InitiateMultipartUploadResult?.UploadId
    if (typeof id !== 'string' || id === '') throw new FileStoreError('unavailable', 'the bucket did not start a multipart upload')
    return id
  }

  #url(key: string, query: Record<string, string>): string {
    const { endpoint, bucket, prefix, forcePathStyle } = this.#settings
    const path = key === '' ? '' : (prefix + key).split('/').map(encodeURIComponent).join('/')
    const base = new URL(endpoint)
    const url = forcePathStyle ? new URL(`${base.origin}${base.pathname.replace(/\/$/, '')}/${bucket}/${path}`) : new URL(`${base.protocol}//${bucket}.${base.host}/${path}`)
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value)
    return url.toString()
  }

  /** One signed request; a 404 is not_found, any other failure `unavailable` naming the status and S3's code (never the credentials). */
  async #send(method: string, key: string, query: Record<string, string> = {}, init: { body?: Buffer | string; headers?: Record<string, string> } = {}): Promise<Response> {
    let res: Response
    // The deadline covers the request up to the answer's headers: a download may then stream for as long as it takes.
    const abort = new AbortController()
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${requestTimeoutMs} ms`)), requestTimeoutMs)
    try {
      res = await this.#client.fetch(this.#url(key, query), { method, headers: init.headers, body: init.body, signal: abort.signal })
    } catch (error) {
      throw new FileStoreError('unavailable', `S3 ${method} did not complete: ${(error as Error).message}`)
    } finally {
      clearTimeout(timer)
    }
    if (res.ok) return res
    const text = method === 'HEAD' ? '' : await res.text().catch(() => '')
    if (res.status === 404) throw new FileStoreError('not_found', `no object at ${key}`)
    const code = /<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1] ?? 'no error code'
    throw new FileStoreError('unavailable', `S3 ${method} answered ${res.status} (${code})`)
  }
}

/** Skips `skip` bytes, passes `length`, drops the rest. */
class ByteWindow extends Transform {
  #skip: number
  #left: number

  constructor(skip: number, length: number) {
    super()
    this.#skip = skip
    this.#left = length
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let part = chunk
    if (this.#skip > 0) {
      const skipped = Math.min(this.#skip, part.length)
      this.#skip -= skipped
      part = part.subarray(skipped)
    }
    if (this.#left > 0 && part.length > 0) {
      const taken = part.subarray(0, this.#left)
      this.#left -= taken.length
      this.push(taken)
    }
    done()
  }
}

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`)
}
