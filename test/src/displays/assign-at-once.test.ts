/**
 * An assignment whose checks this node's memory already passes is one
 * conditional UPDATE (src/displays/display-store.ts). These tests make that
 * memory wrong behind the node's back and prove that the statement's own
 * conditions still refuse what the full check refuses, with the same codes.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { shardOf, ShardUnavailable } from '../../../actors/shard-directory.js'
import { DisplayStore } from '../../../src/displays/display-store.js'
import { assign, connectSimulator, getTarget, openDisplayFarm, publishedRevision, registerDisplay } from '../../helpers/displays.js'

const farm = await openDisplayFarm(t)
const sql = farm.service.services.db.sql

t.test("a capability lowered behind the node's memory refuses the next assignment as insufficient; nothing is written", async (t) => {
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display)
  const revision = await publishedRevision(farm)
  const first = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(first.status, 200, first.text)
  // As if another node recorded a smaller controller's report: this node still remembers the larger one.
  await sql`update displays set capabilities = jsonb_set(capabilities, '{max_decoded_bytes}', '1') where id = ${display.id}`
  const second = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 1 })
  t.equal(second.status, 409)
  t.match(second.json, { error: 'signal_profile_capability_insufficient', message: /takes at most 1/ })
  t.equal((await getTarget(farm, display.id)).json.desired.activation_generation, 1, 'the target is unchanged')
})

t.test('stale expectations after a remembered assignment are refused with the conflict that names them', async (t) => {
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display)
  const revision = await publishedRevision(farm)
  t.equal((await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })).status, 200)
  const again = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.match(again.json, { error: 'signal_profile_activation_conflict', activationGeneration: 1 })
  const rebound = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 2, expectedActivationGeneration: 1 })
  t.match(rebound.json, { error: 'display_binding_epoch_conflict', bindingEpoch: 1 })
  const next = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 1 })
  t.equal(next.status, 200, 'the current expectations still assign')
  t.equal(next.json.desired.activation_generation, 2)
})

t.test('a store that remembers everything still honours a newer fencing token, and answers what the full read answers', async (t) => {
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display)
  const revision = await publishedRevision(farm)
  const store = new DisplayStore(sql, Date.now)
  const shard = shardOf(display.id)
  const request = (generation: number) => ({ organizationId: farm.orgId, revisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: generation })
  // The first assignment reads everything (and teaches the store the revision and the capability).
  const first = await store.assign(display.id, request(0))
  t.equal(first.generation, 1)
  const owner = `test-${randomUUID()}`
  await sql`insert into shard_tokens (shard, token, owner) values (${shard}, 7, ${owner}) on conflict (shard) do update set token = 7, owner = ${owner}`
  t.teardown(() => sql`delete from shard_tokens where owner = ${owner}`)
  await t.rejects(store.assign(display.id, request(1), { shard, token: 6 }), ShardUnavailable, 'an older token writes nothing')
  t.equal((await store.load(display.id))!.generation, 1)
  const second = await store.assign(display.id, request(1), { shard, token: 7 })
  t.same(second, await store.load(display.id), 'the answer is the stored activation')
  t.equal(second.generation, 2)
  t.same(second.payload, { data: revision.data, byteLength: revision.byteLength })
})
