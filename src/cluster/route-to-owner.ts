/**
 * Where a call on a sharded entity runs (docs/operations.md): here when this
 * node owns the shard, else on the owner through the Forwarder. Printers and
 * displays route the same way and differ only in their 503 code.
 *
 * A forwarded call that reached no subscriber ran nowhere, so it is safe to
 * send again: that happens when this node's owner table is a round old and
 * the owner it names has died and the shard has already moved. The owner is
 * then read again from Redis and the call goes there, once. A call that timed
 * out is never sent again: it may have run.
 */
import type { ShardDirectory } from '../../actors/shard-directory.js'
import type { CallArgs, CallResult, NodeCallTable, OpOf } from '../../protocol/node-calls.js'
import { ForwardFailed, OwnerNotListening, type Forwarder } from './forwarder.js'

export const local = Symbol('local')

/** No node could take the call: none holds the shard (`noOwner`), or the owner could not be reached. Nothing is known to be stored. */
export class OwnerUnavailable extends Error {
  readonly noOwner: boolean
  constructor(message: string, noOwner: boolean, cause?: unknown) {
    super(message, { cause })
    this.name = 'OwnerUnavailable'
    this.noOwner = noOwner
  }
}

/** `local` when this node owns `shard` (run the call here); else the owner's answer. Rejects with OwnerUnavailable, or the owner's ServiceError. */
export async function routeToOwner<Calls extends NodeCallTable, Op extends OpOf<Calls>>(
  directory: ShardDirectory,
  forwarder: Forwarder<Calls>,
  shard: number,
  op: Op,
  /** Built only when the call leaves this node. */
  args: () => CallArgs<Calls, Op>,
): Promise<CallResult<Calls, Op> | typeof local> {
  if (directory.ownsShard(shard)) return local
  // A table a round old may miss a move that just happened: ask Redis before answering 503.
  let owner = directory.ownerOf(shard) ?? (await resolve(directory, shard))
  const sending = args()
  for (let sent = 0; ; sent++) {
    if (directory.ownsShard(shard)) return local
    if (owner === undefined) throw new OwnerUnavailable('no node holds the shard right now (it is moving after a node left)', true)
    try {
      return await forwarder.call(owner, op, sending)
    } catch (error) {
      if (!(error instanceof ForwardFailed)) throw error
      if (error instanceof OwnerNotListening && sent === 0) {
        const fresh = await resolve(directory, shard)
        if (fresh !== owner || directory.ownsShard(shard)) {
          owner = fresh
          continue
        }
      }
      throw new OwnerUnavailable(`${error.message}; nothing is known to be stored`, false, error)
    }
  }
}

function resolve(directory: ShardDirectory, shard: number): Promise<string | undefined> {
  return directory.resolveOwner?.(shard).catch(() => undefined) ?? Promise.resolve(undefined)
}
