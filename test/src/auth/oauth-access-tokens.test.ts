/**
 * OAuth access tokens (RFC 9068 JWTs of the service's keyring) on the REST routes: a token opens
 * exactly the routes its scopes name, for its own organization, within what its person's role
 * allows (an admin route needs an admin); the routes for people (account, keys, clients) refuse it;
 * a token for another resource (audience), an expired one, a forged one, one whose client was
 * disabled or whose person left the organization are refused; what it creates is recorded as its
 * person's. Tokens are minted here through the service's own issuer (the token endpoint that hands
 * them out uses the same one).
 */
import { generateKeyPair, SignJWT } from 'jose'
import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { connectLive } from '../../helpers/live.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const issuer = svc.config.publicBaseUrl
const tokens = svc.services.oauthTokens
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const me = (await request(url, '/v1/me', { headers: admin.auth })).json
const adminId: string = me.id ?? me.user?.id
const orgId: string = me.organizations[0].id
const asAdmin = { ...admin.auth, 'x-organization-id': orgId }
const client = (await request(url, '/v1/oauth-clients', { method: 'POST', headers: admin.auth, body: { organization_id: orgId, name: 'Dashboard', redirect_uris: ['https://dash.example/cb'], scopes: ['printers:read', 'inventory:read', 'inventory:write', 'print-jobs:read'] } })).json
const added = await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: asAdmin, body: { email: 'operator@test.printfarm', password: 'operator-password-1', role: 'member' } })
const memberId: string = added.json.userId ?? added.json.user_id ?? added.json.id

const bearer = (token: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...extra })
const mint = async (scopes: string[], o: { userId?: string; audience?: string; organizationId?: string } = {}) =>
  (await tokens.issue({ userId: o.userId ?? adminId, clientId: client.client_id, organizationId: o.organizationId ?? orgId, scopes, ...(o.audience === undefined ? {} : { audience: o.audience }) })).token

t.test('setup - the fixtures exist', async (t) => {
  t.ok(adminId, 'the admin id')
  t.ok(memberId, 'the member id', { added: added.json })
  t.match(client.client_id, /^pfc_/)
})

t.test('scopes - a token opens the routes its scopes name and no other, naming the missing scope', async (t) => {
  const token = await mint(['printers:read', 'inventory:read'])
  const printers = await request(url, '/v1/printer-config', { headers: bearer(token) })
  t.equal(printers.status, 200, 'printers:read reads printers', { body: printers.text })
  t.equal((await request(url, '/v1/materials', { headers: bearer(token) })).status, 200, 'inventory:read reads materials')
  const jobs = await request(url, '/v1/print-jobs', { method: 'POST', headers: bearer(token), body: {} })
  t.equal(jobs.status, 403)
  t.equal(jobs.json.error, 'insufficient_scope')
  t.match(jobs.json.message, /print-jobs:read/)
  const write = await request(url, '/v1/materials', { method: 'POST', headers: bearer(token), body: { name: 'PLA', type: 'PLA' } })
  t.equal(write.json.error, 'insufficient_scope', 'a read scope does not write')
})

t.test("roles - an admin route needs the person to be an admin, whatever the token's scopes", async (t) => {
  const asAdminToken = await mint(['inventory:write'])
  const created = await request(url, '/v1/materials', { method: 'POST', headers: bearer(asAdminToken), body: { name: 'Galaxy PLA', type: 'PLA' } })
  t.equal(created.status, 201, "the admin's token creates a material", { body: created.text })
  const asMemberToken = await mint(['inventory:write', 'inventory:read'], { userId: memberId })
  const refused = await request(url, '/v1/materials', { method: 'POST', headers: bearer(asMemberToken), body: { name: 'Galaxy PLA', type: 'PLA' } })
  t.equal(refused.status, 403)
  t.equal(refused.json.error, 'ORG_ADMIN_REQUIRED')
  t.equal((await request(url, '/v1/materials', { headers: bearer(asMemberToken) })).status, 200, "the member's token still reads")
})

t.test('people only - account, API key and OAuth client routes refuse OAuth tokens', async (t) => {
  const token = await mint(['printers:read', 'inventory:read', 'inventory:write', 'print-jobs:read'])
  for (const [method, path] of [['GET', '/v1/me'], ['GET', '/v1/api-keys'], ['GET', '/v1/oauth-clients'], ['POST', '/v1/auth-codes/verify']] as const) {
    const res = await request(url, path, { method, headers: bearer(token), ...(method === 'POST' ? { body: { code: 'ABCD-EFGH' } } : {}) })
    t.equal(res.status, 403, `${method} ${path}`, { body: res.text })
    t.equal(res.json.error, 'session_required')
  }
})

t.test('refusals - another audience, expiry, forgery, another organization', async (t) => {
  const forMcp = await mint(['printers:read'], { audience: `${issuer}/v1/mcp` })
  const mcp = await request(url, '/v1/printer-config', { headers: bearer(forMcp) })
  t.equal(mcp.status, 401, 'a token for the MCP resource does not open the API')
  t.match(mcp.json.message, /another resource/)
  const { kid, key } = svc.services.keyring.signingKey()
  const claims = { token_use: 'oauth', client_id: client.client_id, organization_id: orgId, scope: 'printers:read' }
  const expired = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setAudience(issuer)
    .setSubject(adminId)
    .setJti('expired-1')
    .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
    .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
    .sign(key)
  const old = await request(url, '/v1/printer-config', { headers: bearer(expired) })
  t.equal(old.status, 401)
  t.equal(old.json.error, 'token_expired')
  const stranger = await generateKeyPair('ES256')
  const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' }).setIssuer(issuer).setAudience(issuer).setSubject(adminId).setJti('forged-1').setIssuedAt().setExpirationTime('1h').sign(stranger.privateKey)
  const fake = await request(url, '/v1/printer-config', { headers: bearer(forged) })
  t.equal(fake.status, 401, 'a token signed by another key is refused')
  t.equal(fake.json.error, 'unauthorized')
  const noTyp = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid }).setIssuer(issuer).setAudience(issuer).setSubject(adminId).setJti('notyp-1').setIssuedAt().setExpirationTime('1h').sign(key)
  t.equal((await request(url, '/v1/printer-config', { headers: bearer(noTyp) })).status, 401, 'a JWT that is not typ at+jwt is refused')
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Elsewhere' } })
  const token = await mint(['printers:read'])
  const elsewhere = await request(url, '/v1/printer-config', { headers: bearer(token, { 'x-organization-id': other.json.id }) })
  t.equal(elsewhere.status, 404, 'naming another organization answers 404')
  t.equal(elsewhere.json.error, 'organization_not_found')
})

t.test("standing - a disabled client's tokens and a departed person's tokens stop working", async (t) => {
  const token = await mint(['printers:read'])
  const memberToken = await mint(['printers:read'], { userId: memberId })
  t.equal((await request(url, '/v1/printer-config', { headers: bearer(token) })).status, 200)
  await request(url, `/v1/oauth-clients/${client.id}`, { method: 'PATCH', headers: admin.auth, body: { is_enabled: false } })
  const disabled = await request(url, '/v1/printer-config', { headers: bearer(token) })
  t.equal(disabled.status, 401, 'the client is disabled')
  t.match(disabled.json.message, /client is disabled/)
  await request(url, `/v1/oauth-clients/${client.id}`, { method: 'PATCH', headers: admin.auth, body: { is_enabled: true } })
  t.equal((await request(url, '/v1/printer-config', { headers: bearer(token) })).status, 200, 'enabled again, it works again')
  t.equal((await request(url, '/v1/printer-config', { headers: bearer(memberToken) })).status, 200)
  const removed = await request(url, `/v1/organizations/${orgId}/members/${memberId}`, { method: 'DELETE', headers: asAdmin })
  t.ok(removed.status < 300, 'the member is removed', { body: removed.text })
  const gone = await request(url, '/v1/printer-config', { headers: bearer(memberToken) })
  t.equal(gone.status, 401, "a departed person's token is refused")
})

t.test("client - a client's narrowed scopes bound its older tokens; an organization's client serves only that organization", async (t) => {
  const narrow = (await request(url, '/v1/oauth-clients', { method: 'POST', headers: admin.auth, body: { organization_id: orgId, name: 'Narrowed', redirect_uris: ['https://n.example/cb'], scopes: ['printers:read', 'inventory:read'] } })).json
  const token = (await tokens.issue({ userId: adminId, clientId: narrow.client_id, organizationId: orgId, scopes: ['printers:read', 'inventory:read'] })).token
  t.equal((await request(url, '/v1/materials', { headers: bearer(token) })).status, 200)
  await request(url, `/v1/oauth-clients/${narrow.id}`, { method: 'PATCH', headers: admin.auth, body: { scopes: ['printers:read'] } })
  const narrowed = await request(url, '/v1/materials', { headers: bearer(token) })
  t.equal(narrowed.status, 403, 'the scope the client lost is gone from its tokens')
  t.equal(narrowed.json.error, 'insufficient_scope')
  t.equal((await request(url, '/v1/printer-config', { headers: bearer(token) })).status, 200, 'the scope it kept still works')
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Borrowed' } })
  const borrowed = (await tokens.issue({ userId: adminId, clientId: narrow.client_id, organizationId: other.json.id, scopes: ['printers:read'] })).token
  const res = await request(url, '/v1/printer-config', { headers: bearer(borrowed) })
  t.equal(res.status, 401, "a token of one organization's client for another organization is refused")
  t.match(res.json.message, /another organization/)
})

t.test('live - an OAuth token opens the feed; disabling its client closes the socket (4001)', async (t) => {
  const live = (await request(url, '/v1/oauth-clients', { method: 'POST', headers: admin.auth, body: { organization_id: orgId, name: 'Wall', redirect_uris: ['https://w.example/cb'], scopes: ['printers:read'] } })).json
  const token = (await tokens.issue({ userId: adminId, clientId: live.client_id, organizationId: orgId, scopes: ['printers:read'] })).token
  const socket = await connectLive(url, { headers: bearer(token) })
  t.teardown(() => socket.close())
  socket.send({ op: 'ping' })
  t.equal((await socket.next((f) => f.op === 'pong')).op, 'pong', 'the feed answers')
  await request(url, `/v1/oauth-clients/${live.id}`, { method: 'PATCH', headers: admin.auth, body: { is_enabled: false } })
  t.match(await socket.closedWith(15_000), { code: 4001, reason: /OAuth token/ }, 'the socket is closed')
})

t.test('sessions - a sign-in session token works as before beside OAuth tokens', async (t) => {
  t.equal((await request(url, '/v1/printer-config', { headers: asAdmin })).status, 200)
  t.equal((await request(url, '/v1/me', { headers: admin.auth })).status, 200)
})
