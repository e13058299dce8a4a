/**
 * Live-feed changes across nodes (docs/operations.md): each node
 * publishes the changes of its own printer actors, and the live views of the
 * displays it owns, to one Redis pub/sub channel as MessagePack, and feeds
 * what other nodes publish into its hub, so a dashboard on node B sees the
 * printers and displays owned by node A. A display's views all come from its
 * owner, through one connection, so they arrive in the order it read them.
 * A printer task crosses as a notice only (which task of which host): each
 * node reads the task itself, if it follows the host (src/live/host-tasks.ts).
 *
 * Pub/sub is fire-and-forget: a change published while a node is
 * disconnected from Redis is not seen there (its clients detect nothing
 * missing in seq, since seqs are per node; the state catches up with the
 * printer's next change, and a reconnecting dashboard gets a snapshot from
 * PostgreSQL). Redis is never on the ingestion path: a publish that fails is
 * counted and logged, the bridge's 200 does not wait for it.
 *
 * The channel carries the database schema, so deployments (and test runs)
 * sharing one Redis do not see each other's farms.
 */
import { decode, encode } from '@msgpack/msgpack'
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { withTimeout } from '../async/deadline.js'
import type { Timers } from '../../actors/clock.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { TaskTouched } from './host-tasks.js'
import type { LiveChange, LiveHub, LiveRemoval } from './hub.js'

/** How long a start waits for Redis before it fails. */
const connectTimeoutMs = 5_000

interface Envelope {
  /** The publishing node: a node ignores its own messages (its hub has them already). */
  n: string
  /** A printer change, or */
  c?: LiveChange
  /** a display's whole live view (or `{id, deleted: true}`) in organization `o`, or */
  d?: { o: string; v: object }
  /** a deleted printer, or */
  r?: LiveRemoval
  /** a printer task that changed, or */
  t?: TaskTouched
  /** an organization whose queue should look again (its owner takes it), or */
  w?: string
  /** an organization whose queue changed (nodes following its queue topic read it). */
  q?: string
}

/** Another node is an edge too: a notice is checked before a read is spent on it. */
function isTaskTouched(value: unknown): value is TaskTouched {
  return (
    typeof value === 'object' &&
    value !== null &&
    'organizationId' in value &&
    typeof value.organizationId === 'string' &&
    'hostId' in value &&
    typeof value.hostId === 'string' &&
    'taskId' in value &&
    typeof value.taskId === 'string'
  )
}

export class RedisRelay {
  readonly #pub: Redis
  readonly #sub: Redis
  readonly #channel: string
  readonly #node = randomUUID()
  readonly #logger: Logger
  #closed = false
  readonly #failures
  readonly #received
  readonly #listeners = new Set<(change: LiveChange) => void>()
  readonly #taskListeners = new Set<(touched: TaskTouched) => void>()
  readonly #queueWakeListeners = new Set<(organizationId: string) => void>()
  readonly #queueChangeListeners = new Set<(organizationId: string) => void>()

  private constructor(url: string, schema: string, hub: LiveHub, logger: Logger, metrics: MetricsRegistry) {
    this.#channel = `printfarm:${schema}:live`
    this.#logger = logger
    const options = { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true }
    this.#pub = new Redis(url, options)
    this.#sub = new Redis(url, { ...options, enableOfflineQueue: true })
    for (const client of [this.#pub, this.#sub]) client.on('error', (error: unknown) => logger.warn('live relay: Redis error', { error }))
    this.#failures = metrics.counter('live_relay_publish_failures_total', 'Live-feed changes that could not be published to Redis.')
    this.#received = metrics.counter('live_relay_received_total', 'Live-feed changes received from other nodes through Redis.')
    this.#sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => {
      let envelope: Envelope
      try {
        envelope = decode(message) as Envelope
      } catch (error) {
        logger.warn('live relay: a message that is not a change', { error })
        return
      }
      if (envelope.n === this.#node) return
      this.#received.inc()
      if (envelope.d !== undefined) return hub.displayChanged(envelope.d.o, envelope.d.v)
      if (envelope.r !== undefined) return hub.printerRemoved(envelope.r)
      if (envelope.t !== undefined) {
        const touched = envelope.t
        if (!isTaskTouched(touched)) return logger.warn('live relay: a task notice without its organizationId, hostId and taskId')
        for (const listener of this.#taskListeners) listener(touched)
        return
      }
      if (typeof envelope.w === 'string') {
        for (const listener of this.#queueWakeListeners) listener(envelope.w)
        return
      }
      if (typeof envelope.q === 'string') {
        for (const listener of this.#queueChangeListeners) listener(envelope.q)
        return
      }
      if (envelope.c === undefined) return
      hub.printerChanged(envelope.c)
      for (const listener of this.#listeners) listener(envelope.c)
    })
  }

  /** Another node's printer changed (status feeds of the displays this node owns follow it). */
  onReceived(listener: (change: LiveChange) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /** A printer task changed through another node (the host topic reads it back here). */
  onTaskReceived(listener: (touched: TaskTouched) => void): () => void {
    this.#taskListeners.add(listener)
    return () => this.#taskListeners.delete(listener)
  }

  /** Another node asks the owner of an organization's queue to look again. */
  onQueueWake(listener: (organizationId: string) => void): () => void {
    this.#queueWakeListeners.add(listener)
    return () => this.#queueWakeListeners.delete(listener)
  }

  /** An organization's queue changed on another node. */
  onQueueChanged(listener: (organizationId: string) => void): () => void {
    this.#queueChangeListeners.add(listener)
    return () => this.#queueChangeListeners.delete(listener)
  }

  static async start(url: string, schema: string, hub: LiveHub, logger: Logger, metrics: MetricsRegistry, timers: Timers): Promise<RedisRelay> {
    const relay = new RedisRelay(url, schema, hub, logger, metrics)
    try {
      await withTimeout(Promise.all([relay.#pub.connect(), relay.#sub.connect()]).then(() => relay.#sub.subscribe(relay.#channel)), connectTimeoutMs, timers)
    } catch (error) {
      relay.#pub.disconnect()
      relay.#sub.disconnect()
      throw error
    }
    return relay
  }

  publish(change: LiveChange): void {
    this.#send({ n: this.#node, c: change })
  }

  /** A printer was deleted through this node. */
  publishRemoval(removal: LiveRemoval): void {
    this.#send({ n: this.#node, r: removal })
  }

  /** A display this node owns changed: its live view, for the other nodes' `displays` topics. */
  publishDisplay(organizationId: string, display: object): void {
    this.#send({ n: this.#node, d: { o: organizationId, v: display } })
  }

  /** A printer task changed through this node: which one, not the task (each node reads it). */
  publishTask(touched: TaskTouched): void {
    this.#send({ n: this.#node, t: touched })
  }

  /** This node cannot take a wake of this organization's queue: the owner will. */
  publishQueueWake(organizationId: string): void {
    this.#send({ n: this.#node, w: organizationId })
  }

  /** This node's pass of an organization's queue is done: its view may have changed. */
  publishQueueChanged(organizationId: string): void {
    this.#send({ n: this.#node, q: organizationId })
  }

  #send(envelope: Envelope): void {
    // Closed before the actors stop (the node stops its parts in reverse order, after the HTTP drain): a
    // change of theirs then is not relayed; the other nodes' views read it from the store when they next load it.
    if (this.#closed) return
    const payload = Buffer.from(encode(envelope))
    this.#pub.publish(this.#channel, payload).catch((error: unknown) => {
      this.#failures.inc()
      this.#logger.warn('live relay: publish failed', { error })
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    await Promise.allSettled([this.#sub.quit(), this.#pub.quit()])
  }
}
