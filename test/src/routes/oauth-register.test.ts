/**
 * Dynamic client registration (POST /v1/oauth/register, RFC 7591) driven by a real client library
 * (oauth4webapi): a public client gets a client_id and no secret; a client_secret_post client gets a
 * secret (once, stored hashed, never expiring); RFC 7591 metadata and application_type are accepted
 * and echoed, anything else is refused; every documented limit holds at its boundary with the RFC 7591
 * error (invalid_redirect_uri, invalid_client_metadata) and error_description; registrations are
 * limited per address (429 with Retry-After); a registered client is nobody's organization client.
 */
import * as oauth from 'oauth4webapi'
import t, { type Test } from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const svc = await startTestService(t, { OAUTH_REGISTRATIONS_PER_ADDRESS: '60' })
const url = svc.url
// The service's own address is loopback http: the library is told that is fine for this test.
const as: oauth.AuthorizationServer = { issuer: url, registration_endpoint: `${url}/v1/oauth/register` }
const insecure = { [oauth.allowInsecureRequests]: true }

async function register(metadata: Record<string, unknown>): Promise<Record<string, any>> {
  const response = await oauth.dynamicClientRegistrationRequest(as, metadata as Partial<oauth.Client>, insecure)
  return (await oauth.processDynamicClientRegistrationResponse(response)) as Record<string, any>
}

async function refused(t: Test, metadata: Record<string, unknown>, error: string, what: string): Promise<void> {
  const response = await oauth.dynamicClientRegistrationRequest(as, metadata as Partial<oauth.Client>, insecure)
  try {
    await oauth.processDynamicClientRegistrationResponse(response)
    t.fail(`${what} was registered`)
  } catch (e) {
    t.ok(e instanceof oauth.ResponseBodyError, `${what}: an RFC 7591 error body`, { error: String(e) })
    const err = e as oauth.ResponseBodyError
    t.equal(err.status, 400, `${what}: 400`)
    t.equal(err.error, error, `${what}: ${error}`)
    t.ok(typeof err.error_description === 'string' && err.error_description.length > 0, `${what}: error_description says what to fix`)
  }
}

t.test('register - a public client (token_endpoint_auth_method none) gets a client_id and no secret', async (t) => {
  const client = await register({ redirect_uris: ['http://127.0.0.1:33418/callback'], client_name: 'Claude', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] })
  t.match(client, { client_name: 'Claude', redirect_uris: ['http://127.0.0.1:33418/callback'], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' })
  t.match(client.client_id, /^pfc_/)
  t.notOk('client_secret' in client, 'no secret field at all')
  t.type(client.client_id_issued_at, 'number')
  t.ok(Math.abs(client.client_id_issued_at - Date.now() / 1000) < 300, 'issued now, in Unix seconds')
  t.equal(client.scope.split(' ').length, 17, 'without scope, all 17 client scopes')
})

t.test('register - a client_secret_post client gets a secret once, never expiring, stored only as a hash', async (t) => {
  const client = await register({ redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'client_secret_post', scope: 'printers:read files:read' })
  t.match(client.client_secret, /^pfcs_[A-Za-z0-9_-]{43}$/)
  t.equal(client.client_secret_expires_at, 0)
  t.equal(client.scope, 'printers:read files:read')
  const rows = await svc.services.db.sql`select * from oauth_clients where client_id = ${client.client_id}`
  t.equal(rows.length, 1)
  t.notOk(JSON.stringify(rows).includes(client.client_secret.slice(5)), 'the secret is nowhere in the row')
  t.equal(await svc.services.oauthClients.secretMatches(client.client_id, client.client_secret), true)
})

t.test('register - RFC 7591 metadata and application_type are accepted and echoed (what the MCP client sends)', async (t) => {
  const metadata = {
    redirect_uris: ['http://localhost:6274/oauth/callback'],
    client_name: 'MCP Inspector',
    client_uri: 'https://github.com/modelcontextprotocol/inspector',
    logo_uri: 'https://example.com/logo.png',
    tos_uri: 'https://example.com/tos',
    policy_uri: 'https://example.com/privacy',
    contacts: ['ops@example.com'],
    software_id: 'inspector',
    software_version: '0.16.0',
    application_type: 'native',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  }
  const client = await register(metadata)
  t.match(client, { ...metadata, redirect_uris: metadata.redirect_uris, contacts: metadata.contacts, grant_types: metadata.grant_types, response_types: metadata.response_types })
})

t.test('limits - every documented bound at its edge, with the RFC 7591 error', async (t) => {
  const base = { redirect_uris: ['https://app.example.com/cb'] }
  const ten = Array.from({ length: 10 }, (_, i) => `https://app.example.com/${i}`)
  for (const [what, change] of [
    ['ten redirect URIs', { redirect_uris: ten }],
    ['a redirect URI of 2048', { redirect_uris: [`https://a.example/${'x'.repeat(2048 - 'https://a.example/'.length)}`] }],
    ['client_name of 200', { client_name: 'n'.repeat(200) }],
    ['scope of 1000 characters', { scope: Array.from({ length: 200 }, () => 'files:read').join(' ').slice(0, 1000).replace(/ \S*$/, '') }],
    ['client_uri of 2048', { client_uri: `https://a.example/${'u'.repeat(2048 - 'https://a.example/'.length)}` }],
    ['only authorization_code', { grant_types: ['authorization_code'] }],
  ] as const) {
    const client = await register({ ...base, ...change })
    t.ok(client.client_id, `${what} is accepted`)
  }
  for (const [what, change, error] of [
    ['no redirect URI', { redirect_uris: [] }, 'invalid_client_metadata'],
    ['eleven redirect URIs', { redirect_uris: [...ten, 'https://app.example.com/x'] }, 'invalid_client_metadata'],
    ['a repeated redirect URI', { redirect_uris: ['https://a.example/cb', 'https://a.example/cb'] }, 'invalid_client_metadata'],
    ['a redirect URI of 2049', { redirect_uris: [`https://a.example/${'x'.repeat(2049 - 'https://a.example/'.length)}`] }, 'invalid_client_metadata'],
    ['http on a public host', { redirect_uris: ['http://app.example.com/cb'] }, 'invalid_redirect_uri'],
    ['a fragment', { redirect_uris: ['https://app.example.com/cb#f'] }, 'invalid_redirect_uri'],
    ['a javascript: URI', { redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
    ['an empty client_name', { client_name: '' }, 'invalid_client_metadata'],
    ['client_name of 201', { client_name: 'n'.repeat(201) }, 'invalid_client_metadata'],
    ['scope of 1001', { scope: 'x'.repeat(1001) }, 'invalid_client_metadata'],
    ['an unknown scope', { scope: 'printers:read admin' }, 'invalid_client_metadata'],
    ['client_uri of 2049', { client_uri: `https://a.example/${'u'.repeat(2049 - 'https://a.example/'.length)}` }, 'invalid_client_metadata'],
    ['logo_uri of 2049', { logo_uri: `https://a.example/${'u'.repeat(2049 - 'https://a.example/'.length)}` }, 'invalid_client_metadata'],
    ['grant type client_credentials', { grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
    ['three grant types', { grant_types: ['authorization_code', 'refresh_token', 'authorization_code'] }, 'invalid_client_metadata'],
    ['response type token', { response_types: ['token'] }, 'invalid_client_metadata'],
    ['only refresh_token with response type code', { grant_types: ['refresh_token'] }, 'invalid_client_metadata'],
    ['token_endpoint_auth_method client_secret_basic', { token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
    ['a javascript: client_uri', { client_uri: 'javascript:alert(1)' }, 'invalid_client_metadata'],
    ['an http logo_uri', { logo_uri: 'http://a.example/logo.png' }, 'invalid_client_metadata'],
    ['a jwks_uri on a link-local address over http', { jwks_uri: 'http://169.254.169.254/latest' }, 'invalid_client_metadata'],
    ['a tos_uri with credentials', { tos_uri: 'https://u:p@a.example/tos' }, 'invalid_client_metadata'],
    ['an unknown field', { backchannel_logout_uri: 'https://a.example/logout' }, 'invalid_client_metadata'],
  ] as const) {
    await refused(t, { ...base, ...change }, error, what)
  }
  const notJson = await request(url, '/v1/oauth/register', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' })
  t.equal(notJson.status, 400)
  t.equal(notJson.json.error, 'invalid_client_metadata', 'unreadable JSON is invalid metadata too')
  t.ok(notJson.json.error_description)
})

t.test("isolation - a registered client is nobody's organization client", async (t) => {
  const client = await register({ redirect_uris: ['https://app.example.com/cb'] })
  const admin = await signIn(url, testAdmin.email, testAdmin.password)
  t.equal((await request(url, `/v1/oauth-clients/${client.client_id}`, { headers: admin.auth })).status, 404)
  const list = await request(url, '/v1/oauth-clients', { headers: admin.auth })
  t.notOk(list.json.clients.some((c: any) => c.client_id === client.client_id))
})

t.test('rate limit - registrations beyond the limit per address answer 429 with Retry-After', async (t) => {
  let answer = await request(url, '/v1/oauth/register', { method: 'POST', body: { redirect_uris: ['https://app.example.com/cb'] } })
  for (let i = 0; i < 80 && answer.status === 201; i++) answer = await request(url, '/v1/oauth/register', { method: 'POST', body: { redirect_uris: ['https://app.example.com/cb'] } })
  t.equal(answer.status, 429, 'the limit is met')
  t.equal(answer.json.error, 'rate_limited')
  t.ok(Number(answer.headers['retry-after']) >= 1, 'with Retry-After')
})
