/**
 * Reading a few small entries of a stored zip (a 3MF) without reading the
 * whole file: yauzl walks the central directory at the end of the zip, and
 * only the entries asked for are inflated (docs/files.md: a 31 MB 3MF's
 * metadata in ~23 ms).
 *
 * The bytes come from the FileStore by range, so this works the same on the
 * file system and on S3. yauzl reads each directory record separately; small
 * reads in the last 4 MiB (where the directory lives) are served from one
 * window read once and extended downwards as needed, so a 5,000-entry
 * directory costs a couple of reads, not 10,000.
 *
 * Bounds, so a hostile zip costs little: at most `maxEntries` entries are
 * looked at (more is an error), an entry is read only up to the bytes asked
 * for (then its inflater is destroyed), entry sizes are validated against
 * their headers (a zip bomb that lies about its size fails), and names that
 * are absolute or climb out with `..` fail the whole zip (yauzl's checks).
 */
import { PassThrough, Readable } from 'node:stream'
import yauzl, { type Entry, type ZipFile } from 'yauzl'
import type { FileStore } from './file-store.js'

const tailBytes = 4 * 1024 * 1024
/** A directory record or the end record: never more than 46 + 3 × 64 KiB. */
const smallReadBytes = 256 * 1024

export class ZipUnreadable extends Error {
  override name = 'ZipUnreadable'
}

class StoreRangeReader extends yauzl.RandomAccessReader {
  readonly #store: FileStore
  readonly #key: string
  readonly #size: number
  /** The bytes from `start` to the end of the file, once read: where the directory lives. Grows downwards. */
  #cache: Promise<{ start: number; bytes: Buffer }> | undefined

  constructor(store: FileStore, key: string, size: number) {
    super()
    this.#store = store
    this.#key = key
    this.#size = size
  }

  override _readStreamForRange(start: number, end: number): Readable {
    const out = new PassThrough()
    if (end <= start) {
      out.end()
      return out
    }
    // Small reads near the end are the directory's: served from one cached window, extended as needed.
    if (start >= this.#size - tailBytes && end - start <= smallReadBytes) {
      this.#cache = this.#cover(start)
      this.#cache.then((cache) => out.end(cache.bytes.subarray(start - cache.start, end - cache.start))).catch((error: unknown) => out.destroy(error as Error))
      return out
    }
    this.#store
      .get(this.#key, { start, end: end - 1 })
      .then((stream) => {
        // yauzl asks for a whole entry and stops reading after the bytes it wanted: the source
        // must stop (and release its file or connection) with it, which pipe() alone does not do.
        if (out.destroyed) return stream.destroy()
        out.once('close', () => stream.destroy())
        stream.on('error', (error) => out.destroy(error))
        stream.pipe(out)
      })
      .catch((error: unknown) => out.destroy(error as Error))
    return out
  }

  /** The cache, extended down to `start` (reads chain, so a window is never fetched twice). */
  async #cover(start: number): Promise<{ start: number; bytes: Buffer }> {
    const cache = await this.#cache
    if (cache !== undefined && cache.start <= start) return cache
    const to = cache?.start ?? this.#size
    const read = await readAll(await this.#store.get(this.#key, { start, end: to - 1 }))
    return { start, bytes: cache === undefined ? read : Buffer.concat([read, cache.bytes]) }
  }
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

export interface ZipEntries {
  /** Every entry name (at most maxEntries). */
  names(): readonly string[]
  /** Up to `limitBytes` of an entry's inflated bytes (`whole`: more than that is an error instead of a cut). */
  read(name: string, limitBytes: number, options?: { whole?: boolean }): Promise<Buffer | undefined>
  close(): void
}

export async function openStoredZip(store: FileStore, key: string, size: number, maxEntries: number): Promise<ZipEntries> {
  let zip: ZipFile
  try {
    zip = await yauzl.fromRandomAccessReaderPromise(new StoreRangeReader(store, key, size), size, { lazyEntries: true, autoClose: false, validateEntrySizes: true, strictFileNames: false })
  } catch (error) {
    throw new ZipUnreadable(`not a readable zip: ${(error as Error).message}`)
  }
  if (zip.entryCount > maxEntries) {
    zip.close()
    throw new ZipUnreadable(`the zip holds ${zip.entryCount} entries; at most ${maxEntries} are read`)
  }
  let entries: Map<string, Entry>
  try {
    entries = await listEntries(zip)
  } catch (error) {
    zip.close()
    throw new ZipUnreadable(`the zip's directory is damaged or unsafe: ${(error as Error).message}`)
  }
  return {
    names: () => [...entries.keys()],
    async read(name, limitBytes, { whole = false } = {}) {
      const entry = entries.get(name)
      if (entry === undefined) return undefined
      if (whole && entry.uncompressedSize > limitBytes) throw new ZipUnreadable(`${name} is ${entry.uncompressedSize} bytes; at most ${limitBytes} are read`)
      try {
        return await readEntry(zip, entry, limitBytes)
      } catch (error) {
        throw new ZipUnreadable(`${name} could not be read: ${(error as Error).message}`)
      }
    },
    close: () => zip.close(),
  }
}

function listEntries(zip: ZipFile): Promise<Map<string, Entry>> {
  return new Promise((resolve, reject) => {
    const entries = new Map<string, Entry>()
    zip.on('entry', (entry: Entry) => {
      entries.set(entry.fileName, entry)
      zip.readEntry()
    })
    zip.once('end', () => resolve(entries))
    zip.once('error', reject)
    zip.readEntry()
  })
}

/** Reads until `limitBytes`, then stops the inflater: a head read of a huge entry costs only its head. */
async function readEntry(zip: ZipFile, entry: Entry, limitBytes: number): Promise<Buffer> {
  const stream = await zip.openReadStreamPromise(entry)
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of stream) {
      const buffer = chunk as Buffer
      chunks.push(buffer)
      size += buffer.length
      if (size >= limitBytes) break
    }
  } finally {
    stream.destroy()
  }
  return Buffer.concat(chunks).subarray(0, limitBytes)
}
