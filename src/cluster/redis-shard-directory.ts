/**
 * The Redis `ShardDirectory` (docs/operations.md, several nodes): several nodes with
 * the same DATABASE_URL and REDIS_URL share the shards, one owner each.
 *
 * - Membership: every node heartbeats into a sorted set scored by its
 *   expiry (Redis's clock, inside a Lua script, so node clocks never
 *   disagree about who is alive).
 * - Leases: one key per shard holding the owner's node id with a TTL. Take
 *   (SET NX PX), renew and release are Lua scripts (src/cluster/lua/) that
 *   check the holder in the same step: no read-then-write race.
 * - Fencing: each acquisition raises the shard's token in PostgreSQL
 *   (shard_tokens); the shard counts as owned only once that commit is back.
 *   The durable writes of the shard's actors carry the token, and
 *   PostgreSQL refuses an older one.
 * - Placement: rendezvous hashing over the live nodes. Every node computes
 *   the same winner for every shard without talking to the others, a join
 *   or leave moves only the shards whose winner changed (about 1/n), and
 *   the move is gradual: at most `movesPerTick` releases per tick (free
 *   shards are taken at once).
 * - Losing a lease: a shard is owned only until its last confirmed renewal
 *   plus the lease minus a safety margin, measured on this node's monotonic
 *   clock from before the renewal was sent. A node that stalls (GC pause,
 *   SIGSTOP) therefore stops claiming its shards by itself the moment it
 *   runs again, before any timer fires; listeners hear of the loss at the
 *   next tick.
 */
import { Redis } from 'ioredis'
import { createHash, randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Clock } from '../../actors/clock.js'
import type { Sql } from 'postgres'
import { ShardUnavailable, shardCount, type ShardDirectory } from '../../actors/shard-directory.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { setLocal } from '../storage/set-local.js'
import { withLuaScripts, type ScriptedRedis } from './lua-scripts.js'

export interface RedisShardDirectoryOptions {
  redisUrl: string
  /** Keys live under `printfarm:{keyspace}:shards:`; the database schema, so deployments sharing a Redis stay apart. */
  keyspace: string
  /** The fencing authority. */
  sql: Sql
  logger: Logger
  metrics: MetricsRegistry
  nodeId?: string
  /** Lease TTL. A dead owner's shards move after at most this long. */
  leaseMs?: number
  /** Heartbeat, renewal and rebalance period; a fifth of the lease by default. */
  tickMs?: number
  /** Shards released and acquired per tick at most (a gradual rebalance). */
  movesPerTick?: number
  /** Shards, for tests with fewer than `shardCount`. */
  shards?: number
  /**
   * The node's clock: when the next tick runs, and the time a shard's owner row says it was taken.
   * A lease itself is measured on the monotonic clock (performance.now()), as Redis measures its TTL:
   * real time, which a test's clock set ahead must not shorten.
   */
  clock: Clock
}

/** Rendezvous weight of a node for a shard: the highest wins. */
export function placementWeight(nodeId: string, shard: number): bigint {
  return createHash('sha256').update(`${nodeId}\u0000${shard}`).digest().readBigUInt64BE(0)
}

/** The winner of a shard among these nodes (undefined for none). */
export function placementOf(shard: number, nodes: readonly string[]): string | undefined {
  let best: string | undefined
  let bestWeight = -1n
  for (const node of nodes) {
    const w = placementWeight(node, shard)
    if (w > bestWeight || (w === bestWeight && best !== undefined && node < best)) {
      best = node
      bestWeight = w
    }
  }
  return best
}

interface Held {
  token: number
  /** Owned until this moment (performance.now()): last confirmed renewal + lease - margin. */
  validUntil: number
}

export class RedisShardDirectory implements ShardDirectory {
  readonly nodeId: string
  readonly #redis: ScriptedRedis
  readonly #o: Required<Omit<RedisShardDirectoryOptions, 'nodeId' | 'redisUrl'>>
  readonly #prefix: string
  readonly #held = new Map<number, Held>()
  readonly #owners: (string | undefined)[]
  readonly #lostListeners = new Set<(shard: number) => void>()
  readonly #gainedListeners = new Set<(shards: readonly number[]) => void>()
  /** A tick completed recently: this node knows the lease table (readiness). */
  #tableAt = -Infinity
  readonly #metrics
  #members: string[] = []
  #timer: unknown
  #ticking: Promise<void> | undefined
  #stopped = false

  constructor(options: RedisShardDirectoryOptions) {
    const leaseMs = options.leaseMs ?? 10_000
    this.nodeId = options.nodeId ?? `node-${randomBytes(6).toString('hex')}`
    this.#o = {
      keyspace: options.keyspace,
      sql: options.sql,
      logger: options.logger,
      metrics: options.metrics,
      leaseMs,
      tickMs: options.tickMs ?? Math.max(50, Math.floor(leaseMs / 5)),
      movesPerTick: options.movesPerTick ?? 32,
      shards: options.shards ?? shardCount,
      clock: options.clock,
    }
    this.#prefix = `printfarm:${options.keyspace}:shards:`
    this.#owners = new Array(this.#o.shards).fill(undefined)
    this.#redis = withLuaScripts(new Redis(options.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true }))
    this.#redis.on('error', (error: unknown) => this.#o.logger.warn('shard directory: Redis error', { error }))
    const m = options.metrics
    this.#metrics = {
      owned: m.gauge('shards_owned', 'Shards this node holds a lease on.'),
      renewals: m.counter('shard_lease_renewals_total', 'Shard lease renewals by outcome: renewed; lost (Redis gave the lease to another node); expired (this node stalled past its lease); fenced (the store saw a newer token).', ['outcome']),
      acquisitions: m.counter('shard_acquisitions_total', 'Shards this node took.'),
      releases: m.counter('shard_releases_total', 'Shards this node gave up for a rebalance or a shutdown.'),
    }
  }

  #key(shard: number): string {
    return `${this.#prefix}lease:${shard}`
  }

  get #membersKey(): string {
    return `${this.#prefix}nodes`
  }

  /** The live nodes as of the last heartbeat. */
  get members(): readonly string[] {
    return this.#members
  }

  /** Shards held now (valid leases only). */
  ownedShards(): number[] {
    return [...this.#held.keys()].filter((s) => this.ownsShard(s)).sort((a, b) => a - b)
  }

  ownerOf(shard: number): string | undefined {
    if (this.ownsShard(shard)) return this.nodeId
    const owner = this.#owners[shard]
    return owner === this.nodeId ? undefined : owner
  }

  /** Reads the lease now: a shard that moved since this node's last round is found at once. */
  async resolveOwner(shard: number): Promise<string | undefined> {
    if (this.ownsShard(shard)) return this.nodeId
    const owner = (await this.#redis.get(this.#key(shard))) ?? undefined
    if (owner !== this.nodeId) this.#owners[shard] = owner
    return owner === this.nodeId ? undefined : owner
  }

  ownsShard(shard: number): boolean {
    const held = this.#held.get(shard)
    return held !== undefined && performance.now() < held.validUntil
  }

  tokenOf(shard: number): number {
    const held = this.#held.get(shard)
    if (held === undefined || !this.ownsShard(shard)) throw new ShardUnavailable(shard, 'not_owned')
    return held.token
  }

  onShardLost(listener: (shard: number) => void): () => void {
    this.#lostListeners.add(listener)
    return () => this.#lostListeners.delete(listener)
  }

  onShardGained(listener: (shards: readonly number[]) => void): () => void {
    this.#gainedListeners.add(listener)
    return () => this.#gainedListeners.delete(listener)
  }

  /** Whether this node holds a current lease table: its last tick completed within a lease. */
  get ready(): boolean {
    return !this.#stopped && performance.now() - this.#tableAt < this.#o.leaseMs
  }

  /** The store refused this node's token: another node holds the shard. Give it up at once. */
  fenced(shard: number): void {
    if (!this.#held.has(shard)) return
    this.#metrics.renewals.inc({ outcome: 'fenced' })
    this.#o.logger.warn('shard fenced by a newer token; given up', { shard, nodeId: this.nodeId })
    this.#lose(shard)
    this.#redis.release(1, this.#key(shard), this.nodeId).catch(() => undefined)
  }

  async start(): Promise<void> {
    await this.#redis.connect()
    await this.tick()
    this.#schedule()
  }

  /** Gives every shard up (the next owners take them at once, without waiting for expiry) and leaves. */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#o.clock.clearTimeout(this.#timer)
    await this.#ticking
    const shards = [...this.#held.keys()]
    for (const shard of shards) this.#lose(shard)
    try {
      if (shards.length > 0) await this.#redis.release(shards.length, ...shards.map((s) => this.#key(s)), this.nodeId)
      await this.#redis.zrem(this.#membersKey, this.nodeId)
    } catch (error) {
      this.#o.logger.warn('shard directory: leaving failed; leases expire by themselves', { error })
    }
    this.#redis.disconnect()
  }

  /** Ends without releasing anything, as a crash would: leases run out in Redis. For failure tests. */
  abandon(): void {
    this.#stopped = true
    this.#o.clock.clearTimeout(this.#timer)
    this.#redis.disconnect()
  }

  #schedule(): void {
    if (this.#stopped) return
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#ticking = this.tick()
        .catch((error: unknown) => this.#o.logger.warn('shard directory tick failed', { error }))
        .finally(() => this.#schedule())
    }, this.#o.tickMs)
  }

  /** One round: heartbeat, renew, release what moved away, take what is due, refresh the owner table. */
  async tick(): Promise<void> {
    // Leases that ran out on this node's clock (it stalled) are lost before anything else.
    const expired = [...this.#held.keys()].filter((shard) => !this.ownsShard(shard))
    if (expired.length > 0) {
      this.#metrics.renewals.inc({ outcome: 'expired' }, expired.length)
      this.#o.logger.warn('shard leases ran out before they were renewed (this node stalled); given up', { shards: expired.length, nodeId: this.nodeId })
      for (const shard of expired) this.#lose(shard)
    }
    const nodeTtl = this.#o.leaseMs
    this.#members = ((await this.#redis.heartbeat(1, this.#membersKey, this.nodeId, nodeTtl)) as string[]).sort()
    await this.#renew()
    const wanted = (shard: number) => placementOf(shard, this.#members) === this.nodeId
    const moveAway = [...this.#held.keys()].filter((s) => !wanted(s)).slice(0, this.#o.movesPerTick)
    if (moveAway.length > 0) await this.#release(moveAway)
    await this.#refreshOwners()
    // Free shards (no lease anywhere) are taken all at once: no owner hands anything over, and a
    // node starting alone owns every shard after its first round. Gradual moves come from the
    // release limit above.
    const free: number[] = []
    for (let s = 0; s < this.#o.shards; s++) {
      if (!this.#held.has(s) && (this.#owners[s] === undefined || this.#owners[s] === this.nodeId) && wanted(s)) free.push(s)
    }
    if (free.length > 0) await this.#acquire(free)
    this.#metrics.owned.set({}, this.#held.size)
    this.#tableAt = performance.now()
  }

  async #renew(): Promise<void> {
    const shards = [...this.#held.keys()]
    if (shards.length === 0) return
    const sentAt = performance.now()
    const renewed = (await this.#redis.renew(shards.length, ...shards.map((s) => this.#key(s)), this.nodeId, this.#o.leaseMs)) as number[]
    const validUntil = sentAt + this.#o.leaseMs - this.#margin()
    shards.forEach((shard, i) => {
      const held = this.#held.get(shard)
      if (held === undefined) return
      if (renewed[i] === 1 && performance.now() < held.validUntil) {
        held.validUntil = validUntil
        this.#metrics.renewals.inc({ outcome: 'renewed' })
      } else {
        this.#metrics.renewals.inc({ outcome: 'lost' })
        this.#o.logger.warn('shard lease lost', { shard, nodeId: this.nodeId })
        this.#lose(shard)
      }
    })
  }

  /** A renewal must land before the lease ends on Redis's clock too: allow for a tick of delay and clock rate drift. */
  #margin(): number {
    return Math.min(this.#o.tickMs, this.#o.leaseMs / 4)
  }

  async #release(shards: number[]): Promise<void> {
    for (const shard of shards) this.#lose(shard)
    await this.#redis.release(shards.length, ...shards.map((s) => this.#key(s)), this.nodeId)
    this.#metrics.releases.inc({}, shards.length)
  }

  async #acquire(shards: number[]): Promise<void> {
    const sentAt = performance.now()
    const results = (await this.#redis.take(shards.length, ...shards.map((s) => this.#key(s)), this.nodeId, this.#o.leaseMs)) as number[]
    const taken = shards.filter((_, i) => results[i] === 1)
    if (taken.length === 0) return
    let tokens: Map<number, number>
    try {
      tokens = await this.#raiseTokens(taken)
    } catch (error) {
      // Without a token the shard cannot be written: give the leases back for another node (or the next tick).
      this.#o.logger.warn('shard directory: fencing tokens not raised; leases given back', { error })
      await this.#redis.release(taken.length, ...taken.map((s) => this.#key(s)), this.nodeId).catch(() => undefined)
      return
    }
    const validUntil = sentAt + this.#o.leaseMs - this.#margin()
    for (const shard of taken) {
      this.#held.set(shard, { token: tokens.get(shard)!, validUntil })
      this.#owners[shard] = this.nodeId
    }
    this.#metrics.acquisitions.inc({}, taken.length)
    // One call per round, not per shard: a listener that reads the store does it once for the lot.
    for (const listener of this.#gainedListeners) {
      try {
        listener(taken)
      } catch (error) {
        this.#o.logger.error('shard-gained listener failed', { shards: taken, error })
      }
    }
  }

  /** One statement for all shards taken in this tick: each token one higher than any before it. */
  async #raiseTokens(shards: number[]): Promise<Map<number, number>> {
    // The raise waits for writes of the old owner that hold the token row (they commit first,
    // so the new owner hydrates after them); bounded, so a stuck writer never stalls the tick
    // and with it this node's renewals. The raise holds the rows it raised until its COMMIT, a
    // round trip later: should this node freeze in between, PostgreSQL ends the transaction
    // after a lease, and another node can take the shards (as a frozen flush, event-store.ts).
    const rows = await this.#o.sql.begin(async (tx) => {
      await setLocal(tx, { lockTimeoutMs: Math.max(100, Math.floor(this.#o.tickMs / 2)), idleInTransactionMs: this.#o.leaseMs })
      return tx<{ shard: number; token: string }[]>`
        insert into shard_tokens (shard, token, owner)
        select s, 1, ${this.nodeId} from unnest(${shards}::int[]) as s
        on conflict (shard) do update set token = shard_tokens.token + 1, owner = excluded.owner, acquired_at = ${new Date(this.#o.clock.now())}
        returning shard, token`
    })
    return new Map(rows.map((r) => [r.shard, Number(r.token)]))
  }

  async #refreshOwners(): Promise<void> {
    const keys = Array.from({ length: this.#o.shards }, (_, s) => this.#key(s))
    const owners = await this.#redis.mget(...keys)
    owners.forEach((owner, s) => {
      this.#owners[s] = owner ?? undefined
    })
  }

  #lose(shard: number): void {
    if (!this.#held.delete(shard)) return
    if (this.#owners[shard] === this.nodeId) this.#owners[shard] = undefined
    for (const listener of this.#lostListeners) {
      try {
        listener(shard)
      } catch (error) {
        this.#o.logger.error('shard-lost listener failed', { shard, error })
      }
    }
  }
}
