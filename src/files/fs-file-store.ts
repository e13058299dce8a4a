/**
 * Files on the local file system under one root (DATA_DIR/files by
 * default; several nodes share it only on a shared mount).
 *
 * A put streams into `.tmp/` under the root, hashing as it goes, fsyncs the
 * file, then links it to its key (`link` fails when the key exists, so an
 * object is never replaced) and fsyncs the directory: when put resolves, the
 * bytes survive a crash, and a reader never sees half a file. Whatever
 * fails on the way removes the temporary; a crash leaves one in `.tmp/`,
 * which removeStaleTemporaries sweeps.
 */
import { createHash, randomUUID } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { link, mkdir, open, readdir, rm, rmdir, stat, unlink } from 'node:fs/promises'
import { dirname, join, resolve, sep } from 'node:path'
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { assertObjectKey, FileStoreError, type ByteRange, type FileStore, type PutResult, type StoredObject } from './file-store.js'

const temporaries = '.tmp'

export class FsFileStore implements FileStore {
  readonly kind = 'fs' as const
  readonly #root: string

  constructor(root: string) {
    this.#root = resolve(root)
  }

  async put(key: string, body: Readable, options: { limitBytes?: number } = {}): Promise<PutResult> {
    const path = this.#path(key)
    const tmpDir = join(this.#root, temporaries)
    await mkdir(tmpDir, { recursive: true })
    const tmp = join(tmpDir, `${randomUUID()}.part`)
    const meter = new Meter(options.limitBytes ?? Number.MAX_SAFE_INTEGER)
    try {
      await pipeline(body, meter, createWriteStream(tmp, { flags: 'wx' }))
      await fsync(tmp)
      await mkdir(dirname(path), { recursive: true })
      try {
        await link(tmp, path)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new FileStoreError('key_taken', `an object already exists at ${key}`)
        throw error
      }
      await fsync(dirname(path))
      return { size: meter.size, sha256: meter.digest() }
    } catch (error) {
      if (meter.tooLarge) throw new FileStoreError('too_large', `more than ${options.limitBytes} bytes`)
      throw error
    } finally {
      await rm(tmp, { force: true })
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const path = this.#path(key)
    const stream = createReadStream(path, range === undefined ? {} : { start: range.start, end: range.end })
    // Opening fails asynchronously: wait for it, so a missing file is not_found here rather than an error mid-response.
    await new Promise<void>((done, fail) => {
      stream.once('open', () => done())
      stream.once('error', (error: NodeJS.ErrnoException) => fail(error.code === 'ENOENT' ? new FileStoreError('not_found', `no object at ${key}`) : error))
    })
    return stream
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    try {
      const found = await stat(this.#path(key))
      return found.isFile() ? { key, size: found.size, modifiedAt: found.mtimeMs } : undefined
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined
      throw error
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    assertObjectKey(prefix, { prefix: true })
    const dir = this.#path(prefix.slice(0, -1))
    const found: StoredObject[] = []
    const walk = async (path: string, key: string): Promise<void> => {
      let entries
      try {
        entries = await readdir(path, { withFileTypes: true })
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return
        throw error
      }
      for (const entry of entries) {
        const child = join(path, entry.name)
        if (entry.isDirectory()) await walk(child, `${key}${entry.name}/`)
        else if (entry.isFile()) {
          const info = await stat(child)
          found.push({ key: `${key}${entry.name}`, size: info.size, modifiedAt: info.mtimeMs })
        }
      }
    }
    await walk(dir, prefix)
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  }

  async delete(key: string): Promise<boolean> {
    const path = this.#path(key)
    try {
      await unlink(path)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
      throw error
    }
    // Empty parents go too, up to (not including) the root: a purged model leaves no empty folders.
    for (let dir = dirname(path); dir.startsWith(this.#root + sep); dir = dirname(dir)) {
      try {
        await rmdir(dir)
      } catch {
        break
      }
    }
    return true
  }

  /** Removes temporaries older than `olderThanMs` (left by a crash mid-upload); answers how many. */
  async removeStaleTemporaries(olderThanMs: number, now: number): Promise<number> {
    const dir = join(this.#root, temporaries)
    let names: string[]
    try {
      names = await readdir(dir)
    } catch {
      return 0
    }
    let removed = 0
    for (const name of names) {
      const path = join(dir, name)
      const info = await stat(path).catch(() => undefined)
      if (info !== undefined && now - info.mtimeMs > olderThanMs) {
        await rm(path, { force: true })
        removed++
      }
    }
    return removed
  }

  async close(): Promise<void> {}

  /** The key's path, checked twice: the key's own rules, then that it resolves inside the root. */
  #path(key: string): string {
    assertObjectKey(key)
    const path = resolve(this.#root, key)
    if (!path.startsWith(this.#root + sep)) throw new FileStoreError('key_invalid', `not a storage key: ${JSON.stringify(key)}`)
    return path
  }
}

async function fsync(path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Counts and hashes the bytes passing through; past the limit it fails the pipeline. */
class Meter extends Transform {
  readonly #hash = createHash('sha256')
  readonly #limit: number
  size = 0
  tooLarge = false

  constructor(limit: number) {
    super()
    this.#limit = limit
  }

  digest(): string {
    return this.#hash.digest('hex')
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length
    if (this.size > this.#limit) {
      this.tooLarge = true
      return done(new FileStoreError('too_large', `more than ${this.#limit} bytes`))
    }
    this.#hash.update(chunk)
    done(null, chunk)
  }
}
