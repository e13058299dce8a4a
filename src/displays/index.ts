/**
 * The status-display part of a node: the store, the display actors with
 * their delivery worker, the MQTT gateway and the status feed, wired
 * together and stopped in order.
 *
 * Several nodes: the owner of a display's shard runs its actor, answers its
 * device messages and publishes its profile and status feed; the API calls
 * that go through the actor (assign, retry, rebind) are forwarded to it, and
 * changes made elsewhere (rename, pixels, delete) are announced to it. The
 * rebind answer carries the new one-time password back from the owner over
 * Redis, like every forwarded answer: Redis is the deployment's internal
 * transport, not a public one.
 */
import type { Clock } from '../../actors/clock.js'
import { DisplayRuntime } from '../../actors/display-runtime.js'
import type { AssignRequest, StoredActivation } from '../../actors/display-persistence.js'
import type { DisplayOp, NodeCallArgs, NodeCallResult } from '../../protocol/node-calls.js'
import { LocalShardDirectory, shardOf, type ShardDirectory } from '../../actors/shard-directory.js'
import { ServiceError } from '../../protocol/errors.js'
import type { Forwarder } from '../cluster/forwarder.js'
import { local, OwnerUnavailable, routeToOwner } from '../cluster/route-to-owner.js'
import type { PrinterRuntime } from '../../actors/printer-runtime.js'
import { configTopic, feedTopic } from '../../protocol/display-mqtt.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { MqttConnection } from '../mqtt/connection.js'
import type { Database } from '../storage/database.js'
import { Snapshots } from '../live/snapshots.js'
import type { DisplayStore } from './display-store.js'
import { DisplayGateway } from './mqtt-gateway.js'
import { StatusFeed } from './status-feed.js'
import { DisplayLiveChanges, type DisplayLiveListener } from './live-changes.js'
import { DynamicSecurity } from '../mqtt/dynamic-security.js'
import { DynsecCredentials, EmbeddedCredentials, UnenforcedCredentials, type BrokerCredentials } from './broker-credentials.js'

export interface DisplayNode {
  readonly store: DisplayStore
  readonly runtime: DisplayRuntime
  readonly gateway: DisplayGateway
  /** How the broker learns and forgets display credentials. */
  readonly credentials: BrokerCredentials
  readonly feed: StatusFeed
  /** A display was registered, renamed, changed its pixels or was rebound: its status feed and its live view follow. */
  changed(organizationId: string, displayId: string): void
  /** Committed display changes, as the live feed's `displays` topic shows them; `wants` says whether the listener needs an organization's now. */
  onLiveChange(listener: DisplayLiveListener, wants?: (organizationId: string) => boolean): () => void
  /** Deletes a display: credential revoked and disconnected, retained messages removed. */
  remove(organizationId: string, displayId: string): Promise<void>
  /** docs/displays.md: through the display's actor, on whichever node owns it. */
  assign(displayId: string, request: AssignRequest): Promise<StoredActivation>
  retry(displayId: string, organizationId: string): Promise<StoredActivation>
  rebind(displayId: string, organizationId: string): Promise<{ current: StoredActivation; username: string; password: string }>
  stop(): Promise<void>
}

export interface DisplayNodeOptions {
  /** How an external broker learns display credentials (MQTT_DISPLAY_CREDENTIALS); the embedded broker needs nothing. */
  brokerCredentials: 'none' | 'dynamic-security'
  db: Database
  store: DisplayStore
  mqtt: MqttConnection
  printers: PrinterRuntime
  logger: Logger
  metrics: MetricsRegistry
  /** Who owns which display (local: this node owns all). */
  directory?: ShardDirectory
  /** Node-to-node calls, with several nodes. */
  forwarder?: Forwarder | undefined
  /** The node's clock (the display actors' delivery timers; the printers' display status). */
  clock: Clock
}

export async function startDisplayNode(options: DisplayNodeOptions): Promise<DisplayNode> {
  const { store, mqtt, logger, metrics } = options
  const credentials = await brokerCredentials(options)
  const gateway = new DisplayGateway(mqtt, credentials, store, logger, metrics, options.clock)
  const publications = metrics.counter('display_profile_publications_total', 'Profile envelope publications by outcome and kind (new activation or republish).', ['outcome', 'kind'])
  const liveChanges = new DisplayLiveChanges(store, logger)
  const directory: ShardDirectory = options.directory ?? new LocalShardDirectory()
  const owns = (displayId: string) => directory.ownsShard(shardOf(displayId))
  const runtime = new DisplayRuntime({
    persistence: store,
    directory,
    transport: gateway,
    clock: options.clock,
    onChange: (stored) => liveChanges.storedChanged(stored),
    onPublish: (outcome, kind) => publications.inc({ outcome, kind }),
    onBackgroundError: (what, error) => logger.warn(`display ${what} failed`, { error }),
  })
  const feed = new StatusFeed({ store, snapshots: new Snapshots(options.db, options.clock), publish: (topic, payload) => gateway.publishRetained(topic, payload), logger, owns, clock: options.clock })
  const reloadFeed = (displayId: string) => void feed.reload(displayId).catch((error: unknown) => logger.warn('status feed reload failed', { displayId, error }))
  await gateway.attach(runtime, { onResync: reloadFeed, onCapabilities: (address) => liveChanges.changed(address.organizationId, address.displayId), owns })
  const unsubscribeShards = [
    directory.onShardGained((shards) => {
      const taken = new Set(shards)
      feed.resume((id) => taken.has(shardOf(id))).catch((error: unknown) => logger.warn('status feed resume failed', { shards, error }))
    }),
    directory.onShardLost((shard) => feed.drop((id) => shardOf(id) === shard)),
  ]
  const forwarder = options.forwarder
  /** Runs `here` when this node owns the display, else asks the owner; 503 display_owner_unavailable while none can answer. */
  const route = async <Op extends DisplayOp>(displayId: string, op: Op, args: NodeCallArgs<Op>, here: () => Promise<NodeCallResult<Op>>): Promise<NodeCallResult<Op>> => {
    if (forwarder === undefined) return here()
    try {
      const remote = await routeToOwner(directory, forwarder, shardOf(displayId), op, () => args)
      return remote === local ? here() : remote
    } catch (error) {
      if (!(error instanceof OwnerUnavailable)) throw error
      const message = error.noOwner ? "no node holds the display's shard right now (it is moving after a node left); retry" : `${error.message}; retry`
      throw new ServiceError('display_owner_unavailable', message, { cause: error })
    }
  }
  const changedHere = async (organizationId: string, displayId: string): Promise<null> => {
    reloadFeed(displayId)
    liveChanges.changed(organizationId, displayId)
    return null
  }
  const forgetHere = async (displayId: string): Promise<null> => {
    await runtime.forget(displayId)
    return null
  }
  forwarder?.handle('display.assign', (a) => runtime.assign(a.displayId, a.request))
  forwarder?.handle('display.retry', (a) => runtime.retry(a.displayId, a.organizationId))
  forwarder?.handle('display.rebind', (a) => runtime.rebind(a.displayId, a.organizationId))
  forwarder?.handle('display.changed', (a) => changedHere(a.organizationId, a.displayId))
  forwarder?.handle('display.forget', (a) => forgetHere(a.displayId))
  /**
   * Tells the owner (this node or another) that the display changed in the store; best effort (a new
   * owner reads the store anyway). While no node can take it (the shard is moving), dashboards still
   * get the change: this node reads the view from the store and sends the frame itself.
   */
  const announce = (organizationId: string, displayId: string, op: 'display.changed' | 'display.forget'): void => {
    const here = op === 'display.changed' ? () => changedHere(organizationId, displayId) : () => forgetHere(displayId)
    route(displayId, op, { organizationId, displayId }, here).catch((error: unknown) => {
      logger.warn('announcing a display change to its owner failed', { displayId, error })
      if (op === 'display.changed') liveChanges.changed(organizationId, displayId)
    })
  }
  // the contract: retained configuration comes back from the store, not from the broker.
  const republished = await runtime.start()
  await feed.start()
  const unsubscribe = options.printers.onChange((change) => feed.printerChanged(change.view.printerId))
  if (credentials instanceof DynsecCredentials) await credentials.start()
  logger.info('displays started', { republished, configured: gateway.configured })
  return {
    store,
    runtime,
    gateway,
    credentials,
    feed,
    changed(organizationId, displayId) {
      announce(organizationId, displayId, 'display.changed')
    },
    assign: (displayId, request) => route(displayId, 'display.assign', { displayId, request }, () => runtime.assign(displayId, request)),
    retry: (displayId, organizationId) => route(displayId, 'display.retry', { displayId, organizationId }, () => runtime.retry(displayId, organizationId)),
    rebind: (displayId, organizationId) => route(displayId, 'display.rebind', { displayId, organizationId }, () => runtime.rebind(displayId, organizationId)),
    onLiveChange: (listener, wants) => liveChanges.onChange(listener, wants),
    async remove(organizationId, displayId) {
      const removed = await store.remove(organizationId, displayId)
      if (owns(displayId)) await runtime.forget(displayId)
      else announce(organizationId, displayId, 'display.forget')
      liveChanges.forget(displayId)
      // The display is gone from the store; a broker that missed this is brought in line by reconciliation.
      await gateway.revokeCredential(removed.credentialId).catch((error: unknown) => logger.warn('revoking a deleted display\'s credential failed', { error }))
      await Promise.all(
        [configTopic(removed), feedTopic(removed)].map((topic) => gateway.publishRetained(topic, '').catch((error: unknown) => logger.warn('clearing a retained message failed', { topic, error }))),
      )
      announce(organizationId, displayId, 'display.changed')
    },
    async stop() {
      credentials.stop()
      unsubscribe()
      for (const off of unsubscribeShards) off()
      feed.stop()
      await runtime.stop()
    },
  }
}

async function brokerCredentials(options: DisplayNodeOptions): Promise<BrokerCredentials> {
  const { mqtt } = options
  if (mqtt.broker !== undefined) return new EmbeddedCredentials(mqtt.broker)
  if (options.brokerCredentials === 'dynamic-security') {
    return new DynsecCredentials(await DynamicSecurity.attach(mqtt.client, options.clock), options.store, options.logger, options.metrics, options.clock)
  }
  return new UnenforcedCredentials()
}
