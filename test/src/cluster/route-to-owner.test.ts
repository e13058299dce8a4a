/**
 * Routing a call to the owner of its shard, over real Redis pub/sub: a
 * call that reached nobody (this node's table named a node that has died) is
 * sent once more to the owner Redis names now; a call that may have run (a
 * timeout) is never sent again; no owner anywhere is a clear refusal.
 */
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { randomBytes } from 'node:crypto'
import { LocalShardDirectory, type ShardDirectory } from '../../../actors/shard-directory.js'
import { Forwarder } from '../../../src/cluster/forwarder.js'
import { local, OwnerUnavailable, routeToOwner } from '../../../src/cluster/route-to-owner.js'
import { MetricsRegistry } from '../../../src/observability/metrics.js'
import { captureLogger, type TestContext } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

if (!process.env['REDIS_URL']) t.plan(0, 'needs REDIS_URL')

const shard = 7

/** The transport's own contract, apart from the service's calls. */
const calls = {
  echo: { args: Type.Object({ value: Type.Integer() }, { additionalProperties: false }), result: Type.Object({ echoed: Type.Integer() }) },
  stall: { args: Type.Object({}, { additionalProperties: false }), result: Type.Null() },
} as const

async function forwarders(t: TestContext, timeoutMs = 5_000) {
  const keyspace = `route-${randomBytes(4).toString('hex')}`
  const start = async (nodeId: string) => {
    const f = await Forwarder.start({ redisUrl: process.env['REDIS_URL']!, keyspace, nodeId, timeoutMs, logger: captureLogger().logger, metrics: new MetricsRegistry(), calls, timers: systemClock })
    t.teardown(() => f.close())
    return f
  }
  return { caller: await start('caller'), owner: await start('owner') }
}

/** This node's view: a table (possibly stale) and what Redis says now. */
function directory(table: string | undefined, redis: string | undefined) {
  const asked: number[] = []
  const d: ShardDirectory = Object.assign(new LocalShardDirectory('caller'), {
    ownerOf: () => table,
    ownsShard: () => false,
    resolveOwner: async (s: number) => (asked.push(s), redis),
  })
  return { d, asked }
}

t.test('route - a call to an owner that is gone (nobody received it) goes once more to the owner Redis names now', async (t) => {
  const { caller, owner } = await forwarders(t)
  let served = 0
  owner.handle('echo', async (args) => (served++, { echoed: args.value }))
  const { d, asked } = directory('died-a-round-ago', 'owner')
  t.same(await routeToOwner(d, caller, shard, 'echo', () => ({ value: 42 })), { echoed: 42 })
  t.equal(served, 1, 'the owner ran it once')
  t.same(asked, [shard], 'Redis was asked once, after the first send reached nobody')
})

t.test('route - a gone owner that Redis still names (its lease has not run out) is refused as unreachable, after one more look', async (t) => {
  const { caller } = await forwarders(t)
  const { d, asked } = directory('gone', 'gone')
  const error = await routeToOwner(d, caller, shard, 'echo', () => ({ value: 1 })).catch((e: unknown) => e)
  t.ok(error instanceof OwnerUnavailable && !error.noOwner, 'OwnerUnavailable, not "no owner"')
  t.match((error as Error).message, /not listening.*nothing is known to be stored/)
  t.same(asked, [shard])
})

t.test('route - no owner in the table nor in Redis is refused as "no owner"', async (t) => {
  const { caller } = await forwarders(t)
  const { d } = directory(undefined, undefined)
  const error = await routeToOwner(d, caller, shard, 'echo', () => ({ value: 1 })).catch((e: unknown) => e)
  t.ok(error instanceof OwnerUnavailable && error.noOwner)
})

t.test('route - a call that timed out (it may have run) is not sent again', async (t) => {
  const { caller, owner } = await forwarders(t, 300)
  let served = 0
  owner.handle('stall', () => (served++, new Promise(() => undefined)))
  const { d, asked } = directory('owner', 'owner')
  const error = await routeToOwner(d, caller, shard, 'stall', () => ({})).catch((e: unknown) => e)
  t.ok(error instanceof OwnerUnavailable && !error.noOwner)
  t.match((error as Error).message, /did not answer within 300 ms/)
  t.equal(served, 1, 'sent once')
  t.same(asked, [], 'Redis was not asked for another owner')
})

t.test('route - a shard this node owns runs here', async (t) => {
  const { caller } = await forwarders(t)
  t.equal(await routeToOwner(new LocalShardDirectory('caller'), caller, shard, 'echo', () => ({ value: 1 })), local)
})
