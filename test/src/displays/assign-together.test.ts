/**
 * Assignments whose checks this node's memory passes, asked for in the same
 * turn of the event loop, go out as one statement (src/displays/display-store.ts):
 * each row keeps its own conditions, and a row that matches nothing falls
 * back to the full check alone, with the refusal that check gives.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { Sql } from 'postgres'
import { shardOf, ShardUnavailable } from '../../../actors/shard-directory.js'
import { DisplayStore } from '../../../src/displays/display-store.js'
import { connectSimulator, openDisplayFarm, publishedRevision, registerDisplay } from '../../helpers/displays.js'

const farm = await openDisplayFarm(t)
const sql = farm.service.services.db.sql

/** The store's statements, counted as they are made. */
function counted(): { sql: Sql; statements: () => number } {
  let made = 0
  const proxy = new Proxy(sql, {
    apply(target, thisArg, args) {
      made++
      return Reflect.apply(target as never, thisArg, args)
    },
  })
  return { sql: proxy, statements: () => made }
}

const stamps = async (ids: string[]) =>
  new Map((await sql<{ id: string; g: number; tx: string }[]>`select id::text, activation_generation as g, xmin::text as tx from displays where id = any(${ids}::uuid[])`).map((r) => [r.id, r]))

t.test('assignments of one turn are one statement, each written or refused on its own conditions', async (t) => {
  const displays = [await registerDisplay(farm), await registerDisplay(farm), await registerDisplay(farm), await registerDisplay(farm)]
  for (const d of displays) await connectSimulator(t, farm, d)
  const revision = await publishedRevision(farm)
  const { sql: countingSql, statements } = counted()
  const store = new DisplayStore(countingSql, Date.now)
  const request = (generation: number) => ({ organizationId: farm.orgId, revisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: generation })
  // The first assignments read everything and teach the store the revision and each capability.
  for (const d of displays) t.equal((await store.assign(d.id, request(0))).generation, 1)
  const [a, b, stale, fenced] = displays as [(typeof displays)[0], (typeof displays)[0], (typeof displays)[0], (typeof displays)[0]]
  const shard = shardOf(fenced.id)
  const owner = `test-${randomUUID()}`
  await sql`insert into shard_tokens (shard, token, owner) values (${shard}, 9, ${owner}) on conflict (shard) do update set token = 9, owner = ${owner}`
  t.teardown(() => sql`delete from shard_tokens where owner = ${owner}`)

  const before = statements()
  const [first, second] = await Promise.all([store.assign(a.id, request(1)), store.assign(b.id, request(1))])
  t.equal(statements() - before, 1, 'two assignments of one turn: one statement')
  t.equal(first.generation, 2)
  t.equal(second.generation, 2)
  t.same(first, await store.load(a.id), 'each answer is its stored activation')
  const written = await stamps([a.id, b.id])
  t.equal(written.get(a.id)!.tx, written.get(b.id)!.tx, 'written by the same transaction')

  const outcomes = await Promise.allSettled([store.assign(a.id, request(2)), store.assign(stale.id, request(0)), store.assign(fenced.id, request(1), { shard, token: 8 })])
  t.match(outcomes[0], { status: 'fulfilled', value: { generation: 3 } })
  t.match(outcomes[1], { status: 'rejected', reason: { code: 'signal_profile_activation_conflict', extra: { activationGeneration: 1 } } }, 'a stale generation gets the full check’s refusal')
  t.equal(outcomes[2].status, 'rejected')
  t.type((outcomes[2] as PromiseRejectedResult).reason, ShardUnavailable, 'an older fencing token writes nothing')
  const after = await stamps([stale.id, fenced.id])
  t.equal(after.get(stale.id)!.g, 1, 'the stale one is unchanged')
  t.equal(after.get(fenced.id)!.g, 1, 'the fenced one is unchanged')
})
