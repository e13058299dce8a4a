/**
 * Who owns which entity (DESIGN section 6). Every entity key (a printer id,
 * later a display id) maps to one of a fixed number of shards by hash; a
 * `ShardDirectory` says which node owns a shard now. The local directory
 * (one node owns everything) is the only one until the Redis directory of
 * issue 7 arrives; the runtime is written against this interface so that
 * swap changes no caller.
 */

/** Fixed for the life of a deployment: changing it moves every entity at once. */
export const shardCount = 256

/** FNV-1a (32 bit) of the key's UTF-16 code units: fast, stable across nodes and versions. */
export function shardOf(key: string, shards: number = shardCount): number {
  let hash = 0x811c9dc5
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash % shards
}

export interface ShardDirectory {
  /** This node's id (unique among live nodes). */
  readonly nodeId: string
  /** The owner of a shard now, or undefined while no node holds it (a lease in flight). */
  ownerOf(shard: number): string | undefined
  ownsShard(shard: number): boolean
  /**
   * The fencing token of a shard this node owns. Issue 7 raises it in
   * PostgreSQL on every acquisition and checks it with every durable write;
   * the local directory owns everything at token 1.
   */
  tokenOf(shard: number): number
  /** Called when this node loses a shard, so its actors are dropped; returns an unsubscribe. */
  onShardLost(listener: (shard: number) => void): () => void
  start(): Promise<void>
  stop(): Promise<void>
}

/** One node, every shard: the single-process deployment and the embedded default. */
export class LocalShardDirectory implements ShardDirectory {
  readonly nodeId: string

  constructor(nodeId = 'local') {
    this.nodeId = nodeId
  }

  ownerOf(shard: number): string | undefined {
    return shard >= 0 && shard < shardCount ? this.nodeId : undefined
  }

  ownsShard(shard: number): boolean {
    return shard >= 0 && shard < shardCount
  }

  tokenOf(): number {
    return 1
  }

  onShardLost(): () => void {
    return () => undefined
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {}
}
