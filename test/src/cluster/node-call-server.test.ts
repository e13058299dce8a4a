/**
 * The receiving side of node-to-node calls, without a transport: a call
 * frame in, an answer frame out. Another node is an edge: arguments that do
 * not match the op's schema are answered with the reason and never reach
 * the handler.
 */
import t from 'tap'
import { nodeCalls, type CallFrame, type NodeCallArgs } from '../../../protocol/node-calls.js'
import { ServiceError } from '../../../protocol/errors.js'
import { compileCalls } from '../../../protocol/schemas/validator.js'
import type { Forwarder } from '../../../src/cluster/forwarder.js'
import { fromWire, NodeCallServer, toWire } from '../../../src/cluster/node-call-server.js'
import { MetricsRegistry } from '../../../src/observability/metrics.js'
import { captureLogger } from '../../helpers/service.js'

const printerId = '0b7c1d2e-3f40-4a51-8b62-7c83d94ea5f6'
const organizationId = '1a2b3c4d-5e6f-4071-8293-a4b5c6d7e8f9'

function server() {
  const registry = new MetricsRegistry()
  const served = registry.counter('served', 'test', ['op'])
  const rejected = registry.counter('rejected', 'test', ['reason', 'op'])
  const { logger, logs } = captureLogger()
  const s = new NodeCallServer({ calls: compileCalls(nodeCalls), logger, served, rejected })
  const ran: NodeCallArgs<'printer.view' | 'printer.setMaintenance'>[] = []
  s.handle('printer.setMaintenance', async (args) => {
    ran.push(args)
    return null
  })
  return { s, served, rejected, logs, ran }
}

const call = (op: string, args: unknown): CallFrame => [0, 9, 'node-a', op, args]

t.test('node call server - a malformed call is refused with the reason and the handler never runs', async (t) => {
  const { s, rejected, served, logs, ran } = server()
  const malformed: [string, unknown, RegExp][] = [
    ['a field of the wrong type', { printerId, organizationId, on: 'yes' }, /args\.on must be boolean/],
    ['a missing field', { printerId, organizationId }, /args is missing the required field 'on'/],
    ['an unknown field', { printerId, organizationId, on: true, force: true }, /args has an unknown field 'force'/],
    ['an id that is no uuid', { printerId: '../../etc', organizationId, on: true }, /args\.printerId must match format "uuid"/],
    ['no object at all', 'printer.setMaintenance', /args must be object/],
    ['nothing', null, /args must be object/],
  ]
  for (const [what, args, reason] of malformed) {
    const [kind, id, ok, payload] = await s.answer(call('printer.setMaintenance', args))
    t.same([kind, id, ok], [1, 9, false], `${what}: answered as a failure of call 9`)
    t.match(payload, { message: reason }, what)
    t.notOk(payload !== null && typeof payload === 'object' && 'code' in payload, `${what}: no code (a fault between nodes, not client input)`)
  }
  t.same(ran, [], 'the handler never ran')
  t.equal(rejected.get({ reason: 'args', op: 'printer.setMaintenance' }), malformed.length, 'counted by op')
  t.equal(served.get({ op: 'printer.setMaintenance' }), 0)
  t.equal(logs.filter((l) => l['msg'] === 'node call refused: its arguments do not match the schema' && l['op'] === 'printer.setMaintenance').length, malformed.length, 'logged')
})

t.test('node call server - a valid call runs once with its typed arguments', async (t) => {
  const { s, served, ran } = server()
  t.same(await s.answer(call('printer.setMaintenance', { printerId, organizationId, on: true })), [1, 9, true, null])
  t.same(ran, [{ printerId, organizationId, on: true }])
  t.equal(served.get({ op: 'printer.setMaintenance' }), 1)
})

t.test('node call server - an op this node does not serve is refused, counted without the caller-chosen name as a label', async (t) => {
  const { s, rejected } = server()
  t.match(await s.answer(call('printer.view', { printerId, organizationId })), [1, 9, false, { message: "no operation 'printer.view' on this node" }], 'in the table, not served here')
  t.match(await s.answer(call('x'.repeat(100), {})), [1, 9, false, { message: /no operation/ }], 'not in the table')
  t.equal(rejected.get({ reason: 'op', op: '' }), 2)
})

t.test('node call server - the handler\'s ServiceError comes back coded; any other failure is not described', async (t) => {
  const { s } = server()
  s.handle('printer.view', async () => {
    throw new ServiceError('printer_not_found', 'no such printer in this organization')
  })
  s.handle('printer.reload', async () => {
    throw new Error('secret internals')
  })
  const [, , , refused] = await s.answer(call('printer.view', { printerId, organizationId }))
  t.same(refused, { code: 'printer_not_found', message: 'no such printer in this organization' })
  const [, , , failed] = await s.answer(call('printer.reload', { printerId }))
  t.same(failed, { message: 'the owner node failed to handle the call' })
})

t.test('node call server - an op is served once; unserved() lists the ops still without a handler', async (t) => {
  const { s } = server()
  t.throws(() => s.handle('printer.setMaintenance', async () => null), /served twice/)
  t.notOk(s.unserved().includes('printer.setMaintenance'))
  t.ok(s.unserved().includes('display.assign'))
})

t.test('node call server - a wire error becomes the ServiceError it was, unless this node does not know its code', async (t) => {
  const error = fromWire(toWire(new ServiceError('printer_owner_unavailable', 'retry', { headers: { 'retry-after': '1' }, extra: { shard: 3 } })))
  t.ok(error instanceof ServiceError)
  t.match(error, { code: 'printer_owner_unavailable', status: 503, message: 'retry', headers: { 'retry-after': '1' }, extra: { shard: 3 } })
  const unknown = fromWire({ code: 'a_code_from_a_newer_node', message: 'something' })
  t.notOk(unknown instanceof ServiceError, 'a code outside the registry is not trusted as one')
  t.equal(unknown.message, 'something')
})

/** Never run: the sending side is typed by the table (this file fails `npm run typecheck` if a wrong call compiles). */
export function typedCalls(f: Forwarder): void {
  void f.call('node', 'printer.setMaintenance', { printerId, organizationId, on: true })
  // @ts-expect-error `on` is a boolean
  void f.call('node', 'printer.setMaintenance', { printerId, organizationId, on: 'yes' })
  // @ts-expect-error `organizationId` is required
  void f.call('node', 'printer.view', { printerId })
  // @ts-expect-error no such op
  void f.call('node', 'printer.explode', {})
  // @ts-expect-error a handler answers what the result schema says
  f.handle('printer.assignHost', async () => ({ printerId }))
}
