/**
 * The zero-configuration store: PGlite (PostgreSQL compiled to WASM) with its
 * data in DATA_DIR, served over PGlite's socket server on a private ephemeral
 * loopback port so that the product reaches it through the same postgres.js
 * code as a real PostgreSQL (DESIGN section 4). Never 5432.
 *
 * PGlite is single-process: two services on one data directory would corrupt
 * it, so the directory is locked by a pid file taken with O_EXCL.
 */
import { mkdirSync, openSync, readFileSync, rmSync, writeSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import type { Logger } from '../log.js'

export interface EmbeddedPostgres {
  readonly host: string
  readonly port: number
  close(): Promise<void>
}

export class DataDirInUse extends Error {
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

function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'printfarm.pid')
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx')
      writeSync(fd, String(process.pid))
      closeSync(fd)
      return () => rmSync(path, { force: true })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const holder = Number(readFileSync(path, 'utf8').trim())
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) throw new DataDirInUse(dataDir, holder)
      if (holder === process.pid) throw new DataDirInUse(dataDir, holder)
      // A stale lock from a process that died (SIGKILL, power loss): take it over.
      rmSync(path, { force: true })
    }
  }
  throw new Error(`could not lock DATA_DIR ${dataDir}`)
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
