/**
 * The receiving side of node-to-node calls (protocol/node-calls.ts): one
 * call frame in, one answer frame out. Another node is an edge like any
 * client: the arguments are checked against the op's schema (compiled once,
 * at start) before the handler sees them, and a call that does not pass is
 * answered with the reason, counted and logged, and never run. The transport
 * (Redis pub/sub, src/cluster/forwarder.ts) only moves the frames.
 *
 * A refused call is answered without a code: it is a fault between nodes (a
 * bug, or two versions that disagree during a rolling restart), not bad
 * client input, so the caller's client gets 500 internal_error, as for an op
 * the node does not serve.
 */
import { isErrorCode, ServiceError } from '../../protocol/errors.js'
import type { AnswerFrame, CallArgs, CallFrame, CallResult, NodeCallTable, OpOf, WireError } from '../../protocol/node-calls.js'
import type { CompiledCalls } from '../../protocol/schemas/validator.js'
import type { Logger } from '../observability/log.js'
import type { Counter } from '../observability/metrics.js'

export type NodeCallHandler<Calls extends NodeCallTable, Op extends OpOf<Calls>> = (args: CallArgs<Calls, Op>) => Promise<CallResult<Calls, Op>>

/** An op this node serves: its arguments checked, then the handler to run, or why not. */
type Served = (args: unknown) => { ok: true; run: () => Promise<unknown> } | { ok: false; reason: string }

export interface NodeCallServerOptions<Calls extends NodeCallTable> {
  calls: CompiledCalls<Calls>
  logger: Logger
  /** Calls run, by op. */
  served: Counter
  /** Frames refused, by reason (`op`: no such operation here; `args`: they fail the op's schema) and op. */
  rejected: Counter
}

export class NodeCallServer<Calls extends NodeCallTable> {
  readonly #o: NodeCallServerOptions<Calls>
  readonly #served = new Map<string, Served>()

  constructor(options: NodeCallServerOptions<Calls>) {
    this.#o = options
  }

  /** Serves `op` for other nodes; `handler` only ever gets arguments that passed the op's schema. */
  handle<Op extends OpOf<Calls>>(op: Op, handler: NodeCallHandler<Calls, Op>): void {
    if (this.#served.has(op)) throw new TypeError(`node call ${op} is served twice`)
    const check = this.#o.calls[op].args
    this.#served.set(op, (raw) => {
      const args = check(raw)
      return args.ok ? { ok: true, run: () => handler(args.value) } : args
    })
  }

  /** Ops of the table nothing serves yet (the service checks at start that there are none). */
  unserved(): string[] {
    return Object.keys(this.#o.calls).filter((op) => !this.#served.has(op))
  }

  /** The answer to one call frame: the handler's result, its ServiceError, or the reason it was not run. */
  async answer(frame: CallFrame): Promise<AnswerFrame> {
    const [, id, from, op, raw] = frame
    const served = this.#served.get(op)
    if (served === undefined) {
      this.#o.rejected.inc({ reason: 'op', op: '' })
      this.#o.logger.warn('node call refused: no such operation on this node', { op, from })
      return [1, id, false, { message: `no operation '${op}' on this node` }]
    }
    const checked = served(raw)
    if (!checked.ok) {
      this.#o.rejected.inc({ reason: 'args', op })
      this.#o.logger.warn('node call refused: its arguments do not match the schema', { op, from, reason: checked.reason })
      return [1, id, false, { message: `node call ${op} refused: ${checked.reason}` }]
    }
    this.#o.served.inc({ op })
    try {
      return [1, id, true, await checked.run()]
    } catch (error) {
      if (!(error instanceof ServiceError)) this.#o.logger.error('forwarded call failed', { op, error })
      return [1, id, false, toWire(error)]
    }
  }
}

export function toWire(error: unknown): WireError {
  if (error instanceof ServiceError) {
    return { code: error.code, message: error.message, ...(error.extra === undefined ? {} : { extra: { ...error.extra } }), ...(error.headers === undefined ? {} : { headers: { ...error.headers } }) }
  }
  return { message: 'the owner node failed to handle the call' }
}

/** The owner's refusal as this node throws it: its ServiceError when the code is one this node knows, else a plain Error (500). */
export function fromWire(wire: WireError): Error {
  if (wire.code !== undefined && isErrorCode(wire.code)) {
    return new ServiceError(wire.code, wire.message, { ...(wire.extra === undefined ? {} : { extra: wire.extra }), ...(wire.headers === undefined ? {} : { headers: wire.headers }) })
  }
  return new Error(wire.message)
}
