/**
 * The durable store. One code path for both modes: postgres.js talks to a real
 * PostgreSQL (DATABASE_URL) or to the embedded PGlite over its socket server.
 */
import { performance } from 'node:perf_hooks'
import postgres, { type Sql, type TransactionSql } from 'postgres'
import type { Config } from '../node/config.js'
import { redact } from '../node/config.js'
import type { Logger } from '../observability/log.js'
import { withTimeout } from '../async/deadline.js'
import type { Timers } from '../../actors/clock.js'
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded-postgres.js'
import { noDelaySockets } from './pg-socket.js'

export type StoreKind = 'postgres' | 'pglite'

/** Either the pool or an open transaction: what a query helper needs. */
export type Queryable = Sql | TransactionSql

export interface Database {
  readonly sql: Sql
  readonly kind: StoreKind
  readonly schema: string
  /**
   * Whether a flush of bridge events is COPYed into the event log (src/printers/event-copy.ts):
   * on a real PostgreSQL. PGlite has no COPY from a client and gets the JSON statement.
   */
  readonly copiesEvents: boolean
  /** Round trip to the store in ms; rejects when it does not answer within timeoutMs. */
  ping(timeoutMs: number): Promise<number>
  close(): Promise<void>
}

export class StoreUnreachable extends Error {
  override name = 'StoreUnreachable'
}

/**
 * `applicationName` names the node's sessions in pg_stat_activity (`printfarm <node id>` for a
 * serving node), so an operator, or a test, can find and end exactly one node's sessions.
 */
export async function openDatabase(config: Config, logger: Logger, timers: Timers, applicationName = 'printfarm'): Promise<Database> {
  const common = {
    onnotice: () => undefined,
    connect_timeout: 10,
    // search_path is a startup parameter, so every pooled connection gets it.
    connection: { search_path: config.databaseSchema, application_name: applicationName.slice(0, 63) },
    // int8 (counts, sequence ids) as JS numbers: ids stay far below 2^53.
    types: { int8: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) } },
    // Not in postgres.js's typings, documented in its README: the connection's socket (Nagle off).
    ...({ socket: noDelaySockets(timers) } as object),
  }
  let embedded: EmbeddedPostgres | undefined
  let sql: Sql
  if (config.databaseUrl !== undefined) {
    sql = postgres(config.databaseUrl, { ...common, max: config.databasePoolMax, idle_timeout: 60 })
  } else {
    embedded = await startEmbeddedPostgres(config.dataDir, logger)
    // PGlite executes one query at a time; a larger pool only queues inside its socket server.
    sql = postgres({ ...common, host: embedded.host, port: embedded.port, user: 'postgres', database: 'postgres', max: 1 })
  }
  const kind: StoreKind = embedded ? 'pglite' : 'postgres'
  const ping = async (timeoutMs: number): Promise<number> => {
    const started = performance.now()
    await withTimeout(sql`select 1`, timeoutMs, timers, () => new StoreUnreachable(`no answer within ${timeoutMs} ms`))
    return performance.now() - started
  }
  try {
    await ping(15_000)
    if (embedded) {
      // PGlite's socket server ignores startup parameters, but every socket shares
      // its one backend session, so a session-level SET holds for all of them.
      await sql`select set_config('search_path', ${config.databaseSchema}, false)`
    }
  } catch (error) {
    await sql.end({ timeout: 1 }).catch(() => undefined)
    await embedded?.close().catch(() => undefined)
    const where = config.databaseUrl !== undefined ? redact(config.databaseUrl) : 'embedded PGlite'
    throw new StoreUnreachable(`cannot reach the database at ${where}: ${(error as Error).message} (check DATABASE_URL)`, { cause: error })
  }
  logger.info('store connected', { kind, schema: config.databaseSchema })
  return {
    sql,
    kind,
    schema: config.databaseSchema,
    copiesEvents: kind === 'postgres',
    ping,
    async close() {
      await sql.end({ timeout: 5 })
      await embedded?.close()
    },
  }
}

