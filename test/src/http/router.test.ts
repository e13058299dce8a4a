import t, { type Test } from 'tap'
import { Router, type HttpMethod, type RouteMatch } from '../../../src/http/router.js'

function found<V>(t: Test, match: RouteMatch<V>): { value: V; params: Record<string, string> } | undefined {
  if (match.kind !== 'found') {
    t.fail(`expected a match, got ${JSON.stringify(match)}`)
    return undefined
  }
  return { value: match.value, params: match.params }
}

const sorted = (methods: readonly HttpMethod[]): HttpMethod[] => [...methods].sort()

t.test('router - a static route matches its exact path only', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/healthz', 'health')
  router.add('GET', '/v1/printers', 'list')
  t.same(router.match('GET', '/healthz'), { kind: 'found', value: 'health', params: {} })
  t.same(router.match('GET', '/v1/printers'), { kind: 'found', value: 'list', params: {} })
  t.same(router.match('GET', '/v1/printers/'), { kind: 'not_found' }, 'a trailing slash is another path')
  t.same(router.match('GET', '/v1'), { kind: 'not_found' }, 'a prefix is not a match')
  t.same(router.match('GET', '/v1/printers/x'), { kind: 'not_found' })
})

t.test('router - a parameterised route binds its parameters by name', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/printers/{id}', 'printer')
  router.add('GET', '/v1/printers/{id}/jobs/{jobId}', 'job')
  t.same(found(t, router.match('GET', '/v1/printers/p1')), { value: 'printer', params: { id: 'p1' } })
  t.same(found(t, router.match('GET', '/v1/printers/p1/jobs/j9')), { value: 'job', params: { id: 'p1', jobId: 'j9' } })
  t.same(router.match('GET', '/v1/printers/p1/jobs'), { kind: 'not_found' }, 'an intermediate node with no methods is not a route')
  t.same(router.match('GET', '/v1/printers/p1/jobs/j9/x'), { kind: 'not_found' }, 'extra segments do not match')
})

t.test('router - a literal segment wins over a parameter at the same depth', async (t) => {
  const router = new Router<string>()
  // Registered in both orders so the outcome cannot depend on insertion order.
  router.add('GET', '/v1/printers/{id}', 'by-id')
  router.add('GET', '/v1/printers/summary', 'summary')
  router.add('GET', '/v1/farms/stats/{x}', 'farm-stats-literal')
  router.add('GET', '/v1/farms/{farmId}/{x}', 'farm-param')

  t.same(found(t, router.match('GET', '/v1/printers/summary')), { value: 'summary', params: {} })
  t.same(found(t, router.match('GET', '/v1/printers/other')), { value: 'by-id', params: { id: 'other' } })
  t.same(found(t, router.match('GET', '/v1/farms/stats/today')), { value: 'farm-stats-literal', params: { x: 'today' } })
  t.same(found(t, router.match('GET', '/v1/farms/f1/today')), { value: 'farm-param', params: { farmId: 'f1', x: 'today' } })
})

t.test('router - a literal branch that dead-ends falls back to the parameter and leaves no stale params', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/a/b/{y}', 'literal-b')
  router.add('GET', '/a/{x}/c/d', 'param-x')
  // The literal 'b' branch binds y=c, then fails on 'd'; the walk must back out and drop y.
  t.same(found(t, router.match('GET', '/a/b/c/d')), { value: 'param-x', params: { x: 'b' } })
  t.same(found(t, router.match('GET', '/a/b/c')), { value: 'literal-b', params: { y: 'c' } })
})

t.test('router - an unknown path is 404, a known path with another method is 405 with the allowed list', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/printers', 'list')
  router.add('POST', '/v1/printers', 'create')
  router.add('DELETE', '/v1/printers/{id}', 'delete')

  t.same(router.match('GET', '/v1/nothing'), { kind: 'not_found' })
  t.same(router.match('DELETE', '/v1/nothing/x'), { kind: 'not_found' })

  const staticMiss = router.match('PUT', '/v1/printers')
  t.equal(staticMiss.kind, 'method_not_allowed')
  if (staticMiss.kind === 'method_not_allowed') {
    t.same(sorted(staticMiss.allowed), ['GET', 'HEAD', 'POST'], 'HEAD is implied by GET')
  }

  const paramMiss = router.match('GET', '/v1/printers/p1')
  t.equal(paramMiss.kind, 'method_not_allowed')
  if (paramMiss.kind === 'method_not_allowed') {
    t.same(paramMiss.allowed, ['DELETE'], 'no GET, so no implied HEAD')
  }
})

t.test('router - HEAD matches a GET route, and an explicit HEAD route wins', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/status', 'get-status')
  router.add('GET', '/v1/printers/{id}', 'get-printer')
  router.add('GET', '/feed', 'get-feed')
  router.add('HEAD', '/feed', 'head-feed')
  router.add('HEAD', '/probe', 'head-probe')
  router.add('GET', '/probe', 'get-probe')
  router.add('POST', '/only-post', 'post')

  t.same(router.match('HEAD', '/status'), { kind: 'found', value: 'get-status', params: {} })
  t.same(found(t, router.match('HEAD', '/v1/printers/p1')), { value: 'get-printer', params: { id: 'p1' } })
  t.same(router.match('HEAD', '/feed'), { kind: 'found', value: 'head-feed', params: {} })
  t.same(router.match('HEAD', '/probe'), { kind: 'found', value: 'head-probe', params: {} }, 'a HEAD route added before its GET still wins')
  t.same(router.match('GET', '/probe'), { kind: 'found', value: 'get-probe', params: {} })
  t.same(router.match('HEAD', '/only-post'), { kind: 'method_not_allowed', allowed: ['POST'] }, 'HEAD is not implied by POST')

  const allowed = router.allowed('/feed')
  t.same(sorted(allowed), ['GET', 'HEAD'], 'an explicit HEAD is listed once')
})

t.test('router - parameters are percent-decoded', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/files/{name}', 'file')
  t.same(found(t, router.match('GET', '/v1/files/a%20b%2Fc')), { value: 'file', params: { name: 'a b/c' } })
  t.same(found(t, router.match('GET', '/v1/files/%C3%A9t%C3%A9')), { value: 'file', params: { name: 'été' } })
  t.same(found(t, router.match('GET', '/v1/files/plain')), { value: 'file', params: { name: 'plain' } })
})

t.test('router - invalid percent-encoding in a parameter is bad_path naming the parameter', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/files/{name}', 'file')
  for (const raw of ['%zz', '%', 'abc%4', '%E0%A4%A', '%C3']) {
    const match = router.match('GET', `/v1/files/${raw}`)
    t.equal(match.kind, 'bad_path', raw)
    if (match.kind === 'bad_path') t.match(match.reason, /'name'/, `${raw}: the reason names the parameter`)
  }
  t.same(router.allowed('/v1/files/%zz'), [], 'allowed() of a bad path is empty')
})

t.test('router - an empty segment never binds a parameter', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/printers/{id}', 'printer')
  router.add('GET', '/v1/printers/{id}/jobs', 'jobs')
  t.same(router.match('GET', '/v1/printers/'), { kind: 'not_found' })
  t.same(router.match('GET', '/v1/printers//jobs'), { kind: 'not_found' })
  t.same(router.allowed('/v1/printers/'), [])
})

t.test('router - a duplicate route throws TypeError', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/healthz', 'a')
  router.add('GET', '/v1/printers/{id}', 'b')
  t.throws(() => router.add('GET', '/healthz', 'again'), TypeError, 'static duplicate')
  t.throws(() => router.add('GET', '/v1/printers/{id}', 'again'), TypeError, 'parameterised duplicate')
  t.doesNotThrow(() => router.add('POST', '/healthz', 'c'), 'another method on the same path is fine')
  t.doesNotThrow(() => router.add('PUT', '/v1/printers/{id}', 'd'), 'another method on the same pattern is fine')
  t.same(router.match('GET', '/healthz'), { kind: 'found', value: 'a', params: {} }, 'the first registration is kept')
})

t.test('router - conflicting parameter names at one depth throw TypeError', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/printers/{id}', 'a')
  t.throws(() => router.add('DELETE', '/v1/printers/{printerId}', 'b'), TypeError)
  t.throws(() => router.add('GET', '/v1/printers/{name}/jobs', 'c'), TypeError)
  t.doesNotThrow(() => router.add('GET', '/v1/printers/{id}/jobs', 'd'), 'the same name deeper is fine')
})

t.test('router - malformed patterns throw TypeError', async (t) => {
  const router = new Router<string>()
  t.throws(() => router.add('GET', 'no-slash', 'a'), TypeError)
  t.throws(() => router.add('GET', '/v1/{id}x', 'a'), TypeError)
  t.throws(() => router.add('GET', '/v1/{1id}', 'a'), TypeError)
})

t.test('router - allowed() lists registered methods and is empty for an unknown path', async (t) => {
  const router = new Router<string>()
  router.add('GET', '/v1/printers', 'list')
  router.add('POST', '/v1/printers', 'create')
  router.add('PATCH', '/v1/printers/{id}', 'patch')
  t.same(router.allowed('/nope'), [])
  t.same(router.allowed('/v1/printers/p1/extra'), [])
  t.same(sorted(router.allowed('/v1/printers')), ['GET', 'HEAD', 'POST'])
  t.same(router.allowed('/v1/printers/p1'), ['PATCH'])
  t.same(new Router<string>().allowed('/'), [], 'an empty router knows no path')
})
