/**
 * Where the bytes of model files live (docs/files.md): one narrow
 * interface, so the local file system and S3-compatible object storage are
 * interchangeable and one conformance suite (test/src/files/file-store.test.ts)
 * holds every backend to the same contract.
 *
 * Keys are relative, `/`-separated paths (`{orgId}/{modelId}/{name}/{name}`);
 * every backend refuses a key that could leave its root (`..`, empty or
 * absolute segments, segments starting with a dot, backslashes, control
 * characters) with reason key_invalid, before any I/O. A `put` is all or nothing: readers never see a partly written object,
 * and a failed or aborted put leaves nothing behind.
 */
import type { Readable } from 'node:stream'

export interface StoredObject {
  key: string
  size: number
  /** ms since the Unix epoch. */
  modifiedAt: number
}

export interface PutResult {
  size: number
  /** Lower-case hex SHA-256 of the bytes, computed while they streamed in. */
  sha256: string
}

/** An inclusive byte range, as HTTP Range means it (`end` < size). */
export interface ByteRange {
  start: number
  end: number
}

export interface FileStore {
  /** Which backend: 'fs' or 's3' (logs, /readyz). */
  readonly kind: 'fs' | 's3'
  /**
   * Streams `body` into `key`, replacing nothing: an existing key is an error
   * (key_taken), since file names carry a version and are never reused.
   * `limitBytes`: more than that fails with too_large and stores nothing.
   */
  put(key: string, body: Readable, options?: { limitBytes?: number; contentType?: string }): Promise<PutResult>
  /** The object's bytes, or one range of them; not_found when absent. */
  get(key: string, range?: ByteRange): Promise<Readable>
  /** Size and time of one object, or undefined when absent. */
  stat(key: string): Promise<StoredObject | undefined>
  /** Every object whose key starts with `prefix` (which must end with '/'), sorted by key. */
  list(prefix: string): Promise<StoredObject[]>
  /** Removes one object; true when it existed. */
  delete(key: string): Promise<boolean>
  /** Releases connections and timers. */
  close(): Promise<void>
}

export type FileStoreFailure = 'key_invalid' | 'key_taken' | 'not_found' | 'too_large' | 'unavailable'

export class FileStoreError extends Error {
  override name = 'FileStoreError'
  readonly reason: FileStoreFailure
  constructor(reason: FileStoreFailure, message: string) {
    super(message)
    this.reason = reason
  }
}

/** The one check of a key every backend runs first: relative, '/'-separated, no way out of the root. */
export function assertObjectKey(key: string, { prefix = false } = {}): void {
  const segments = key.split('/')
  if (prefix) {
    if (!key.endsWith('/')) throw new FileStoreError('key_invalid', `a prefix ends with '/': ${JSON.stringify(key.slice(0, 300))}`)
    segments.pop()
  }
  const bad =
    key.length === 0 ||
    Buffer.byteLength(key) > 1024 ||
    // No segment starts with a dot: no `.`/`..`, and the fs backend's `.tmp/` is never a key (stored names never start with one).
    segments.some((s) => s === '' || s.startsWith('.')) ||
    // eslint-disable-next-line no-control-regex
    /[\\\u0000-\u001f\u007f]/.test(key)
  if (bad) throw new FileStoreError('key_invalid', `not a storage key: ${JSON.stringify(key.slice(0, 300))}`)
}
