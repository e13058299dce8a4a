/**
 * One node of the service: configuration in, a running HTTP server out, and a
 * stop() that drains it. The CLI, the tests and the benchmarks all start the
 * service through here, so they run the same stack.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from './config.js'
import { withTimeout } from './deadline.js'
import { createLogger, type Logger } from './log.js'
import { MetricsRegistry, registerProcessMetrics } from './metrics.js'
import { buildOpenApiDocument } from './openapi.js'
import { startHttpServer, type HttpServer } from './http/server.js'
import type { Route, RouteSchemas } from './http/route.js'
import { assertNativeUws } from './http/uws.js'
import { systemRoutes } from './routes/system.js'
import type { NodeState, Services } from './services.js'
import { openDatabase, type Database } from './storage/database.js'
import { migrate } from './storage/migrate.js'
import { migrations } from './storage/migrations/index.js'
import { connectMqtt, type MqttConnection } from './mqtt/connection.js'
import { bootstrapAdmin } from './auth/accounts.js'
import { createAuthenticator } from './auth/authenticate.js'
import { FailureLimiter } from './auth/failure-limiter.js'
import { loadKeyring, type Keyring } from './auth/keyring.js'
import { Sessions } from './auth/sessions.js'
import { authRoutes } from './routes/auth.js'
import { organizationRoutes } from './routes/organizations.js'
import { apiKeyRoutes } from './routes/api-keys.js'
import { authCodeRoutes } from './routes/auth-codes.js'
import { ApiKeyCache, UsageLogWriter } from './auth/api-keys.js'
import { PrinterConfigStore } from './printers/config-store.js'
import { printerConfigRoutes } from './routes/printer-config.js'
import { printerEventRoutes } from './routes/printer-events.js'
import { farmPageRoutes } from './routes/farm-page.js'
import { startPrinterNode, type PrinterNode } from './printers/runtime.js'
import { createLiveFeed } from './live/index.js'
import { RedisRelay } from './live/redis-relay.js'
import { loadSealedBox } from './secrets/sealing-key.js'
import type { SealedBox } from './secrets/sealed-box.js'
import { signalProfileRoutes } from './routes/signal-profiles.js'
import { displayRoutes } from './routes/displays.js'
import { DisplayStore } from './displays/display-store.js'
import { ProfileStore } from './displays/profile-store.js'
import { startDisplayNode, type DisplayNode } from './displays/index.js'
import { systemClock } from '../actors/clock.js'
import { LocalShardDirectory, type ShardDirectory } from '../actors/shard-directory.js'
import { RedisShardDirectory } from './cluster/redis-shard-directory.js'
import { Forwarder } from './cluster/forwarder.js'
import { nodeCalls } from '../protocol/node-calls.js'
import { RoutedPrinters } from './cluster/routed-printers.js'

export interface RunningService {
  readonly port: number
  /** http://127.0.0.1:port when bound to all interfaces, else the bound host. */
  readonly url: string
  readonly services: Services
  readonly http: HttpServer
  /** Set when this start created the first admin; the password only when it was generated. */
  readonly bootstrap: { email: string; generatedPassword: string | undefined } | undefined
  /** Graceful: stop accepting, finish in-flight requests, close the store. Idempotent. */
  stop(): Promise<void>
}

/** Window of the failed sign-in limits (LOGIN_FAILURES_PER_ACCOUNT / _PER_ADDRESS count within it). */
const loginFailureWindowMs = 15 * 60 * 1000

export interface StartOptions {
  logger?: Logger
  /** Extra routes (tests mount probes of the adapter here). */
  extraRoutes?: readonly Route<RouteSchemas, Services>[]
}

/** Every route of the service, in one table: served, documented, scoped. */
export function allRoutes(): readonly Route<RouteSchemas, Services>[] {
  return [...systemRoutes, ...authRoutes, ...organizationRoutes, ...apiKeyRoutes, ...authCodeRoutes, ...printerConfigRoutes, ...printerEventRoutes, ...signalProfileRoutes, ...displayRoutes, ...farmPageRoutes]
}

export async function startService(config: Config, options: StartOptions = {}): Promise<RunningService> {
  const logger = options.logger ?? createLogger(config.logLevel)
  // Fail before touching the store when the server could not run anyway.
  assertNativeUws()
  const db: Database = await openDatabase(config, logger)
  const metrics = new MetricsRegistry()
  // The one clock of this node's actors and live feed (actors/clock.ts).
  const clock = systemClock
  const stopProcessMetrics = registerProcessMetrics(metrics)
  // What has started so far, undone in reverse when a later step of the start fails.
  const started: (() => unknown)[] = [() => db.close(), stopProcessMetrics]
  const undo = async (): Promise<void> => {
    for (const close of [...started].reverse()) await Promise.resolve().then(close).catch(() => undefined)
  }
  const state: NodeState = { migrationsVersion: 0, accepting: true }
  let mqtt: MqttConnection
  let keyring: Keyring
  let sealedBox: SealedBox
  let bootstrap: RunningService['bootstrap']
  let printerNode: PrinterNode
  let displayNode: DisplayNode
  let directory: ShardDirectory
  let forwarder: Forwarder | undefined
  let printers: RoutedPrinters
  const displayStore = new DisplayStore(db.sql)
  try {
    const result = await migrate(db.sql, config.databaseSchema, migrations, logger)
    state.migrationsVersion = result.version
    sealedBox = await loadSealedBox(db.sql, config.secretKey, logger)
    keyring = await loadKeyring(db.sql, sealedBox, logger)
    bootstrap = await bootstrapAdmin(db.sql, { email: config.adminEmail, password: config.adminPassword }, logger)
    // With Redis the nodes share the shards (DESIGN section 6); without it this node owns them all.
    if (config.redisUrl !== undefined) {
      const redisDirectory = new RedisShardDirectory({
        redisUrl: config.redisUrl,
        keyspace: config.databaseSchema,
        sql: db.sql,
        logger,
        metrics,
        nodeId: config.nodeId ?? persistentNodeId(config.dataDir),
        leaseMs: config.shardLeaseMs,
      })
      directory = redisDirectory
      try {
        forwarder = await Forwarder.start({ redisUrl: config.redisUrl, keyspace: config.databaseSchema, nodeId: redisDirectory.nodeId, timeoutMs: config.forwardTimeoutMs, logger, metrics, calls: nodeCalls })
        await withTimeout(redisDirectory.start(), 5_000)
      } catch (error) {
        redisDirectory.abandon()
        await forwarder?.close()
        throw new Error(`REDIS_URL is set but Redis did not answer (${(error as Error).message}); start Redis or unset REDIS_URL`, { cause: error })
      }
      const f = forwarder
      started.push(() => f.close(), () => redisDirectory.stop())
    } else {
      directory = new LocalShardDirectory()
    }
    printerNode = await startPrinterNode(db, config, metrics, logger, clock, directory)
    started.push(() => printerNode.stop())
    mqtt = await connectMqtt(config, logger, { verifyDisplay: (username, password) => displayStore.verifyCredential(username, password) })
    started.push(() => mqtt.close())
    displayNode = await startDisplayNode({ brokerCredentials: config.mqttDisplayCredentials, db, store: displayStore, mqtt, printers: printerNode.runtime, logger, metrics, directory, forwarder, clock })
    started.push(() => displayNode.stop())
    printers = new RoutedPrinters(printerNode.runtime, directory, forwarder)
    // Printers and displays have registered their handlers: a call of the table nobody serves is a bug, found here.
    forwarder?.assertServesAll()
  } catch (error) {
    await undo()
    throw error
  }

  const routes = [...allRoutes(), ...(options.extraRoutes ?? [])]
  let openApi: string | undefined
  const sessions = new Sessions(db.sql, keyring, config.publicBaseUrl)
  const apiKeyCache = new ApiKeyCache(db.sql)
  const apiKeyUsage = new UsageLogWriter(db.sql, logger)
  const pairingWindowMs = loginFailureWindowMs
  const authenticate = createAuthenticator(db.sql, sessions, apiKeyCache)
  const live = createLiveFeed({ db, printers: printerNode.runtime, authenticate, sessions, logger, metrics, clock })
  // Display frames come from the node that runs the display's actor (relayed to the others below).
  displayNode.onLiveChange((organizationId, display) => live.hub.displayChanged(organizationId, display))
  let relay: RedisRelay | undefined
  if (config.redisUrl !== undefined) {
    try {
      relay = await RedisRelay.start(config.redisUrl, config.databaseSchema, live.hub, logger, metrics)
    } catch (error) {
      await undo()
      throw new Error(`REDIS_URL is set but Redis did not answer (${(error as Error).message}); start Redis or unset REDIS_URL`, { cause: error })
    }
    const r = relay
    started.push(() => r.close())
    live.onLocalChange((change) => r.publish(change))
    displayNode.onLiveChange((organizationId, display) => r.publishDisplay(organizationId, display))
    // The status feeds of this node's displays follow printers owned by other nodes too.
    r.onReceived((change) => displayNode.feed.printerChanged(change.printer.id))
  }
  const services: Services = {
    config,
    logger,
    metrics,
    db,
    mqtt,
    keyring,
    sessions,
    loginFailures: {
      accountAtAddress: new FailureLimiter({ limit: config.loginFailuresPerAccount, windowMs: loginFailureWindowMs }),
      address: new FailureLimiter({ limit: config.loginFailuresPerAddress, windowMs: loginFailureWindowMs }),
      account: new FailureLimiter({ limit: config.loginFailuresPerAddress, windowMs: loginFailureWindowMs }),
    },
    apiKeyCache,
    apiKeyUsage,
    printerConfig: new PrinterConfigStore(db, sealedBox, logger),
    printers,
    shards: {
      readiness: () => ({
        ok: directory instanceof RedisShardDirectory ? directory.ready : true,
        kind: directory instanceof RedisShardDirectory ? 'redis' : 'local',
        nodeId: directory.nodeId,
        owned: directory instanceof RedisShardDirectory ? directory.ownedShards().length : 256,
      }),
    },
    live,
    profiles: new ProfileStore(db.sql),
    displays: displayNode,
    pairingLimits: {
      generation: new FailureLimiter({ limit: config.authCodesPerAddress, windowMs: pairingWindowMs }),
      verifyFailures: new FailureLimiter({ limit: config.authCodeFailuresPerSource, windowMs: pairingWindowMs }),
      exchangeFailures: new FailureLimiter({ limit: config.authCodeFailuresPerSource, windowMs: pairingWindowMs }),
    },
    state,
    startedAt: Date.now(),
    openApiJson: () => (openApi ??= JSON.stringify(buildOpenApiDocument(routes, { publicBaseUrl: config.publicBaseUrl }))),
  }

  let http: HttpServer
  try {
    http = await startHttpServer({
      host: config.host,
      port: config.port,
      bodyLimitBytes: config.bodyLimitBytes,
      requestTimeoutMs: config.requestTimeoutMs,
      corsOrigins: config.corsOrigins,
      logger,
      metrics,
      routes,
      services,
      authenticate,
      attach: (app) => live.attach(app),
      onApiKeyUse: (use) =>
        apiKeyUsage.record({
          apiKeyId: use.keyId,
          usedAt: new Date(),
          method: use.method,
          route: use.route,
          status: use.status,
          remoteAddress: use.remoteAddress,
          requestId: use.requestId,
        }),
    })
  } catch (error) {
    await undo()
    throw error
  }
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host
  const url = `http://${host}:${http.port}`

  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      state.accepting = false
      logger.info('shutting down', { inFlight: http.inFlight })
      try {
        live.close()
        await http.close(config.shutdownTimeoutMs)
        // Actors finish their messages and the group commit writes its last flush before the store closes.
        await displayNode.stop().catch((error: unknown) => logger.warn('display actors stop failed', { error }))
        await printerNode.stop().catch((error: unknown) => logger.warn('printer actors stop failed', { error }))
        // Handoff: the actors drained and the group commit flushed above; only now are the leases
        // released, so the next owner hydrates after this node's last write.
        await directory.stop().catch((error: unknown) => logger.warn('releasing the shards failed; they expire by themselves', { error }))
        await forwarder?.close()
        await apiKeyUsage.close().catch((error: unknown) => logger.warn('usage log flush failed', { error }))
        await mqtt.close().catch((error: unknown) => logger.warn('MQTT close failed', { error }))
        await relay?.close()
      } finally {
        await db.close()
        stopProcessMetrics()
      }
      logger.info('stopped')
    })())

  return { port: http.port, url, services, http, bootstrap, stop }
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
