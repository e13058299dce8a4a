/**
 * The node-call contract (protocol/node-calls.ts): every op has a schema for
 * its arguments and its result, all compile with the node-call validator,
 * arguments are strict, and the values that cross as MessagePack (a Date)
 * pass where JSON values would not.
 */
import t from 'tap'
import { KindGuard } from '@sinclair/typebox'
import { AnswerFrameSchema, CallFrameSchema, DateValue, nodeCalls } from '../../protocol/node-calls.js'
import { compileCalls, compileNodeCallValidator } from '../../protocol/schemas/validator.js'

const ops = Object.keys(nodeCalls) as (keyof typeof nodeCalls)[]

t.test('node calls - every op in the table has an args schema and a result schema', async (t) => {
  t.ok(ops.length >= 12, `${ops.length} ops`)
  for (const op of ops) {
    t.match(op, /^(printer|display)\.[a-z][A-Za-z]*$/, `${op} is named area.operation`)
    t.ok(KindGuard.IsSchema(nodeCalls[op].args), `${op} args`)
    t.ok(KindGuard.IsSchema(nodeCalls[op].result), `${op} result`)
  }
})

t.test('node calls - every schema compiles with the strict node-call validator', async (t) => {
  const compiled = compileCalls(nodeCalls)
  for (const op of ops) {
    t.type(compiled[op].args, 'function', `${op} args`)
    t.type(compiled[op].result, 'function', `${op} result`)
  }
})

t.test('node calls - arguments are strict objects: an unknown field is refused, not ignored', async (t) => {
  const compiled = compileCalls(nodeCalls)
  for (const op of ops) {
    t.equal(nodeCalls[op].args.type, 'object', op)
    t.equal(nodeCalls[op].args.additionalProperties, false, op)
  }
  const assign = compiled['display.changed'].args
  const args = { organizationId: '7d4ad8a3-1f0e-4c55-9d41-63f0b4c1a001', displayId: '7d4ad8a3-1f0e-4c55-9d41-63f0b4c1a002' }
  t.ok(assign(args).ok)
  t.same(assign({ ...args, also: 1 }), { ok: false, reason: "args has an unknown field 'also'" })
})

t.test('node calls - a Date crosses as a Date: a string or an invalid Date is refused', async (t) => {
  const date = compileNodeCallValidator(DateValue, 'result')
  t.ok(date(new Date()).ok)
  t.same(date('2026-01-01T00:00:00Z'), { ok: false, reason: 'result must be a Date' })
  t.same(date(new Date(Number.NaN)), { ok: false, reason: 'result must be a Date' })
})

t.test('node calls - frames: a call names its caller and op, an answer says ok or carries a wire error', async (t) => {
  const call = compileNodeCallValidator(CallFrameSchema, 'frame')
  const answer = compileNodeCallValidator(AnswerFrameSchema, 'frame')
  t.ok(call([0, 1, 'node-a', 'printer.view', { anything: 'is checked later' }]).ok)
  t.notOk(call([0, 0, 'node-a', 'printer.view', {}]).ok, 'ids start at 1')
  t.notOk(call([0, 1, 'node a/evil', 'printer.view', {}]).ok, 'a caller id that is no node id (it names the answer channel)')
  t.notOk(call([0, 1, 'node-a', 'printer.view']).ok, 'no args')
  t.ok(answer([1, 1, true, null]).ok)
  t.ok(answer([1, 1, false, { code: 'printer_not_found', message: 'no such printer' }]).ok)
  t.notOk(answer([1, 1, false, 'boom']).ok, 'an error is an object')
  t.notOk(answer([1, 1, false, { message: 'x', stack: '...' }]).ok, 'with known fields only')
})
