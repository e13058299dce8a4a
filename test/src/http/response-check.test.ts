/**
 * CHECK_RESPONSES (on in every test service): an answer whose body its route's
 * response schema does not allow, or whose status the route does not list,
 * answers 500 and logs which field differs — so a route that drifts from what
 * /openapi.json says fails the test that called it. Off, the same answer goes
 * out as the handler gave it.
 */
import { Type } from '@sinclair/typebox'
import t from 'tap'
import { defineRoute } from '../../../src/http/route.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const Counted = Type.Object({ n: Type.Integer(), at: Type.String({ format: 'date-time' }) }, { additionalProperties: false })

const routes = [
  defineRoute({
    method: 'GET',
    path: '/test/counted/{kind}',
    operationId: 'testCounted',
    summary: 'answers as its kind says',
    tags: ['test'],
    auth: { kind: 'public', reason: 'test' },
    schemas: { params: Type.Object({ kind: Type.String() }) },
    responses: { 200: { description: 'A count.', schema: Counted }, 204: { description: 'Nothing.' } },
    handler: (req) => {
      const at = new Date(0)
      switch (req.params.kind) {
        case 'right':
          // A Date is its ISO string on the wire: checked as the client reads it.
          return { body: { n: 1, at: at as unknown as string } }
        case 'wrong-type':
          return { body: { n: 'one' as unknown as number, at: at.toISOString() } }
        case 'extra-field':
          return { body: { n: 1, at: at.toISOString(), secret: 'x' } as { n: number; at: string } }
        case 'unlisted-status':
          return { status: 202, body: { n: 1, at: at.toISOString() } }
        case 'empty':
          return { status: 204 }
        default:
          return { status: 404, body: { error: 'route_not_found', message: 'an error answered rather than thrown' } }
      }
    },
  }),
]

t.test('response check - answers its schema allows go out; others answer 500 and log the field', async (t) => {
  const svc = await startTestService(t, {}, { extraRoutes: routes })
  t.equal(svc.config.checkResponses, true, 'the test environment turns the check on')
  const right = await request(svc.url, '/test/counted/right')
  t.equal(right.status, 200)
  t.same(right.json, { n: 1, at: '1970-01-01T00:00:00.000Z' })
  t.equal((await request(svc.url, '/test/counted/empty')).status, 204, 'a status without a schema')
  t.equal((await request(svc.url, '/test/counted/other')).status, 404, 'an error answered by the handler is the error body')

  for (const [kind, field] of [
    ['wrong-type', /response\.n|\/n/],
    ['extra-field', /secret|additional/],
    ['unlisted-status', /202/],
  ] as const) {
    const res = await request(svc.url, `/test/counted/${kind}`)
    t.equal(res.status, 500, `${kind}: 500`)
    t.equal(res.json.error, 'internal_error')
    const logged = svc.logs.find((l) => l['requestId'] === res.json.requestId && JSON.stringify(l).includes('/test/counted/{kind}'))
    t.ok(logged, `${kind}: logged with the request id`)
    t.match(JSON.stringify(logged), field, `${kind}: the log names what differs`)
  }
})

t.test('response check - off (the default), the handler\'s answer goes out as it is', async (t) => {
  const svc = await startTestService(t, { CHECK_RESPONSES: 'false' }, { extraRoutes: routes })
  const res = await request(svc.url, '/test/counted/wrong-type')
  t.equal(res.status, 200)
  t.same(res.json, { n: 'one', at: '1970-01-01T00:00:00.000Z' })
})
