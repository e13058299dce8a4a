/**
 * Node-to-node calls for the shard router (docs/operations.md): a
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
 *
 * What may be called is a table of schemas (protocol/node-calls.ts): `call`
 * and `handle` are typed by it, the owner checks the arguments before running
 * anything (node-call-server.ts), and the caller checks the result before it
 * trusts it. Every frame is checked against the frame schema first; one that
 * fails is counted and dropped (there is no id to answer).
 */
import { decode, encode } from '@msgpack/msgpack'
import { Redis } from 'ioredis'
import { performance } from 'node:perf_hooks'
import { FrameSchema, type AnswerFrame, type CallArgs, type CallFrame, type CallResult, type NodeCalls, type NodeCallTable, type OpOf } from '../../protocol/node-calls.js'
import { compileCalls, compileNodeCallValidator, type CompiledCalls } from '../../protocol/schemas/validator.js'
import { withTimeout } from '../async/deadline.js'
import type { Timers } from '../../actors/clock.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { fromWire, NodeCallServer, type NodeCallHandler } from './node-call-server.js'

/** How long a start waits for Redis before it fails. */
const connectTimeoutMs = 5_000

const checkFrame = compileNodeCallValidator(FrameSchema, 'frame')

interface Pending {
  /** The answer's value, checked against the op's result schema before the caller sees it. */
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
  timer: unknown
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

export interface ForwarderOptions<Calls extends NodeCallTable> {
  redisUrl: string
  keyspace: string
  nodeId: string
  timeoutMs: number
  logger: Logger
  metrics: MetricsRegistry
  /** What may be called (protocol/node-calls.ts `nodeCalls`; tests give their own). */
  calls: Calls
  /** The node's clock: how long a call may wait for its answer. */
  timers: Timers
}

export class Forwarder<Calls extends NodeCallTable = NodeCalls> {
  readonly #o: ForwarderOptions<Calls>
  readonly #pub: Redis
  readonly #sub: Redis
  readonly #compiled: CompiledCalls<Calls>
  readonly #server: NodeCallServer<Calls>
  readonly #pending = new Map<number, Pending>()
  #next = 1
  #closed = false
  readonly #calls
  readonly #seconds
  readonly #rejected

  private constructor(options: ForwarderOptions<Calls>) {
    this.#o = options
    this.#compiled = compileCalls(options.calls)
    const redis = { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true }
    this.#pub = new Redis(options.redisUrl, redis)
    this.#sub = new Redis(options.redisUrl, { ...redis, enableOfflineQueue: true })
    for (const client of [this.#pub, this.#sub]) client.on('error', (error: unknown) => options.logger.warn('forwarder: Redis error', { error }))
    const m = options.metrics
    this.#calls = m.counter('forwards_total', 'Calls forwarded to the owner of a shard, by operation and outcome (ok, refused: the owner answered with an error, unreachable, timeout, malformed: the answer failed the result schema).', ['op', 'outcome'])
    this.#seconds = m.histogram('forward_seconds', 'Round trip of a forwarded call, caller side.', ['op'], [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
    this.#rejected = m.counter('forwards_rejected_total', 'Frames from other nodes this node refused, by reason (frame: not a node-call frame; op: an operation it does not serve; args: arguments that fail the operation\'s schema) and operation.', ['reason', 'op'])
    this.#server = new NodeCallServer({
      calls: this.#compiled,
      logger: options.logger,
      served: m.counter('forwards_served_total', 'Calls other nodes forwarded to this node and it ran, by operation.', ['op']),
      rejected: this.#rejected,
    })
    this.#sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.#receive(message))
  }

  static async start<Calls extends NodeCallTable>(options: ForwarderOptions<Calls>): Promise<Forwarder<Calls>> {
    const forwarder = new Forwarder(options)
    const connected = Promise.all([forwarder.#pub.connect(), forwarder.#sub.connect()]).then(() => forwarder.#sub.subscribe(forwarder.#channel(options.nodeId)))
    try {
      await withTimeout(connected, connectTimeoutMs, options.timers, () => new Error(`Redis gave no answer within ${connectTimeoutMs} ms`))
    } catch (error) {
      forwarder.#pub.disconnect()
      forwarder.#sub.disconnect()
      throw error
    }
    return forwarder
  }

  /** Serves an operation for other nodes; the handler gets only arguments that passed the op's schema. */
  handle<Op extends OpOf<Calls>>(op: Op, handler: NodeCallHandler<Calls, Op>): void {
    this.#server.handle(op, handler)
  }

  /** Fails the start when an op of the table has no handler: another node's call would only get "no operation". */
  assertServesAll(): void {
    const missing = this.#server.unserved()
    if (missing.length > 0) throw new TypeError(`node calls without a handler on this node: ${missing.join(', ')}`)
  }

  /** Calls `op` on `node`; rejects with the owner's ServiceError, or ForwardFailed when it cannot be reached in time. */
  call<Op extends OpOf<Calls>>(node: string, op: Op, args: CallArgs<Calls, Op>): Promise<CallResult<Calls, Op>> {
    if (this.#closed) return Promise.reject(new ForwardFailed('this node is shutting down'))
    const id = this.#next++
    const started = performance.now()
    const checkResult = this.#compiled[op].result
    const outcome = (name: string) => {
      this.#calls.inc({ op, outcome: name })
      this.#seconds.observe({ op }, (performance.now() - started) / 1000)
    }
    return new Promise((resolve, reject) => {
      const timer = this.#o.timers.setTimeout(() => {
        this.#pending.delete(id)
        outcome('timeout')
        reject(new ForwardFailed(`the owner node ${node} did not answer within ${this.#o.timeoutMs} ms`))
      }, this.#o.timeoutMs)
      this.#pending.set(id, {
        resolve: (value) => {
          const result = checkResult(value)
          if (result.ok) {
            outcome('ok')
            resolve(result.value)
            return
          }
          // It may have run: not a ForwardFailed, so it is never sent again.
          outcome('malformed')
          this.#o.logger.warn('forwarder: an answer does not match its schema', { op, node, reason: result.reason })
          reject(new Error(`the owner node ${node} answered ${op} with a value this node cannot read: ${result.reason}`))
        },
        reject: (error) => {
          outcome(error instanceof ForwardFailed ? 'unreachable' : 'refused')
          reject(error)
        },
        timer,
      })
      const frame: CallFrame = [0, id, this.#o.nodeId, op, args]
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
    this.#o.timers.clearTimeout(pending.timer)
    if (ok) pending.resolve(value)
    else pending.reject(error)
  }

  #receive(message: Buffer): void {
    let decoded: unknown
    try {
      decoded = decode(message)
    } catch (error) {
      this.#rejected.inc({ reason: 'frame', op: '' })
      this.#o.logger.warn('forwarder: a frame that is not MessagePack', { error })
      return
    }
    const frame = checkFrame(decoded)
    if (!frame.ok) {
      this.#rejected.inc({ reason: 'frame', op: '' })
      this.#o.logger.warn('forwarder: a frame that is not a node call nor an answer', { reason: frame.reason })
      return
    }
    const f = frame.value
    if (f[0] === 1) {
      if (f[2]) this.#settle(f[1], true, f[3])
      else this.#settle(f[1], false, undefined, fromWire(f[3]))
      return
    }
    const from = f[2]
    void this.#server.answer(f).then((answer: AnswerFrame) =>
      this.#pub.publish(this.#channel(from), Buffer.from(encode(answer, { ignoreUndefined: true }))).catch((error: unknown) => this.#o.logger.warn('forwarder: an answer was not sent', { op: f[3], error })),
    )
  }
}
