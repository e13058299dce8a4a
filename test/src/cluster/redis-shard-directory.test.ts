/**
 * The Redis shard directory on real Redis and PostgreSQL: placement, moves
 * on join, leave and crash, lease loss after a stall, and fencing tokens
 * that only ever rise. Nodes here are directories in one process with short
 * leases; the multi-process failure tests come with the directory's wiring
 * into the service.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { placementOf, RedisShardDirectory } from '../../../src/cluster/redis-shard-directory.js'
import { MetricsRegistry } from '../../../src/observability/metrics.js'
import { captureLogger, startTestService, type TestContext } from '../../helpers/service.js'
import { waitFor } from '../../helpers/poll.js'
import { systemClock } from '../../../actors/clock.js'

const shared = process.env['DATABASE_URL'] && process.env['REDIS_URL']
if (!shared) t.plan(0, 'needs DATABASE_URL and REDIS_URL')

const leaseMs = 600
const shards = 32

async function cluster(t: TestContext) {
  // The service only holds the schema here: without REDIS_URL its own directory is local and raises no token.
  const svc = await startTestService(t, { REDIS_URL: undefined })
  const keyspace = `${svc.config.databaseSchema}-${randomBytes(4).toString('hex')}`
  const nodes: RedisShardDirectory[] = []
  const node = async (nodeId: string) => {
    const directory = new RedisShardDirectory({
      redisUrl: process.env['REDIS_URL']!,
      keyspace,
      sql: svc.services.db.sql,
      logger: captureLogger().logger,
      metrics: new MetricsRegistry(),
      nodeId,
      leaseMs,
      tickMs: 50,
      shards,
      clock: systemClock,
    })
    nodes.push(directory)
    t.teardown(() => directory.stop().catch(() => undefined))
    await directory.start()
    return directory
  }
  const tokens = async () => {
    const rows = await svc.services.db.sql<{ shard: number; token: string }[]>`select shard, token from shard_tokens`
    return new Map(rows.map((r) => [r.shard, Number(r.token)]))
  }
  /** Every shard owned by exactly one of these directories, each its placement winner among them. */
  const settled = (live: RedisShardDirectory[]) => {
    const ids = live.map((n) => n.nodeId)
    for (let s = 0; s < shards; s++) {
      const owners = live.filter((n) => n.ownsShard(s))
      if (owners.length !== 1 || owners[0]!.nodeId !== placementOf(s, ids)) return false
      if (live.some((n) => n.ownerOf(s) !== owners[0]!.nodeId)) return false
    }
    return true
  }
  return { node, tokens, settled, nodes }
}

t.test('three nodes: every shard has exactly one owner, its placement winner, and every node agrees who it is', async (t) => {
  const c = await cluster(t)
  const a = await c.node('node-a')
  const b = await c.node('node-b')
  const d = await c.node('node-c')
  await waitFor(() => c.settled([a, b, d]), 'placement settled')
  const counts = [a, b, d].map((n) => n.ownedShards().length)
  t.equal(counts.reduce((x, y) => x + y), shards)
  t.ok(counts.every((n) => n > 0), `each node holds some shards (${counts.join(', ')})`)
  const tokens = await c.tokens()
  t.equal(tokens.size, shards, 'a fencing token for every shard taken')
  for (const n of [a, b, d]) for (const s of n.ownedShards()) t.equal(n.tokenOf(s), tokens.get(s), `shard ${s}: the owner writes with the stored token`)
})

t.test('a node that stops gracefully hands its shards over at once, with higher tokens; one that joins takes only its share', async (t) => {
  const c = await cluster(t)
  const a = await c.node('node-a')
  const b = await c.node('node-b')
  await waitFor(() => c.settled([a, b]), 'two nodes settled')
  const before = await c.tokens()
  const fromB = b.ownedShards()
  const lost: number[] = []
  b.onShardLost((s) => lost.push(s))
  await b.stop()
  t.same(lost.sort((x, y) => x - y), fromB, 'its listeners hear of every shard it gives up')
  await waitFor(() => a.ownedShards().length === shards, 'the other node holds everything')
  const after = await c.tokens()
  for (const s of fromB) t.ok(after.get(s)! > before.get(s)!, `shard ${s}: the new owner's token is higher`)

  const aBefore = new Set(a.ownedShards())
  const d = await c.node('node-c')
  await waitFor(() => c.settled([a, d]), 'the newcomer settled')
  t.ok(d.ownedShards().every((s) => aBefore.has(s) && placementOf(s, ['node-a', 'node-c']) === 'node-c'), 'only shards whose winner changed moved')
})

t.test('a node that crashes keeps nothing: its shards move once its leases run out', async (t) => {
  const c = await cluster(t)
  const a = await c.node('node-a')
  const b = await c.node('node-b')
  await waitFor(() => c.settled([a, b]), 'settled')
  const fromB = b.ownedShards()
  b.abandon()
  t.ok(fromB.every((s) => a.ownerOf(s) === 'node-b'), 'right after the crash the lease is still the dead node\'s')
  await waitFor(() => a.ownedShards().length === shards, 'the survivor took them after expiry')
  t.ok(fromB.every((s) => a.ownsShard(s)))
})

t.test('a node that stalls past its lease stops claiming its shards by itself, and hears it lost them when it runs again', async (t) => {
  const c = await cluster(t)
  const a = await c.node('node-a')
  const b = await c.node('node-b')
  await waitFor(() => c.settled([a, b]), 'settled')
  const fromB = b.ownedShards()
  const tokensBefore = fromB.map((s) => b.tokenOf(s))
  const lost: number[] = []
  b.onShardLost((s) => lost.push(s))
  // A stall: b's event loop is blocked longer than the lease (what SIGSTOP or a long GC pause does).
  const end = Date.now() + leaseMs * 2
  while (Date.now() < end) {
    // busy
  }
  t.ok(fromB.every((s) => !b.ownsShard(s)), 'no shard is claimed on an expired lease, before any timer ran')
  t.throws(() => b.tokenOf(fromB[0]!), /not owned/, 'and no token is handed out for a write')
  await waitFor(() => lost.length === fromB.length, 'the loss is reported')
  await waitFor(() => c.settled([a, b]), 'settled again')
  const tokensAfter = await c.tokens()
  fromB.forEach((s, i) => t.ok(tokensAfter.get(s)! > tokensBefore[i]!, `shard ${s}: taken again with a higher token`))
})
