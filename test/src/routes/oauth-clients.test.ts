/**
 * OAuth clients an organization manages (POST/GET/PATCH/DELETE /v1/oauth-clients): an admin
 * registers one; a confidential client's secret is answered once and stored only as a hash (and
 * checks in constant time against the hash); lists and reads never show a secret; members read,
 * only admins change; another organization's clients do not exist for you; API keys cannot manage
 * clients; every documented limit (name 1-255, description 1000, at least one redirect URI and scope,
 * the 17 client scopes) holds at its boundary, and redirect URIs are https, loopback http or a
 * private-use scheme.
 */
import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const orgId: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id
const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Other farm' } })
const otherOrgId: string = other.json.id

const valid = { organization_id: orgId, name: 'Farm dashboard', redirect_uris: ['https://dash.example.com/callback'], scopes: ['printers:read'] }
const create = (body: Record<string, unknown>, headers = admin.auth) => request(url, '/v1/oauth-clients', { method: 'POST', headers, body })

// A member (not admin) of the first organization, and an admin of the other one only.
await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: { ...admin.auth, 'x-organization-id': orgId }, body: { email: 'viewer@test.printfarm', password: 'viewer-password-1', role: 'member' } })
const member = await signIn(url, 'viewer@test.printfarm', 'viewer-password-1')
await request(url, `/v1/organizations/${otherOrgId}/members`, { method: 'POST', headers: { ...admin.auth, 'x-organization-id': otherOrgId }, body: { email: 'stranger@test.printfarm', password: 'stranger-password-1', role: 'admin' } })
const outsider = await signIn(url, 'stranger@test.printfarm', 'stranger-password-1')

t.test('create - a confidential client gets its secret once; the store keeps only a hash that checks in constant time', async (t) => {
  const res = await create({ ...valid, is_public: false, description: 'Wall screens' })
  t.equal(res.status, 201, 'created', { body: res.text })
  t.match(res.json, { organization_id: orgId, name: 'Farm dashboard', description: 'Wall screens', redirect_uris: valid.redirect_uris, scopes: ['printers:read'], is_public: false, is_enabled: true })
  t.match(res.json.client_id, /^pfc_[A-Za-z0-9_-]{22}$/)
  t.match(res.json.client_secret, /^pfcs_[A-Za-z0-9_-]{43}$/)
  const rows = await svc.services.db.sql`select * from oauth_clients where id = ${res.json.id}`
  t.notOk(JSON.stringify(rows).includes(res.json.client_secret.slice(5)), 'the secret is nowhere in the row')
  t.equal(await svc.services.oauthClients.secretMatches(res.json.client_id, res.json.client_secret), true, 'the secret checks')
  t.equal(await svc.services.oauthClients.secretMatches(res.json.client_id, res.json.client_secret.slice(0, -1) + 'x'), false, 'another secret does not')
  const read = await request(url, `/v1/oauth-clients/${res.json.id}`, { headers: admin.auth })
  t.equal(read.status, 200)
  t.notOk('client_secret' in read.json, 'reads never show the secret')
  t.same((await request(url, `/v1/oauth-clients/${res.json.client_id}`, { headers: admin.auth })).json, read.json, 'the client_id finds it too')
  const list = await request(url, `/v1/oauth-clients?organization_id=${orgId}`, { headers: admin.auth })
  t.ok(list.json.clients.some((c: any) => c.id === res.json.id), 'listed')
  t.notOk(list.json.clients.some((c: any) => 'client_secret' in c), 'without secrets')
})

t.test('create - a public client (the default) has no secret', async (t) => {
  const res = await create({ ...valid, redirect_uris: ['http://127.0.0.1/callback', 'com.example.farm:/oauth'] })
  t.equal(res.status, 201, 'created', { body: res.text })
  t.equal(res.json.is_public, true)
  t.equal(res.json.client_secret, null)
  t.equal(await svc.services.oauthClients.secretMatches(res.json.client_id, 'pfcs_anything'), false, 'no secret matches a public client')
})

t.test('limits - every bound at its edge; redirect URIs must be https, loopback http or a private-use scheme', async (t) => {
  const ok = [
    ['name of 255', { name: 'n'.repeat(255) }],
    ['description of 1000', { description: 'd'.repeat(1000) }],
    ['all 17 client scopes', { scopes: ['printers:read', 'printers:write', 'jobs:read', 'jobs:write', 'telemetry:read', 'models:read', 'models:write', 'files:read', 'files:write', 'print-jobs:read', 'print-jobs:write', 'inventory:read', 'inventory:write', 'makes:read', 'makes:write', 'fleet:read', 'fleet:write'] }],
    ['ten redirect URIs', { redirect_uris: Array.from({ length: 10 }, (_, i) => `https://a.example/${i}`) }],
    ['loopback http with a port', { redirect_uris: ['http://localhost:8123/cb', 'http://[::1]:9000/cb'] }],
  ] as const
  for (const [what, change] of ok) t.equal((await create({ ...valid, ...change })).status, 201, `${what} is accepted`)
  const refused = [
    ['an empty name', { name: '' }],
    ['a name of 256', { name: 'n'.repeat(256) }],
    ['a description of 1001', { description: 'd'.repeat(1001) }],
    ['no redirect URI', { redirect_uris: [] }],
    ['eleven redirect URIs', { redirect_uris: Array.from({ length: 11 }, (_, i) => `https://a.example/${i}`) }],
    ['a repeated redirect URI', { redirect_uris: ['https://a.example/cb', 'https://a.example/cb'] }],
    ['a relative redirect URI', { redirect_uris: ['/callback'] }],
    ['http on a public host', { redirect_uris: ['http://dash.example.com/callback'] }],
    ['a fragment', { redirect_uris: ['https://a.example/cb#x'] }],
    ['a javascript: URI', { redirect_uris: ['javascript:alert(1)'] }],
    ['credentials in the URI', { redirect_uris: ['https://user:pw@a.example/cb'] }],
    ['no scope', { scopes: [] }],
    ['host:pair (not a client scope)', { scopes: ['host:pair'] }],
    ['print:launch (not a client scope)', { scopes: ['print:launch'] }],
    ['an unknown scope', { scopes: ['admin'] }],
    ['a repeated scope', { scopes: ['printers:read', 'printers:read'] }],
    ['an organization_id that is not a uuid', { organization_id: 'farm' }],
    ['an unknown field', { secret: 'x' }],
  ] as const
  for (const [what, change] of refused) {
    const res = await create({ ...valid, ...change })
    t.equal(res.status, 400, `${what} is refused`, { body: res.text })
    t.equal(res.json.error, 'validation_failed')
  }
  const withoutName = { ...valid } as Record<string, unknown>
  delete withoutName['name']
  t.equal((await create(withoutName)).status, 400, 'name is required')
  const http = await create({ ...valid, redirect_uris: ['http://dash.example.com/callback'] })
  t.match(http.json.message, /redirect_uris\[0\] may use http only on a loopback host/, 'the message names the URI and the rule')
})

t.test('update - an admin renames, re-scopes and disables a client; bad changes are refused and change nothing', async (t) => {
  const { json: client } = await create(valid)
  const res = await request(url, `/v1/oauth-clients/${client.id}`, { method: 'PATCH', headers: admin.auth, body: { name: 'Renamed', scopes: ['printers:read', 'files:read'], is_enabled: false, description: null } })
  t.equal(res.status, 200, 'changed', { body: res.text })
  t.match(res.json, { name: 'Renamed', scopes: ['printers:read', 'files:read'], is_enabled: false, description: null, redirect_uris: valid.redirect_uris, is_public: true })
  for (const body of [{}, { scopes: ['print:launch'] }, { redirect_uris: ['ftp://a.example/cb'] }, { is_public: false }, { name: '' }]) {
    const bad = await request(url, `/v1/oauth-clients/${client.id}`, { method: 'PATCH', headers: admin.auth, body })
    t.equal(bad.status, 400, `${JSON.stringify(body)} is refused`, { body: bad.text })
  }
  t.same((await request(url, `/v1/oauth-clients/${client.id}`, { headers: admin.auth })).json, res.json, 'the refused changes changed nothing')
})

t.test('delete - an admin deletes a client; it is gone', async (t) => {
  const { json: client } = await create(valid)
  const res = await request(url, `/v1/oauth-clients/${client.id}`, { method: 'DELETE', headers: admin.auth })
  t.equal(res.status, 200)
  t.same(res.json, { success: true })
  t.equal((await request(url, `/v1/oauth-clients/${client.id}`, { headers: admin.auth })).status, 404)
  t.equal((await request(url, `/v1/oauth-clients/${client.id}`, { method: 'DELETE', headers: admin.auth })).json.error, 'oauth_client_not_found')
})

t.test('access - members read, only admins change; other organizations and API keys get nothing', async (t) => {
  const { json: client } = await create(valid)
  t.equal((await request(url, `/v1/oauth-clients/${client.id}`, { headers: member.auth })).status, 200, 'a member reads the client')
  t.equal((await request(url, '/v1/oauth-clients', { headers: member.auth })).json.clients.length > 0, true, 'a member lists its organization\'s clients')
  const patch = await request(url, `/v1/oauth-clients/${client.id}`, { method: 'PATCH', headers: member.auth, body: { name: 'mine' } })
  t.equal(patch.status, 403)
  t.equal(patch.json.error, 'ORG_ADMIN_REQUIRED')
  t.equal((await request(url, `/v1/oauth-clients/${client.id}`, { method: 'DELETE', headers: member.auth })).status, 403)
  t.equal((await create(valid, member.auth)).status, 403, 'a member cannot register a client')
  for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'x' }], ['DELETE', undefined]] as const) {
    const res = await request(url, `/v1/oauth-clients/${client.id}`, { method, headers: outsider.auth, ...(body === undefined ? {} : { body }) })
    t.equal(res.status, 404, `${method} by another organization's admin answers 404`)
  }
  t.equal((await create(valid, outsider.auth)).status, 404, "registering in another organization answers 404 (it is not the caller's)")
  const theirs = await request(url, '/v1/oauth-clients', { headers: outsider.auth })
  t.equal(theirs.status, 200)
  t.notOk(theirs.json.clients.some((c: any) => c.id === client.id), "another organization's list does not show it")
  // The admin belongs to two organizations: the other one's list is its own.
  const otherClient = await create({ ...valid, organization_id: otherOrgId })
  t.equal(otherClient.status, 201)
  const firstList = await request(url, `/v1/oauth-clients?organization_id=${orgId}`, { headers: admin.auth })
  t.notOk(firstList.json.clients.some((c: any) => c.id === otherClient.json.id), 'each organization lists its own clients')
  const ambiguous = await request(url, '/v1/oauth-clients', { headers: admin.auth })
  t.equal(ambiguous.status, 400, 'a caller in several organizations names one')
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: { ...admin.auth, 'x-organization-id': orgId }, body: { name: 'k', scopes: ['printers:read', 'fleet:write'] } })
  const byKey = await request(url, '/v1/oauth-clients', { headers: { 'x-api-key': key.json.key } })
  t.equal(byKey.status, 403, 'API keys cannot manage OAuth clients')
  t.equal(byKey.json.error, 'session_required')
  t.equal((await request(url, '/v1/oauth-clients')).status, 401, 'nor can anonymous callers')
})
