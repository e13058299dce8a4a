/**
 * The parts of a node, each once: its name, what it needs, how it starts and stops
 * (src/startup/parts.ts). The node starts them in the order their needs give and stops them in
 * reverse, which is the order that loses nothing: the HTTP server drains first (a batch answered
 * is a batch flushed), then the live feed and its relay, the queue and job sweeps, the displays
 * and the broker, the printer actors (their last flush), the shards' leases (released only after
 * that last write, so the next owner hydrates after it), the node calls and, last, the store.
 * What one part does when another changes is in reactions.ts.
 */
import type { Config } from './config.js'
import { withTimeout } from '../async/deadline.js'
import type { Logger } from '../observability/log.js'
import { MetricsRegistry, registerProcessMetrics } from '../observability/metrics.js'
import { startHttpServer, type HttpServer } from '../http/server.js'
import type { Route, RouteSchemas } from '../http/route.js'
import type { NodeState, Services } from '../routes/route-context.js'
import { openDatabase, type Database } from '../storage/database.js'
import { migrate } from '../storage/migrate.js'
import { migrations } from '../storage/migrations/index.js'
import { connectMqtt, type MqttConnection } from '../mqtt/connection.js'
import { createAuthenticator, type Authenticate } from '../auth/authenticate.js'
import { loadKeyring, type Keyring } from '../auth/keyring.js'
import { Sessions } from '../auth/sessions.js'
import { ApiKeyCache } from '../auth/api-keys.js'
import { HostBindings } from '../auth/host-binding.js'
import { OAuthAccessTokens } from '../oauth/access-tokens.js'
import { startPrinterNode, type PrinterNode } from '../printers/runtime.js'
import { createLiveFeed, type LiveFeed } from '../live/index.js'
import { RedisRelay } from '../live/redis-relay.js'
import { createQueueNode, type QueueNode } from '../queue/index.js'
import { queueHead } from '../queue/queue-view.js'
import { loadSealedBox } from '../secrets/sealing-key.js'
import type { SealedBox } from '../secrets/sealed-box.js'
import { createFileNode, type FileNode } from '../files/index.js'
import { createJobNode, type JobNode } from '../jobs/index.js'
import { DisplayStore } from '../displays/display-store.js'
import { startDisplayNode, type DisplayNode } from '../displays/index.js'
import type { Clock } from '../../actors/clock.js'
import { LocalShardDirectory, type ShardDirectory } from '../../actors/shard-directory.js'
import { RedisShardDirectory } from '../cluster/redis-shard-directory.js'
import { Forwarder } from '../cluster/forwarder.js'
import { nodeCalls } from '../../protocol/node-calls.js'
import { RoutedPrinters } from '../cluster/routed-printers.js'
import { definePart, type AnyPart } from '../startup/parts.js'
import { routeContext } from './route-context.js'

/** Every part of a node by name, with what it gives the parts that need it. The first four are given to the start. */
export interface NodeParts {
  readonly config: Config
  readonly logger: Logger
  readonly clock: Clock
  /** This node's id in the cluster (NODE_ID, or the one kept in DATA_DIR). */
  readonly nodeId: string
  /** Every route the node serves (the service's, and a test's probes). */
  readonly routes: readonly Route<RouteSchemas, Services>[]
  readonly store: Database
  readonly metrics: MetricsRegistry
  /** The process gauges (memory, event-loop delay) on the registry; stopping them ends the delay monitor. */
  readonly processMetrics: () => void
  /** The schema migrated; readiness reads it, the stop and the end of the start set `accepting`. */
  readonly state: NodeState
  readonly secrets: { readonly sealedBox: SealedBox; readonly keyring: Keyring }
  /** Node-to-node calls through Redis; absent on a node alone. */
  readonly nodeCalls: Forwarder | undefined
  /** Which node owns which shard (local: this one owns them all). */
  readonly shards: ShardDirectory
  readonly printers: PrinterNode
  /** The printer actors, on this node or reached through their owner. */
  readonly routedPrinters: RoutedPrinters
  readonly displayStore: DisplayStore
  readonly mqtt: MqttConnection
  readonly displays: DisplayNode
  /** The check that every node call has its handler (printers and displays registered theirs). */
  readonly callsServed: true
  readonly files: FileNode
  readonly hostBindings: HostBindings
  readonly jobs: JobNode
  readonly queue: QueueNode
  /** Job sweeps and queue passes running (after the reactions between printers, jobs and queue are connected). */
  readonly sweeps: true
  readonly auth: { readonly sessions: Sessions; readonly apiKeyCache: ApiKeyCache; readonly oauthTokens: OAuthAccessTokens; readonly authenticate: Authenticate }
  readonly live: LiveFeed
  /** The live feed's relay to the other nodes; absent on a node alone. */
  readonly relay: RedisRelay | undefined
  /** What the route handlers are given (each takes its area's slice). */
  readonly services: Services
  readonly http: HttpServer
}

/** What a node's start is given; every other part it starts. */
export type GivenParts = Pick<NodeParts, 'config' | 'logger' | 'clock' | 'nodeId' | 'routes'>

const part = definePart<NodeParts>()

/** Jobs the live `queue` topic shows (the head of the queue; GET /v1/queue pages through all). */
const liveQueueLength = 100

export const nodeParts: readonly AnyPart<NodeParts>[] = [
  part({
    name: 'store',
    needs: ['config', 'logger', 'clock', 'nodeId'],
    start: ({ config, logger, clock, nodeId }) => openDatabase(config, logger, clock, `printfarm ${nodeId}`),
    stop: (db) => db.close(),
  }),
  part({
    name: 'metrics',
    needs: [],
    start: () => new MetricsRegistry(),
  }),
  part({
    name: 'processMetrics',
    needs: ['metrics', 'clock'],
    start: ({ metrics, clock }) => registerProcessMetrics(metrics, clock.now),
    stop: (stopGauges) => stopGauges(),
  }),
  part({
    name: 'state',
    needs: ['store', 'config', 'logger'],
    // Not ready (GET /readyz) until the whole start is done, the first admin included.
    start: async ({ store, config, logger }) => ({ migrationsVersion: (await migrate(store.sql, config.databaseSchema, migrations, logger)).version, accepting: false }),
  }),
  part({
    name: 'secrets',
    needs: ['store', 'state', 'config', 'logger', 'clock'],
    start: async ({ store, config, logger, clock }) => {
      const sealedBox = await loadSealedBox(store.sql, config.secretKey, logger)
      return { sealedBox, keyring: await loadKeyring(store.sql, sealedBox, logger, () => clock.now()) }
    },
  }),
  part({
    name: 'nodeCalls',
    needs: ['config', 'logger', 'metrics', 'clock', 'nodeId', 'state'],
    start: async ({ config, logger, metrics, clock, nodeId }) => {
      if (config.redisUrl === undefined) return undefined
      return Forwarder.start({ redisUrl: config.redisUrl, keyspace: config.databaseSchema, nodeId, timeoutMs: config.forwardTimeoutMs, logger, metrics, calls: nodeCalls, timers: clock }).catch((error: unknown) => {
        throw redisUnreachable(error)
      })
    },
    stop: (forwarder) => forwarder?.close(),
  }),
  part({
    name: 'shards',
    // nodeCalls: the node takes shards only once it answers the calls other nodes send their owner.
    needs: ['config', 'logger', 'store', 'metrics', 'clock', 'nodeId', 'nodeCalls'],
    start: async ({ config, logger, store, metrics, clock, nodeId }) => {
      if (config.redisUrl === undefined) return new LocalShardDirectory()
      const directory = new RedisShardDirectory({ redisUrl: config.redisUrl, keyspace: config.databaseSchema, sql: store.sql, logger, metrics, nodeId, leaseMs: config.shardLeaseMs, clock })
      try {
        await withTimeout(directory.start(), 5_000, clock)
      } catch (error) {
        directory.abandon()
        throw redisUnreachable(error)
      }
      return directory
    },
    stop: (directory) => (directory instanceof RedisShardDirectory ? directory.stop() : undefined),
  }),
  part({
    name: 'printers',
    needs: ['store', 'config', 'metrics', 'logger', 'clock', 'shards'],
    start: ({ store, config, metrics, logger, clock, shards }) => startPrinterNode(store, config, metrics, logger, clock, shards),
    stop: (printers) => printers.stop(),
  }),
  part({
    name: 'routedPrinters',
    needs: ['printers', 'shards', 'nodeCalls'],
    start: ({ printers, shards, nodeCalls }) => new RoutedPrinters(printers.runtime, shards, nodeCalls),
  }),
  part({
    name: 'displayStore',
    needs: ['store', 'clock'],
    start: ({ store, clock }) => new DisplayStore(store.sql, () => clock.now()),
  }),
  part({
    name: 'mqtt',
    needs: ['config', 'logger', 'displayStore'],
    start: async ({ config, logger, displayStore }) => {
      const mqtt = await connectMqtt(config, logger, { verifyDisplay: (username, password) => displayStore.verifyCredential(username, password) })
      if (config.mqttUrl !== undefined && config.mqttDisplayCredentials === 'none') {
        logger.warn(
          'status displays are off: MQTT_URL names an external broker and MQTT_DISPLAY_CREDENTIALS is none, so the service cannot give displays credentials; display registration answers 503 MQTT_DISPLAY_NOT_CONFIGURED (set MQTT_DISPLAY_CREDENTIALS=dynamic-security for Mosquitto, see docs/displays.md)',
        )
      }
      return mqtt
    },
    stop: (mqtt) => mqtt.close(),
  }),
  part({
    name: 'displays',
    needs: ['config', 'store', 'displayStore', 'mqtt', 'printers', 'logger', 'metrics', 'shards', 'nodeCalls', 'clock'],
    start: (p) =>
      startDisplayNode({
        brokerCredentials: p.config.mqttDisplayCredentials,
        db: p.store,
        store: p.displayStore,
        mqtt: p.mqtt,
        printers: p.printers.runtime,
        logger: p.logger,
        metrics: p.metrics,
        directory: p.shards,
        forwarder: p.nodeCalls,
        clock: p.clock,
      }),
    stop: (displays) => displays.stop(),
  }),
  part({
    name: 'callsServed',
    // A call of the table nobody serves is a bug, found here rather than by another node's call.
    needs: ['nodeCalls', 'printers', 'displays'],
    start: ({ nodeCalls }) => {
      nodeCalls?.assertServesAll()
      return true as const
    },
  }),
  part({
    name: 'files',
    needs: ['config', 'store', 'secrets', 'logger', 'metrics', 'clock'],
    start: ({ config, store, secrets, logger, metrics, clock }) => {
      const files = createFileNode(config, store, secrets.sealedBox, logger, metrics, clock)
      files.start()
      return files
    },
    stop: (files) => files.close(),
  }),
  part({
    name: 'hostBindings',
    needs: ['store'],
    start: ({ store }) => new HostBindings(store.sql),
  }),
  part({
    name: 'jobs',
    needs: ['config', 'store', 'secrets', 'files', 'logger', 'metrics', 'clock', 'printers'],
    start: ({ config, store, secrets, files, logger, metrics, clock, printers }) => createJobNode(config, store, secrets.sealedBox, files, logger, metrics, clock, printers.taskEvents),
  }),
  part({
    name: 'queue',
    needs: ['config', 'store', 'jobs', 'shards', 'clock', 'logger', 'metrics', 'printers'],
    start: ({ config, store, jobs, shards, clock, logger, metrics, printers }) => createQueueNode(config, store, jobs.dispatcher, shards, clock, logger, metrics, printers.taskEvents),
  }),
  part({
    name: 'sweeps',
    needs: ['jobs', 'queue'],
    start: ({ jobs, queue }) => {
      jobs.start()
      queue.start()
      return true as const
    },
    // The queue's passes end before the job sweeps, the reverse of their start.
    stop: (_, { jobs, queue }) => {
      queue.close()
      jobs.close()
    },
  }),
  part({
    name: 'auth',
    needs: ['store', 'secrets', 'config', 'clock'],
    start: ({ store, secrets, config, clock }) => {
      const now = () => clock.now()
      const sessions = new Sessions(store.sql, secrets.keyring, config.publicBaseUrl, now)
      const apiKeyCache = new ApiKeyCache(store.sql, { now })
      const oauthTokens = new OAuthAccessTokens(secrets.keyring, config.publicBaseUrl, config.oauthAccessTtlSeconds, now)
      return { sessions, apiKeyCache, oauthTokens, authenticate: createAuthenticator(store.sql, sessions, apiKeyCache, oauthTokens, now) }
    },
  }),
  part({
    name: 'live',
    needs: ['store', 'printers', 'jobs', 'queue', 'hostBindings', 'auth', 'logger', 'metrics', 'clock'],
    start: (p) =>
      createLiveFeed({
        db: p.store,
        printers: p.printers.runtime,
        tasks: p.jobs.dispatcher,
        queue: (organizationId) => queueHead(p.store.sql, organizationId, p.queue.settings, p.clock.now(), liveQueueLength),
        checkHost: (principal, hostId) => p.hostBindings.check(principal, hostId),
        authenticate: p.auth.authenticate,
        sessions: p.auth.sessions,
        logger: p.logger,
        metrics: p.metrics,
        clock: p.clock,
      }),
    stop: (feed) => feed.close(),
  }),
  part({
    name: 'relay',
    needs: ['config', 'live', 'logger', 'metrics', 'clock'],
    start: async ({ config, live, logger, metrics, clock }) => {
      if (config.redisUrl === undefined) return undefined
      return RedisRelay.start(config.redisUrl, config.databaseSchema, live.hub, logger, metrics, clock).catch((error: unknown) => {
        throw redisUnreachable(error)
      })
    },
    stop: (relay) => relay?.close(),
  }),
  part({
    name: 'services',
    needs: ['config', 'logger', 'clock', 'routes', 'store', 'metrics', 'state', 'secrets', 'shards', 'routedPrinters', 'mqtt', 'displays', 'files', 'jobs', 'queue', 'hostBindings', 'auth', 'live'],
    start: (p) => routeContext(p),
    stop: (services) => services.apiKeyUsage.close(),
  }),
  part({
    name: 'http',
    needs: ['config', 'logger', 'clock', 'metrics', 'routes', 'services', 'auth', 'live', 'sweeps', 'relay', 'callsServed'],
    start: ({ config, logger, clock, metrics, routes, services, auth, live }) =>
      startHttpServer({
        host: config.host,
        port: config.port,
        bodyLimitBytes: config.bodyLimitBytes,
        requestTimeoutMs: config.requestTimeoutMs,
        timers: clock,
        corsOrigins: config.corsOrigins,
        trustedProxies: config.trustedProxies,
        checkResponses: config.checkResponses,
        logger,
        metrics,
        routes,
        services,
        authenticate: auth.authenticate,
        attach: (app) => live.attach(app),
        onApiKeyUse: (use) =>
          services.apiKeyUsage.record({
            apiKeyId: use.keyId,
            usedAt: new Date(clock.now()),
            method: use.method,
            route: use.route,
            status: use.status,
            remoteAddress: use.remoteAddress,
            requestId: use.requestId,
          }),
      }),
    // Stopped first: no new request, and those in flight finish (up to SHUTDOWN_TIMEOUT_MS) before anything below them closes.
    stop: (http, { config }) => http.close(config.shutdownTimeoutMs),
  }),
]

function redisUnreachable(error: unknown): Error {
  return new Error(`REDIS_URL is set but Redis did not answer (${(error as Error).message}); start Redis or unset REDIS_URL`, { cause: error })
}
