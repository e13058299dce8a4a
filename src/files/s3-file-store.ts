/**
 * Files in S3-compatible object storage (AWS S3, MinIO, Ceph, R2…), signed
 * with SigV4 by aws4fetch (no SDK, no dependencies; docs/development.md).
 *
 * A put streams the body through a hash and sends it as one PUT when it is
 * at most `partBytes`, else as a multipart upload of `partBytes` parts sent
 * one after the other, so memory holds about one part (two while a part is
 * assembled) whatever the file size, and a slow bucket slows the sender
 * down. Any failure (the source erroring or aborted, the limit, the bucket)
 * aborts the multipart upload: S3 shows an object only once it is complete,
 * so nothing partial is ever visible. A failed put destroys its body.
 *
 * Every request has a deadline up to its answer (and the answer's XML);
 * a download's body then streams for as long as the reader takes.
 */
import { AwsClient } from 'aws4fetch'
import { XMLParser } from 'fast-xml-parser'
import { createHash } from 'node:crypto'
import { Readable, Transform, pipeline, type TransformCallback } from 'node:stream'
import type { ReadableStream as NodeWebStream } from 'node:stream/web'
import { assertObjectKey, FileStoreError, type ByteRange, type FileStore, type PutResult, type StoredObject } from './file-store.js'
import type { Timers } from '../../actors/clock.js'

/** Within S3's part bounds (5 MiB to 5 GiB, at most 10,000 parts: objects up to 80 GiB). */
const partBytes = 8 * 1024 * 1024
const requestTimeoutMs = 30_000
/**
 * aws4fetch retries 5xx and 429 answers itself (10 times by default, backing off up to
 * ~25 s); a few tries ride out a SlowDown and leave the deadline to bound the rest.
 */
const retries = 3
// Entities are decoded by decodeXml, not the parser: it leaves numeric references (s3rver's &#x27;)
// alone unless told to decode HTML's hundreds of names too, and caps the expansions of a whole listing.
const xml = new XMLParser({ parseTagValue: false, processEntities: false, isArray: (name) => name === 'Contents' })

export interface S3FileStoreOptions {
  /** e.g. https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:9000 */
  endpoint: string
  bucket: string
  region: string
  accessKeyId: string
  secretAccessKey: string
  /** Key prefix inside the bucket ('' or ending with '/'), so several deployments can share one bucket. */
  prefix?: string
  /** true → endpoint/bucket/key (MinIO and most self-hosted stores); false → bucket.endpoint/key (AWS). */
  forcePathStyle: boolean
}

/** What a request sends besides its method, key and query. */
interface Outgoing {
  body?: Buffer | string
  headers?: Record<string, string>
}

interface Answer {
  status: number
  headers: Headers
  text: string
}

export class S3FileStore implements FileStore {
  readonly kind = 's3' as const
  readonly #options: S3FileStoreOptions
  readonly #prefix: string
  readonly #client: AwsClient

  readonly #timers: Timers

  /** `timers`: the node's clock, which bounds each request. */
  constructor(options: S3FileStoreOptions, timers: Timers) {
    this.#timers = timers
    this.#options = options
    this.#prefix = options.prefix ?? ''
    this.#client = new AwsClient({ accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey, region: options.region, service: 's3', retries })
  }

  async put(key: string, body: Readable, options: { limitBytes?: number; contentType?: string } = {}): Promise<PutResult> {
    const limit = options.limitBytes ?? Number.MAX_SAFE_INTEGER
    const contentType = options.contentType ?? 'application/octet-stream'
    const hash = createHash('sha256')
    let size = 0
    let pending: Buffer[] = []
    let pendingBytes = 0
    let uploadId: string | undefined
    const etags: string[] = []
    /** Sends the first `partBytes` pending bytes as the next part; the rest stays pending. */
    const sendPart = async (bytes: number): Promise<void> => {
      uploadId ??= await this.#createUpload(key, contentType)
      const joined = Buffer.concat(pending, pendingBytes)
      const part = joined.subarray(0, bytes)
      // A copy of the (small) rest, so the part's buffer is not kept alive by it while the next part fills.
      const rest = Buffer.from(joined.subarray(bytes))
      pending = rest.length > 0 ? [rest] : []
      pendingBytes = rest.length
      const answer = await this.#request('PUT', key, { partNumber: String(etags.length + 1), uploadId }, { body: part })
      const etag = answer.headers.get('etag')
      if (etag === null) throw new FileStoreError('unavailable', `S3 accepted part ${etags.length + 1} of ${key} without an ETag`)
      etags.push(etag)
    }
    try {
      assertObjectKey(key)
      // Names carry a version the database hands out once, so this HEAD is a guard against a bug,
      // not a lock: two puts racing on one key could both pass it, and the later one would win.
      if ((await this.stat(key)) !== undefined) throw new FileStoreError('key_taken', `an object already exists at ${key}`)
      for await (const chunk of body as AsyncIterable<Uint8Array | string>) {
        const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        size += buffer.length
        if (size > limit) throw new FileStoreError('too_large', `more than ${limit} bytes`)
        hash.update(buffer)
        pending.push(buffer)
        pendingBytes += buffer.length
        // Strictly more than a part: an object of exactly partBytes still goes as one PUT,
        // and the last part of a multipart upload is never empty.
        if (pendingBytes > partBytes) await sendPart(partBytes)
      }
      if (uploadId === undefined) {
        await this.#request('PUT', key, {}, { body: Buffer.concat(pending, pendingBytes), headers: { 'content-type': contentType } })
      } else {
        await sendPart(pendingBytes)
        const list = etags.map((etag, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${escapeXml(etag)}</ETag></Part>`).join('')
        const answer = await this.#request('POST', key, { uploadId }, { body: `<CompleteMultipartUpload>${list}</CompleteMultipartUpload>`, headers: { 'content-type': 'application/xml' } })
        // S3 may answer 200 and then report the failure in the body (it starts the answer early to keep the connection alive).
        const code = errorCode(answer.text)
        if (code !== undefined) throw new FileStoreError('unavailable', `S3 did not complete the upload of ${key} (${code})`)
      }
      return { size, sha256: hash.digest('hex') }
    } catch (error) {
      body.destroy()
      // Best effort: a multipart upload left behind is invisible and only costs storage until a lifecycle rule removes it.
      if (uploadId !== undefined) await this.#request('DELETE', key, { uploadId }).catch(() => undefined)
      throw error
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    assertObjectKey(key)
    const res = await this.#fetch('GET', key, {}, { headers: range === undefined ? {} : { range: `bytes=${range.start}-${range.end}` } }, 'stream')
    const body = res.body === null ? Readable.from([]) : Readable.fromWeb(res.body as unknown as NodeWebStream<Uint8Array>)
    if (range === undefined) return body
    // Some S3-compatible stores ignore a Range (200, the whole object) or widen it (s3rver answers
    // bytes=0-0 with everything): exactly the bytes asked for are passed on either way.
    const answeredFrom = res.status === 206 ? Number(/^bytes (\d+)-/.exec(res.headers.get('content-range') ?? '')?.[1] ?? range.start) : 0
    const window = new ByteWindow(Math.max(0, range.start - answeredFrom), range.end - range.start + 1)
    // pipeline, not pipe: a download that breaks fails the reader, and a reader that stops cancels the download.
    return pipeline(body, window, () => undefined)
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    assertObjectKey(key)
    try {
      const answer = await this.#request('HEAD', key)
      return { key, size: Number(answer.headers.get('content-length') ?? 0), modifiedAt: Date.parse(answer.headers.get('last-modified') ?? '') || 0 }
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
      const query: Record<string, string> = { 'list-type': '2', prefix: this.#prefix + prefix }
      if (token !== undefined) query['continuation-token'] = token
      const answer = await this.#request('GET', '', query)
      const parsed = xml.parse(answer.text) as { ListBucketResult?: { Contents?: { Key?: unknown; Size?: unknown; LastModified?: unknown }[]; IsTruncated?: unknown; NextContinuationToken?: unknown } }
      const result = parsed.ListBucketResult
      if (result === undefined) throw new FileStoreError('unavailable', 'S3 answered a listing that is not a ListBucketResult')
      for (const item of result.Contents ?? []) {
        if (typeof item.Key !== 'string') continue
        const key = decodeXml(item.Key)
        if (!key.startsWith(this.#prefix)) continue
        found.push({ key: key.slice(this.#prefix.length), size: Number(item.Size ?? 0), modifiedAt: Date.parse(String(item.LastModified ?? '')) || 0 })
      }
      token = result.IsTruncated === 'true' && typeof result.NextContinuationToken === 'string' ? decodeXml(result.NextContinuationToken) : undefined
    } while (token !== undefined)
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  }

  async delete(key: string): Promise<boolean> {
    // S3's DELETE answers 204 whether or not the key existed: the HEAD tells.
    if ((await this.stat(key)) === undefined) return false
    await this.#request('DELETE', key)
    return true
  }

  async close(): Promise<void> {}

  async #createUpload(key: string, contentType: string): Promise<string> {
    const answer = await this.#request('POST', key, { uploads: '' }, { headers: { 'content-type': contentType } })
    const id = (xml.parse(answer.text) as { InitiateMultipartUploadResult?: { UploadId?: unknown } }).InitiateMultipartUploadResult?.UploadId
    if (typeof id !== 'string' || id === '') throw new FileStoreError('unavailable', 'the bucket did not start a multipart upload')
    return decodeXml(id)
  }

  #url(key: string, query: Record<string, string>): string {
    const { endpoint, bucket, forcePathStyle } = this.#options
    const path = key === '' ? '' : (this.#prefix + key).split('/').map(encodeSegment).join('/')
    const base = new URL(endpoint)
    const url = forcePathStyle ? new URL(`${base.origin}${base.pathname.replace(/\/$/, '')}/${bucket}/${path}`) : new URL(`${base.protocol}//${bucket}.${base.host}/${path}`)
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value)
    return url.toString()
  }

  /** One request whose whole answer is read within the deadline. */
  async #request(method: string, key: string, query: Record<string, string> = {}, init: Outgoing = {}): Promise<Answer> {
    return this.#fetch(method, key, query, init, 'text')
  }

  /**
   * One signed request; a 404 of a key is not_found, any other failure `unavailable`, naming the
   * status and S3's error code (never the credentials, which travel only in the signature).
   * 'stream' leaves the body unread once the headers are in; 'text' reads it within the deadline.
   */
  #fetch(method: string, key: string, query: Record<string, string>, init: Outgoing, read: 'stream'): Promise<Response>
  #fetch(method: string, key: string, query: Record<string, string>, init: Outgoing, read: 'text'): Promise<Answer>
  async #fetch(method: string, key: string, query: Record<string, string>, init: Outgoing, read: 'text' | 'stream'): Promise<Response | Answer> {
    // Not AbortSignal.timeout: it would also cut a download streaming to a slow reader. This deadline
    // is lifted once the answer is in; it covers aws4fetch's retries too (one signal for all tries).
    const abort = new AbortController()
    const timer = this.#timers.setTimeout(() => abort.abort(new Error(`no answer within ${requestTimeoutMs} ms`)), requestTimeoutMs)
    try {
      let res: Response
      try {
        res = await this.#client.fetch(this.#url(key, query), { method, headers: init.headers, body: init.body, signal: abort.signal })
      } catch (error) {
        throw new FileStoreError('unavailable', `S3 ${method} did not complete: ${describe(error)}`)
      }
      if (res.ok && read === 'stream') return res
      let text: string
      try {
        text = method === 'HEAD' ? '' : await res.text()
      } catch (error) {
        throw new FileStoreError('unavailable', `S3 ${method} answer broke off: ${describe(error)}`)
      }
      if (res.ok) return { status: res.status, headers: res.headers, text }
      const code = errorCode(text)
      // NoSuchBucket or NoSuchUpload are the configuration or the upload gone, not an absent object.
      if (res.status === 404 && (code === undefined || code === 'NoSuchKey')) throw new FileStoreError('not_found', `no object at ${key}`)
      throw new FileStoreError('unavailable', `S3 ${method} answered ${res.status} (${code ?? 'no error code'})`)
    } finally {
      this.#timers.clearTimeout(timer)
    }
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

/** RFC 3986, as SigV4 signs it: encodeURIComponent leaves !'()* alone. */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
}

function errorCode(text: string): string | undefined {
  return /<Error>[\s\S]*?<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1]
}

/** The error's message and its cause's code (ECONNREFUSED…), which fetch hides in `cause`. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const cause = (error.cause as { code?: unknown; message?: unknown } | undefined) ?? {}
  const detail = typeof cause.code === 'string' ? cause.code : typeof cause.message === 'string' ? cause.message : undefined
  return detail === undefined ? error.message : `${error.message} (${detail})`
}

const xmlNames: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }

/** XML's five named entities and numeric references; anything else stays as written. */
function decodeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|amp|lt|gt|quot|apos);/g, (whole, name: string) => {
    if (!name.startsWith('#')) return xmlNames[name] ?? whole
    const code = name[1] === 'x' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10)
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole
  })
}

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`)
}
