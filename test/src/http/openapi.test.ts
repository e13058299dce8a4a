import t from 'tap'
import { readFileSync } from 'node:fs'
import { Validator } from '@seriousme/openapi-schema-validator'
import { errorCodes, isErrorCode } from '../../../protocol/errors.js'
import { allRoutes } from '../../../src/node/service.js'
import { serviceVersion } from '../../../src/node/version.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const served = await request(svc.url, '/openapi.json')
const doc = served.json

t.test('openapi - the served document is valid OpenAPI 3.1 with version 1.0.0', async (t) => {
  t.equal(served.status, 200)
  t.match(served.headers['content-type'], /^application\/json/)
  t.equal(doc.openapi, '3.1.0')
  t.equal(doc.info.version, '1.0.0', 'the API version')
  const result = await new Validator().validate(doc)
  t.equal(result.valid, true, JSON.stringify(result.errors ?? []).slice(0, 2000))
  // The validator is a real check: a response without its required description is refused.
  const broken = structuredClone(doc)
  delete broken.paths['/healthz'].get.responses['200'].description
  t.equal((await new Validator().validate(broken)).valid, false, 'a broken copy is refused')
})

t.test('openapi - every registered route is described, and nothing else', async (t) => {
  const routes = allRoutes()
  t.ok(routes.length > 0)
  for (const route of routes) {
    const operation = doc.paths?.[route.path]?.[route.method.toLowerCase()]
    t.ok(operation, `${route.method} ${route.path} is in the document`)
    t.equal(operation?.operationId, route.operationId)
  }
  const described = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
  )
  t.same(described.sort(), routes.map((r) => `${r.method} ${r.path}`).sort())
})

t.test('openapi - operation ids are unique', async (t) => {
  const ids = allRoutes().map((r) => r.operationId)
  t.equal(new Set(ids).size, ids.length)
})

t.test('openapi - every documented error code is in the registry with its status', async (t) => {
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        for (const code of (response['x-error-codes'] ?? []) as string[]) {
          t.ok(isErrorCode(code), `${method} ${path} ${status}: ${code} is registered`)
          if (isErrorCode(code)) t.equal(String(errorCodes[code].status), status, `${code} documented under its own status`)
        }
      }
    }
  }
  for (const code of Object.keys(errorCodes)) t.match(doc.info.description, `| ${code} |`, `${code} is in the error table`)
})

t.test('openapi - public routes declare no security requirement', async (t) => {
  for (const route of allRoutes()) {
    const op = doc.paths[route.path][route.method.toLowerCase()]
    if (route.auth.kind === 'public') t.same(op.security, [], `${route.path} is public`)
  }
})

t.test('version - the service version matches package.json', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }
  t.equal(serviceVersion, pkg.version)
})

t.test('openapi - a query parameter is required only when a request without it is refused', async (t) => {
  const params = (path: string, method: string) => doc.paths[path][method].parameters as { name: string; in: string; required: boolean }[]
  const required = (path: string, method: string, name: string) => params(path, method).find((p) => p.name === name)?.required
  t.equal(required('/v1/api-keys/{id}/logs', 'get', 'limit'), false, 'limit has a default')
  t.equal(required('/v1/printer-config', 'get', 'include_incomplete'), false)
  t.equal(required('/v1/printer-config', 'get', 'enabled_only'), false)
  t.equal(required('/v1/api-keys/{id}', 'delete', 'organizationId'), true, 'a parameter without a default stays required')
  // And the route agrees: every query parameter marked optional may be left out.
  const listed = await request(svc.url, '/v1/printer-config', { headers: { authorization: `Bearer ${(await request(svc.url, '/v1/auth/login', { method: 'POST', body: { email: 'admin@test.printfarm', password: 'test-admin-password' } })).json.access_token}` } })
  t.equal(listed.status, 200)
})
