import t, { type Test } from 'tap'
import { connect } from 'node:net'
import { Type } from '@sinclair/typebox'
import { defineRoute, type Route, type RouteSchemas } from '../../../src/http/route.js'
import type { Services } from '../../../src/routes/route-context.js'
import { metricValue, rawExchange, request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const testAuth = { kind: 'public', reason: 'test route' } as const
let releaseSlow: (() => void) | undefined
let slowEntered: (() => void) | undefined
let releaseHold: (() => void) | undefined
let holdEntered: (() => void) | undefined

const probes: Route<RouteSchemas, Services>[] = [
  defineRoute({
    method: 'POST',
    path: '/test/echo',
    operationId: 'testEcho',
    summary: 'echo',
    tags: ['test'],
    auth: testAuth,
    schemas: {
      body: Type.Object(
        {
          name: Type.String({ minLength: 1, maxLength: 10 }),
          count: Type.Optional(Type.Integer({ minimum: 1 })),
          items: Type.Optional(Type.Array(Type.Object({ id: Type.String({ maxLength: 3 }) }, { additionalProperties: false }))),
        },
        { additionalProperties: false },
      ),
    },
    responses: { 200: { description: 'the body' } },
    handler: (req) => ({ body: { received: req.body } }),
  }),
  defineRoute({
    method: 'POST',
    path: '/test/empty-ok',
    operationId: 'testEmptyOk',
    summary: 'empty body allowed',
    tags: ['test'],
    auth: testAuth,
    emptyBodyAllowed: true,
    schemas: { body: Type.Object({}, { additionalProperties: false }) },
    responses: { 200: { description: 'ok' } },
    handler: (req) => ({ body: { received: req.body } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test/query',
    operationId: 'testQuery',
    summary: 'query coercion',
    tags: ['test'],
    auth: testAuth,
    schemas: {
      query: Type.Object(
        { limit: Type.Integer({ minimum: 1, maximum: 200, default: 100 }), flag: Type.Optional(Type.Boolean()) },
        { additionalProperties: false },
      ),
    },
    responses: { 200: { description: 'the query' } },
    handler: (req) => ({ body: req.query }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test/items/{id}',
    operationId: 'testItem',
    summary: 'path parameter',
    tags: ['test'],
    auth: testAuth,
    schemas: { params: Type.Object({ id: Type.String({ format: 'uuid' }) }) },
    responses: { 200: { description: 'the id' } },
    handler: (req) => ({ body: { id: req.params.id } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test/boom',
    operationId: 'testBoom',
    summary: 'handler bug',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: () => {
      throw new Error('secret detail from inside the handler')
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/test/store-down',
    operationId: 'testStoreDown',
    summary: 'store unreachable',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/test/slow',
    operationId: 'testSlow',
    summary: 'waits until released',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: async () => {
      await new Promise<void>((resolve) => {
        releaseSlow = resolve
        slowEntered?.()
      })
      return { body: { slow: true } }
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/test/hold',
    operationId: 'testHold',
    summary: 'reads its body, then waits until released',
    tags: ['test'],
    auth: testAuth,
    emptyBodyAllowed: true,
    schemas: { body: Type.Object({}) },
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: async () => {
      await new Promise<void>((resolve) => {
        releaseHold = resolve
        holdEntered?.()
      })
      return { status: 202 }
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/test/async-boom',
    operationId: 'testAsyncBoom',
    summary: 'async handler bug',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: async () => {
      await Promise.resolve()
      throw new Error('async secret')
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/test/no-reply',
    operationId: 'testNoReply',
    summary: 'async handler that forgets its reply',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: (async () => undefined) as unknown as () => Promise<{ body: unknown }>,
  }),
  defineRoute({
    method: 'GET',
    path: '/test/unserialisable',
    operationId: 'testUnserialisable',
    summary: 'async reply that cannot be JSON',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: async () => ({ body: { n: 10n } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test/header-injection',
    operationId: 'testHeaderInjection',
    summary: 'a header value with a line break',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: async (req) => ({ body: {}, headers: { 'x-echo': String(req.query['v'] ?? '') } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test/accepted',
    operationId: 'testAccepted',
    summary: 'bodiless 202',
    tags: ['test'],
    auth: testAuth,
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: () => ({ status: 202 }),
  }),
]

const svc = await startTestService(t, { BODY_LIMIT_BYTES: '65536', CORS_ORIGINS: 'https://dash.example.com' }, { extraRoutes: probes })
const url = svc.url

async function healthy(t: Test): Promise<void> {
  const res = await request(url, '/healthz')
  t.equal(res.status, 200, 'the server still answers')
}

t.test('probes - healthz, readyz, metrics and openapi answer with no configuration', async (t) => {
  const health = await request(url, '/healthz')
  t.equal(health.status, 200)
  t.equal(health.json.status, 'ok')
  const ready = await request(url, '/readyz')
  t.equal(ready.status, 200)
  t.equal(ready.json.ready, true)
  t.equal(ready.json.checks.store.ok, true)
  t.ok(ready.json.checks.migrations.version >= 1)
  const metrics = await request(url, '/metrics')
  t.equal(metrics.status, 200)
  t.match(metrics.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.ok(metricValue(metrics.text, 'http_requests_total{route="/healthz",method="GET",status="200"}') >= 1, 'per-route counter')
  t.match(metrics.text, /http_request_duration_seconds_bucket\{route="\/readyz",method="GET",le="0\.005"\}/, 'per-route latency histogram')
  const doc = await request(url, '/openapi.json')
  t.equal(doc.status, 200)
  t.equal(doc.json.info.version, '1.0.0')
})

t.test('metrics - each request to a route is counted once', async (t) => {
  const before = metricValue((await request(url, '/metrics')).text, 'http_requests_total{route="/test/query",method="GET",status="200"}')
  await request(url, '/test/query')
  await request(url, '/test/query')
  const after = metricValue((await request(url, '/metrics')).text, 'http_requests_total{route="/test/query",method="GET",status="200"}')
  t.equal(after - before, 2)
})

t.test('errors - malformed JSON is refused with 400 invalid_json', async (t) => {
  const res = await request(url, '/test/echo', { method: 'POST', body: '{"name": "a",', headers: { 'content-type': 'application/json' } })
  t.equal(res.status, 400)
  t.equal(res.json.error, 'invalid_json')
  t.type(res.json.message, 'string')
  t.equal(res.json.requestId, res.headers['x-request-id'])
  await healthy(t)
})

t.test('errors - a declared body over the limit is refused with 413 before it is read', async (t) => {
  const { response, closedByServer } = await rawExchange(svc.port, (s) => {
    s.write('POST /test/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{"name":')
  })
  t.match(response, /^HTTP\/1\.1 413 /)
  t.match(response, /"error":"payload_too_large"/)
  t.ok(closedByServer, 'the connection is closed rather than read to the end')
  await healthy(t)
})

t.test('errors - a chunked body that grows past the limit is cut off with 413', async (t) => {
  const chunk = Buffer.alloc(16_384, 'a')
  const { response } = await rawExchange(svc.port, (s) => {
    s.write('POST /test/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n')
    for (let i = 0; i < 6; i++) s.write(`${chunk.length.toString(16)}\r\n${chunk.toString()}\r\n`)
    s.write('0\r\n\r\n')
  })
  t.match(response, /^HTTP\/1\.1 413 /)
  t.match(response, /payload_too_large/)
  await healthy(t)
})

t.test('errors - a chunked body cut off at the limit ends that connection', async (t) => {
  const chunk = Buffer.alloc(16_384, 'a')
  const { closedByServer } = await rawExchange(svc.port, (s) => {
    s.write('POST /test/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n')
    for (let i = 0; i < 6; i++) s.write(`${chunk.length.toString(16)}\r\n${chunk.toString()}\r\n`)
  })
  t.ok(closedByServer, 'the rest of the body is not read as a next request')
})

t.test('errors - a body just under the limit is read whole', async (t) => {
  const items = Array.from({ length: 3000 }, () => ({ id: 'abc' })) // ~ 40 KB
  const res = await request(url, '/test/echo', { method: 'POST', body: { name: 'big', items } })
  t.equal(res.status, 200)
  t.equal(res.json.received.items.length, 3000)
})

t.test('errors - an unknown route is 404 route_not_found', async (t) => {
  for (const [method, path] of [
    ['GET', '/nope'],
    ['POST', '/v1/does-not-exist'],
    ['GET', '/test/items/a/b'],
    ['DELETE', '/nothing-here/'],
  ] as const) {
    const res = await request(url, path, { method })
    t.equal(res.status, 404, `${method} ${path}`)
    t.equal(res.json.error, 'route_not_found')
  }
})

t.test('errors - a known path with the wrong method is 405 with Allow', async (t) => {
  const res = await request(url, '/healthz', { method: 'POST', body: {} })
  t.equal(res.status, 405)
  t.equal(res.json.error, 'method_not_allowed')
  t.equal(res.headers['allow'], 'GET, HEAD')
  const put = await request(url, '/test/echo', { method: 'PUT', body: { name: 'x' } })
  t.equal(put.status, 405)
  t.equal(put.headers['allow'], 'POST')
  const trace = await request(url, '/test/echo', { method: 'TRACE' })
  t.equal(trace.status, 405, 'a method the service never routes')
  t.equal(trace.json.error, 'method_not_allowed')
})

t.test('errors - a method the HTTP parser does not know closes that connection only', async (t) => {
  // uWS drops the connection for methods outside its parser's set (PROPFIND, PURGE);
  // no route sees it, and the server goes on serving everyone else.
  const { response, closedByServer } = await rawExchange(svc.port, (s) => s.write('PROPFIND /test/echo HTTP/1.1\r\nHost: x\r\n\r\n'))
  t.equal(response, '')
  t.ok(closedByServer)
  await healthy(t)
})

t.test('errors - an upload aborted by the client does not disturb the server', async (t) => {
  const metric = 'http_requests_aborted_total{route="/test/echo"}'
  const before = metricValue((await request(url, '/metrics')).text, metric)
  await rawExchange(
    svc.port,
    (s) => s.write('POST /test/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"name":"hal'),
    { closeAfterWrite: true },
  )
  // The abort is seen by the server asynchronously; poll its own counter.
  let after = before
  for (let i = 0; i < 100 && after === before; i++) {
    await new Promise((r) => setImmediate(r))
    after = metricValue((await request(url, '/metrics')).text, metric)
  }
  t.equal(after, before + 1, 'counted as aborted, nothing answered')
  await healthy(t)
})

t.test('validation - fields are checked by the route schema and named in the message', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{}, /missing the required field 'name'/],
    [{ name: '' }, /body\.name must NOT have fewer than 1 characters/],
    [{ name: 'x'.repeat(11) }, /body\.name must NOT have more than 10 characters/],
    [{ name: 'ok', extra: 1 }, /unknown field 'extra'/],
    [{ name: 'ok', count: '3' }, /body\.count must be integer/],
    [{ name: 'ok', count: 1.5 }, /body\.count must be integer/],
    [{ name: 'ok', items: [{ id: 'a' }, { id: 'toolong' }] }, /body\.items\[1\]\.id must NOT have more than 3 characters/],
    [[1, 2], /body must be object/],
    ['"text"', /body must be object/],
    [null, /body must be object/],
  ]
  for (const [body, message] of cases) {
    const res = await request(url, '/test/echo', { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.json.error, 'validation_failed')
    t.match(res.json.message, message)
  }
})

t.test('validation - a body of another media type is 415', async (t) => {
  const res = await request(url, '/test/echo', { method: 'POST', body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(res.status, 415)
  t.equal(res.json.error, 'unsupported_media_type')
  const vendorJson = await request(url, '/test/echo', { method: 'POST', body: '{"name":"v"}', headers: { 'content-type': 'application/vnd.api+json' } })
  t.equal(vendorJson.status, 200, '+json media types are JSON')
})

t.test('validation - an empty body is 400 body_required unless the route takes an empty object', async (t) => {
  const res = await request(url, '/test/echo', { method: 'POST' })
  t.equal(res.status, 400)
  t.equal(res.json.error, 'body_required')
  const ok = await request(url, '/test/empty-ok', { method: 'POST' })
  t.equal(ok.status, 200)
  t.same(ok.json.received, {})
})

t.test('validation - query strings are coerced by their schema and bounded', async (t) => {
  t.same((await request(url, '/test/query')).json, { limit: 100 }, 'default applied')
  t.same((await request(url, '/test/query?limit=25&flag=true')).json, { limit: 25, flag: true })
  const bad = await request(url, '/test/query?limit=500')
  t.equal(bad.status, 400)
  t.match(bad.json.message, /query\.limit must be <= 200/)
  const unknown = await request(url, '/test/query?color=red')
  t.equal(unknown.status, 400)
  t.match(unknown.json.message, /unknown field 'color'/)
  const notNumber = await request(url, '/test/query?limit=abc')
  t.equal(notNumber.status, 400)
})

t.test('validation - path parameters are decoded and checked', async (t) => {
  const id = '6f1c2d4e-8a9b-4c3d-9e1f-0a1b2c3d4e5f'
  t.same((await request(url, `/test/items/${id}`)).json, { id })
  const bad = await request(url, '/test/items/not-a-uuid')
  t.equal(bad.status, 400)
  t.match(bad.json.message, /path\.id must match format "uuid"/)
  const badEncoding = await request(url, '/test/items/%E0%A4%A')
  t.equal(badEncoding.status, 400)
  t.equal(badEncoding.json.error, 'validation_failed')
})

t.test('faults - a handler bug is a 500 internal_error that leaks nothing and is logged', async (t) => {
  const res = await request(url, '/test/boom')
  t.equal(res.status, 500)
  t.equal(res.json.error, 'internal_error')
  t.notMatch(res.text, /secret detail/, 'the cause stays in the log')
  const logged = svc.logs.find((l) => l['msg'] === 'request failed' && l['requestId'] === res.json.requestId)
  t.ok(logged, 'logged with its request id')
  t.match(JSON.stringify(logged), /secret detail/)
  await healthy(t)
})

t.test('faults - an unreachable store is a retryable 503 store_unavailable', async (t) => {
  const res = await request(url, '/test/store-down')
  t.equal(res.status, 503)
  t.equal(res.json.error, 'store_unavailable')
  t.equal(res.headers['retry-after'], '1')
})

t.test('request ids - a sane incoming id is echoed, anything else replaced', async (t) => {
  const echoed = await request(url, '/healthz', { headers: { 'x-request-id': 'bridge-7.batch:42' } })
  t.equal(echoed.headers['x-request-id'], 'bridge-7.batch:42')
  const replaced = await request(url, '/healthz', { headers: { 'x-request-id': 'bad id with spaces' } })
  t.match(replaced.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  const a = await request(url, '/healthz')
  const b = await request(url, '/healthz')
  t.not(a.headers['x-request-id'], b.headers['x-request-id'], 'generated ids are unique')
})

t.test('cors - allowed origins get CORS headers and preflights, others get none', async (t) => {
  const origin = 'https://dash.example.com'
  const pre = await request(url, '/test/echo', {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, x-api-key' },
  })
  t.equal(pre.status, 204)
  t.equal(pre.headers['access-control-allow-origin'], origin)
  t.match(pre.headers['access-control-allow-methods'], /POST/)
  t.match(pre.headers['access-control-allow-headers'], /x-api-key/)
  t.equal(pre.headers['vary'], 'origin')
  const actual = await request(url, '/healthz', { headers: { origin } })
  t.equal(actual.headers['access-control-allow-origin'], origin)
  t.match(actual.headers['access-control-expose-headers'], /x-request-id/)
  const stranger = await request(url, '/healthz', { headers: { origin: 'https://evil.example.net' } })
  t.equal(stranger.headers['access-control-allow-origin'], undefined)
  const strangerPre = await request(url, '/test/echo', { method: 'OPTIONS', headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'POST' } })
  t.equal(strangerPre.headers['access-control-allow-origin'], undefined)
  const unknownPath = await request(url, '/nowhere', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } })
  t.equal(unknownPath.status, 404)
})

t.test('head - HEAD of a GET route answers headers without a body', async (t) => {
  const res = await request(url, '/healthz', { method: 'HEAD' })
  t.equal(res.status, 200)
  t.equal(res.text, '')
  t.ok(Number(res.headers['content-length']) > 0)
})

t.test('concurrency - a slow request does not hold up others', async (t) => {
  const entered = new Promise<void>((resolve) => {
    slowEntered = resolve
  })
  const slow = request(url, '/test/slow')
  await entered
  const quick = await request(url, '/healthz')
  t.equal(quick.status, 200)
  releaseSlow?.()
  releaseSlow = undefined
  t.equal((await slow).status, 200)
})

t.test('faults - an async handler that throws, forgets its reply or returns what JSON cannot hold is a 500, never a crash', async (t) => {
  for (const path of ['/test/async-boom', '/test/no-reply', '/test/unserialisable']) {
    const res = await request(url, path)
    t.equal(res.status, 500, path)
    t.equal(res.json.error, 'internal_error')
    t.notMatch(res.text, /async secret/)
  }
  await healthy(t)
})

t.test('faults - a header value with a line break is refused, never written', async (t) => {
  const res = await request(url, '/test/header-injection?v=' + encodeURIComponent('x\r\nset-cookie: stolen=1'))
  t.equal(res.status, 500)
  t.equal(res.headers['set-cookie'], undefined)
  t.equal(res.headers['x-echo'], undefined)
  t.equal((await request(url, '/test/header-injection?v=fine')).headers['x-echo'], 'fine')
})

t.test('framing - bodiless replies carry a correct length', async (t) => {
  const { response } = await rawExchange(svc.port, (s) => s.write('OPTIONS /test/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'))
  t.match(response, /^HTTP\/1\.1 204 /)
  t.notMatch(response, /Content-Length: [1-9]/i, 'a 204 announces no body')
  const accepted = await rawExchange(svc.port, (s) => s.write('GET /test/accepted HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'))
  t.match(accepted.response, /^HTTP\/1\.1 202 /)
  t.match(accepted.response, /Content-Length: 0\r\n/i, 'an empty 202 says so')
})

t.test('lifecycle - a request stays in flight until its handler settles, even after the client left', async (t) => {
  const entered = new Promise<void>((resolve) => {
    holdEntered = resolve
  })
  const before = svc.http.inFlight
  const client = connect(svc.port, '127.0.0.1')
  client.on('error', () => undefined)
  client.write('POST /test/hold HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}')
  await entered
  // The client goes away while the handler runs.
  client.destroy()
  for (let i = 0; i < 200 && metricValue((await request(url, '/metrics')).text, 'http_requests_aborted_total{route="/test/hold"}') === 0; i++) {
    await new Promise((r) => setImmediate(r))
  }
  t.equal(metricValue((await request(url, '/metrics')).text, 'http_requests_aborted_total{route="/test/hold"}'), 1, 'the abort was seen')
  t.equal(svc.http.inFlight, before + 1, 'still in flight while the handler runs')
  releaseHold?.()
  for (let i = 0; i < 200 && svc.http.inFlight !== before; i++) await new Promise((r) => setImmediate(r))
  t.equal(svc.http.inFlight, before, 'released once the handler settled')
})
