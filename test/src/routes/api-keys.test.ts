import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { whoamiRoute } from '../../helpers/routes.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const svc = await startTestService(t, {}, { extraRoutes: [whoamiRoute('printers:read')] })
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const orgId: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id
// The admin joins other organizations below, so every call names the one it means.
const adminAuth = { ...admin.auth, 'x-organization-id': orgId }

async function createKey(body: Record<string, unknown>, auth: Record<string, string> = adminAuth) {
  return request(url, '/v1/api-keys', { method: 'POST', headers: auth, body })
}
const withKey = (key: string, extra: Record<string, string> = {}) => ({ 'x-api-key': key, ...extra })

t.test('api keys - an admin creates a key; its secret is shown once and stored only as a hash', async (t) => {
  const res = await createKey({ name: 'bridge 1', scopes: ['printers:read', 'printers:write'] })
  t.equal(res.status, 200)
  t.match(res.json.key, /^pfk_[0-9a-f]{10}_[A-Za-z0-9_-]{43}$/)
  t.match(res.json, { name: 'bridge 1', organizationId: orgId, expiresAt: null, lastUsedAt: null, enabled: true, scopes: ['printers:read', 'printers:write'] })
  const list = await request(url, '/v1/api-keys', { headers: admin.auth })
  const listed = list.json.apiKeys.find((k: { id: string }) => k.id === res.json.id)
  t.ok(listed)
  t.notOk('key' in listed, 'the list never shows the secret')
  for (const field of ['id', 'name', 'organizationId', 'createdAt', 'enabled', 'scopes']) t.ok(field in listed, field)
  const rows = await svc.services.db.sql`select * from api_keys where id = ${res.json.id}`
  // pfk_ + 10 hex + _ : the 43 characters after that are the secret (base64url may itself contain '_').
  const secret = res.json.key.slice(15)
  t.equal(secret.length, 43)
  t.notOk(JSON.stringify(rows).includes(secret), 'the secret part is nowhere in the row')
})

t.test('api keys - a key acts for its organization on routes that accept its scope', async (t) => {
  const { json } = await createKey({ name: 'reader', scopes: ['printers:read'] })
  const ok = await request(url, '/test/whoami', { headers: withKey(json.key) })
  t.equal(ok.status, 200)
  t.same(ok.json, { kind: 'api_key', keyId: json.id, organizationId: orgId, scopes: ['printers:read'] })
  t.equal((await request(url, '/test/whoami', { headers: withKey(json.key, { 'x-organization-id': orgId }) })).status, 200, 'naming its own organization is fine')
})

t.test('api keys - refusals: wrong scope 403, bad secret 401, another organization 404, people-only routes 403', async (t) => {
  const { json } = await createKey({ name: 'writer only', scopes: ['printers:write'] })
  const scope = await request(url, '/test/whoami', { headers: withKey(json.key) })
  t.equal(scope.status, 403)
  t.equal(scope.json.error, 'insufficient_scope')
  t.match(scope.json.message, /printers:read/)
  const { json: reader } = await createKey({ name: 'reader 2', scopes: ['printers:read'] })
  const forged = reader.key.slice(0, -4) + (reader.key.endsWith('AAAA') ? 'BBBB' : 'AAAA')
  for (const bad of [forged, 'pfk_0000000000_' + 'A'.repeat(43), 'not-a-key', '']) {
    const res = await request(url, '/test/whoami', { headers: withKey(bad) })
    t.equal(res.status, 401, `refused: ${bad.slice(0, 20)}`)
  }
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Other farm' } })
  const cross = await request(url, '/test/whoami', { headers: withKey(reader.key, { 'x-organization-id': other.json.id }) })
  t.equal(cross.status, 404)
  t.equal(cross.json.error, 'organization_not_found')
  for (const path of ['/v1/api-keys', '/v1/me', '/v1/organizations']) {
    const res = await request(url, path, { headers: withKey(reader.key) })
    t.equal(res.status, 403, path)
    t.equal(res.json.error, 'session_required')
  }
})

t.test('api keys - disabling, expiring or deleting a key stops it at once on this node', async (t) => {
  const { json } = await createKey({ name: 'short lived', scopes: ['printers:read'] })
  const use = () => request(url, '/test/whoami', { headers: withKey(json.key) })
  t.equal((await use()).status, 200, 'cached as valid now')
  const disabled = await request(url, `/v1/api-keys/${json.id}`, { method: 'PATCH', headers: adminAuth, body: { enabled: false } })
  t.equal(disabled.status, 200)
  t.equal(disabled.json.enabled, false)
  t.equal((await use()).json.error, 'api_key_disabled')
  await request(url, `/v1/api-keys/${json.id}`, { method: 'PATCH', headers: adminAuth, body: { enabled: true, expires_at: new Date(Date.now() - 1000).toISOString() } })
  t.equal((await use()).json.error, 'api_key_expired')
  await request(url, `/v1/api-keys/${json.id}`, { method: 'PATCH', headers: adminAuth, body: { expires_at: null } })
  t.equal((await use()).status, 200, 'expiry removed')
  const scoped = await request(url, `/v1/api-keys/${json.id}`, { method: 'PATCH', headers: adminAuth, body: { scopes: ['jobs:read'], name: 'renamed' } })
  t.same([scoped.json.name, scoped.json.scopes], ['renamed', ['jobs:read']])
  t.equal((await use()).json.error, 'insufficient_scope', 're-scoping applies at once')
  t.equal((await request(url, `/v1/api-keys/${json.id}?organizationId=${orgId}`, { method: 'DELETE', headers: adminAuth })).status, 204)
  t.equal((await use()).json.error, 'unauthorized')
  const again = await request(url, `/v1/api-keys/${json.id}?organizationId=${orgId}`, { method: 'DELETE', headers: adminAuth })
  t.equal(again.status, 404)
  t.equal(again.json.error, 'api_key_not_found')
})

t.test('api keys - members read, admins write; another organization\'s keys are 404', async (t) => {
  await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: admin.auth, body: { email: 'member@test.printfarm', password: 'member-password-1', role: 'member' } })
  const member = await signIn(url, 'member@test.printfarm', 'member-password-1')
  t.equal((await request(url, '/v1/api-keys', { headers: member.auth })).status, 200)
  const denied = await createKey({ name: 'nope', scopes: ['printers:read'] }, member.auth)
  t.equal(denied.status, 403)
  t.equal(denied.json.error, 'ORG_ADMIN_REQUIRED')

  const { json } = await createKey({ name: 'guarded', scopes: ['printers:read'] })
  const org2 = await request(url, '/v1/organizations', { method: 'POST', headers: member.auth, body: { name: 'Member farm' } })
  const asOther = { ...member.auth, 'x-organization-id': org2.json.id }
  t.equal((await request(url, `/v1/api-keys/${json.id}`, { method: 'PATCH', headers: asOther, body: { enabled: false } })).status, 404)
  t.equal((await request(url, `/v1/api-keys/${json.id}?organizationId=${org2.json.id}`, { method: 'DELETE', headers: member.auth })).status, 404)
  t.equal((await request(url, `/v1/api-keys/${json.id}/logs`, { headers: asOther })).status, 404)
  t.notOk((await request(url, '/v1/api-keys', { headers: asOther })).json.apiKeys.some((k: { id: string }) => k.id === json.id))
  const several = await request(url, '/v1/api-keys', { headers: member.auth })
  t.equal(several.status, 400, 'a caller in two organizations names one')
  t.equal(several.json.error, 'organization_required')
  t.type(several.json.requestId, 'string', 'list errors carry requestId')
  t.equal((await request(url, `/v1/api-keys?organizationId=${org2.json.id}`, { headers: member.auth })).status, 200, 'organizationId in the query selects one')
  const [row] = await svc.services.db.sql`select enabled from api_keys where id = ${json.id}`
  t.equal(row?.['enabled'], true, 'nothing changed')
})

t.test('api keys - each use is logged with route, method, status, address and request id, newest first, paginated', async (t) => {
  const { json } = await createKey({ name: 'logged', scopes: ['printers:read'] })
  for (let i = 0; i < 3; i++) await request(url, '/test/whoami', { headers: withKey(json.key, { 'x-request-id': `use-${i}` }) })
  await request(url, '/test/whoami', { headers: withKey(json.key, { 'x-organization-id': '00000000-0000-4000-8000-000000000000' }) })
  const page = await request(url, `/v1/api-keys/${json.id}/logs?limit=2`, { headers: adminAuth })
  t.equal(page.status, 200)
  t.same(page.json.logs.map((l: { requestId: string }) => l.requestId), ['use-2', 'use-1'], 'refused uses are not logged; newest first')
  t.match(page.json.logs[0], { method: 'GET', route: '/test/whoami', status: 200, remoteAddress: '127.0.0.1' })
  t.type(page.json.nextCursor, 'number')
  const rest = await request(url, `/v1/api-keys/${json.id}/logs?limit=2&before=${page.json.nextCursor}`, { headers: adminAuth })
  t.same(rest.json.logs.map((l: { requestId: string }) => l.requestId), ['use-0'])
  t.equal(rest.json.nextCursor, null)
  const listed = (await request(url, '/v1/api-keys', { headers: adminAuth })).json.apiKeys.find((k: { id: string }) => k.id === json.id)
  t.type(listed.lastUsedAt, 'string', 'lastUsedAt is kept')
})

t.test('api keys - bad input is 400 naming the field', async (t) => {
  const cases: [string, string, unknown, RegExp][] = [
    ['POST', '/v1/api-keys', { scopes: ['printers:read'] }, /required field 'name'/],
    ['POST', '/v1/api-keys', { name: 'x', scopes: [] }, /body\.scopes must NOT have fewer than 1 items/],
    ['POST', '/v1/api-keys', { name: 'x', scopes: ['printers:fly'] }, /body\.scopes\[0\] must be one of: printers:read, printers:write/],
    ['POST', '/v1/api-keys', { name: 'x', scopes: ['printers:read', 'printers:read'] }, /must NOT have duplicate items/],
    ['POST', '/v1/api-keys', { name: 'x', scopes: ['printers:read'], expires_at: 'tomorrow' }, /body\.expires_at must match format "date-time"/],
    ['POST', '/v1/api-keys', { name: 'x', scopes: ['printers:read'], expires_at: '2000-01-01T00:00:00Z' }, /must be in the future/],
    ['POST', '/v1/api-keys', { name: 'x', scopes: ['printers:read'], secret: 'mine' }, /unknown field 'secret'/],
    ['PATCH', '/v1/api-keys/00000000-0000-4000-8000-000000000000', {}, /body must NOT have fewer than 1 properties/],
    ['PATCH', '/v1/api-keys/not-a-uuid', { enabled: true }, /path\.id must match format "uuid"/],
    ['DELETE', '/v1/api-keys/00000000-0000-4000-8000-000000000000', undefined, /required field 'organizationId'/],
    ['GET', '/v1/api-keys/00000000-0000-4000-8000-000000000000/logs?limit=0', undefined, /query\.limit must be >= 1/],
  ]
  for (const [method, path, body, message] of cases) {
    const res = await request(url, path, { method, headers: adminAuth, body })
    t.equal(res.status, 400, `${method} ${path}`)
    t.match(res.json.message, message, `${method} ${path}`)
  }
  const malformedOrg = await request(url, '/v1/api-keys?organizationId=abc', { headers: admin.auth })
  t.equal(malformedOrg.status, 404, 'a malformed organization id is not found, like any other not of yours')
  const conflicting = await request(url, `/v1/api-keys/00000000-0000-4000-8000-000000000000?organizationId=00000000-0000-4000-8000-000000000001`, {
    method: 'DELETE',
    headers: adminAuth,
  })
  t.equal(conflicting.status, 400, 'x-organization-id and organizationId naming different organizations is refused')
  t.match(conflicting.json.message, /different organizations/)
})
