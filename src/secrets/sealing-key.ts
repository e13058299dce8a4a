/**
 * Where the sealing key comes from. PRINTFARM_SECRET_KEY (32 bytes, base64)
 * keeps sealed secrets safe even from someone holding a copy of the database.
 * Without it the service still works, with a key it generates once and keeps
 * in the store — protection against leaks of logs and API answers, not of the
 * database — and says so at start. A store key made before PRINTFARM_SECRET_KEY
 * was set stays usable for opening, so values sealed earlier still read.
 */
import { randomBytes } from 'node:crypto'
import type { Logger } from '../observability/log.js'
import type { Queryable } from '../storage/database.js'
import { SealedBox } from './sealed-box.js'

export async function loadSealedBox(sql: Queryable, configured: Buffer | undefined, logger: Logger): Promise<SealedBox> {
  const generated = randomBytes(32).toString('base64')
  if (configured === undefined) {
    await sql`insert into service_meta (key, value) values ('sealing_key', ${generated}) on conflict (key) do nothing`
  }
  const [row] = await sql<{ value: string }[]>`select value from service_meta where key = 'sealing_key'`
  const stored = row === undefined ? undefined : Buffer.from(row.value, 'base64')
  if (configured !== undefined) return new SealedBox(configured, stored === undefined ? [] : [stored])
  logger.warn('PRINTFARM_SECRET_KEY is not set: printer credentials are sealed with a key kept in the database; set it to protect them from a database leak')
  return new SealedBox(stored!)
}
