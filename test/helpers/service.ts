/**
 * Starts the real service for a test: real uWS on an ephemeral port, and the
 * store the environment names. With DATABASE_URL set (CI's main run) each test
 * file gets its own PostgreSQL schema, dropped afterwards; without it, an
 * embedded PGlite in a temporary DATA_DIR.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { PGlite } from '@electric-sql/pglite'
import postgres from 'postgres'
import { loadConfig, type Config } from '../../src/node/config.js'
import { createLogger, type Logger } from '../../src/observability/log.js'
import { startService, type RunningService, type StartOptions } from '../../src/node/service.js'
import { systemClock } from '../../actors/clock.js'

export interface TestContext {
  teardown(fn: () => unknown): void
}

export interface TestService extends RunningService {
  readonly config: Config
  /** Log lines the service wrote, parsed. */
  readonly logs: Record<string, unknown>[]
}

/** The first admin every test service is started with (PRINTFARM_ADMIN_*). */
export const testAdmin = { email: 'admin@test.printfarm', password: 'test-admin-password' } as const

export const usingRealPostgres = (): boolean => Boolean(process.env['DATABASE_URL'])

export function tempDir(t: TestContext, prefix = 'printfarm-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A fresh schema on the real PostgreSQL, dropped at teardown. */
export function tempSchema(t: TestContext): string {
  const schema = `t_${randomBytes(6).toString('hex')}`
  t.teardown(async () => {
    const sql = postgres(process.env['DATABASE_URL']!, { max: 1, onnotice: () => undefined })
    await sql`drop schema if exists ${sql(schema)} cascade`
    await sql.end()
  })
  return schema
}

export function testEnv(t: TestContext, env: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  const base: Record<string, string | undefined> = {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    DATA_DIR: tempDir(t),
    DATABASE_URL: process.env['DATABASE_URL'],
    REDIS_URL: process.env['REDIS_URL'],
    MQTT_URL: process.env['MQTT_URL'],
    MQTT_PORT: '0',
    PRINTFARM_ADMIN_EMAIL: testAdmin.email,
    PRINTFARM_ADMIN_PASSWORD: testAdmin.password,
    // The lowest cost the service accepts: hundreds of sign-ins per run (the default, 17, is tested in passwords.test.ts).
    PASSWORD_HASH_COST: '15',
    // Every JSON answer checked against its route's response schema: a drift fails the test that caused it.
    CHECK_RESPONSES: 'true',
  }
  if (base['DATABASE_URL']) base['DATABASE_SCHEMA'] = tempSchema(t)
  return { ...base, ...env }
}

export function captureLogger(level: 'debug' | 'info' = 'info'): { logger: Logger; logs: Record<string, unknown>[] } {
  const logs: Record<string, unknown>[] = []
  return { logger: createLogger(level, { now: systemClock.now, sink: (line) => logs.push(JSON.parse(line) as Record<string, unknown>) }), logs }
}

/**
 * Embedded runs: a service's first start on an empty DATA_DIR creates its PGlite cluster (initdb,
 * about 5 s on this machine, most of a test file's start). A test that only needs an empty store gets
 * a copy of a cluster made once per machine and PGlite version instead, kept in the temporary folder
 * (about 40 MB): initdb only, so migrations, the first admin and everything else still happen at its
 * start. Test processes that find none race to make it; each builds its own and renames it into
 * place, and a loser uses the winner's (a rename is atomic, so a half-made template is never seen).
 * The first start on an empty directory stays covered by the tests that pass their own DATA_DIR or
 * start the CLI, and by CI's `npm start` smoke test.
 */
let clusterTemplate: Promise<string> | undefined
const pgliteVersion = (JSON.parse(readFileSync(new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url), 'utf8')) as { version: string }).version
export async function copyFreshCluster(dataDir: string): Promise<void> {
  clusterTemplate ??= (async () => {
    const template = join(tmpdir(), `printfarm-pglite-template-${pgliteVersion}`)
    if (existsSync(join(template, 'PG_VERSION'))) return template
    const building = mkdtempSync(join(tmpdir(), 'printfarm-pglite-building-'))
    const db = await PGlite.create(join(building, 'pglite'))
    await db.close()
    try {
      renameSync(join(building, 'pglite'), template)
    } catch {
      // Another test process put its template there first: the same initdb, use it.
    }
    rmSync(building, { recursive: true, force: true })
    return template
  })()
  cpSync(await clusterTemplate, join(dataDir, 'pglite'), { recursive: true })
}

export async function startTestService(
  t: TestContext,
  env: Record<string, string | undefined> = {},
  options: StartOptions = {},
): Promise<TestService> {
  const config = loadConfig(testEnv(t, env))
  if (config.databaseUrl === undefined && !('DATA_DIR' in env)) await copyFreshCluster(config.dataDir)
  const { logger, logs } = captureLogger()
  const service = await startService(config, { logger, ...options })
  t.teardown(() => service.stop())
  return Object.assign(service, { config, logs })
}
