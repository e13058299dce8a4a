/**
 * The bridge's state folder: what it must keep across restarts. The folder is the bridge's alone
 * (mode 0700) and the paired key is readable by its owner only (0600): it acts for the farm's
 * printers. Every file is written to a temporary name, flushed and renamed, so a power cut leaves
 * the old file or the new one, never half of one.
 */
import { randomBytes } from 'node:crypto'
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { Type, type Static } from '@sinclair/typebox'
import { compileBodyValidator } from '../../protocol/schemas/validator.js'

/** The paired key as the bridge keeps it (the service's answer to the pairing exchange, with where and when). */
export const StoredKey = Type.Object({
  key: Type.String({ minLength: 1 }),
  id: Type.String(),
  organization_id: Type.String(),
  scopes: Type.Array(Type.String()),
  /** The service it was paired with. */
  url: Type.String(),
  paired_at: Type.String(),
})
export type StoredKey = Static<typeof StoredKey>

const readStoredKey = compileBodyValidator(StoredKey)

export class BridgeStateDir {
  readonly path: string

  constructor(path: string) {
    this.path = path
  }

  /** Creates the folder (owner only) if it is missing, and makes an existing one private. */
  ensure(): void {
    mkdirSync(this.path, { recursive: true, mode: 0o700 })
    const mode = statSync(this.path).mode & 0o777
    // A folder others may read would hand them the key; it is made private rather than refused.
    if ((mode & 0o077) !== 0) chmodSync(this.path, 0o700)
  }

  /** The paired key, or undefined before the first pairing. Throws naming the file when it is unreadable or not a key. */
  key(): StoredKey | undefined {
    const text = this.read('key.json')
    if (text === undefined) return undefined
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      throw new Error(`${join(this.path, 'key.json')} is not JSON: pair again (printfarm bridge pair)`)
    }
    const read = readStoredKey(parsed)
    if (!read.ok) throw new Error(`${join(this.path, 'key.json')} is not a paired key (${read.reason}): pair again (printfarm bridge pair)`)
    return read.value
  }

  saveKey(key: StoredKey): void {
    this.ensure()
    this.write('key.json', `${JSON.stringify(key, null, 2)}\n`, 0o600)
  }

  /**
   * This bridge's host id: `configured` when given (BRIDGE_HOST_ID), else the one made on the first
   * start and kept here, from the machine's name (an operator recognises it in the service's lists)
   * and a random part (two machines of the same name stay two hosts).
   */
  hostId(configured?: string): string {
    if (configured !== undefined) return configured
    const kept = this.read('host-id')?.trim()
    if (kept !== undefined && kept !== '') return kept
    const made = `${hostname().toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'bridge'}-${randomBytes(3).toString('hex')}`
    this.ensure()
    this.write('host-id', `${made}\n`, 0o600)
    return made
  }

  /** A file of the folder, or undefined when it does not exist. */
  read(name: string): string | undefined {
    try {
      return readFileSync(join(this.path, name), 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw new Error(`cannot read ${join(this.path, name)}: ${(error as Error).message}`)
    }
  }

  /** Replaces a file of the folder as a whole (temporary name, flush, rename, folder flushed). */
  write(name: string, text: string, mode = 0o600): void {
    const target = join(this.path, name)
    const temporary = `${target}.${randomBytes(4).toString('hex')}.tmp`
    const fd = openSync(temporary, 'wx', mode)
    try {
      writeSync(fd, text)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temporary, target)
    // The rename is durable once the folder is flushed.
    const dir = openSync(this.path, 'r')
    try {
      fsyncSync(dir)
    } finally {
      closeSync(dir)
    }
  }
}
