/**
 * A status display that follows every device rule of the contract, for
 * tests, benchmarks and firmware authors (`printfarm display-sim`).
 *
 * On connect it starts a new session (session_generation one above the
 * stored one), publishes its capabilities report, subscribes to its
 * profile/config and status/feed topics and announces what it has (result
 * announced). With a reconnect policy it keeps its connection as a device
 * does (simulator-connection.ts): after a loss it tries again with backoff,
 * and every reconnection is a new session, started the same way, since the
 * service accepts another session's receipts only with a higher
 * session_generation (machines/display-activation.ts). For each
 * profile/config envelope:
 * 1. The envelope must be strict and of this binding; anything else is ignored.
 * 2. Its identity equal to the active one: applied again (an idempotent
 *    confirmation, e.g. after a republish).
 * 3. No trustworthy fence: rejected, profile_fence_recovery_required, until a
 *    new binding (a new simulator with a fresh fence store).
 * 4. A generation below the fence: stale_activation. The fence's generation
 *    with another revision or hash: activation_conflict.
 * 5. Expired: a new activation is not authorized; result deferred with
 *    refresh_requested, and the service republishes with new timestamps.
 * 6. The bytes are verified (base64, SHA-256, canonical form, every rule)
 *    and checked against its own capability: hash_mismatch, invalid_program,
 *    unsupported_profile_format, profile_too_large, unsupported_white_output.
 * 7. The fence is written durably before activation; a failed write is
 *    profile_persist_failed and the candidate is not activated.
 * 8. Activated; result applied with active = highest_admitted = attempted.
 * Receipts carry the session and a status_sequence rising within it.
 */
import type { MqttClient } from 'mqtt'
import { randomUUID } from 'node:crypto'
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import {
  configTopic,
  credentialTopic,
  EnvelopeSchema,
  FeedSchema,
  feedTopic,
  sameIdentity,
  type DisplayAddress,
  type Envelope,
  type Feed,
  type Identity,
  type ReceiptMessage,
  type SignalProfileCapability,
} from '../../protocol/display-mqtt.js'
import { compileBodyValidator } from '../../protocol/schemas/validator.js'
import { verifyProfile, type DecodedProfile } from '../../protocol/signal-profile/decoder.js'
import { connectSupervised, type ConnectionEvent, type ReconnectPolicy } from './display-sim-connection.js'
import type { Clock } from '../../actors/clock.js'

export { BrokerRefusedLogin, deviceReconnect, type ConnectionEvent, type ReconnectPolicy } from './display-sim-connection.js'

const validateEnvelope = compileBodyValidator(EnvelopeSchema)
const validateFeed = compileBodyValidator(FeedSchema)

/** The device's durable memory: the admission fence and the last session generation. */
export interface FenceStore {
  /** undefined when the stored fence cannot be trusted (corrupt, unreadable). */
  read(): { fence: Identity | null; sessionGeneration: number } | undefined
  /** false when the write did not become durable. */
  write(state: { fence: Identity | null; sessionGeneration: number }): boolean
}

export class MemoryFenceStore implements FenceStore {
  state: { fence: Identity | null; sessionGeneration: number } | undefined = { fence: null, sessionGeneration: 0 }
  failWrites = false
  read() {
    return this.state && { ...this.state }
  }
  write(state: { fence: Identity | null; sessionGeneration: number }): boolean {
    if (this.failWrites) return false
    this.state = { ...state }
    return true
  }
}

/** A JSON file written by rename, so a crash leaves the old or the new fence, never half of one. */
export class FileFenceStore implements FenceStore {
  readonly path: string
  constructor(path: string) {
    this.path = path
  }
  read() {
    try {
      const parsed = JSON.parse(readFileSync(this.path, 'utf8')) as { fence: Identity | null; sessionGeneration: number }
      return { fence: parsed.fence ?? null, sessionGeneration: Number(parsed.sessionGeneration) || 0 }
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ENOENT' ? { fence: null, sessionGeneration: 0 } : undefined
    }
  }
  write(state: { fence: Identity | null; sessionGeneration: number }): boolean {
    try {
      writeFileSync(`${this.path}.tmp`, JSON.stringify(state))
      renameSync(`${this.path}.tmp`, this.path)
      return true
    } catch {
      return false
    }
  }
}

export interface SimulatorOptions extends DisplayAddress {
  url: string
  username: string
  password: string
  credentialId: string
  /** The advertised capability; null sends a report without signal_profile (firmware that keeps its built-in patterns). */
  capability?: SignalProfileCapability | null
  fenceStore?: FenceStore
  /** The time the device reads (envelope and feed expiry, observation stamps) and its waits. */
  clock: Clock
  /** Test hook: what to do with a verified, admissible envelope before the fence write. */
  decide?: (envelope: Envelope) => 'apply' | 'defer' | 'ignore'
  /** Reconnect as a device does; without one a lost connection is final (tests and benchmarks that end it on purpose). */
  reconnect?: ReconnectPolicy
  /** Told of each connection event as it happens (also those before the first connection). */
  onConnection?: (event: ConnectionEvent) => void
}

export const fullCapability: SignalProfileCapability = { format_version: 1, max_decoded_bytes: 750, max_phases: 8, supports_white_output: true, supports_cct: true }

type Outcome = { result: ReceiptMessage['profile']['result']; attempted: Identity | null; error: string | null; refresh: boolean }

export class DisplaySimulator {
  readonly options: SimulatorOptions
  readonly client: MqttClient
  sessionId: string = randomUUID()
  sessionGeneration: number
  sequence = 0
  fence: Identity | null
  fenceTrusted: boolean
  active: Identity | null = null
  profile: DecodedProfile | null = null
  feed: Feed | null = null
  readonly receipts: ReceiptMessage[] = []
  readonly envelopes: Envelope[] = []
  /** Every connection event since the first connection, oldest first. */
  readonly connectionEvents: ConnectionEvent[] = []
  connection: 'connected' | 'offline' | 'failed' = 'connected'
  readonly #waiters = new Set<() => void>()
  readonly #clock: Clock
  readonly #store: FenceStore

  private constructor(options: SimulatorOptions, client: MqttClient, store: FenceStore, stored: { fence: Identity | null; sessionGeneration: number } | undefined) {
    this.options = options
    this.client = client
    this.#store = store
    this.#clock = options.clock
    this.fenceTrusted = stored !== undefined
    this.fence = stored?.fence ?? null
    this.sessionGeneration = (stored?.sessionGeneration ?? 0) + 1
  }

  /** Connects and starts the first session. Rejects with BrokerRefusedLogin when the broker refuses the credential. */
  static async connect(options: SimulatorOptions): Promise<DisplaySimulator> {
    const store = options.fenceStore ?? new MemoryFenceStore()
    const stored = store.read()
    let sim: DisplaySimulator | undefined
    const client = await connectSupervised(
      options.url,
      { username: options.username, password: options.password, protocolVersion: 4, clientId: `display-sim-${randomUUID().slice(0, 12)}`, clean: true, connectTimeout: 5_000 },
      options.reconnect,
      {
        now: () => options.clock.now(),
        onEvent: (event) => (sim === undefined ? options.onConnection?.(event) : sim.#onConnection(event)),
        resume: async () => {
          if (sim === undefined) throw new Error('reconnected before the first session started')
          return sim.#resume()
        },
      },
    )
    sim = new DisplaySimulator(options, client, store, stored)
    client.on('message', (topic, payload) => sim.#onMessage(topic, payload))
    await sim.#startSession()
    return sim
  }

  /** Publishes the capabilities report (again, e.g. after a firmware change). */
  async reportCapabilities(capability: SignalProfileCapability | null | undefined = this.options.capability): Promise<void> {
    const report = { firmware: 'printfarm-display-sim 1', pixels: 64, ...(capability === null ? {} : { signal_profile: capability ?? fullCapability }) }
    await this.client.publishAsync(credentialTopic(this.options, this.options.credentialId, 'capabilities'), JSON.stringify(report), { qos: 1 })
  }

  /** Asks the service to send the feed and configuration again. */
  async resync(): Promise<void> {
    await this.client.publishAsync(credentialTopic(this.options, this.options.credentialId, 'resync'), JSON.stringify({ reason: 'simulator' }), { qos: 1 })
  }

  /** Whether the status feed is stale (no feed, or past its expiry): the device shows its stale mode. */
  feedStale(now = this.#clock.now()): boolean {
    return this.feed === null || Date.parse(this.feed.expires_at) <= now
  }

  /** Resolves when `predicate` holds (checked after every message), or rejects after `timeoutMs`. */
  waitFor(predicate: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    if (predicate()) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!predicate()) return
        this.#waiters.delete(check)
        this.#clock.clearTimeout(timer)
        resolve()
      }
      const timer = this.#clock.setTimeout(() => {
        this.#waiters.delete(check)
        reject(new Error(`display simulator: timed out waiting for ${what}`))
      }, timeoutMs)
      this.#waiters.add(check)
    })
  }

  /**
   * A session: its generation stored first (it must rise across restarts even
   * if nothing else is ever written), then capabilities, subscriptions and
   * the announcement of what is active, in the order the contract gives.
   */
  async #startSession(): Promise<void> {
    if (this.fenceTrusted) this.#store.write({ fence: this.fence, sessionGeneration: this.sessionGeneration })
    await this.reportCapabilities()
    await this.client.subscribeAsync([configTopic(this.options), feedTopic(this.options)], { qos: 1 })
    await this.#send({ result: 'announced', attempted: null, error: null, refresh: false })
  }

  /** After a reconnection: a new session, one generation up, its sequence from 1 again. */
  async #resume(): Promise<number> {
    this.sessionId = randomUUID()
    this.sessionGeneration++
    this.sequence = 0
    await this.#startSession()
    return this.sessionGeneration
  }

  #onConnection(event: ConnectionEvent): void {
    this.connectionEvents.push(event)
    this.connection = event.type === 'resumed' ? 'connected' : event.type === 'failed' ? 'failed' : 'offline'
    this.options.onConnection?.(event)
    this.#notify()
  }

  async close(): Promise<void> {
    await this.client.endAsync(true).catch(() => undefined)
  }

  #onMessage(topic: string, payload: Buffer): void {
    if (topic === feedTopic(this.options)) {
      if (payload.length > 0) {
        const parsed = parseJson(payload)
        const result = validateFeed(parsed)
        if (result.ok && this.#ours(result.value.organization_id, result.value.display_id, result.value.binding_epoch)) {
          if (this.feed === null || result.value.sequence > this.feed.sequence) this.feed = result.value
        }
      }
    } else if (topic === configTopic(this.options) && payload.length > 0) {
      const result = validateEnvelope(parseJson(payload))
      if (result.ok && this.#ours(result.value.organization_id, result.value.display_id, result.value.binding_epoch)) {
        this.envelopes.push(result.value)
        void this.#consider(result.value)
      }
    }
    this.#notify()
  }

  #ours(organizationId: string, displayId: string, bindingEpoch: number): boolean {
    return organizationId === this.options.organizationId && displayId === this.options.displayId && bindingEpoch === this.options.bindingEpoch
  }

  async #consider(envelope: Envelope): Promise<void> {
    const candidate: Identity = { activation_generation: envelope.activation_generation, profile_revision_id: envelope.profile_revision_id, sha256: envelope.sha256 }
    const reject = (error: string) => this.#send({ result: 'rejected', attempted: candidate, error, refresh: false })
    if (sameIdentity(candidate, this.active)) return this.#send({ result: 'applied', attempted: candidate, error: null, refresh: false })
    if (!this.fenceTrusted) return reject('profile_fence_recovery_required')
    const fence = this.fence
    if (fence !== null && candidate.activation_generation < fence.activation_generation) return reject('stale_activation')
    if (fence !== null && candidate.activation_generation === fence.activation_generation && !sameIdentity(candidate, fence)) return reject('activation_conflict')
    if (Date.parse(envelope.expires_at) <= this.#clock.now()) return this.#send({ result: 'deferred', attempted: candidate, error: null, refresh: true })
    const verified = verifyProfile(envelope.data, envelope.sha256)
    if (!verified.ok) return reject(/sha256|base64/i.test(verified.reason) ? 'hash_mismatch' : 'invalid_program')
    const capability = this.options.capability ?? fullCapability
    const bytes = Math.floor((envelope.data.length * 3) / 4) - (envelope.data.endsWith('==') ? 2 : envelope.data.endsWith('=') ? 1 : 0)
    if (bytes !== envelope.byte_length) return reject('invalid_program')
    if (verified.profile.formatVersion !== capability.format_version) return reject('unsupported_profile_format')
    if (bytes > capability.max_decoded_bytes) return reject('profile_too_large')
    if (verified.profile.patterns.some((p) => p.phases.length > capability.max_phases)) return reject('invalid_program')
    if (!capability.supports_white_output && verified.profile.patterns.some((p) => p.usesWhite)) return reject('unsupported_white_output')
    if (!capability.supports_cct && verified.profile.patterns.some((p) => p.usesCct)) return reject('invalid_program')
    const decision = this.options.decide?.(envelope) ?? 'apply'
    if (decision === 'ignore') return
    if (decision === 'defer') return this.#send({ result: 'deferred', attempted: candidate, error: 'completion_cache_busy', refresh: false })
    // The fence first: a failed write cannot activate the candidate.
    if (!this.#store.write({ fence: candidate, sessionGeneration: this.sessionGeneration })) return reject('profile_persist_failed')
    this.fence = candidate
    this.active = candidate
    this.profile = verified.profile
    return this.#send({ result: 'applied', attempted: candidate, error: null, refresh: false })
  }

  async #send(outcome: Outcome): Promise<void> {
    const receipt: ReceiptMessage = {
      organization_id: this.options.organizationId,
      display_id: this.options.displayId,
      binding_epoch: this.options.bindingEpoch,
      credential_id: this.options.credentialId,
      session_id: this.sessionId,
      session_generation: this.sessionGeneration,
      status_sequence: ++this.sequence,
      observed_at: new Date(this.#clock.now()).toISOString(),
      refresh_requested: outcome.refresh,
      profile: {
        active: this.active,
        attempted: outcome.attempted,
        highest_admitted: this.fence,
        result: outcome.result,
        refresh_requested: outcome.refresh,
        error_code: outcome.error,
      },
    }
    this.receipts.push(receipt)
    await this.client.publishAsync(credentialTopic(this.options, this.options.credentialId, 'receipt'), JSON.stringify(receipt), { qos: 1 }).catch(() => undefined)
    this.#notify()
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter()
  }
}

function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'))
  } catch {
    return undefined
  }
}
