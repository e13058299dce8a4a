/**
 * Fencing in the store (docs/operations.md) on the real PostgreSQL: a write
 * carrying a shard token older than the newest one stored is refused in the
 * same statement and stores nothing; other units of the same group-commit
 * flush go through; token 0 (the local directory) is not checked. And in a
 * running node on the Redis directory: a write the store refuses makes the
 * node give the shard up.
 */
import t from 'tap'
import { ShardUnavailable, shardOf } from '../../../actors/shard-directory.js'
import type { PersistedPrinterState, PrinterCommit } from '../../../actors/printer-persistence.js'
import { PgPrinterPersistence } from '../../../src/printers/event-store.js'
import { checkFence, fencedIdleTimeoutMs } from '../../../src/storage/fencing.js'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { waitFor } from '../../helpers/poll.js'
import { metricValue, request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const unit = (printerId: string, organizationId: string, token: number, seqn: number): PrinterCommit => ({
  printerId,
  organizationId,
  hostId: 'host-a',
  assignmentEpoch: 1,
  fencingToken: token,
  events: [{ eventId: `f-${seqn}`, idempotencyKey: null, type: 'printer:deltaUpdate', seqn, timestamp: 1_700_000_000_000 + seqn, deliveryAttempt: 1, data: {}, jobId: null, applied: true }],
  highWaterSeqn: seqn,
  state: {} as PersistedPrinterState,
  online: true,
  seen: true,
  jobs: [],
})

t.test('fencing - a write with an older token than the shard\'s newest is refused and stores nothing; the newest token and token 0 write', async (t) => {
  const svc = await startTestService(t, { REDIS_URL: undefined })
  const sql = svc.services.db.sql
  const farm = await openFarm(svc.url)
  const stale = await addPrinter(farm)
  // Another printer on another shard, in the same flush.
  let fresh = await addPrinter(farm)
  while (shardOf(fresh) === shardOf(stale)) fresh = await addPrinter(farm)
  await sql`insert into shard_tokens (shard, token, owner) values (${shardOf(stale)}, 5, 'new-owner'), (${shardOf(fresh)}, 3, 'me')`
  const store = new PgPrinterPersistence(svc.services.db, svc.services.clock)
  const events = async (printerId: string) => (await sql<{ event_id: string }[]>`select event_id from printer_events where printer_id = ${printerId} order by seqn`).map((r) => r.event_id)

  // Both units are queued in the same turn: one flush, one statement.
  const [refused, written] = await Promise.allSettled([store.commit(unit(stale, farm.orgId, 4, 0)), store.commit(unit(fresh, farm.orgId, 3, 0))])
  t.equal(refused.status, 'rejected')
  const reason = (refused as PromiseRejectedResult).reason
  t.ok(reason instanceof ShardUnavailable && reason.reason === 'fenced' && reason.shard === shardOf(stale), 'the stale unit is refused as fenced, naming its shard')
  t.same(await events(stale), [], 'none of its events is stored')
  t.same(await sql`select 1 from printer_state where printer_id = ${stale}`, [], 'nor its state')
  t.equal(written.status, 'fulfilled', 'the unit with the current token in the same flush is written')
  t.same(await events(fresh), ['f-0'])

  await store.commit(unit(stale, farm.orgId, 5, 1))
  t.same(await events(stale), ['f-1'], 'the newest token writes')
  await store.commit(unit(stale, farm.orgId, 0, 2))
  t.same(await events(stale), ['f-1', 'f-2'], 'token 0 (the local directory) is not checked')

  await t.rejects(store.assignHost(stale, 'host-b', 1, 2, 4), ShardUnavailable, 'a host move with a stale token is refused')
  const [printer] = await sql<{ host_id: string; assignment_epoch: number }[]>`select host_id, assignment_epoch from printers where id = ${stale}`
  t.same(printer, { host_id: 'host-a', assignment_epoch: 1 }, 'and the printer did not move')
  t.equal(await store.assignHost(stale, 'host-b', 1, 2, 5), true, 'the newest token moves it')

  await t.rejects(sql.begin((tx) => checkFence(tx, { shard: shardOf(stale), token: 4 })), ShardUnavailable, 'the transactional check (display writes) refuses a stale token')
  await sql.begin((tx) => checkFence(tx, { shard: shardOf(stale), token: 5 }))
  // A shard this test gave no token (the printers' shards are random).
  const untouched = [250, 251, 252].find((s) => s !== shardOf(stale) && s !== shardOf(fresh))!
  await sql.begin((tx) => checkFence(tx, { shard: untouched, token: 1 }))
  t.pass('the current token, and a shard never taken, pass')
})

t.test('fencing - a fenced transaction is ended by PostgreSQL after a bounded idle time; an unfenced one keeps the server default', async (t) => {
  const svc = await startTestService(t, { REDIS_URL: undefined })
  const sql = svc.services.db.sql
  await sql`insert into shard_tokens (shard, token, owner) values (${253}, 2, 'me')`
  const idleLimit = (fence: { shard: number; token: number }) =>
    sql.begin(async (tx) => {
      await checkFence(tx, fence)
      const [row] = await tx<{ idle_in_transaction_session_timeout: string }[]>`show idle_in_transaction_session_timeout`
      return row!.idle_in_transaction_session_timeout
    })
  // A node frozen while holding the shard's token row would keep every other node from taking the shard.
  t.equal(await idleLimit({ shard: 253, token: 2 }), `${fencedIdleTimeoutMs / 1000}s`, 'bounded once the token row is held')
  t.not(await idleLimit({ shard: 253, token: 0 }), `${fencedIdleTimeoutMs / 1000}s`, 'token 0 (the local directory) holds no token row and is not bounded')
})

t.test('fencing - a refused unit whose seqns straddle events the current owner stored: none of its events is kept, every one of the owner\'s is', async (t) => {
  const svc = await startTestService(t, { REDIS_URL: undefined })
  const sql = svc.services.db.sql
  const farm = await openFarm(svc.url)
  const printer = await addPrinter(farm)
  await sql`insert into shard_tokens (shard, token, owner) values (${shardOf(printer)}, 7, 'new-owner')`
  const store = new PgPrinterPersistence(svc.services.db, svc.services.clock)
  // The current owner (token 7) stores seqns 1 and 2.
  await store.commit(unit(printer, farm.orgId, 7, 1))
  await store.commit(unit(printer, farm.orgId, 7, 2))
  // The former owner (token 6) still writes seqns 0 and 3: on PostgreSQL its rows reach the log by
  // COPY before the statement sees the fence, and must leave again without touching 1 and 2.
  const stale = unit(printer, farm.orgId, 6, 0)
  stale.events = [...stale.events, { ...stale.events[0]!, eventId: 'f-3', seqn: 3 }]
  stale.highWaterSeqn = 3
  await t.rejects(store.commit(stale), ShardUnavailable, 'the stale unit is refused')
  const stored = await sql<{ seqn: number; event_id: string }[]>`select seqn, event_id from printer_events where printer_id = ${printer} order by seqn`
  t.same(stored, [
    { seqn: 1, event_id: 'f-1' },
    { seqn: 2, event_id: 'f-2' },
  ])
  t.match((await sql`select high_water_seqn from printer_state where printer_id = ${printer}`)[0], { high_water_seqn: 2 }, "the owner's state stands")
})

t.test('fencing - a node whose shard was taken behind its back (a Redis failover repeating a lease) has its next write refused: 503, nothing stored, the shard given up, then taken again with a newer token', { skip: process.env['REDIS_URL'] === undefined ? 'needs REDIS_URL (the Redis directory)' : false }, async (t) => {
  const svc = await startTestService(t, { SHARD_LEASE_MS: '2000' })
  const sql = svc.services.db.sql
  const farm = await openFarm(svc.url)
  const printer = await addPrinter(farm)
  const shard = shardOf(printer)
  t.equal((await postBatch(farm, batch(printer, [item(0)]))).status, 200)
  const [before] = await sql<{ token: string }[]>`select token from shard_tokens where shard = ${shard}`
  // What another node's acquisition does; this node's Redis lease is untouched, so only the store can tell it.
  await sql`update shard_tokens set token = token + 1, owner = 'usurper' where shard = ${shard}`

  const refused = await postBatch(farm, batch(printer, [item(1)]))
  t.equal(refused.status, 503, refused.text)
  t.equal(refused.json.error, 'printer_owner_unavailable')
  t.ok(refused.headers['retry-after'], 'with Retry-After')
  const stored = async () => (await sql<{ seqn: string }[]>`select seqn from printer_events where printer_id = ${printer} order by seqn`).map((r) => Number(r.seqn))
  t.same(await stored(), [0], 'nothing of the refused batch is stored')
  const metrics = await request(svc.url, '/metrics')
  t.equal(metricValue(metrics.text, 'shard_lease_renewals_total{outcome="fenced"}'), 1, 'the node gave the shard up as fenced')

  // Placement still gives it this node: it takes the shard again, with a token above the usurper's, and the retry goes through.
  await waitFor(async () => (await postBatch(farm, batch(printer, [item(1, { deliveryAttempt: 2 })]))).status === 200, 'the retry to be accepted', 20_000)
  t.same(await stored(), [0, 1], 'the retry is stored once')
  const [after] = await sql<{ token: string; owner: string }[]>`select token, owner from shard_tokens where shard = ${shard}`
  t.ok(Number(after!.token) >= Number(before!.token) + 2, `taken again with a newer token (${before!.token} -> ${after!.token})`)
  t.not(after!.owner, 'usurper')
})

t.test("fencing - a task's start on a node whose shard was taken behind its back is refused (503) and starts nothing; the retry on the new owner starts it once", { skip: process.env['REDIS_URL'] === undefined ? 'needs REDIS_URL (the Redis directory)' : false }, async (t) => {
  const svc = await startTestService(t, { SHARD_LEASE_MS: '2000' })
  const sql = svc.services.db.sql
  const farm = await openFarm(svc.url)
  const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge', scopes: [...bridgeScopes] } })
  const bridge = { ...farm, bridge: { 'x-api-key': key.json.key as string } }
  const printer = await addPrinter(farm, 'host-a', { enabled: true })
  t.equal((await postBatch(bridge, batch(printer, [item(0, { type: 'heartbeat' })]))).status, 200)
  const model = await createModel(svc.url, farm.admin)
  const file = (await upload(svc.url, farm.admin, model, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id
  const created = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'fenced start', model_file_id: file } })
  const assigned = await request(svc.url, `/v1/print-jobs/${created.json.id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  t.equal(assigned.status, 200, assigned.text)
  const taskId = assigned.json.task.id
  t.equal((await request(svc.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: bridge.bridge, body: { hostId: 'host-a', assignmentEpoch: 1 } })).status, 200)
  await sql`update shard_tokens set token = token + 1, owner = 'usurper' where shard = ${shardOf(printer)}`

  const start = (attempt: number) => postBatch(bridge, batch(printer, [item(1, { type: 'job:start', data: { jobId: created.json.id, printerTaskId: taskId }, eventId: 'start-1', deliveryAttempt: attempt })]))
  const refused = await start(1)
  t.equal(refused.status, 503, refused.text)
  const [task] = await sql<{ state: string }[]>`select state from printer_tasks where id = ${taskId}`
  t.equal(task?.state, 'claimed', 'the task did not start')
  const [job] = await sql<{ status: string }[]>`select status from print_jobs where id = ${created.json.id}`
  t.equal(job?.status, 'dispatching', 'the job did not start')

  await waitFor(async () => (await start(2)).status === 200, 'the retry to be accepted', 20_000)
  const [after] = await sql<{ state: string }[]>`select state from printer_tasks where id = ${taskId}`
  t.equal(after?.state, 'started', 'the retry on the owner started the task')
  t.equal((await sql`select 1 from printer_events where printer_id = ${printer} and event_id = 'start-1'`).length, 1, 'the start is stored once')
})
