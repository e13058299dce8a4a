/**
 * The service's side of the display topics: publishes the
 * retained profile/config envelopes for the display actors, and takes what
 * displays send on their credential-bound topics: receipts to the display's
 * actor, capability reports to the store, resync requests to both the actor
 * and the status feed.
 *
 * Who may send what is the broker's job (topic access per docs/authentication.md,
 * credentials per broker in broker-credentials.ts): a message on display
 * D's credential topic comes from D's credential. The gateway still checks that the message's own fields name
 * the topic's display, binding and credential, and drops anything oversized,
 * unreadable or invalid (counted in displays_mqtt_messages_total).
 */
import { parseJsonText } from '../../protocol/json-text.js'
import type { MqttClient } from 'mqtt'
import {
  CapabilitiesReportSchema,
  configTopic,
  deviceTopicsFilter,
  maxDeviceMessageBytes,
  maxReceiptBytes,
  parseDeviceTopic,
  ReceiptSchema,
  type DeviceTopic,
  type DisplayAddress,
  type DisplayCredential,
  type SignalProfileCapability,
} from '../../protocol/display-mqtt.js'
import { compileBodyValidator } from '../../protocol/schemas/validator.js'
import type { DisplayRuntime, ProfileTransport } from '../../actors/display-runtime.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { MqttConnection } from '../mqtt/connection.js'
import type { DisplayStore } from './display-store.js'
import type { BrokerCredentials } from './broker-credentials.js'
import { ServiceError } from '../../protocol/errors.js'
import type { Timers } from '../../actors/clock.js'

/** How long a publication may wait for the broker's PUBACK before it counts as failed. */
export const publishTimeoutMs = 10_000

const validateReceipt = compileBodyValidator(ReceiptSchema)
const validateCapabilities = compileBodyValidator(CapabilitiesReportSchema)

export interface DisplayGatewayHooks {
  /** A display asked for its feed again (resync) or its binding changed. */
  onResync?: (displayId: string) => void
  /** A capability report of a current credential was recorded. */
  onCapabilities?: (address: DisplayAddress) => void
  /** Whether this node runs the display now: with several nodes every node hears every display, and only the owner answers. */
  owns?: (displayId: string) => boolean
}

export class DisplayGateway implements ProfileTransport {
  readonly #credentials: BrokerCredentials
  readonly #client: MqttClient
  readonly #store: DisplayStore
  readonly #logger: Logger
  readonly #messages
  #runtime: DisplayRuntime | undefined
  #hooks: DisplayGatewayHooks = {}

  readonly #timers: Timers

  constructor(mqtt: MqttConnection, credentials: BrokerCredentials, store: DisplayStore, logger: Logger, metrics: MetricsRegistry, timers: Timers) {
    this.#client = mqtt.client
    this.#timers = timers
    this.#credentials = credentials
    this.#store = store
    this.#logger = logger
    this.#messages = metrics.counter('displays_mqtt_messages_total', 'Messages from displays by topic kind and outcome.', ['kind', 'outcome'])
  }

  /**
   * Whether displays can be served: the broker enforces display credentials
   * and topic access (BrokerCredentials). Without that, display routes
   * answer 503 MQTT_DISPLAY_NOT_CONFIGURED instead of handing out
   * credentials that no broker checks.
   */
  get configured(): boolean {
    return this.#credentials.enforced
  }

  /** Before the store commits a credential; a broker that cannot take it is a retryable 503 and nothing is stored. */
  async grantCredential(credential: DisplayCredential): Promise<void> {
    try {
      await this.#credentials.grant(credential)
    } catch (error) {
      this.#logger.warn('the broker did not take a display credential', { displayId: credential.displayId, error })
      throw new ServiceError('mqtt_broker_unavailable', `the MQTT broker did not take the display's credential: ${(error as Error).message}`)
    }
  }

  /** Subscribes to every display's credential topics; from then on messages reach `runtime`. */
  async attach(runtime: DisplayRuntime, hooks: DisplayGatewayHooks = {}): Promise<void> {
    this.#runtime = runtime
    this.#hooks = hooks
    this.#client.on('message', (topic, payload, packet) => this.#onMessage(topic, payload, packet.retain))
    // Subscribed again by MQTT.js after a reconnect (resubscribe is on by default).
    await this.#client.subscribeAsync(deviceTopicsFilter, { qos: 1 })
  }

  publishConfig(address: DisplayAddress, payload: string): Promise<void> {
    return this.#publish(configTopic(address), payload)
  }

  /** An empty retained message deletes the retained configuration (MQTT 3.1.1 section 3.3.1.3). */
  clearConfig(address: DisplayAddress): Promise<void> {
    return this.#publish(configTopic(address), '')
  }

  revokeCredential(credentialId: string): Promise<void> {
    return this.#credentials.revoke(credentialId)
  }

  /** Retained QoS 1 under the display tree, bounded in time. */
  publishRetained(topic: string, payload: string): Promise<void> {
    return this.#publish(topic, payload)
  }

  #publish(topic: string, payload: string): Promise<void> {
    if (!this.#client.connected) return Promise.reject(new Error('the MQTT broker is not connected'))
    return new Promise<void>((resolve, reject) => {
      const timer = this.#timers.setTimeout(() => reject(new Error(`no PUBACK within ${publishTimeoutMs} ms`)), publishTimeoutMs)
      this.#client.publish(topic, payload, { qos: 1, retain: true }, (error) => {
        this.#timers.clearTimeout(timer)
        if (error) reject(error)
        else resolve()
      })
    })
  }

  #onMessage(topic: string, payload: Buffer, retained: boolean): void {
    const device = parseDeviceTopic(topic)
    if (device === undefined) return
    const count = (outcome: string) => this.#messages.inc({ kind: device.kind, outcome })
    if (retained && payload.length > 0) {
      // docs/authentication.md: displays never publish retained. The embedded broker refuses it; Mosquitto's
      // ACLs cannot, so a retained device message replayed at (re)subscription is dropped, never
      // taken for a fresh one, and removed from the broker.
      this.#publish(topic, '').catch((error: unknown) => this.#logger.warn('clearing a retained display message failed', { topic, error }))
      return count('retained')
    }
    // An empty payload is how a retained message is deleted (the service's own clearing comes back
    // on its subscription); it carries nothing from a device.
    if (payload.length === 0) return count('empty')
    if (this.#hooks.owns?.(device.displayId) === false) return count('other_node')
    const limit = device.kind === 'receipt' ? maxReceiptBytes : maxDeviceMessageBytes
    if (payload.length > limit) return count('too_large')
    const text = parseJsonText(payload, 'payload')
    // Not JSON, or not Unicode (a lone surrogate escape): dropped and counted like any malformed message.
    if (!text.ok) return count(text.code)
    const body = text.value
    switch (device.kind) {
      case 'receipt':
        return void this.#receipt(device, body).then(count, (error: unknown) => {
          count('failed')
          this.#logger.warn('display receipt not processed', { displayId: device.displayId, error })
        })
      case 'capabilities':
        return void this.#capabilities(device, body).then(count, (error: unknown) => {
          count('failed')
          this.#logger.warn('display capabilities not recorded', { displayId: device.displayId, error })
        })
      case 'resync':
        count('accepted')
        this.#runtime?.resync(device.displayId, device.bindingEpoch).catch((error: unknown) => this.#logger.warn('display resync failed', { error }))
        this.#hooks.onResync?.(device.displayId)
        return
      case 'health':
        return count('accepted')
    }
  }

  async #receipt(device: DeviceTopic, body: unknown): Promise<string> {
    const result = validateReceipt(body)
    if (!result.ok) return 'invalid'
    if (this.#runtime === undefined) return 'ignored'
    return this.#runtime.receipt(device, result.value)
  }

  /** A report without a valid signal_profile object means the controller lacks the capability. */
  async #capabilities(device: DeviceTopic, body: unknown): Promise<string> {
    const result = validateCapabilities(body)
    const capability: SignalProfileCapability | null = result.ok ? (result.value.signal_profile ?? null) : null
    const recorded = await this.#store.recordCapabilities(device, capability)
    if (!recorded) return 'ignored'
    this.#hooks.onCapabilities?.(device)
    return result.ok ? 'accepted' : 'invalid'
  }
}
