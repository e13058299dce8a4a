/**
 * Node-to-node calls for the shard router (issue 7, DESIGN section 6): a
 * request that lands on a node that does not own the entity's shard is sent
 * to the owner as a MessagePack frame over Redis pub/sub, and the owner's
 * answer comes back the same way.
 *
 * Why Redis and not a direct connection: every node already holds Redis
 * connections and knows the other nodes only by id (the shard directory's
 * membership), so there are no addresses to publish, no mesh of sockets to
 * keep and no extra port to open. The cost, measured by bench/ingest on two
 * nodes: each forwarded call is two PUBLISHes and two hops through Redis
 * (caller → Redis → owner → Redis → caller) plus a MessagePack encode and
 * decode of the request and the answer on each side: +6.8 ms at the median
 * for a 100-event batch at light load on the 2-core machine, about 0.3 ms of
 * it MessagePack each way (README, Benchmarks).
 *
 * Delivery is at most once: pub/sub keeps nothing for a node that is not
 * listening. A PUBLISH that reaches no subscriber (the owner is gone) fails
 * at once; an answer that does not come within the timeout fails the call.
 * Either way the caller answers 503 with Retry-After, and the bridge's retry
 * is deduplicated by the owner if the first attempt was in fact stored. (A
 * call that reached nobody is first sent once more to the owner Redis names
 * now: see route-to-owner.ts.)
 * A forwarded call is never forwarded again (no loops): an owner that lost
 * the shard meanwhile answers 503 itself.
 */
import { decode, encode } from '@msgpack/msgpack'
import { Redis } from 'ioredis'
import { performance } from 'node:perf_hooks'
import { ServiceError, type ErrorCode } from '../../protocol/errors.js'
import { withTimeout } from '../deadline.js'
import type { Logger } from '../log.js'
import type { MetricsRegistry } from '../metrics.js'

/** How long a start waits for Redis before it fails. */
const connectTimeoutMs = 5_000

type Handler = (args: Record<string, unknown>) => Promise<unknown>

/** [0, id, from, op, args] or [1, id, ok, value | error] */
type Frame = [0, number, string, string, Record<string, unknown>] | [1, number, boolean, unknown]

interface WireError {
  code?: string
  message: string
  extra?: Record<string, unknown>
  headers?: Record<string, string>
}

interface Pending {
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
  timer: ReturnType<typeof setTimeout>
}

/** The owner could not be reached (gone, or no answer in time): nothing is known to be stored. */
export class ForwardFailed extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ForwardFailed'
  }
}

/** The call reached no subscriber on the owner's channel: it ran nowhere, so sending it again (elsewhere) is safe. */
export class OwnerNotListening extends ForwardFailed {
  constructor(node: string) {
    super(`the owner node ${node} is not listening (gone)`)
    this.name = 'OwnerNotListening'
  }
}

export interface ForwarderOptions {
  redisUrl: string
  keyspace: string
  nodeId: string
  timeoutMs: number
  logger: Logger
  metrics: MetricsRegistry
}

export class Forwarder {
  readonly #o: ForwarderOptions
  readonly #pub: Redis
  readonly #sub: Redis
  readonly #handlers = new Map<string, Handler>()
  readonly #pending = new Map<number, Pending>()
  #next = 1
  #closed = false
  readonly #calls
  readonly #seconds
  readonly #served

  private constructor(options: ForwarderOptions) {
    this.#o = options
    const redis = { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true }
    this.#pub = new Redis(options.redisUrl, redis)
    this.#sub = new Redis(options.redisUrl, { ...redis, enableOfflineQueue: true })
    for (const client of [this.#pub, this.#sub]) client.on('error', (error: unknown) => options.logger.warn('forwarder: Redis error', { error }))
    const m = options.metrics
    this.#calls = m.counter('forwards_total', 'Calls forwarded to the owner of a shard, by operation and outcome (ok, refused: the owner answered with an error, unreachable, timeout).', ['op', 'outcome'])
    this.#seconds = m.histogram('forward_seconds', 'Round trip of a forwarded call, caller side.', ['op'], [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
    this.#served = m.counter('forwards_served_total', 'Calls other nodes forwarded to this node, by operation.', ['op'])
    this.#sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.#receive(message))
  }

  static async start(options: ForwarderOptions): Promise<Forwarder> {
    const forwarder = new Forwarder(options)
    const connected = Promise.all([forwarder.#pub.connect(), forwarder.#sub.connect()]).then(() => forwarder.#sub.subscribe(forwarder.#channel(options.nodeId)))
    try {
      await withTimeout(connected, connectTimeoutMs, () => new Error(`Redis gave no answer within ${connectTimeoutMs} ms`))
    } catch (error) {
      forwarder.#pub.disconnect()
      forwarder.#sub.disconnect()
      throw error
    }
    return forwarder
  }

  /** Serves an operation for other nodes. */
  handle(op: string, handler: Handler): void {
    this.#handlers.set(op, handler)
  }

  /** Calls `op` on `node`; rejects with the owner's ServiceError, or ForwardFailed when it cannot be reached in time. */
  call(node: string, op: string, args: Record<string, unknown>): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ForwardFailed('this node is shutting down'))
    const id = this.#next++
    const started = performance.now()
    const outcome = (name: string) => {
      this.#calls.inc({ op, outcome: name })
      this.#seconds.observe({ op }, (performance.now() - started) / 1000)
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id)
        outcome('timeout')
        reject(new ForwardFailed(`the owner node ${node} did not answer within ${this.#o.timeoutMs} ms`))
      }, this.#o.timeoutMs)
      this.#pending.set(id, {
        resolve: (value) => {
          outcome('ok')
          resolve(value)
        },
        reject: (error) => {
          outcome(error instanceof ForwardFailed ? 'unreachable' : 'refused')
          reject(error)
        },
        timer,
      })
      const frame: Frame = [0, id, this.#o.nodeId, op, args]
      this.#pub.publish(this.#channel(node), Buffer.from(encode(frame, { ignoreUndefined: true }))).then(
        (receivers) => {
          if (receivers === 0) this.#settle(id, false, undefined, new OwnerNotListening(node))
        },
        (error: unknown) => this.#settle(id, false, undefined, new ForwardFailed(`Redis did not take the forwarded call (${(error as Error).message})`)),
      )
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    for (const [id] of this.#pending) this.#settle(id, false, undefined, new ForwardFailed('this node is shutting down'))
    this.#pub.disconnect()
    this.#sub.disconnect()
  }

  #channel(node: string): string {
    return `printfarm:${this.#o.keyspace}:node:${node}`
  }

  #settle(id: number, ok: boolean, value: unknown, error?: unknown): void {
    const pending = this.#pending.get(id)
    if (pending === undefined) return
    this.#pending.delete(id)
    clearTimeout(pending.timer)
    if (ok) pending.resolve(value)
    else pending.reject(error)
  }

  #receive(message: Buffer): void {
    let frame: Frame
    try {
      frame = decode(message) as Frame
    } catch (error) {
      this.#o.logger.warn('forwarder: a frame that is not MessagePack', { error })
      return
    }
    if (frame[0] === 1) {
      const [, id, ok, payload] = frame
      this.#settle(id, ok, payload, ok ? undefined : fromWire(payload as WireError))
      return
    }
    const [, id, from, op, args] = frame
    const handler = this.#handlers.get(op)
    this.#served.inc({ op })
    const answer = (ok: boolean, payload: unknown) => {
      const reply: Frame = [1, id, ok, payload]
      this.#pub.publish(this.#channel(from), Buffer.from(encode(reply, { ignoreUndefined: true }))).catch((error: unknown) => this.#o.logger.warn('forwarder: an answer was not sent', { op, error }))
    }
    if (handler === undefined) {
      answer(false, { message: `no operation '${op}' on this node` } satisfies WireError)
      return
    }
    handler(args).then(
      (value) => answer(true, value),
      (error: unknown) => {
        if (!(error instanceof ServiceError)) this.#o.logger.error('forwarded call failed', { op, error })
        answer(false, toWire(error))
      },
    )
  }
}

function toWire(error: unknown): WireError {
  if (error instanceof ServiceError) {
    return { code: error.code, message: error.message, ...(error.extra === undefined ? {} : { extra: { ...error.extra } }), ...(error.headers === undefined ? {} : { headers: { ...error.headers } }) }
  }
  return { message: 'the owner node failed to handle the call' }
}

function fromWire(wire: WireError): Error {
  if (wire.code !== undefined) {
    return new ServiceError(wire.code as ErrorCode, wire.message, { ...(wire.extra === undefined ? {} : { extra: wire.extra }), ...(wire.headers === undefined ? {} : { headers: wire.headers }) })
  }
  return new Error(wire.message)
}
