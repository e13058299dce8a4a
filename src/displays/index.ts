/**
 * The status-display part of a node: the store, the display actors with
 * their delivery worker, the MQTT gateway and the status feed, wired
 * together and stopped in order.
 */
import { DisplayRuntime } from '../../actors/display-runtime.js'
import { storedStatus } from '../../actors/display-persistence.js'
import type { PrinterRuntime } from '../../actors/printer-runtime.js'
import { configTopic, feedTopic } from '../../protocol/display-mqtt.js'
import type { Logger } from '../log.js'
import type { MetricsRegistry } from '../metrics.js'
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
  /** Committed display changes, as the live feed's `displays` topic shows them. */
  onLiveChange(listener: DisplayLiveListener): () => void
  /** Deletes a display: credential revoked and disconnected, retained messages removed. */
  remove(organizationId: string, displayId: string): Promise<void>
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
}

export async function startDisplayNode(options: DisplayNodeOptions): Promise<DisplayNode> {
  const { store, mqtt, logger, metrics } = options
  const credentials = await brokerCredentials(options)
  const gateway = new DisplayGateway(mqtt, credentials, store, logger, metrics)
  const publications = metrics.counter('display_profile_publications_total', 'Profile envelope publications by outcome and kind (new activation or republish).', ['outcome', 'kind'])
  const liveChanges = new DisplayLiveChanges(store, logger)
  const lastShown = new Map<string, string>()
  const runtime = new DisplayRuntime({
    persistence: store,
    transport: gateway,
    onChange: (stored) => {
      // Publication bookkeeping (attempt counts, the 45 s republish) changes nothing a dashboard
      // shows: only a change of binding, generation, status, applied identity or error is read back.
      const shown = JSON.stringify([stored.bindingEpoch, stored.generation, storedStatus(stored), stored.applied, stored.errorCode, stored.publishError])
      if (lastShown.get(stored.displayId) === shown) return
      lastShown.set(stored.displayId, shown)
      liveChanges.changed(stored.organizationId, stored.displayId)
    },
    onPublish: (outcome, kind) => publications.inc({ outcome, kind }),
    onBackgroundError: (what, error) => logger.warn(`display ${what} failed`, { error }),
  })
  const feed = new StatusFeed({ store, snapshots: new Snapshots(options.db), publish: (topic, payload) => gateway.publishRetained(topic, payload), logger })
  const reloadFeed = (displayId: string) => void feed.reload(displayId).catch((error: unknown) => logger.warn('status feed reload failed', { displayId, error }))
  await gateway.attach(runtime, { onResync: reloadFeed, onCapabilities: (address) => liveChanges.changed(address.organizationId, address.displayId) })
  // SPEC part 6 rule 5: retained configuration comes back from the store, not from the broker.
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
      reloadFeed(displayId)
      liveChanges.changed(organizationId, displayId)
    },
    onLiveChange: (listener) => liveChanges.onChange(listener),
    async remove(organizationId, displayId) {
      const removed = await store.remove(organizationId, displayId)
      await runtime.forget(displayId)
      lastShown.delete(displayId)
      // The display is gone from the store; a broker that missed this is brought in line by reconciliation.
      await gateway.revokeCredential(removed.credentialId).catch((error: unknown) => logger.warn('revoking a deleted display\'s credential failed', { error }))
      await Promise.all(
        [configTopic(removed), feedTopic(removed)].map((topic) => gateway.publishRetained(topic, '').catch((error: unknown) => logger.warn('clearing a retained message failed', { topic, error }))),
      )
      reloadFeed(displayId)
      liveChanges.changed(organizationId, displayId)
    },
    async stop() {
      credentials.stop()
      unsubscribe()
      feed.stop()
      await runtime.stop()
    },
  }
}

async function brokerCredentials(options: DisplayNodeOptions): Promise<BrokerCredentials> {
  const { mqtt } = options
  if (mqtt.broker !== undefined) return new EmbeddedCredentials(mqtt.broker)
  if (options.brokerCredentials === 'dynamic-security') {
    return new DynsecCredentials(await DynamicSecurity.attach(mqtt.client), options.store, options.logger, options.metrics)
  }
  return new UnenforcedCredentials()
}
