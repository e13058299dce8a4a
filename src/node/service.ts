/**
 * One node of the service: configuration in, a running HTTP server out, and a
 * stop() that drains it. The CLI, the tests and the benchmarks all start the
 * service through here, so they run the same stack.
 *
 * The start is ordered so that it cannot half-succeed: the listen addresses
 * are checked before anything exists; the node's parts (src/node/parts.ts:
 * the store, the cluster, the actors, the broker, the live feed, the HTTP
 * server last) come up in the order their needs give, each undone in reverse
 * if a later one fails; and the first admin is created only once the service
 * is up, so a password printed is a password that works.
 */
import { setPasswordCost } from '../auth/passwords.js'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from './config.js'
import { createLogger, type Logger } from '../observability/log.js'
import type { HttpServer } from '../http/server.js'
import type { Route, RouteSchemas } from '../http/route.js'
import { assertNativeUws } from '../http/uws.js'
import type { Services } from '../routes/route-context.js'
import type { Database } from '../storage/database.js'
import { bootstrapAdmin } from '../auth/accounts.js'
import { systemClock, type Clock } from '../../actors/clock.js'
import { checkListenAddresses } from '../startup/preflight.js'
import { StartedParts } from '../startup/started-parts.js'
import { startParts } from '../startup/parts.js'
import { nodeParts, type NodeParts } from './parts.js'
import { nodeReactions } from './reactions.js'
import { allRoutes } from './routes.js'

export interface RunningService {
  readonly port: number
  /** http://127.0.0.1:port when bound to all interfaces, else the bound host. */
  readonly url: string
  readonly services: Services
  readonly http: HttpServer
  /** Set when this start created the first admin; the password only when it was generated. */
  readonly bootstrap: { email: string; generatedPassword: string | undefined } | undefined
  /** Milliseconds from the call of startService to a node that answers. */
  readonly startupMs: number
  /** Graceful: stop accepting, finish in-flight requests, close the store. Idempotent. */
  stop(): Promise<void>
}

export interface StartOptions {
  logger?: Logger
  /** Extra routes (tests mount probes of the adapter here). */
  extraRoutes?: readonly Route<RouteSchemas, Services>[]
  /** The node's one clock (tests hold time still and count the timers a stop leaves). */
  clock?: Clock
}

export { allRoutes }

export async function startService(config: Config, options: StartOptions = {}): Promise<RunningService> {
  const began = performance.now()
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? createLogger(config.logLevel, { now: clock.now })
  // Fail before creating anything when the server could not run anyway.
  assertNativeUws()
  await checkListenAddresses(config)
  setPasswordCost(config.passwordHashCost)
  const started = new StartedParts(logger)
  try {
    const given = { config, logger, clock, nodeId: config.nodeId ?? persistentNodeId(config.dataDir), routes: [...allRoutes(), ...(options.extraRoutes ?? [])] }
    const node: NodeParts = await startParts(given, nodeParts, nodeReactions, started)
    const bootstrap = await createFirstAdmin(node.store, config, logger)
    node.state.accepting = true
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host
    let stopping: Promise<void> | undefined
    return {
      port: node.http.port,
      url: `http://${host}:${node.http.port}`,
      services: node.services,
      http: node.http,
      bootstrap,
      startupMs: Math.round(performance.now() - began),
      stop: () => (stopping ??= stopNode(logger, node, started)),
    }
  } catch (error) {
    await started.undo()
    throw error
  }
}

/**
 * The first start of an empty store creates an organization and its admin,
 * now that the service answers: the password is logged at once, the moment
 * the account exists, so no later failure can leave an account nobody can
 * sign in to (and `printfarm admin reset-password` is the way back in anyway).
 */
async function createFirstAdmin(db: Database, config: Config, logger: Logger): Promise<RunningService['bootstrap']> {
  const created = await bootstrapAdmin(db.sql, { email: config.adminEmail, password: config.adminPassword }, logger)
  if (created !== undefined) {
    // Printed once: only its hash is stored.
    logger.info('admin account created; sign in at POST /v1/auth/login', {
      email: created.email,
      password: created.generatedPassword ?? '(from PRINTFARM_ADMIN_PASSWORD)',
    })
  }
  return created
}

/** Graceful stop: the same teardown as a failed start, every part in the reverse order of its start (src/node/parts.ts says why that order). */
async function stopNode(logger: Logger, node: Pick<NodeParts, 'state' | 'http'>, parts: StartedParts): Promise<void> {
  node.state.accepting = false
  logger.info('shutting down', { inFlight: node.http.inFlight })
  await parts.undo()
  logger.info('stopped')
}

/**
 * A node without NODE_ID keeps the id it drew the first time in DATA_DIR/node-id, so a restart
 * (a crash, a deploy) reclaims its own shards at once instead of waiting for its old leases.
 */
function persistentNodeId(dataDir: string): string {
  const file = join(dataDir, 'node-id')
  try {
    const id = readFileSync(file, 'utf8').trim()
    if (/^[A-Za-z0-9._-]{1,64}$/.test(id)) return id
  } catch {
    // first start on this DATA_DIR
  }
  const id = `node-${randomBytes(6).toString('hex')}`
  mkdirSync(dataDir, { recursive: true })
  writeFileSync(file, `${id}\n`)
  return id
}
