/**
 * One node of the service: configuration in, a running HTTP server out, and a
 * stop() that drains it. The CLI, the tests and the benchmarks all start the
 * service through here, so they run the same stack.
 *
 * The start is ordered so that it cannot half-succeed: the listen addresses
 * are checked before anything exists; the store, the cluster, the actors, the
 * broker and the live feed come up next, each undone in reverse if a later
 * one fails; the HTTP port is taken (exclusively) last but one; and the first
 * admin is created only once the service is up, so a password printed is a
 * password that works. Each step is one function below.
 */
import { setPasswordCost } from '../auth/passwords.js'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from './config.js'
import { withTimeout } from '../async/deadline.js'
import { createLogger, type Logger } from '../observability/log.js'
import { MetricsRegistry, registerProcessMetrics } from '../observability/metrics.js'
import { buildOpenApiDocument } from '../http/openapi.js'
import { startHttpServer, type HttpServer } from '../http/server.js'
import type { Route, RouteSchemas } from '../http/route.js'
import { assertNativeUws } from '../http/uws.js'
import { systemRoutes } from '../routes/system.js'
import type { NodeState, Services } from '../routes/route-context.js'
import { openDatabase, type Database } from '../storage/database.js'
import { migrate } from '../storage/migrate.js'
import { migrations } from '../storage/migrations/index.js'
import { connectMqtt, type MqttConnection } from '../mqtt/connection.js'
import { bootstrapAdmin } from '../auth/accounts.js'
import { createAuthenticator, type Authenticate } from '../auth/authenticate.js'
import { FailureLimiter } from '../auth/failure-limiter.js'
import { loadKeyring, type Keyring } from '../auth/keyring.js'
import { Sessions } from '../auth/sessions.js'
import { authRoutes } from '../routes/auth.js'
import { organizationRoutes } from '../routes/organizations.js'
import { apiKeyRoutes } from '../routes/api-keys.js'
import { authCodeRoutes } from '../routes/auth-codes.js'
import { ApiKeyCache, UsageLogWriter } from '../auth/api-keys.js'
import { PrinterConfigStore } from '../printers/config-store.js'
import { printerConfigRoutes } from '../routes/printer-config.js'
import { printerRoutes } from '../routes/printers.js'
import { PrinterReads } from '../printers/printer-reads.js'
import { FleetGauges } from '../printers/fleet-gauges.js'
import { printerEventRoutes } from '../routes/printer-events.js'
import { farmPageRoutes } from '../routes/farm-page.js'
import { startPrinterNode, type PrinterNode } from '../printers/runtime.js'
import { createLiveFeed, type LiveFeed } from '../live/index.js'
import { RedisRelay } from '../live/redis-relay.js'
import { queueRoutes } from '../routes/queue.js'
import { createQueueNode, type QueueNode } from '../queue/index.js'
import { queueHead } from '../queue/queue-view.js'
import { loadSealedBox } from '../secrets/sealing-key.js'
import type { SealedBox } from '../secrets/sealed-box.js'
import { signalProfileRoutes } from '../routes/signal-profiles.js'
import { displayRoutes } from '../routes/displays.js'
import { modelRoutes } from '../routes/models.js'
import { fileRoutes } from '../routes/files.js'
import { modelFileRoutes } from '../routes/model-files.js'
import { materialRoutes } from '../routes/materials.js'
import { MaterialStore } from '../materials/material-store.js'
import { inventoryRoutes } from '../routes/inventory.js'
import { SpoolStore } from '../inventory/spool-store.js'
import { MakeStore } from '../makes/make-store.js'
import { SkuStore } from '../makes/sku-store.js'
import { makeRoutes } from '../routes/makes.js'
import { skuRoutes } from '../routes/skus.js'
import { OAuthClientStore } from '../oauth/client-store.js'
import { OAuthAccessTokens } from '../oauth/access-tokens.js'
import { AgentIdentities } from '../oauth/agent-identity.js'
import { Authorization } from '../oauth/authorization.js'
import { Authorizations } from '../oauth/authorizations.js'
import { Resources } from '../oauth/resources.js'
import { TokenEndpoint } from '../oauth/token-endpoint.js'
import { oauthClientRoutes } from '../routes/oauth-clients.js'
import { oauthRoutes } from '../routes/oauth.js'
import { agentIdentityRoutes } from '../routes/agent-identity.js'
import { discoveryRoutes } from '../routes/discovery.js'
import { oauthAuthorizationRoutes } from '../routes/oauth-authorizations.js'
import { mcpRouteList } from '../routes/mcp.js'
import { createFileNode, type FileNode } from '../files/index.js'
import { createJobNode, type JobNode } from '../jobs/index.js'
import { HostBindings } from '../auth/host-binding.js'
import { printJobRoutes } from '../routes/print-jobs.js'
import { printerTaskRoutes } from '../routes/printer-tasks.js'
import { DisplayStore } from '../displays/display-store.js'
import { ProfileStore } from '../displays/profile-store.js'
import { startDisplayNode, type DisplayNode } from '../displays/index.js'
import { systemClock, type Clock } from '../../actors/clock.js'
import { LocalShardDirectory, type ShardDirectory } from '../../actors/shard-directory.js'
import { RedisShardDirectory } from '../cluster/redis-shard-directory.js'
import { Forwarder } from '../cluster/forwarder.js'
import { nodeCalls } from '../../protocol/node-calls.js'
import { RoutedPrinters } from '../cluster/routed-printers.js'
import { checkListenAddresses } from '../startup/preflight.js'
import { StartedParts } from '../startup/started-parts.js'
import { connect, coreReactions, liveReactions, relayReactions } from './reactions.js'

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

/** Window of the failed sign-in limits (LOGIN_FAILURES_PER_ACCOUNT / _PER_ADDRESS count within it). */
const loginFailureWindowMs = 15 * 60 * 1000

export interface StartOptions {
  logger?: Logger
  /** Extra routes (tests mount probes of the adapter here). */
  extraRoutes?: readonly Route<RouteSchemas, Services>[]
  /** The node's one clock (tests hold time still and count the timers a stop leaves). */
  clock?: Clock
}

/** Every route of the service, in one table: served, documented, scoped. */
export function allRoutes(): readonly Route<RouteSchemas, Services>[] {
  return [...systemRoutes, ...authRoutes, ...organizationRoutes, ...apiKeyRoutes, ...authCodeRoutes, ...oauthRoutes, ...oauthClientRoutes, ...agentIdentityRoutes, ...oauthAuthorizationRoutes, ...discoveryRoutes, ...mcpRouteList, ...printerConfigRoutes, ...printerRoutes, ...printerEventRoutes, ...modelRoutes, ...fileRoutes, ...modelFileRoutes, ...materialRoutes, ...inventoryRoutes, ...makeRoutes, ...skuRoutes, ...printJobRoutes, ...queueRoutes, ...printerTaskRoutes, ...signalProfileRoutes, ...displayRoutes, ...farmPageRoutes]
}

/** The long-lived parts below the HTTP layer: store, secrets, cluster, actors, broker. */
interface Core {
  readonly db: Database
  readonly metrics: MetricsRegistry
  readonly state: NodeState
  readonly sealedBox: SealedBox
  readonly keyring: Keyring
  readonly directory: ShardDirectory
  readonly forwarder: Forwarder | undefined
  /** The one clock of this node's actors and live feed. */
  readonly clock: Clock
  readonly printerNode: PrinterNode
  /** The printer actors, on this node or reached through their owner. */
  readonly printers: RoutedPrinters
  readonly mqtt: MqttConnection
  readonly displayNode: DisplayNode
  readonly files: FileNode
  readonly jobs: JobNode
  readonly queue: QueueNode
  readonly hostBindings: HostBindings
}

export async function startService(config: Config, options: StartOptions = {}): Promise<RunningService> {
  const began = performance.now()
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? createLogger(config.logLevel, { now: clock.now })
  // Fail before creating anything when the server could not run anyway.
  assertNativeUws()
  await checkListenAddresses(config)
  setPasswordCost(config.passwordHashCost)
  const parts = new StartedParts(logger)
  try {
    const core = await startCore(config, logger, parts, clock)
    const now = () => core.clock.now()
    const sessions = new Sessions(core.db.sql, core.keyring, config.publicBaseUrl, now)
    const apiKeyCache = new ApiKeyCache(core.db.sql, { now })
    const oauthTokens = new OAuthAccessTokens(core.keyring, config.publicBaseUrl, config.oauthAccessTtlSeconds, now)
    const authenticate = createAuthenticator(core.db.sql, sessions, apiKeyCache, oauthTokens, now)
    const live = await startLive(config, logger, core, authenticate, sessions, parts)
    const routes = [...allRoutes(), ...(options.extraRoutes ?? [])]
    const services = wireServices(config, logger, core, live, { sessions, apiKeyCache, oauthTokens, routes })
    parts.add('api key usage log', () => services.apiKeyUsage.close())
    const http = await startHttpServer({
      host: config.host,
      port: config.port,
      bodyLimitBytes: config.bodyLimitBytes,
      requestTimeoutMs: config.requestTimeoutMs,
      timers: core.clock,
      corsOrigins: config.corsOrigins,
      trustedProxies: config.trustedProxies,
      checkResponses: config.checkResponses,
      logger,
      metrics: core.metrics,
      routes,
      services,
      authenticate,
      attach: (app) => live.attach(app),
      onApiKeyUse: (use) =>
        services.apiKeyUsage.record({
          apiKeyId: use.keyId,
          usedAt: new Date(core.clock.now()),
          method: use.method,
          route: use.route,
          status: use.status,
          remoteAddress: use.remoteAddress,
          requestId: use.requestId,
        }),
    })
    // Stopped first: no new request, and those in flight finish (up to SHUTDOWN_TIMEOUT_MS) before anything below them closes.
    parts.add('http', () => http.close(config.shutdownTimeoutMs))
    const bootstrap = await createFirstAdmin(core.db, config, logger)
    core.state.accepting = true
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host
    let stopping: Promise<void> | undefined
    return {
      port: http.port,
      url: `http://${host}:${http.port}`,
      services,
      http,
      bootstrap,
      startupMs: Math.round(performance.now() - began),
      stop: () => (stopping ??= stopNode(logger, core.state, http, parts)),
    }
  } catch (error) {
    await parts.undo()
    throw error
  }
}

async function startCore(config: Config, logger: Logger, parts: StartedParts, clock: Clock): Promise<Core> {
  const nodeId = config.nodeId ?? persistentNodeId(config.dataDir)
  const db = await openDatabase(config, logger, clock, `printfarm ${nodeId}`)
  parts.add('store', () => db.close())
  const metrics = new MetricsRegistry()
  const stopProcessMetrics = registerProcessMetrics(metrics, clock.now)
  parts.add('process metrics', stopProcessMetrics)
  // Not ready (GET /readyz) until the whole start is done, the first admin included.
  const state: NodeState = { migrationsVersion: 0, accepting: false }
  state.migrationsVersion = (await migrate(db.sql, config.databaseSchema, migrations, logger)).version
  const sealedBox = await loadSealedBox(db.sql, config.secretKey, logger)
  const keyring = await loadKeyring(db.sql, sealedBox, logger, () => clock.now())
  const { directory, forwarder } = await startCluster(config, logger, db, metrics, parts, nodeId, clock)
  const printerNode = await startPrinterNode(db, config, metrics, logger, clock, directory)
  parts.add('printers', () => printerNode.stop())
  const displayStore = new DisplayStore(db.sql, () => clock.now())
  const mqtt = await connectMqtt(config, logger, { verifyDisplay: (username, password) => displayStore.verifyCredential(username, password) })
  parts.add('mqtt', () => mqtt.close())
  if (config.mqttUrl !== undefined && config.mqttDisplayCredentials === 'none') {
    logger.warn(
      'status displays are off: MQTT_URL names an external broker and MQTT_DISPLAY_CREDENTIALS is none, so the service cannot give displays credentials; display registration answers 503 MQTT_DISPLAY_NOT_CONFIGURED (set MQTT_DISPLAY_CREDENTIALS=dynamic-security for Mosquitto, see docs/displays.md)',
    )
  }
  const displayNode = await startDisplayNode({ brokerCredentials: config.mqttDisplayCredentials, db, store: displayStore, mqtt, printers: printerNode.runtime, logger, metrics, directory, forwarder, clock })
  parts.add('displays', () => displayNode.stop())
  const printers = new RoutedPrinters(printerNode.runtime, directory, forwarder)
  const files = createFileNode(config, db, sealedBox, logger, metrics, clock)
  files.start()
  parts.add('files', () => files.close())
  const hostBindings = new HostBindings(db.sql)
  const jobs = createJobNode(config, db, sealedBox, files, logger, metrics, clock, printerNode.taskEvents)
  const queue = createQueueNode(config, db, jobs.dispatcher, directory, clock, logger, metrics, printerNode.taskEvents)
  connect(coreReactions(printerNode, jobs, queue))
  jobs.start()
  parts.add('jobs', () => jobs.close())
  queue.start()
  parts.add('queue', () => queue.close())
  // Printers and displays have registered their handlers: a call of the table nobody serves is a bug, found here.
  forwarder?.assertServesAll()
  return { db, metrics, state, sealedBox, keyring, directory, forwarder, clock, printerNode, printers, mqtt, displayNode, files, jobs, queue, hostBindings }
}

/** With Redis the nodes share the shards (docs/operations.md); without it this node owns them all. */
async function startCluster(
  config: Config,
  logger: Logger,
  db: Database,
  metrics: MetricsRegistry,
  parts: StartedParts,
  nodeId: string,
  clock: Clock,
): Promise<{ directory: ShardDirectory; forwarder: Forwarder | undefined }> {
  if (config.redisUrl === undefined) return { directory: new LocalShardDirectory(), forwarder: undefined }
  const directory = new RedisShardDirectory({
    redisUrl: config.redisUrl,
    keyspace: config.databaseSchema,
    sql: db.sql,
    logger,
    metrics,
    nodeId,
    leaseMs: config.shardLeaseMs,
    clock,
  })
  let forwarder: Forwarder | undefined
  try {
    forwarder = await Forwarder.start({ redisUrl: config.redisUrl, keyspace: config.databaseSchema, nodeId: directory.nodeId, timeoutMs: config.forwardTimeoutMs, logger, metrics, calls: nodeCalls, timers: clock })
    await withTimeout(directory.start(), 5_000, clock)
  } catch (error) {
    directory.abandon()
    await forwarder?.close()
    throw redisUnreachable(error)
  }
  const started = forwarder
  parts.add('node calls', () => started.close())
  parts.add('shard leases', () => directory.stop())
  return { directory, forwarder }
}

/** Jobs the live `queue` topic shows (the head of the queue; GET /v1/queue pages through all). */
const liveQueueLength = 100

/** The live feed, with its relay to other nodes when Redis is configured. */
async function startLive(config: Config, logger: Logger, core: Core, authenticate: Authenticate, sessions: Sessions, parts: StartedParts): Promise<LiveFeed> {
  const feed = createLiveFeed({ db: core.db, printers: core.printerNode.runtime, tasks: core.jobs.dispatcher, queue: (organizationId) => queueHead(core.db.sql, organizationId, core.queue.settings, core.clock.now(), liveQueueLength), checkHost: (principal, hostId) => core.hostBindings.check(principal, hostId), authenticate, sessions, logger, metrics: core.metrics, clock: core.clock })
  parts.add('live feed', () => feed.close())
  connect(liveReactions(feed, core.queue, core.displayNode))
  if (config.redisUrl === undefined) return feed
  let relay: RedisRelay
  try {
    relay = await RedisRelay.start(config.redisUrl, config.databaseSchema, feed.hub, logger, core.metrics, core.clock)
  } catch (error) {
    throw redisUnreachable(error)
  }
  parts.add('live relay', () => relay.close())
  connect(relayReactions(relay, feed, core.queue, core.displayNode))
  return feed
}

/** What route handlers are given (pure construction: nothing here starts or connects). */
function wireServices(
  config: Config,
  logger: Logger,
  core: Core,
  live: LiveFeed,
  shared: { sessions: Sessions; apiKeyCache: ApiKeyCache; oauthTokens: OAuthAccessTokens; routes: readonly Route<RouteSchemas, Services>[] },
): Services {
  const { db, directory } = core
  const now = () => core.clock.now()
  let openApi: string | undefined
  const redis = directory instanceof RedisShardDirectory ? directory : undefined
  const printerReads = new PrinterReads(db, core.clock)
  const oauthClients = new OAuthClientStore(db.sql, logger, now)
  const resources = new Resources(config.publicBaseUrl)
  const agents = new AgentIdentities(db.sql, core.keyring, shared.oauthTokens, resources, { claimTtlSeconds: config.agentClaimTtlSeconds, assertionTtlSeconds: config.oauthRefreshTtlSeconds }, logger, () => core.clock.now())
  return {
    config,
    logger,
    metrics: core.metrics,
    db,
    mqtt: core.mqtt,
    keyring: core.keyring,
    sessions: shared.sessions,
    oauthTokens: shared.oauthTokens,
    loginFailures: {
      accountAtAddress: new FailureLimiter({ limit: config.loginFailuresPerAccount, windowMs: loginFailureWindowMs }),
      address: new FailureLimiter({ limit: config.loginFailuresPerAddress, windowMs: loginFailureWindowMs }),
      account: new FailureLimiter({ limit: config.loginFailuresPerAddress, windowMs: loginFailureWindowMs }),
    },
    apiKeyCache: shared.apiKeyCache,
    apiKeyUsage: new UsageLogWriter(db.sql, logger, core.clock),
    printerConfig: new PrinterConfigStore(db, core.sealedBox, logger, now),
    printers: core.printers,
    printerReads,
    fleetGauges: new FleetGauges(printerReads, core.metrics, core.clock, logger),
    clock: core.clock,
    shards: {
      readiness: () => ({
        ok: redis?.ready ?? true,
        kind: redis === undefined ? 'local' : 'redis',
        nodeId: directory.nodeId,
        owned: redis?.ownedShards().length ?? 256,
      }),
    },
    live,
    profiles: new ProfileStore(db.sql, now),
    displays: core.displayNode,
    files: core.files,
    materials: new MaterialStore(db.sql, now),
    inventory: new SpoolStore(db.sql),
    makes: new MakeStore(db.sql, now),
    skus: new SkuStore(db.sql, now),
    oauthClients,
    oauthServer: {
      resources,
      authorization: new Authorization(db.sql, oauthClients, resources, config.publicBaseUrl, config.oauthCodeTtlSeconds, logger, core.sealedBox.derivedKeys('oauth-consent'), () => core.clock.now()),
      tokens: new TokenEndpoint(db.sql, { clients: oauthClients, tokens: shared.oauthTokens, resources, agents }, config.oauthRefreshTtlSeconds, logger, () => core.clock.now()),
      agents,
      authorizations: new Authorizations(db.sql, logger, () => core.clock.now()),
      failures: new FailureLimiter({ limit: config.oauthFailuresPerAddress, windowMs: loginFailureWindowMs }),
      agentStarts: new FailureLimiter({ limit: config.agentIdentitiesPerAddress, windowMs: loginFailureWindowMs }),
    },
    oauthRegistrations: new FailureLimiter({ limit: config.oauthRegistrationsPerAddress, windowMs: loginFailureWindowMs }),
    jobs: core.jobs,
    queue: core.queue,
    hostBindings: core.hostBindings,
    pairingLimits: {
      generation: new FailureLimiter({ limit: config.authCodesPerAddress, windowMs: loginFailureWindowMs }),
      verifyFailures: new FailureLimiter({ limit: config.authCodeFailuresPerSource, windowMs: loginFailureWindowMs }),
      exchangeFailures: new FailureLimiter({ limit: config.authCodeFailuresPerSource, windowMs: loginFailureWindowMs }),
    },
    state: core.state,
    startedAt: core.clock.now(),
    openApiJson: () => (openApi ??= JSON.stringify(buildOpenApiDocument(shared.routes, { publicBaseUrl: config.publicBaseUrl }))),
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

/**
 * Graceful stop: the same teardown as a failed start, every part in the reverse order of its start,
 * which is the order that loses nothing. The HTTP server drains first (a batch answered is a batch
 * flushed), then the live feed and its relay, the queue and job sweeps, the displays and the broker,
 * the printer actors (their last flush), the shards' leases (released only after that last write,
 * so the next owner hydrates after it), the cluster and, last, the store.
 */
async function stopNode(logger: Logger, state: NodeState, http: HttpServer, parts: StartedParts): Promise<void> {
  state.accepting = false
  logger.info('shutting down', { inFlight: http.inFlight })
  await parts.undo()
  logger.info('stopped')
}

function redisUnreachable(error: unknown): Error {
  return new Error(`REDIS_URL is set but Redis did not answer (${(error as Error).message}); start Redis or unset REDIS_URL`, { cause: error })
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
