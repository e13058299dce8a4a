/**
 * Files on the local file system under one root (DATA_DIR/files by
 * default; several nodes share it only on a shared mount).
 *
 * A put streams into `.tmp/` under the root, hashing as it goes, fsyncs the
 * file, then links it to its key (`link` fails when the key exists, so an
 * object is never replaced, even by two puts racing on one node or two) and
 * fsyncs every directory whose entries changed: when put resolves, the bytes
 * and their name survive a crash, and a reader never sees half a file.
 * Whatever fails on the way removes the temporary; a crash leaves one in
 * `.tmp/`, which removeStaleTemporaries sweeps.
 *
 * A failed put destroys its body, as the S3 store does: the caller hands the
 * stream over and never has to drain it.
 */
import { createHash, randomUUID } from 'node:crypto'
import { link, mkdir, open, readdir, rm, rmdir, stat, unlink, type FileHandle } from 'node:fs/promises'
import { dirname, join, resolve, sep } from 'node:path'
import { Transform, Writable, type Readable, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { assertObjectKey, FileStoreError, type ByteRange, type FileStore, type PutResult, type StoredObject } from './file-store.js'

const temporaries = '.tmp'
/** Tries of mkdir + link: a concurrent delete may remove a parent that just became empty in between. */
const linkAttempts = 3

export class FsFileStore implements FileStore {
  readonly kind = 'fs' as const
  readonly #root: string

  constructor(root: string) {
    this.#root = resolve(root)
  }

  async put(key: string, body: Readable, options: { limitBytes?: number; contentType?: string } = {}): Promise<PutResult> {
    let tmp: string | undefined
    let handle: FileHandle | undefined
    const limit = options.limitBytes ?? Number.MAX_SAFE_INTEGER
    try {
      const path = this.#path(key)
      const tmpDir = join(this.#root, temporaries)
      await mkdir(tmpDir, { recursive: true })
      tmp = join(tmpDir, `${randomUUID()}.part`)
      // Our own handle rather than createWriteStream(path): the file exists before a byte flows, the
      // same descriptor is fsynced, and closing it below waits for a write still in flight after a failure.
      handle = await open(tmp, 'wx')
      const meter = new Meter(limit)
      await pipeline(body, meter, writerTo(handle))
      await handle.sync()
      await handle.close()
      handle = undefined
      await this.#linkInPlace(tmp, path, key)
      return { size: meter.size, sha256: meter.digest() }
    } catch (error) {
      body.destroy()
      if (error instanceof TooLarge) throw new FileStoreError('too_large', `more than ${limit} bytes`)
      throw error
    } finally {
      await handle?.close().catch(() => undefined)
      if (tmp !== undefined) await rm(tmp, { force: true })
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const path = this.#path(key)
    let handle: FileHandle
    try {
      handle = await open(path, 'r')
    } catch (error) {
      if (isAbsence(error)) throw new FileStoreError('not_found', `no object at ${key}`)
      throw error
    }
    // Opened and checked here, so a missing object (or a directory on the way to others) is
    // not_found before the caller answers, never an error halfway through a response.
    try {
      if (!(await handle.stat()).isFile()) throw new FileStoreError('not_found', `no object at ${key}`)
    } catch (error) {
      await handle.close()
      throw error
    }
    return handle.createReadStream(range === undefined ? {} : { start: range.start, end: range.end })
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    try {
      const found = await stat(this.#path(key))
      return found.isFile() ? { key, size: found.size, modifiedAt: Math.floor(found.mtimeMs) } : undefined
    } catch (error) {
      if (isAbsence(error)) return undefined
      throw error
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    assertObjectKey(prefix, { prefix: true })
    const dir = this.#path(prefix.slice(0, -1))
    const found: StoredObject[] = []
    // Files and folders may vanish while the walk runs (a delete, a purge): gone is not an error.
    const walk = async (path: string, keyPrefix: string): Promise<void> => {
      let entries
      try {
        entries = await readdir(path, { withFileTypes: true })
      } catch (error) {
        if (isAbsence(error)) return
        throw error
      }
      for (const entry of entries) {
        const child = join(path, entry.name)
        if (entry.isDirectory()) await walk(child, `${keyPrefix}${entry.name}/`)
        else if (entry.isFile()) {
          const info = await stat(child).catch((error: unknown) => {
            if (isAbsence(error)) return undefined
            throw error
          })
          if (info !== undefined) found.push({ key: `${keyPrefix}${entry.name}`, size: info.size, modifiedAt: Math.floor(info.mtimeMs) })
        }
      }
    }
    // A prefix never starts with a dot, so the walk never enters `.tmp/`.
    await walk(dir, prefix)
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  }

  async delete(key: string): Promise<boolean> {
    const path = this.#path(key)
    try {
      await unlink(path)
    } catch (error) {
      // EISDIR: the key names a folder of other objects, not an object.
      if (isAbsence(error) || (error as NodeJS.ErrnoException).code === 'EISDIR') return false
      throw error
    }
    // Empty parents go too, up to (not including) the root: a purged model leaves no empty folders.
    // A parent that is not empty (or was just refilled) stops the climb.
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
    } catch (error) {
      if (isAbsence(error)) return 0
      throw error
    }
    let removed = 0
    for (const name of names) {
      const path = join(dir, name)
      const info = await stat(path).catch(() => undefined)
      if (info !== undefined && info.isFile() && now - info.mtimeMs > olderThanMs) {
        await rm(path, { force: true })
        removed++
      }
    }
    return removed
  }

  async close(): Promise<void> {}

  /** Links the fsynced temporary to its key, then makes the new name durable. */
  async #linkInPlace(tmp: string, path: string, key: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      await mkdir(dirname(path), { recursive: true })
      try {
        await link(tmp, path)
        break
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code === 'EEXIST') throw new FileStoreError('key_taken', `an object already exists at ${key}`)
        if (code === 'ENOENT' && attempt < linkAttempts) continue
        throw error
      }
    }
    // Every folder up to the root, not only the parent: mkdir may just have created some of them
    // (here or in a concurrent put that has not synced them yet), and a folder's entry lives in its parent.
    for (let dir = dirname(path); ; dir = dirname(dir)) {
      await fsyncDirectory(dir)
      if (!dir.startsWith(this.#root + sep)) break
    }
  }

  /** The key's path, checked twice: the key's own rules, then that it resolves inside the root. */
  #path(key: string): string {
    assertObjectKey(key)
    const path = resolve(this.#root, key)
    if (!path.startsWith(this.#root + sep)) throw new FileStoreError('key_invalid', `not a storage key: ${JSON.stringify(key.slice(0, 300))}`)
    return path
  }
}

function isAbsence(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return code === 'ENOENT' || code === 'ENOTDIR'
}

/**
 * A Writable onto a handle it never closes. (handle.createWriteStream with autoClose: false keeps
 * the handle referenced for good, and its close() then never settles.)
 */
function writerTo(handle: FileHandle): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      const writeAll = async (): Promise<void> => {
        for (let offset = 0; offset < chunk.length; ) offset += (await handle.write(chunk, offset, chunk.length - offset)).bytesWritten
      }
      writeAll().then(() => done(), done)
    },
  })
}

async function fsyncDirectory(path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** The Meter's own failure, told apart from the source's (put turns it into too_large). */
class TooLarge extends Error {}

/** Counts and hashes the bytes passing through; past the limit it fails the pipeline, which destroys the source. */
class Meter extends Transform {
  readonly #hash = createHash('sha256')
  readonly #limit: number
  size = 0

  constructor(limit: number) {
    super()
    this.#limit = limit
  }

  digest(): string {
    return this.#hash.digest('hex')
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length
    if (this.size > this.#limit) return done(new TooLarge())
    this.#hash.update(chunk)
    done(null, chunk)
  }
}
