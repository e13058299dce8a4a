/**
 * The zero-configuration store: PGlite (PostgreSQL compiled to WASM) with its
 * data in DATA_DIR, served over PGlite's socket server on a private ephemeral
 * loopback port so that the product reaches it through the same postgres.js
 * code as a real PostgreSQL (docs/operations.md). Never 5432.
 *
 * PGlite is single-process: two services on one data directory would corrupt
 * it, so the directory is locked by a pid file taken with O_EXCL.
 */
import { randomBytes } from 'node:crypto'
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import type { Logger } from '../observability/log.js'
import { StartupProblem } from '../startup/problems.js'

export interface EmbeddedPostgres {
  readonly host: string
  readonly port: number
  close(): Promise<void>
}

export class DataDirInUse extends StartupProblem {
  constructor(dataDir: string, pid: number) {
    super(`DATA_DIR ${dataDir} is in use by process ${pid}; stop that process or set DATA_DIR to another directory`)
    this.name = 'DataDirInUse'
  }
}

export async function startEmbeddedPostgres(dataDir: string, logger: Logger): Promise<EmbeddedPostgres> {
  mkdirSync(dataDir, { recursive: true })
  const releaseLock = lockDataDir(dataDir)
  let db: PGlite | undefined
  try {
    const started = performance.now()
    db = await PGlite.create(join(dataDir, 'pglite'))
    const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0 })
    await server.start()
    const [host, port] = server.getServerConn().split(':')
    logger.info('embedded PostgreSQL (PGlite) started', { dataDir, ms: Math.round(performance.now() - started) })
    const pglite = db
    return {
      host: host!,
      port: Number(port),
      async close() {
        await server.stop()
        await pglite.close()
        releaseLock()
      },
    }
  } catch (error) {
    await db?.close().catch(() => undefined)
    releaseLock()
    throw error
  }
}

/**
 * Takes DATA_DIR's pid file. The pid is written to a private file first and
 * hard-linked into place, so the lock appears complete or not at all (no
 * reader ever sees it half-written). A lock whose process is gone is taken
 * over by renaming it aside and checking that what was renamed is the stale
 * file that was judged, not a fresh lock another starter just made.
 */
function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'printfarm.pid')
  const mine = String(process.pid)
  for (let attempt = 0; attempt < 5; attempt++) {
    const temp = `${path}.${mine}.${randomBytes(4).toString('hex')}`
    writeFileSync(temp, mine)
    try {
      linkSync(temp, path)
      return () => {
        if (readIfExists(path) === mine) rmSync(path, { force: true })
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    } finally {
      rmSync(temp, { force: true })
    }
    const seen = readIfExists(path)
    if (seen === undefined) continue // released meanwhile: try again
    const holder = Number(seen)
    if (!/^\d+$/.test(seen) || holder === 0) {
      throw new Error(`DATA_DIR ${dataDir} has an unreadable lock file ${path}; delete it if no printfarm process uses this directory`)
    }
    if (holder === process.pid || isAlive(holder)) throw new DataDirInUse(dataDir, holder)
    // Stale (its process died without cleaning up: SIGKILL, power loss).
    const aside = `${path}.stale.${mine}.${randomBytes(4).toString('hex')}`
    try {
      renameSync(path, aside)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
      throw error
    }
    const moved = readIfExists(aside)
    if (moved !== seen) {
      // Another starter replaced the stale lock between our read and our rename: give it back.
      try {
        linkSync(aside, path)
      } catch {
        // A third starter holds the path now; either way the directory is taken.
      }
      rmSync(aside, { force: true })
      throw new DataDirInUse(dataDir, Number(moved))
    }
    rmSync(aside, { force: true })
  }
  throw new Error(`could not lock DATA_DIR ${dataDir}: it keeps changing hands`)
}

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
