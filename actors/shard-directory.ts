/**
 * Who owns which entity (docs/operations.md). Every entity key (a printer id,
 * later a display id) maps to one of a fixed number of shards by hash; a
 * `ShardDirectory` says which node owns a shard now: the local directory
 * (one node owns everything) or the Redis one of src/cluster (several
 * nodes). The runtimes are written against this interface, so the choice
 * changes no caller.
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
  /** The owner of a shard as of this node's last look, or undefined while no node holds it (a lease in flight). */
  ownerOf(shard: number): string | undefined
  /** The owner of a shard asked of the directory now (this node's table may be a round old); optional. */
  resolveOwner?(shard: number): Promise<string | undefined>
  ownsShard(shard: number): boolean
  /**
   * The fencing token of a shard this node owns; throws ShardUnavailable when
   * it does not own it now. The Redis directory raises it in PostgreSQL on
   * every acquisition and the store refuses a write carrying an older one.
   * 0 means unfenced: the local directory is the only writer by construction.
   */
  tokenOf(shard: number): number
  /** Called when this node loses a shard, so its actors are dropped; returns an unsubscribe. */
  onShardLost(listener: (shard: number) => void): () => void
  /** Called with the shards this node took in one round (their actors may have work to resume); returns an unsubscribe. */
  onShardGained(listener: (shards: readonly number[]) => void): () => void
  /** The store refused a write of this shard (a newer token exists): give the shard up now. */
  fenced(shard: number): void
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
    return 0
  }

  onShardLost(): () => void {
    return () => undefined
  }

  onShardGained(): () => void {
    return () => undefined
  }

  fenced(): void {}

  async start(): Promise<void> {}

  async stop(): Promise<void> {}
}

/**
 * This node may not write the shard: it does not own it now, or the store
 * refused its token because another node took the shard. Nothing was
 * stored; the runtimes answer 503 with their own code and the client retries.
 */
export class ShardUnavailable extends Error {
  readonly shard: number
  readonly reason: 'not_owned' | 'fenced'

  constructor(shard: number, reason: 'not_owned' | 'fenced') {
    super(reason === 'fenced' ? `shard ${shard} was taken by another node (a newer fencing token)` : `shard ${shard} is not owned by this node now`)
    this.name = 'ShardUnavailable'
    this.shard = shard
    this.reason = reason
  }
}

/** The token a write of this shard carries now (0: unfenced). */
export interface Fence {
  shard: number
  token: number
}
