/**
 * The MCP endpoint with the official client SDK over HTTP: the client runs the whole OAuth flow itself
 * (protected-resource discovery, registration, PKCE, resource, token) and a person approves through the
 * consent handoff; it lists and calls the tools in both protocol eras; and the MCP authorization rules
 * hold: no token or a token for another audience → 401 with the resource metadata, a missing scope →
 * 403 insufficient_scope (step-up), an expired token refused, a foreign Origin refused, another
 * organization's ids not found.
 */
import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { connectAgent, TestAuthProvider } from '../../helpers/mcp.js'
import { startOAuthService } from '../../helpers/oauth.js'
import { testAdmin } from '../../helpers/service.js'

const svc = await startOAuthService(t)
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)

const toolNames = [
  'list_printers',
  'get_printer',
  'set_maintenance',
  'list_jobs',
  'get_print_job',
  'create_print_job',
  'cancel_print_job',
  'queue_status',
  'verify_print',
  'list_models',
  'list_model_files',
  'get_file_metadata',
  'list_materials',
  'list_inventory',
  'adjust_inventory',
  'farm_summary',
]

t.test('mcp - no token: 401 with WWW-Authenticate naming the protected-resource metadata, and a body with message and requestId', async (t) => {
  const res = await request(url, '/v1/mcp', { method: 'POST', headers: { accept: 'application/json, text/event-stream' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })
  t.equal(res.status, 401)
  t.match(res.headers['www-authenticate'], /^Bearer /)
  t.match(res.headers['www-authenticate'], new RegExp(`resource_metadata="${url}/.well-known/oauth-protected-resource/v1/mcp"`))
  const session = await request(url, '/v1/mcp', { method: 'POST', headers: { ...admin.auth, accept: 'application/json, text/event-stream' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })
  t.equal(session.status, 401, 'a sign-in session token is not an MCP token')
  for (const refused of [res, session]) {
    t.match(refused.json, { error: String, message: String, requestId: String }, 'the body says what to fix and carries the request id, as every error does')
  }
  t.equal(res.json.requestId, res.headers['x-request-id'], 'the id of the x-request-id header')
})

for (const era of ['legacy', 'modern'] as const) {
  t.test(`mcp (${era}) - the client runs the OAuth flow itself, then lists and calls the tools`, async (t) => {
    const provider = new TestAuthProvider(url)
    const { client } = await connectAgent(url, provider, era)
    t.equal(provider.authorizations.length, 1, 'one authorization, through the consent handoff')
    const auth = provider.authorizations[0]!
    t.equal(auth.searchParams.get('resource'), `${url}/v1/mcp`, 'the client asked for the MCP resource (RFC 8707)')
    t.equal(auth.searchParams.get('code_challenge_method'), 'S256')

    const { tools } = await client.listTools()
    t.same(tools.map((tool) => tool.name).sort(), [...toolNames].sort(), 'every tool is listed')
    const listPrinters = tools.find((tool) => tool.name === 'list_printers')!
    t.match(listPrinters.inputSchema, { type: 'object', properties: { status: {}, limit: {} } }, 'input schema from the route')
    t.ok(listPrinters.outputSchema, 'output schema from the route')

    const printers = await client.callTool({ name: 'list_printers', arguments: { limit: 5 } })
    t.notOk(printers.isError, JSON.stringify(printers.content))
    t.match(printers.structuredContent, { printers: [], total: 0, limit: 5, offset: 0 })

    const summary = await client.callTool({ name: 'farm_summary', arguments: {} })
    t.notOk(summary.isError, JSON.stringify(summary.content))
    t.match(summary.structuredContent, { printers: { total: 0, online: 0 }, jobs: { by_status: { queued: 0 } } })

    const missing = await client.callTool({ name: 'get_printer', arguments: { id: '00000000-0000-4000-8000-000000000000' } })
    t.equal(missing.isError, true, 'an unknown printer is a tool error')
    t.match(missing.structuredContent, { error: 'printer_not_found' }, 'with our error code')

    const wrong = await client.callTool({ name: 'list_printers', arguments: { limit: 'many' } })
    t.equal(wrong.isError, true, 'a bad argument is a tool error the model can read')
    t.match(wrong.structuredContent, { error: 'validation_failed' })
    const unknown = await client.callTool({ name: 'list_printers', arguments: { colour: 'red' } })
    t.match(unknown.structuredContent, { error: 'validation_failed', message: /unknown argument 'colour'/ })
    await client.close()
  })
}

t.test('mcp - a foreign Origin is refused; the service\'s own passes', async (t) => {
  const provider = new TestAuthProvider(url)
  const { client } = await connectAgent(url, provider)
  await client.close()
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/list' }
  const headers = { authorization: `Bearer ${provider.accessToken}`, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }
  const foreign = await request(url, '/v1/mcp', { method: 'POST', headers: { ...headers, origin: 'https://evil.example.com' }, body })
  t.equal(foreign.status, 403)
  t.equal(foreign.json.error, 'mcp_origin_forbidden')
  const own = await request(url, '/v1/mcp', { method: 'POST', headers: { ...headers, origin: url }, body })
  t.equal(own.status, 200, own.text)
})

const rpc = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }
const call = (token: string, name: string, args: Record<string, unknown> = {}) =>
  request(url, '/v1/mcp', { method: 'POST', headers: { ...rpc, authorization: `Bearer ${token}` }, body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: args } } })
/** The JSON-RPC answer of a POST, whether it came as JSON or as one event of a stream. */
function answerOf(text: string): any {
  const data = text.startsWith('{') ? text : (/^data: (.*)$/m.exec(text)?.[1] ?? 'null')
  return JSON.parse(data)
}

t.test('mcp - a token for another audience, an expired one, a forged one: 401 invalid_token', async (t) => {
  const provider = new TestAuthProvider(url)
  const { client } = await connectAgent(url, provider)
  await client.close()
  const me = (await request(url, '/v1/me', { headers: admin.auth })).json
  const clientId = (await provider.clientInformation())!.client_id
  const grant = { userId: me.user.id, clientId, organizationId: me.organizations[0].id, scopes: ['printers:read'] }
  const forApi = await svc.services.oauthTokens.issue(grant)
  const api = await call(forApi.token, 'list_printers')
  t.equal(api.status, 401, 'a token for the API is not a token for MCP')
  t.match(api.headers['www-authenticate'], /error="invalid_token"/)
  t.match(api.headers['www-authenticate'], /resource_metadata=/)
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${forApi.token}` } })).status, 200, 'while the API takes it')

  const { SignJWT } = await import('jose')
  const { kid, key } = svc.services.keyring.signingKey()
  const expired = await new SignJWT({ token_use: 'oauth', client_id: clientId, organization_id: grant.organizationId, scope: 'printers:read' })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
    .setIssuer(url)
    .setAudience(`${url}/v1/mcp`)
    .setSubject(grant.userId)
    .setJti(crypto.randomUUID())
    .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
    .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
    .sign(key)
  const late = await call(expired, 'list_printers')
  t.equal(late.status, 401, 'an expired token')
  t.match(late.headers['www-authenticate'], /invalid_token/)
  const forged = await call(provider.accessToken!.slice(0, -4) + 'AAAA', 'list_printers')
  t.equal(forged.status, 401, 'a token whose signature does not check')
  const mcp = await call(provider.accessToken!, 'list_printers')
  t.equal(mcp.status, 200, 'the MCP token itself works')
})

t.test('mcp - a tool outside the token\'s scopes: 403 insufficient_scope naming the scope (step-up)', async (t) => {
  // A token for MCP with printers:read only, as a client that asked for less would hold.
  const provider = new TestAuthProvider(url)
  const { client } = await connectAgent(url, provider)
  await client.close()
  const me = (await request(url, '/v1/me', { headers: admin.auth })).json
  const clientId = (await provider.clientInformation())!.client_id
  const narrow = await svc.services.oauthTokens.issue({ userId: me.user.id, clientId, organizationId: me.organizations[0].id, scopes: ['printers:read'], audience: `${url}/v1/mcp` })
  const ok = await call(narrow.token, 'list_printers')
  t.equal(ok.status, 200, 'a tool of its scope works')
  t.equal(answerOf(ok.text).result.isError, false)
  const res = await call(narrow.token, 'list_jobs')
  t.equal(res.status, 403)
  t.match(res.headers['www-authenticate'], /error="insufficient_scope"/)
  t.match(res.headers['www-authenticate'], /scope="[^"]*print-jobs:read/)
  t.match(res.headers['www-authenticate'], /resource_metadata=/)
})

t.test('mcp - another organization\'s printers are not found; a member cannot use admin tools', async (t) => {
  const provider = new TestAuthProvider(url)
  const { client } = await connectAgent(url, provider)
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Other farm' } })
  t.equal(other.status, 201)
  const created = await request(url, '/v1/printer-config', {
    method: 'POST',
    headers: { ...admin.auth, 'x-organization-id': other.json.id },
    body: { name: 'Elsewhere', ip_address: '127.0.0.1', host_id: 'host-b' },
  })
  t.equal(created.status, 200, created.text)
  const foreign = await client.callTool({ name: 'get_printer', arguments: { id: created.json.id } })
  t.equal(foreign.isError, true)
  t.match(foreign.structuredContent, { error: 'printer_not_found' }, "another organization's printer does not exist for this token")
  const maintenance = await client.callTool({ name: 'set_maintenance', arguments: { id: created.json.id, maintenance: true } })
  t.match(maintenance.structuredContent, { error: 'printer_not_found' }, 'nor can it be changed')
  await client.close()

  const member = { email: 'mcp-member@test.printfarm', password: 'member-password-123' }
  const orgId = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id
  await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: admin.auth, body: { ...member, role: 'member' } })
  const memberProvider = new TestAuthProvider(url, { person: member })
  const { client: memberClient } = await connectAgent(url, memberProvider)
  const own = await request(url, '/v1/printer-config', { method: 'POST', headers: { ...admin.auth, 'x-organization-id': orgId }, body: { name: 'Here', ip_address: '127.0.0.1', host_id: 'host-a' } })
  const refused = await memberClient.callTool({ name: 'set_maintenance', arguments: { id: own.json.id, maintenance: true } })
  t.equal(refused.isError, true)
  t.match(refused.structuredContent, { error: 'ORG_ADMIN_REQUIRED' }, 'an admin tool needs an admin, whatever the scopes')
  const seen = await memberClient.callTool({ name: 'get_printer', arguments: { id: own.json.id } })
  t.notOk(seen.isError, 'while reading works')
  await memberClient.close()
})
