import t, { type Test } from 'tap'
import { Type } from '@sinclair/typebox'
import { compileBodyValidator, compileTextValidator, describeError } from '../../protocol/schemas/validator.js'

/** The reason of a refused value, or a test failure if the value passes. */
function reason(t: Test, result: { ok: true } | { ok: false; reason: string }): string {
  if (result.ok) {
    t.fail('expected the value to be refused')
    return ''
  }
  return result.reason
}

t.test('validator - a body validator accepts a valid value and returns it', async (t) => {
  const validate = compileBodyValidator(Type.Object({ name: Type.String(), count: Type.Integer() }))
  t.same(validate({ name: 'p1', count: 2 }), { ok: true, value: { name: 'p1', count: 2 } })
})

t.test('validator - a body validator never coerces', async (t) => {
  const validate = compileBodyValidator(
    Type.Object({
      count: Type.Optional(Type.Integer()),
      flag: Type.Optional(Type.Boolean()),
      tags: Type.Optional(Type.Array(Type.String())),
      name: Type.Optional(Type.String()),
    }),
  )
  t.equal(reason(t, validate({ count: '1' })), 'body.count must be integer', '"1" is not an integer')
  t.equal(reason(t, validate({ flag: 'true' })), 'body.flag must be boolean', '"true" is not a boolean')
  t.equal(reason(t, validate({ tags: 'a' })), 'body.tags must be array', 'a single value is not an array')
  t.equal(reason(t, validate({ name: 5 })), 'body.name must be string', '5 is not a string')
  t.equal(reason(t, validate({ count: 1.5 })), 'body.count must be integer')
  const value = { count: 1 }
  const ok = validate(value)
  t.ok(ok.ok)
  t.same(value, { count: 1 }, 'the value is not rewritten')
})

t.test('validator - a text validator coerces numbers, booleans and single values to arrays', async (t) => {
  const validate = compileTextValidator(
    Type.Object({
      limit: Type.Integer({ minimum: 1 }),
      flag: Type.Optional(Type.Boolean()),
      ids: Type.Optional(Type.Array(Type.String())),
      sizes: Type.Optional(Type.Array(Type.Integer())),
    }),
    'query',
  )
  t.same(validate({ limit: '25', flag: 'true', ids: 'a', sizes: '5' }), {
    ok: true,
    value: { limit: 25, flag: true, ids: ['a'], sizes: [5] },
  })
  t.same(validate({ limit: '3', flag: 'false', ids: ['a', 'b'] }), { ok: true, value: { limit: 3, flag: false, ids: ['a', 'b'] } })
  t.equal(reason(t, validate({ limit: 'abc' })), 'query.limit must be integer', 'text that is not a number still fails')
  t.equal(reason(t, validate({ limit: '2.5' })), 'query.limit must be integer')
  t.equal(reason(t, validate({ limit: '0' })), 'query.limit must be >= 1', 'coerced values are range-checked')
})

t.test('validator - a path validator names the path', async (t) => {
  const validate = compileTextValidator(Type.Object({ id: Type.String({ format: 'uuid' }), n: Type.Integer() }), 'path')
  t.same(validate({ id: '6f1c1f6e-2a0b-4c43-9a4d-6f0b7d3f1e2a', n: '7' }), {
    ok: true,
    value: { id: '6f1c1f6e-2a0b-4c43-9a4d-6f0b7d3f1e2a', n: 7 },
  })
  t.equal(reason(t, validate({ id: 'nope', n: '7' })), 'path.id must match format "uuid"')
})

t.test('validator - defaults are applied', async (t) => {
  const schema = Type.Object({
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 100 }),
    order: Type.String({ default: 'asc' }),
    flag: Type.Optional(Type.Boolean()),
  })
  t.same(compileTextValidator(schema, 'query')({}), { ok: true, value: { limit: 100, order: 'asc' } })
  t.same(compileTextValidator(schema, 'query')({ limit: '7' }), { ok: true, value: { limit: 7, order: 'asc' } }, 'a given value wins')
  t.same(compileBodyValidator(schema)({ order: 'desc' }), { ok: true, value: { limit: 100, order: 'desc' } }, 'bodies get defaults too')
})

t.test('validator - an unknown field is named', async (t) => {
  const validate = compileBodyValidator(Type.Object({ name: Type.String() }, { additionalProperties: false }))
  t.equal(reason(t, validate({ name: 'a', colour: 'red' })), "body has an unknown field 'colour'")
  const query = compileTextValidator(Type.Object({ limit: Type.Optional(Type.Integer()) }, { additionalProperties: false }), 'query')
  t.equal(reason(t, query({ limt: '5' })), "query has an unknown field 'limt'")
})

t.test('validator - a missing required field is named', async (t) => {
  const validate = compileBodyValidator(
    Type.Object({ name: Type.String(), printer: Type.Object({ id: Type.String(), model: Type.String() }) }),
  )
  t.equal(reason(t, validate({ printer: { id: 'p', model: 'm' } })), "body is missing the required field 'name'")
  t.equal(reason(t, validate({ name: 'a', printer: { id: 'p' } })), "body.printer is missing the required field 'model'")
})

t.test('validator - nested array paths render like body.items[1].id', async (t) => {
  const validate = compileBodyValidator(
    Type.Object({
      items: Type.Array(Type.Object({ id: Type.String({ maxLength: 3 }), tags: Type.Optional(Type.Array(Type.String())) })),
    }),
  )
  t.equal(reason(t, validate({ items: [{ id: 'abc' }, { id: 'abcd' }] })), 'body.items[1].id must NOT have more than 3 characters')
  t.equal(reason(t, validate({ items: [{ id: 'a' }, { id: 'b' }, { id: 'c', tags: ['x', 2] }] })), 'body.items[2].tags[1] must be string')
  t.equal(reason(t, validate({ items: [{ id: 'a' }, {}] })), "body.items[1] is missing the required field 'id'")
  t.equal(reason(t, validate([])), 'body must be object', 'the root itself')
})

t.test('validator - an enum lists the allowed values', async (t) => {
  const validate = compileBodyValidator(
    Type.Object({ state: Type.Unsafe<string>({ type: 'string', enum: ['idle', 'printing', 'paused'] }) }),
  )
  t.equal(reason(t, validate({ state: 'broken' })), 'body.state must be one of: idle, printing, paused')
})

t.test('validator - a union of literals (TypeBox enums) lists the allowed values', async (t) => {
  const validate = compileBodyValidator(
    Type.Object({ state: Type.Union([Type.Literal('idle'), Type.Literal('printing'), Type.Literal('paused')]) }),
  )
  const message = reason(t, validate({ state: 'broken' }))
  t.match(message, /^body\.state /)
  t.equal(message, 'body.state must be one of: idle, printing, paused')
})

t.test('validator - a const names the one allowed value', async (t) => {
  const validate = compileBodyValidator(Type.Object({ version: Type.Literal(1) }))
  t.equal(reason(t, validate({ version: 2 })), 'body.version must be 1')
})

t.test('validator - keys that are not identifiers render in brackets', async (t) => {
  const validate = compileBodyValidator(
    Type.Object({
      'x-request': Type.Optional(Type.Integer()),
      'a/b': Type.Optional(Type.Integer()),
      'a~b': Type.Optional(Type.Integer()),
      'has space': Type.Optional(Type.Object({ $ok: Type.Integer(), _x1: Type.Optional(Type.Integer()) })),
    }),
  )
  t.equal(reason(t, validate({ 'x-request': 'a' })), 'body["x-request"] must be integer')
  t.equal(reason(t, validate({ 'a/b': 'a' })), 'body["a/b"] must be integer', 'a JSON-pointer ~1 is decoded')
  t.equal(reason(t, validate({ 'a~b': 'a' })), 'body["a~b"] must be integer', 'a JSON-pointer ~0 is decoded')
  t.equal(reason(t, validate({ 'has space': { $ok: 'a' } })), 'body["has space"].$ok must be integer', '$ is an identifier character')
  t.equal(reason(t, validate({ 'has space': { $ok: 1, _x1: 'a' } })), 'body["has space"]._x1 must be integer')
})

t.test('validator - describeError without an error says the whole value is invalid', async (t) => {
  t.equal(describeError(undefined, 'body'), 'body is invalid')
  t.equal(
    describeError({ keyword: 'x-custom', instancePath: '/a/0', schemaPath: '#', params: {} }, 'query'),
    'query.a[0] is invalid',
    'an error with no message',
  )
})

t.test('validator - query numbers are decimal text only: Infinity, hex, blanks and out-of-range text fail (once a 500)', async (t) => {
  const query = compileTextValidator(
    Type.Object({ limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }), ratio: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })) }),
    'query',
  )
  for (const bad of ['Infinity', '-Infinity', 'NaN', '0x10', ' 5', '5 ', '1e309', '', '+5', '01']) {
    const result = query({ limit: bad })
    t.equal(result.ok, false, `limit=${JSON.stringify(bad)}`)
  }
  t.match(query({ limit: 'Infinity' }), { ok: false, reason: 'query.limit must be integer' })
  t.match(query({ limit: '201' }), { ok: false, reason: /query\.limit must be <= 200/ })
  t.same(query({ limit: '1e2' }), { ok: true, value: { limit: 100 } }, 'exponent notation is decimal')
  t.same(query({ ratio: '0.25' }), { ok: true, value: { limit: 50, ratio: 0.25 } })
  t.match(query({ limit: ['5', '6'] }), { ok: false }, 'a repeated parameter for one value fails')
})
