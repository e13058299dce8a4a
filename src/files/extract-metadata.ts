/**
 * What an uploaded file is and what its slicer wrote (docs/files.md),
 * read from the stored bytes by range: the same code runs at upload and on
 * reprocess, on the file system and on S3.
 *
 * - Type by content: a zip holding `3D/3dmodel.model` is model/3mf; G-code
 *   text is application/gcode; binary or ASCII STL is model/stl; anything
 *   else keeps the declared type (or application/octet-stream).
 * - Metadata is tried when the name or the zip magic says 3MF (the zip's
 *   directory and a few small entries) and for G-code (its first and last
 *   64 KiB). A file whose metadata cannot be read is still a file: its
 *   metadata says `processing: {status: 'failed', error}`.
 */
import { readGcodeMetadata, readThreeMfMetadata, SlicerMetadataError, type ProjectFilament } from '../../protocol/slicer-metadata/index.js'
import type { FileStore } from './file-store.js'
import { openStoredZip, ZipUnreadable, type ZipEntries } from './zip-reader.js'

export interface Extracted {
  fileType: string
  metadata: Record<string, unknown>
  projectFilaments: ProjectFilament[]
  activePlateNumber: number | null
}

const headBytes = 64 * 1024
const maxZipEntries = 5_000
const maxConfigBytes = 4 * 1024 * 1024
const maxPlates = 64

export interface StoredBytes {
  store: FileStore
  key: string
  size: number
  /** The first bytes of the file (at least 512 when the file has them): what the type is judged by. */
  head: Buffer
  filename: string
  declaredType: string | undefined
}

export async function extractMetadata(file: StoredBytes): Promise<Extracted> {
  const declared = file.declaredType === undefined || file.declaredType === '' ? 'application/octet-stream' : file.declaredType
  const isZip = file.head.subarray(0, 4).equals(Buffer.from('PK\x03\x04', 'latin1'))
  const namedThreeMf = /\.3mf$/i.test(file.filename)
  try {
    if (isZip || namedThreeMf) return await fromThreeMf(file, declared)
    if (looksLikeGcode(file.head)) return await fromGcode(file)
    return { fileType: looksLikeStl(file.head, file.size) ? 'model/stl' : declared, metadata: succeeded({}), projectFilaments: [], activePlateNumber: null }
  } catch (error) {
    if (error instanceof ZipUnreadable || error instanceof SlicerMetadataError) {
      const fileType = looksLikeGcode(file.head) ? 'application/gcode' : looksLikeStl(file.head, file.size) ? 'model/stl' : declared
      return { fileType, metadata: { processing: { status: 'failed', error: error.message.slice(0, 500) } }, projectFilaments: [], activePlateNumber: null }
    }
    throw error
  }
}

function succeeded(metadata: Record<string, unknown>): Record<string, unknown> {
  return { ...metadata, processing: { status: 'succeeded' } }
}

async function fromThreeMf(file: StoredBytes, declared: string): Promise<Extracted> {
  const zip = await openStoredZip(file.store, file.key, file.size, maxZipEntries)
  try {
    const names = zip.names()
    if (!names.includes('3D/3dmodel.model')) throw new ZipUnreadable('the zip is not a 3MF: it has no 3D/3dmodel.model')
    const parsed = readThreeMfMetadata({
      sliceInfo: await text(zip, 'Metadata/slice_info.config', maxConfigBytes),
      projectSettings: await text(zip, 'Metadata/project_settings.config', maxConfigBytes),
      modelHead: (await zip.read('3D/3dmodel.model', headBytes))?.toString('utf8'),
      plateGcodeHeads: await plateHeads(zip, names),
    })
    return { fileType: 'model/3mf', metadata: succeeded(parsed.metadata), projectFilaments: parsed.project_filaments, activePlateNumber: parsed.activePlateNumber }
  } catch (error) {
    // A zip that is not a 3MF is still whatever it was declared as.
    if (error instanceof ZipUnreadable && !/\.3mf$/i.test(file.filename) && declared !== 'model/3mf') {
      return { fileType: declared, metadata: { processing: { status: 'failed', error: error.message.slice(0, 500) } }, projectFilaments: [], activePlateNumber: null }
    }
    throw error
  } finally {
    zip.close()
  }
}

async function text(zip: ZipEntries, name: string, limit: number): Promise<string | undefined> {
  return (await zip.read(name, limit, { whole: true }))?.toString('utf8')
}

async function plateHeads(zip: ZipEntries, names: readonly string[]): Promise<Map<number, string>> {
  const heads = new Map<number, string>()
  for (const name of names) {
    const match = /^Metadata\/plate_(\d{1,4})\.gcode$/.exec(name)
    if (match === null || heads.size >= maxPlates) continue
    const head = await zip.read(name, headBytes)
    if (head !== undefined) heads.set(Number(match[1]), head.toString('utf8'))
  }
  return heads
}

async function fromGcode(file: StoredBytes): Promise<Extracted> {
  const head = file.size <= headBytes ? file.head : await readRange(file, 0, headBytes - 1)
  const tail = file.size <= headBytes ? Buffer.alloc(0) : await readRange(file, Math.max(headBytes, file.size - headBytes), file.size - 1)
  const parsed = readGcodeMetadata(head.toString('utf8'), tail.toString('utf8'))
  return { fileType: 'application/gcode', metadata: succeeded(parsed.metadata), projectFilaments: parsed.project_filaments, activePlateNumber: parsed.activePlateNumber }
}

async function readRange(file: StoredBytes, start: number, end: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of await file.store.get(file.key, { start, end })) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Text (no NUL) whose first meaningful line is a comment or a G/M/T command. */
function looksLikeGcode(head: Buffer): boolean {
  if (head.length === 0 || head.includes(0)) return false
  const first = head.toString('latin1', 0, Math.min(head.length, 4096)).split(/\r?\n/).find((line) => line.trim() !== '')
  return first !== undefined && /^\s*(;|[GMT]\d)/.test(first)
}

function looksLikeStl(head: Buffer, size: number): boolean {
  if (/^solid[ \t\r\n]/.test(head.toString('latin1', 0, 6)) && head.toString('latin1').includes('facet')) return true
  // Binary STL: an 80-byte header, a triangle count, 50 bytes per triangle.
  return size >= 84 && head.length >= 84 && 84 + 50 * head.readUInt32LE(80) === size
}
