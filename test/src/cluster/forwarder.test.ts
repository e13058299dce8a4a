/**
 * Node-to-node calls over real Redis pub/sub, with the service's own table
 * (protocol/node-calls.ts): the values that cross as MessagePack (a Date, a
 * map as pairs) arrive as the schemas say; a call the owner's schema refuses
 * never runs there; an answer the caller's schema refuses is not trusted;
 * a frame that is no node call is counted and dropped.
 */
import t from 'tap'
import { encode } from '@msgpack/msgpack'
import { Type } from '@sinclair/typebox'
import { Redis } from 'ioredis'
import { randomBytes } from 'node:crypto'
import type { StoredActivation } from '../../../actors/display-persistence.js'
import { ServiceError } from '../../../protocol/errors.js'
import { nodeCalls, type NodeCallTable } from '../../../protocol/node-calls.js'
import { Forwarder } from '../../../src/cluster/forwarder.js'
import { MetricsRegistry } from '../../../src/observability/metrics.js'
import { captureLogger, type TestContext } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

if (!process.env['REDIS_URL']) t.plan(0, 'needs REDIS_URL')

const displayId = '5c0e6a58-7d3b-4c1e-9f2a-0b1c2d3e4f50'
const organizationId = '1a2b3c4d-5e6f-4071-8293-a4b5c6d7e8f9'
const printerId = '0b7c1d2e-3f40-4a51-8b62-7c83d94ea5f6'

async function nodes<Caller extends NodeCallTable, Owner extends NodeCallTable>(t: TestContext, callerCalls: Caller, ownerCalls: Owner) {
  const keyspace = `forwarder-${randomBytes(4).toString('hex')}`
  const start = async <Calls extends NodeCallTable>(nodeId: string, calls: Calls) => {
    const metrics = new MetricsRegistry()
    const { logger, logs } = captureLogger()
    const forwarder = await Forwarder.start({ redisUrl: process.env['REDIS_URL']!, keyspace, nodeId, timeoutMs: 5_000, logger, metrics, calls, timers: systemClock })
    t.teardown(() => forwarder.close())
    return { forwarder, metrics, logs }
  }
  return { keyspace, caller: await start('caller', callerCalls), owner: await start('owner', ownerCalls) }
}

const activation: StoredActivation = {
  displayId,
  organizationId,
  bindingEpoch: 2,
  credentialId: '9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4',
  generation: 1,
  desired: { activation_generation: 1, profile_revision_id: '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0', sha256: 'ab'.repeat(32) },
  payload: { data: 'AAEC', byteLength: 3 },
  applied: null,
  errorCode: null,
  publishError: null,
  publishAttempts: 0,
  session: null,
  updatedAt: new Date('2026-03-04T05:06:07.089Z'),
}

t.test('forwarder - a stored activation crosses with its Date; an ingest result with its job map', async (t) => {
  const { caller, owner } = await nodes(t, nodeCalls, nodeCalls)
  owner.forwarder.handle('display.retry', async () => activation)
  owner.forwarder.handle('printer.ingest', async () => ({ processed: 1, failed: 0, stored: 1, duplicates: 0, refused: [], jobOf: [['e1', 17]], outcomes: [{ eventId: 'e1', seqn: 0, outcome: 'applied' }], lastSeqn: 0 }))
  const retried = await caller.forwarder.call('owner', 'display.retry', { displayId, organizationId })
  t.ok(retried.updatedAt instanceof Date, 'a Date, not a string')
  t.same(retried, activation)
  const request = {
    organizationId,
    hostId: 'bridge-1',
    assignmentEpoch: 1,
    events: [{ eventId: 'e1', type: 'job:start' as const, seqn: 1, timestamp: 1_700_000_000_000, deliveryAttempt: 1, data: { name: 'benchy.3mf' } }],
  }
  t.same(await caller.forwarder.call('owner', 'printer.ingest', { printerId, request }), {
    processed: 1,
    failed: 0,
    stored: 1,
    duplicates: 0,
    refused: [],
    jobOf: [['e1', 17]],
    outcomes: [{ eventId: 'e1', seqn: 0, outcome: 'applied' }],
    lastSeqn: 0,
  })
})

t.test('forwarder - a call the owner\'s schema refuses is answered with the reason and never runs there', async (t) => {
  const { caller, owner } = await nodes(t, nodeCalls, nodeCalls)
  let ran = 0
  owner.forwarder.handle('display.changed', async () => (ran++, null))
  // What a node of another version, or a bug, could send: the caller's types would not let this compile.
  const sent = caller.forwarder.call('owner', 'display.changed', { displayId, organizationId: 42 } as never)
  await t.rejects(sent, { message: /node call display\.changed refused: args\.organizationId must be string/ })
  t.equal(ran, 0, 'the handler never ran')
  t.match(owner.metrics.render(), /forwards_rejected_total\{reason="args",op="display.changed"\} 1/)
  t.match(caller.metrics.render(), /forwards_total\{op="display.changed",outcome="refused"\} 1/)
  t.ok(owner.logs.some((l) => l['msg'] === 'node call refused: its arguments do not match the schema'))
})

t.test('forwarder - an answer the caller\'s result schema refuses is not trusted (a node of another version)', async (t) => {
  const older = { ask: { args: Type.Object({}, { additionalProperties: false }), result: Type.Object({ count: Type.Integer() }) } } as const
  const newer = { ask: { args: Type.Object({}, { additionalProperties: false }), result: Type.Object({ count: Type.String() }) } } as const
  const { caller, owner } = await nodes(t, older, newer)
  let ran = 0
  owner.forwarder.handle('ask', async () => (ran++, { count: 'many' }))
  const error = await caller.forwarder.call('owner', 'ask', {}).catch((e: unknown) => e)
  t.ok(error instanceof Error && !(error instanceof ServiceError), 'a plain error: 500 to the client')
  t.match(error, { message: /answered ask with a value this node cannot read: result\.count must be integer/ })
  t.equal(ran, 1, 'it ran once and is not sent again')
  t.match(caller.metrics.render(), /forwards_total\{op="ask",outcome="malformed"\} 1/)
})

t.test('forwarder - a frame that is neither a call nor an answer is counted and dropped; the next call is served', async (t) => {
  const { keyspace, caller, owner } = await nodes(t, nodeCalls, nodeCalls)
  owner.forwarder.handle('display.changed', async () => null)
  const redis = new Redis(process.env['REDIS_URL']!)
  t.teardown(() => redis.disconnect())
  const channel = `printfarm:${keyspace}:node:owner`
  await redis.publish(channel, Buffer.from([0xc1])) // never used in MessagePack
  await redis.publish(channel, Buffer.from(encode([0, 1, 'caller', 'display.changed'])))
  await redis.publish(channel, Buffer.from(encode({ op: 'display.changed' })))
  // Redis hands a message to the subscriber before it answers PUBLISH: these frames reach the owner before the call does.
  t.equal(await caller.forwarder.call('owner', 'display.changed', { displayId, organizationId }), null)
  t.match(owner.metrics.render(), /forwards_rejected_total\{reason="frame",op=""\} 3/)
})
