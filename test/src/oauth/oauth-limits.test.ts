/**
 * Every limit and refusal of the OAuth authorization server and the agent identity routes, at its
 * boundary, over HTTP, each with its status and RFC 6749 error code (and error_description):
 * the session handoff (who may ask, every field's bounds, unknown client, unregistered redirect URI,
 * foreign resource, scopes the client lacks, PKCE for public clients); authorize (errors sent back on
 * the redirect URI with state and iss, a disabled client and a foreign organization_id refused without
 * a redirect, HTML for browsers and JSON otherwise); the token endpoint (form and JSON bodies, repeated
 * parameters, media types, grant types, client authentication, codes bound to their client, clients
 * without refresh_token, agents bound to their own grants, no-store); the per-address limits on failed
 * requests (successes never counted) and on agent identities; the agent identity bodies; organization
 * isolation of OAuth tokens and clients; revocation; and the discovery documents.
 */
import * as oauth from 'oauth4webapi'
import t, { type Test } from 'tap'
import { request, signIn, type HttpResult } from '../../helpers/http.js'
import { approve, authorizationUrl, discover, follow, registerClient, startOAuthService } from '../../helpers/oauth.js'
import { testAdmin } from '../../helpers/service.js'

// The main service never meets its rate limits; the second one has small limits (and an app directory challenge).
const svc = await startOAuthService(t, { OAUTH_FAILURES_PER_ADDRESS: '1000000', AGENT_IDENTITIES_PER_ADDRESS: '1000000', OAUTH_REGISTRATIONS_PER_ADDRESS: '1000' })
const url = svc.url
const as = await discover(url)
const main = { url, as }
const challengeToken = 'acme-domain-verification-7f3c2a'
const limited = await startOAuthService(t, { OAUTH_FAILURES_PER_ADDRESS: '5', AGENT_IDENTITIES_PER_ADDRESS: '3', APPS_CHALLENGE_VENDOR: 'acme', APPS_CHALLENGE_TOKEN: challengeToken })
const small = { url: limited.url, as: await discover(limited.url) }

const redirectUri = 'http://127.0.0.1:45123/callback'
const claimGrant = 'urn:printfarm:agent-auth:grant-type:claim'
const jwtBearer = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
const formType = { 'content-type': 'application/x-www-form-urlencoded' }
const challenge43 = 'c'.repeat(43)

const admin = await signIn(url, testAdmin.email, testAdmin.password)
const orgA: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id

// Organization B (created after A, so A stays the admin's first) and a person who is a member of B only.
const createdB = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Second farm' } })
if (createdB.status !== 201) throw new Error(`organization B: ${createdB.status} ${createdB.text}`)
const orgB: string = createdB.json.id
const outsider = { email: 'outsider@example.com', password: 'outsider-password-1' }
const addedOutsider = await request(url, `/v1/organizations/${orgB}/members`, { method: 'POST', headers: admin.auth, body: { ...outsider, role: 'member' } })
if (addedOutsider.status !== 200) throw new Error(`outsider: ${addedOutsider.status} ${addedOutsider.text}`)

type Server = { url: string; as: oauth.AuthorizationServer }

/** An RFC 6749 error answer: status, code and a description that says what is wrong. */
function refused(t: Test, res: HttpResult, status: number, error: string, what: string, todo?: string): void {
  const extra = todo === undefined ? { body: res.text } : { body: res.text, todo }
  t.equal(res.status, status, `${what}: ${status}`, extra)
  t.equal(res.json?.error, error, `${what}: ${error}`, extra)
  t.ok(typeof res.json?.error_description === 'string' && res.json.error_description.length > 0, `${what}: error_description`, extra)
}

async function publicClient(extra: Record<string, unknown> = {}, server: Server = main): Promise<oauth.Client> {
  return registerClient(server.as, { redirect_uris: [redirectUri], client_name: 'Limits app', token_endpoint_auth_method: 'none', ...extra })
}

async function token(params: Record<string, string>, base = url): Promise<HttpResult> {
  return request(base, '/v1/oauth/token', { method: 'POST', headers: formType, body: new URLSearchParams(params).toString() })
}

async function revoke(params: Record<string, string>, base = url): Promise<HttpResult> {
  return request(base, '/v1/oauth/revoke', { method: 'POST', headers: formType, body: new URLSearchParams(params).toString() })
}

async function handoff(body: Record<string, unknown>, headers: Record<string, string> = admin.auth, base = url): Promise<HttpResult> {
  return request(base, '/v1/oauth/session-handoff', { method: 'POST', headers, body })
}

interface FlowOptions {
  scope?: string
  resource?: string
  person?: { email: string; password: string }
  organizationId?: string
  server?: Server
}

/** A person approves on the consent page: the authorization code and its PKCE verifier. */
async function codeFor(client: oauth.Client, options: FlowOptions = {}): Promise<{ code: string; verifier: string }> {
  const server = options.server ?? main
  const auth = await authorizationUrl(server.as, client, redirectUri, { scope: options.scope ?? 'printers:read', ...(options.resource === undefined ? {} : { resource: options.resource }) })
  const approval = await approve(server.url, auth.url, {
    ...(options.person === undefined ? {} : { email: options.person.email, password: options.person.password }),
    ...(options.organizationId === undefined ? {} : { organizationId: options.organizationId }),
  })
  if (approval.location === undefined) throw new Error(`no redirect: ${approval.status} ${approval.body}`)
  const params = oauth.validateAuthResponse(server.as, client, approval.location, auth.state)
  return { code: params.get('code')!, verifier: auth.verifier }
}

function codeParams(client: oauth.Client, flow: { code: string; verifier: string }, secret?: string): Record<string, string> {
  return {
    grant_type: 'authorization_code',
    client_id: client.client_id,
    code: flow.code,
    redirect_uri: redirectUri,
    code_verifier: flow.verifier,
    ...(secret === undefined ? {} : { client_secret: secret }),
  }
}

/** The whole code flow: the token answer (access and, for clients that refresh, refresh token). */
async function tokensFor(client: oauth.Client, options: FlowOptions & { secret?: string } = {}): Promise<Record<string, any>> {
  const flow = await codeFor(client, options)
  const res = await token(codeParams(client, flow, options.secret), (options.server ?? main).url)
  if (res.status !== 200) throw new Error(`token: ${res.status} ${res.text}`)
  return res.json
}

const bearer = (accessToken: string, organizationId?: string): Record<string, string> => ({
  authorization: `Bearer ${accessToken}`,
  ...(organizationId === undefined ? {} : { 'x-organization-id': organizationId }),
})

async function startAgent(base = url, body: Record<string, unknown> = { type: 'claude-code' }): Promise<{ agent_id: string; claim_token: string }> {
  const res = await request(base, '/agent/identity', { method: 'POST', body })
  if (res.status !== 201) throw new Error(`agent identity: ${res.status} ${res.text}`)
  return res.json
}

t.test('session handoff - only a signed-in person asks: no token 401, an API key or an OAuth token 403 session_required', async (t) => {
  const client = await publicClient()
  const body = { clientId: client.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }
  refused(t, await request(url, '/v1/oauth/session-handoff', { method: 'POST', body }), 401, 'unauthorized', 'no token')

  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: { ...admin.auth, 'x-organization-id': orgA }, body: { name: 'handoff probe', scopes: ['printers:read'] } })
  t.equal(key.status, 200, key.text)
  refused(t, await handoff(body, { 'x-api-key': key.json.key }), 403, 'session_required', 'an API key')
  const tokens = await tokensFor(client)
  refused(t, await handoff(body, bearer(tokens.access_token)), 403, 'session_required', 'an OAuth access token')

  const ok = await handoff(body)
  t.equal(ok.status, 200, ok.text)
  t.match(ok.json.handoff, /^pfoh_/)
  t.equal(ok.headers['cache-control'], 'no-store', 'a handoff is never cached')
})

t.test('session handoff - every field at its bounds: scopes 1-19 unique consent scopes, clientId 1-200, redirectUri 1-2048, resource 2048, codeChallenge 43-128, no other field', async (t) => {
  const client = await publicClient()
  const longRedirect = `http://127.0.0.1:45123/${'r'.repeat(2048 - 'http://127.0.0.1:45123/'.length)}`
  const longClient = await publicClient({ redirect_uris: [longRedirect] })
  const base = { clientId: client.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }
  const all19 = ['printers:read', 'printers:write', 'jobs:read', 'jobs:write', 'telemetry:read', 'models:read', 'models:write', 'files:read', 'files:write', 'print-jobs:read', 'print-jobs:write', 'inventory:read', 'inventory:write', 'makes:read', 'makes:write', 'fleet:read', 'fleet:write', 'host:pair', 'print:launch']

  for (const [what, change] of [
    ['one scope', {}],
    ['all 19 consent scopes (a client registered with the 17 keeps its 17)', { scopes: all19 }],
    ['a codeChallenge of 43', { codeChallenge: 'a'.repeat(43) }],
    ['a codeChallenge of 128', { codeChallenge: 'A-._~'.repeat(25) + 'abc' }],
    ['a registered redirectUri of 2048', { clientId: longClient.client_id, redirectUri: longRedirect }],
    ['resource: the API', { resource: url }],
    ['resource: the API with a trailing slash', { resource: `${url}/` }],
    ['resource: the MCP endpoint', { resource: `${url}/v1/mcp` }],
  ] as const) {
    const res = await handoff({ ...base, ...change })
    t.equal(res.status, 200, `${what} is accepted`, { body: res.text })
  }

  for (const [what, change] of [
    ['no scope', { scopes: [] }],
    ['a scope twice', { scopes: ['printers:read', 'printers:read'] }],
    ['20 scopes (19 and a repeat)', { scopes: [...all19, 'printers:read'] }],
    ['an unknown scope', { scopes: ['printers:read', 'admin'] }],
    ['scopes as a string', { scopes: 'printers:read' }],
    ['an empty clientId', { clientId: '' }],
    ['a clientId of 201', { clientId: 'c'.repeat(201) }],
    ['an empty redirectUri', { redirectUri: '' }],
    ['a redirectUri of 2049', { redirectUri: `${longRedirect}x` }],
    ['a resource of 2049', { resource: `https://a.example/${'x'.repeat(2049 - 'https://a.example/'.length)}` }],
    ['a codeChallenge of 42', { codeChallenge: 'a'.repeat(42) }],
    ['a codeChallenge of 129', { codeChallenge: 'a'.repeat(129) }],
    ['a codeChallenge with a character outside [A-Za-z0-9._~-]', { codeChallenge: `${'a'.repeat(42)}+` }],
    ['an unknown field', { state: 'x' }],
  ] as const) {
    refused(t, await handoff({ ...base, ...change }), 400, 'invalid_request', what)
  }
  const { resource: _omit, ...noResource } = base
  refused(t, await handoff(noResource), 400, 'invalid_request', 'no resource at all')
  refused(t, await handoff({ ...base, clientId: 'pfc_' + 'u'.repeat(196) }), 400, 'invalid_client', 'a clientId of 200 passes the bounds: an unknown client')
  refused(t, await handoff({ ...base, resource: `https://a.example/${'x'.repeat(2048 - 'https://a.example/'.length)}` }), 400, 'invalid_target', 'a resource of 2048 passes the bounds: not served here')
})

t.test('session handoff - unknown client, unregistered redirect URI, foreign resource, scopes the client lacks, a public client without PKCE', async (t) => {
  const client = await publicClient({ scope: 'printers:read printers:write' })
  const base = { clientId: client.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }
  refused(t, await handoff({ ...base, clientId: 'pfc_nobody' }), 400, 'invalid_client', 'an unknown client')
  refused(t, await handoff({ ...base, redirectUri: 'https://attacker.example.com/cb' }), 400, 'invalid_request', 'a redirect URI the client did not register')
  refused(t, await handoff({ ...base, redirectUri: `${redirectUri}/deeper` }), 400, 'invalid_request', 'a longer path than the registered one')
  refused(t, await handoff({ ...base, resource: 'https://elsewhere.example.com/' }), 400, 'invalid_target', 'a resource that is neither the API nor MCP')
  refused(t, await handoff({ ...base, resource: `${url}/v1/printers` }), 400, 'invalid_target', 'another path of this service')
  refused(t, await handoff({ ...base, scopes: ['files:read', 'host:pair'] }), 400, 'invalid_scope', 'scopes none of which the client has')
  const { codeChallenge: _omit, ...noPkce } = base
  refused(t, await handoff(noPkce), 400, 'invalid_request', 'a public client without codeChallenge')

  const confidential = await registerClient(as, { redirect_uris: [redirectUri], token_endpoint_auth_method: 'client_secret_post' })
  const ok = await handoff({ ...noPkce, clientId: confidential.client_id })
  t.equal(ok.status, 200, 'a confidential client may go without PKCE', { body: ok.text })
  const narrowed = await handoff({ ...base, scopes: ['printers:read', 'files:read'] })
  t.equal(narrowed.status, 200, 'scopes the client lacks are dropped when some remain', { body: narrowed.text })
})

const authorizeErrors = [
  ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
  ['response_type empty', { response_type: '' }, 'unsupported_response_type'],
  ['code_challenge_method plain', { code_challenge_method: 'plain' }, 'invalid_request'],
  ['a code_challenge of 42', { code_challenge: 'a'.repeat(42) }, 'invalid_request'],
  ['an unknown scope', { scope: 'printers:read admin' }, 'invalid_scope'],
  ['only scopes the client may not have', { scope: 'host:pair' }, 'invalid_scope'],
  ['a resource not served here', { resource: 'https://elsewhere.example.com/' }, 'invalid_target'],
  ['organization_id that is not a uuid', { organization_id: 'not-a-uuid' }, 'invalid_request'],
  ['decision neither allow nor deny', { decision: 'maybe' }, 'invalid_request'],
  ['decision deny', { decision: 'deny' }, 'access_denied'],
] as const

t.test('authorize - an application that registered itself gets no error on its redirect URI before its consent page was seen: 400 and no redirect', async (t) => {
  const client = await publicClient()
  const base = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
  for (const [what, change, error] of authorizeErrors) {
    const next = new URL(base.url)
    for (const [k, v] of Object.entries(change)) next.searchParams.set(k, v)
    const res = await follow(next, { accept: 'text/html' })
    t.equal(res.status, 400, `${what}: 400`, { body: res.body })
    t.equal(res.location, undefined, `${what}: no redirect`)
    t.match(res.body, new RegExp(error), `${what}: the page names ${error}`)
    // A consent token of another page (another state) proves nothing for this request.
    const forged = new URL(next)
    forged.searchParams.set('consent', `${Math.floor(Date.now() / 1000) + 600}.${'A'.repeat(43)}`)
    t.equal((await follow(forged)).location, undefined, `${what}: a made-up consent token sends nothing back`)
  }
})

t.test('authorize - after the client and redirect URI check out, errors go back on the redirect URI with state and iss (an organization\'s client)', async (t) => {
  const created = await request(url, '/v1/oauth-clients', { method: 'POST', headers: admin.auth, body: { organization_id: orgA, name: 'Errors go back', redirect_uris: [redirectUri], scopes: ['printers:read', 'files:read'] } })
  t.equal(created.status, 201, created.text)
  const client = { client_id: created.json.client_id as string }
  const base = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
  for (const [what, change, error] of authorizeErrors) {
    const next = new URL(base.url)
    for (const [k, v] of Object.entries(change)) next.searchParams.set(k, v)
    const res = await follow(next)
    t.equal(res.status, 302, `${what}: 302`, { body: res.body })
    t.equal(res.location === undefined ? undefined : res.location.origin + res.location.pathname, redirectUri, `${what}: back to the redirect URI`)
    t.equal(res.location?.searchParams.get('error'), error, `${what}: error=${error}`)
    t.ok((res.location?.searchParams.get('error_description') ?? '').length > 0, `${what}: error_description`)
    t.equal(res.location?.searchParams.get('state'), base.state, `${what}: state`)
    t.equal(res.location?.searchParams.get('iss'), url, `${what}: iss (RFC 9207)`)
    t.equal(res.location?.searchParams.get('code'), null, `${what}: no code`)
  }
  const noMethod = new URL(base.url)
  noMethod.searchParams.delete('code_challenge_method')
  const n = await follow(noMethod)
  t.equal(n.location?.searchParams.get('error'), 'invalid_request', 'a code_challenge without a method is plain: refused')
})

t.test('authorize - malformed query, unknown or disabled client: 400 and no redirect; HTML for browsers, JSON otherwise', async (t) => {
  const client = await publicClient()
  const base = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
  for (const [what, mutate] of [
    ['no client_id', (u: URL) => u.searchParams.delete('client_id')],
    ['a client_id of 201', (u: URL) => u.searchParams.set('client_id', 'c'.repeat(201))],
    ['no redirect_uri', (u: URL) => u.searchParams.delete('redirect_uri')],
    ['a redirect_uri of 2049', (u: URL) => u.searchParams.set('redirect_uri', `http://127.0.0.1:45123/${'x'.repeat(2049 - 23)}`)],
    ['client_id twice', (u: URL) => u.searchParams.append('client_id', client.client_id)],
    ['a state of 2049', (u: URL) => u.searchParams.set('state', 's'.repeat(2049))],
  ] as const) {
    const next = new URL(base.url)
    mutate(next)
    const res = await follow(next)
    t.equal(res.status, 400, `${what}: 400`, { body: res.body })
    t.equal(res.location, undefined, `${what}: no redirect`)
    t.equal(JSON.parse(res.body).error, 'invalid_request', `${what}: invalid_request`)
  }

  const unknown = await authorizationUrl(as, { client_id: 'pfc_unknown' }, redirectUri)
  const json = await fetch(unknown.url, { redirect: 'manual' })
  t.equal(json.status, 400)
  t.match(json.headers.get('content-type'), /^application\/json/, 'JSON for a client that does not ask for HTML')
  const body = (await json.json()) as Record<string, unknown>
  t.equal(body['error'], 'invalid_client')
  t.ok(String(body['error_description']).length > 0, 'with error_description')
  const html = await fetch(unknown.url, { redirect: 'manual', headers: { accept: 'text/html,application/xhtml+xml' } })
  t.equal(html.status, 400)
  t.equal(html.headers.get('location'), null, 'no redirect')
  t.match(html.headers.get('content-type'), /^text\/html/, 'an HTML page for a browser')
  t.equal(html.headers.get('cache-control'), 'no-store')
  t.match(await html.text(), /This sign-in cannot continue[\s\S]*invalid_client/, 'the page names the error')
  const elsewhere = new URL(base.url)
  elsewhere.searchParams.set('redirect_uri', 'https://attacker.example.com/cb')
  const badRedirect = await fetch(elsewhere, { redirect: 'manual', headers: { accept: 'text/html' } })
  t.equal(badRedirect.status, 400)
  t.equal(badRedirect.headers.get('location'), null, 'an unregistered redirect URI: no redirect')
  t.match(await badRedirect.text(), /invalid_request/)

  const browserMalformed = new URL(base.url)
  browserMalformed.searchParams.delete('redirect_uri')
  const m = await fetch(browserMalformed, { redirect: 'manual', headers: { accept: 'text/html' } })
  t.equal(m.status, 400, 'a malformed request from a browser: 400')
  // A malformed authorization URL is the application's bug, not the person's: the schema answers it before the page would.
  t.match(await m.text(), /redirect_uri/, 'the error names the missing field')

  // An organization's client, disabled: nothing is sent back to it, and it cannot start a sign-in or use the token endpoint.
  const created = await request(url, '/v1/oauth-clients', { method: 'POST', headers: admin.auth, body: { organization_id: orgA, name: 'Soon disabled', redirect_uris: [redirectUri], scopes: ['printers:read'] } })
  t.equal(created.status, 201, created.text)
  const orgClient = { client_id: created.json.client_id as string }
  const auth = await authorizationUrl(as, orgClient, redirectUri, { scope: 'printers:read' })
  t.equal((await follow(auth.url)).status, 200, 'enabled: the consent page')
  const flow = await codeFor(orgClient)
  const patched = await request(url, `/v1/oauth-clients/${created.json.id}`, { method: 'PATCH', headers: admin.auth, body: { is_enabled: false } })
  t.equal(patched.status, 200, patched.text)
  t.equal(patched.json.is_enabled, false)
  const disabled = await follow(auth.url)
  t.equal(disabled.status, 400, 'disabled: 400')
  t.equal(disabled.location, undefined, 'disabled: no redirect')
  t.equal(JSON.parse(disabled.body).error, 'invalid_client')
  const disabledHtml = await follow(auth.url, { accept: 'text/html' })
  t.equal(disabledHtml.status, 400)
  t.match(disabledHtml.body, /<h1>This sign-in cannot continue[\s\S]*invalid_client/, 'the HTML page for a browser')
  refused(t, await handoff({ clientId: orgClient.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }), 400, 'invalid_client', 'a handoff for a disabled client')
  refused(t, await token(codeParams(orgClient, flow)), 400, 'invalid_client', "a disabled client's code at the token endpoint")
})

t.test('authorize - organization_id naming an organization the person is not in: 400 and no code, even with a valid handoff', async (t) => {
  const client = await publicClient()
  for (const [what, organization] of [
    ["organization A (the outsider is in B only)", orgA],
    ['an organization that does not exist', '00000000-0000-4000-8000-000000000000'],
  ] as const) {
    const auth = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
    const res = await approve(url, auth.url, { email: outsider.email, password: outsider.password, authorizeExtra: { organization_id: organization } })
    t.equal(res.status, 400, `${what}: 400`, { body: res.body })
    t.equal(res.location, undefined, `${what}: no redirect`)
    t.equal(JSON.parse(res.body).error, 'invalid_request', `${what}: invalid_request`)
  }
  const codes = await svc.services.db.sql`select count(*)::int as n from oauth_codes where client_id = ${client.client_id}`
  t.equal(codes[0]!.n, 0, 'no code was issued')

  const tokens = await tokensFor(client, { person: outsider })
  t.equal((await request(url, '/v1/printers', { headers: bearer(tokens.access_token, orgB) })).status, 200, "without organization_id the outsider signs in for their own organization")
  const adminAuth = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
  const chosen = await approve(url, adminAuth.url, { authorizeExtra: { organization_id: orgB.toUpperCase() } })
  t.equal(chosen.status, 302, 'a person in two organizations picks the other one', { body: chosen.body })
  t.ok(chosen.location?.searchParams.get('code'), 'a code')
})

t.test('token - form and JSON bodies both work, and the tokens are never cached', async (t) => {
  const client = await publicClient()
  const viaForm = await token(codeParams(client, await codeFor(client)))
  t.equal(viaForm.status, 200, viaForm.text)
  t.equal(viaForm.headers['cache-control'], 'no-store', 'form: cache-control no-store')
  t.equal(viaForm.headers['pragma'], 'no-cache')
  t.match(viaForm.json, { token_type: 'Bearer', scope: 'printers:read' })
  const viaJson = await request(url, '/v1/oauth/token', { method: 'POST', body: codeParams(client, await codeFor(client)) })
  t.equal(viaJson.status, 200, viaJson.text)
  t.equal(viaJson.headers['cache-control'], 'no-store', 'JSON: cache-control no-store')
  const charset = await request(url, '/v1/oauth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' },
    body: new URLSearchParams(codeParams(client, await codeFor(client))).toString(),
  })
  t.equal(charset.status, 200, 'a form with a charset parameter', { body: charset.text })
  const refreshed = await token({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: viaForm.json.refresh_token })
  t.equal(refreshed.status, 200, refreshed.text)
  t.equal(refreshed.headers['cache-control'], 'no-store', 'refresh: cache-control no-store')
})

t.test('token - malformed requests: a parameter twice, another media type, no or unknown grant_type, parameters out of bounds', async (t) => {
  const client = await publicClient()
  const twice = await request(url, '/v1/oauth/token', { method: 'POST', headers: formType, body: `grant_type=authorization_code&grant_type=refresh_token&client_id=${client.client_id}` })
  refused(t, twice, 400, 'invalid_request', 'grant_type sent twice')
  const twiceCode = await request(url, '/v1/oauth/token', { method: 'POST', headers: formType, body: `grant_type=authorization_code&code=a&code=b&client_id=${client.client_id}&redirect_uri=x` })
  refused(t, twiceCode, 400, 'invalid_request', 'code sent twice')
  for (const type of ['text/plain', 'multipart/form-data; boundary=x', 'application/xml']) {
    const res = await request(url, '/v1/oauth/token', { method: 'POST', headers: { 'content-type': type }, body: 'grant_type=refresh_token' })
    refused(t, res, 415, 'unsupported_media_type', `content type ${type}`)
  }
  const notUtf8 = await request(url, '/v1/oauth/token', { method: 'POST', headers: formType, body: Buffer.concat([Buffer.from('grant_type=refresh_token&refresh_token='), Buffer.from([0xff, 0xfe])]) })
  refused(t, notUtf8, 400, 'invalid_request', 'a form that is not UTF-8')
  const notJson = await request(url, '/v1/oauth/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"grant_type":' })
  refused(t, notJson, 400, 'invalid_request', 'unreadable JSON')
  refused(t, await token({ client_id: client.client_id, code: 'pfoc_x' }), 400, 'invalid_request', 'no grant_type')
  refused(t, await token({ grant_type: '' }), 400, 'invalid_request', 'an empty grant_type')
  refused(t, await request(url, '/v1/oauth/token', { method: 'POST', body: { grant_type: 1 } }), 400, 'invalid_request', 'a grant_type that is not a string')
  for (const grant of ['password', 'client_credentials', 'implicit', 'urn:ietf:params:oauth:grant-type:device_code']) {
    refused(t, await token({ grant_type: grant, client_id: client.client_id }), 400, 'unsupported_grant_type', `grant_type ${grant}`)
  }
  for (const [what, params] of [
    ['a code of 201', { code: 'c'.repeat(201) }],
    ['a code_verifier of 201', { code_verifier: 'v'.repeat(201) }],
    ['a redirect_uri of 2049', { redirect_uri: 'r'.repeat(2049) }],
    ['a client_id of 201', { client_id: 'c'.repeat(201) }],
    ['a scope of 1001', { scope: 's'.repeat(1001) }],
    ['a resource of 2049', { resource: 'r'.repeat(2049) }],
    ['an assertion of 8193', { assertion: 'a'.repeat(8193) }],
  ] as const) {
    const fine: Record<string, string> = { grant_type: 'authorization_code', client_id: client.client_id, code: 'pfoc_x', redirect_uri: redirectUri }
    refused(t, await token({ ...fine, ...params }), 400, 'invalid_request', what)
  }
})

t.test('token - authorization_code: missing code or redirect_uri, unknown client, a public client with a secret, a code of another client', async (t) => {
  const a = await publicClient()
  const b = await publicClient()
  const flow = await codeFor(a)
  const { code: _c, ...noCode } = codeParams(a, flow)
  refused(t, await token(noCode), 400, 'invalid_request', 'no code')
  refused(t, await token({ ...codeParams(a, flow), code: '' }), 400, 'invalid_request', 'an empty code')
  const { redirect_uri: _r, ...noRedirect } = codeParams(a, flow)
  refused(t, await token(noRedirect), 400, 'invalid_request', 'no redirect_uri')
  refused(t, await token({ ...codeParams(a, flow), client_id: 'pfc_nobody' }), 400, 'invalid_client', 'an unknown client_id')
  const { client_id: _i, ...noClient } = codeParams(a, flow)
  refused(t, await token(noClient), 400, 'invalid_client', 'no client_id')
  refused(t, await token({ ...codeParams(a, flow), client_secret: 'pfcs_guess' }), 400, 'invalid_client', 'a public client sending a client_secret')
  // client_secret_basic is not offered (token_endpoint_auth_methods_supported: none, client_secret_post); RFC 6749 §5.2 still
  // says a client that tried the Authorization header MUST get 401 with WWW-Authenticate.
  const basic = await request(url, '/v1/oauth/token', {
    method: 'POST',
    headers: { ...formType, authorization: `Basic ${Buffer.from(`${a.client_id}:pfcs_guess`).toString('base64')}` },
    body: new URLSearchParams(noClient).toString(),
  })
  t.equal(basic.json?.error, 'invalid_client', 'HTTP Basic client authentication: invalid_client')
  t.equal(basic.status, 401, 'HTTP Basic client authentication: 401')
  t.match(basic.headers['www-authenticate'], /^Basic/i, 'HTTP Basic client authentication: WWW-Authenticate')
  refused(t, await token(codeParams(b, flow)), 400, 'invalid_grant', "client A's code redeemed by client B")
  const mine = await token(codeParams(a, flow))
  t.equal(mine.status, 200, 'the code still works for the client it was issued to', { body: mine.text })
  refused(t, await token(codeParams(a, flow)), 400, 'invalid_grant', 'the same code again')
})

t.test('token - a client registered without refresh_token gets no refresh token and cannot use that grant', async (t) => {
  const client = await publicClient({ grant_types: ['authorization_code'] })
  const tokens = await tokensFor(client)
  t.type(tokens.access_token, 'string')
  t.notOk('refresh_token' in tokens, 'no refresh_token in the answer')
  refused(t, await token({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: 'pfor_anything' }), 400, 'unauthorized_client', 'the refresh_token grant')
  const other = await tokensFor(await publicClient())
  refused(t, await token({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: other.refresh_token }), 400, 'unauthorized_client', "even with another client's real refresh token")
})

t.test("token - an agent grant naming another agent's agent_id as client_id is invalid_client, and spends nothing", async (t) => {
  const mine = await startAgent()
  const other = await startAgent()
  const confirmed = await request(url, '/v1/agent/identity/claim/confirm', { method: 'POST', headers: admin.auth, body: { claim_token: mine.claim_token, organization_id: orgA, scopes: ['printers:read'] } })
  t.equal(confirmed.status, 200, confirmed.text)
  refused(t, await token({ grant_type: claimGrant, claim_token: mine.claim_token, client_id: other.agent_id }), 400, 'invalid_client', "the claim grant with another agent's id")
  refused(t, await token({ grant_type: claimGrant, claim_token: mine.claim_token, client_id: 'pfa_nobody' }), 400, 'invalid_client', 'the claim grant with an unknown agent id')
  refused(t, await token({ grant_type: claimGrant, claim_token: mine.claim_token, client_id: mine.agent_id, client_secret: 'x' }), 400, 'invalid_client', 'an agent sending a client_secret')
  const collected = await token({ grant_type: claimGrant, claim_token: mine.claim_token, client_id: mine.agent_id })
  t.equal(collected.status, 200, 'the right agent still collects its tokens', { body: collected.text })
  t.equal(collected.headers['cache-control'], 'no-store')
  const assertion = collected.json.identity_assertion as string
  refused(t, await token({ grant_type: jwtBearer, assertion, client_id: other.agent_id }), 400, 'invalid_client', "the jwt-bearer grant with another agent's id")
  const exchanged = await token({ grant_type: jwtBearer, assertion, client_id: mine.agent_id })
  t.equal(exchanged.status, 200, 'the refused attempt did not spend the assertion', { body: exchanged.text })
  refused(t, await token({ grant_type: claimGrant, client_id: mine.agent_id }), 400, 'invalid_request', 'the claim grant without claim_token')
  refused(t, await token({ grant_type: jwtBearer, client_id: mine.agent_id }), 400, 'invalid_request', 'the jwt-bearer grant without assertion')
})

t.test('rate limit - OAUTH_FAILURES_PER_ADDRESS failed requests, then 429 rate_limited with Retry-After; successes and pending polls are never counted', async (t) => {
  const client = await publicClient({}, small)
  const flow = await codeFor(client, { server: small })
  const failure = () => token({ grant_type: 'authorization_code', client_id: client.client_id, code: 'pfoc_guess', redirect_uri: redirectUri, code_verifier: 'v'.repeat(43) }, small.url)
  for (let i = 1; i <= 3; i++) refused(t, await failure(), 400, 'invalid_grant', `failure ${i} of 5`)
  refused(t, await token({ grant_type: 'password', client_id: client.client_id }, small.url), 400, 'unsupported_grant_type', 'an unsupported grant type (not counted)')
  const pending = await startAgent(small.url)
  refused(t, await token({ grant_type: claimGrant, claim_token: pending.claim_token, client_id: pending.agent_id }, small.url), 400, 'authorization_pending', 'a pending poll (not counted)')
  refused(t, await token({ client_id: client.client_id }, small.url), 400, 'invalid_request', 'a malformed request (refused before it is counted)')
  const good = await token(codeParams(client, flow), small.url)
  t.equal(good.status, 200, 'a successful request in between', { body: good.text })
  for (let i = 4; i <= 5; i++) refused(t, await failure(), 400, 'invalid_grant', `failure ${i} of 5: the success and the polls gave their count back`)
  const limitedAnswer = await failure()
  refused(t, limitedAnswer, 429, 'rate_limited', 'the sixth failure')
  t.ok(Number(limitedAnswer.headers['retry-after']) >= 1, 'with Retry-After in seconds', { retryAfter: limitedAnswer.headers['retry-after'] })
  const refreshNow = await token({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: good.json.refresh_token }, small.url)
  refused(t, refreshNow, 429, 'rate_limited', 'from then on even a good request from that address')
  refused(t, await revoke({ token: 'pfor_x' }, small.url), 429, 'rate_limited', 'the revocation endpoint shares the budget')
  const session = await signIn(small.url, testAdmin.email, testAdmin.password)
  refused(t, await handoff({ clientId: client.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }, session.auth, small.url), 429, 'rate_limited', 'the session handoff shares the budget')
  const inspect = await request(small.url, `/v1/agent/identity/claim/inspect?claim_token=${'x'.repeat(40)}`)
  refused(t, inspect, 429, 'rate_limited', 'claim lookups share the budget')
})

t.test('rate limit - AGENT_IDENTITIES_PER_ADDRESS agent identities, then 429 rate_limited with Retry-After', async (t) => {
  // One identity was started by the previous subtest on this service (the pending poll).
  for (let i = 2; i <= 3; i++) {
    const res = await request(small.url, '/agent/identity', { method: 'POST', body: { type: 'cursor' } })
    t.equal(res.status, 201, `identity ${i} of 3`, { body: res.text })
  }
  const fourth = await request(small.url, '/agent/identity', { method: 'POST', body: { type: 'cursor' } })
  refused(t, fourth, 429, 'rate_limited', 'the fourth identity')
  t.ok(Number(fourth.headers['retry-after']) >= 1, 'with Retry-After')
  const renew = await request(small.url, '/agent/identity/claim', { method: 'POST', body: { claim_token: 'x'.repeat(40), email: 'ops@example.com' } })
  refused(t, renew, 429, 'rate_limited', 'claim renewals share the limit')
  const invalid = await request(small.url, '/agent/identity', { method: 'POST', body: {} })
  refused(t, invalid, 400, 'invalid_request', 'a malformed request is refused as such, before the limit')
})

t.test('agent identity - POST /agent/identity: type 1-100 required, login_hint 3-320, no other field', async (t) => {
  for (const [what, body] of [
    ['a type of 1', { type: 'x' }],
    ['a type of 100', { type: 't'.repeat(100) }],
    ['a login_hint of 3', { type: 'cursor', login_hint: 'a@b' }],
    ['a login_hint of 320', { type: 'cursor', login_hint: 'h'.repeat(320) }],
  ] as const) {
    const res = await request(url, '/agent/identity', { method: 'POST', body })
    t.equal(res.status, 201, `${what} is accepted`, { body: res.text })
  }
  for (const [what, body] of [
    ['no type', { login_hint: 'ops@example.com' }],
    ['an empty type', { type: '' }],
    ['a type of 101', { type: 't'.repeat(101) }],
    ['a login_hint of 2', { type: 'cursor', login_hint: 'ab' }],
    ['a login_hint of 321', { type: 'cursor', login_hint: 'h'.repeat(321) }],
    ['an unknown field', { type: 'cursor', scope: 'printers:read' }],
    ['a type that is not a string', { type: 7 }],
  ] as const) {
    refused(t, await request(url, '/agent/identity', { method: 'POST', body }), 400, 'invalid_request', what)
  }
  refused(t, await request(url, '/agent/identity', { method: 'POST', headers: { 'content-type': 'application/json' } }), 400, 'invalid_request', 'no body')
})

t.test('agent identity - POST /agent/identity/claim: claim_token 20-200, email 3-320 and an email, no other field', async (t) => {
  const email = 'ops@example.com'
  for (const [what, body] of [
    ['a claim_token of 20', { claim_token: 'x'.repeat(20), email }],
    ['a claim_token of 200', { claim_token: 'x'.repeat(200), email }],
    ['an email of 320', { claim_token: 'x'.repeat(40), email: `${'e'.repeat(320 - '@example.com'.length)}@example.com` }],
  ] as const) {
    refused(t, await request(url, '/agent/identity/claim', { method: 'POST', body }), 404, 'agent_claim_not_found', `${what} passes the bounds: an unknown claim`)
  }
  for (const [what, body] of [
    ['a claim_token of 19', { claim_token: 'x'.repeat(19), email }],
    ['a claim_token of 201', { claim_token: 'x'.repeat(201), email }],
    ['no claim_token', { email }],
    ['no email', { claim_token: 'x'.repeat(40) }],
    ['an email of 2', { claim_token: 'x'.repeat(40), email: 'a@' }],
    ['an email of 321', { claim_token: 'x'.repeat(40), email: `${'e'.repeat(321 - '@example.com'.length)}@example.com` }],
    ['an email without @', { claim_token: 'x'.repeat(40), email: 'not-an-email' }],
    ['an email with a space', { claim_token: 'x'.repeat(40), email: 'ops @example.com' }],
    ['an unknown field', { claim_token: 'x'.repeat(40), email, type: 'cursor' }],
  ] as const) {
    refused(t, await request(url, '/agent/identity/claim', { method: 'POST', body }), 400, 'invalid_request', what)
  }
})

t.test('agent identity - GET /v1/agent/identity/claim/inspect: claim_token 20-200, nothing else', async (t) => {
  const inspect = (query: string) => request(url, `/v1/agent/identity/claim/inspect?${query}`)
  refused(t, await inspect(`claim_token=${'x'.repeat(20)}`), 404, 'agent_claim_not_found', 'a claim_token of 20 passes the bounds')
  refused(t, await inspect(`claim_token=${'x'.repeat(200)}`), 404, 'agent_claim_not_found', 'a claim_token of 200 passes the bounds')
  refused(t, await inspect(`claim_token=${'x'.repeat(19)}`), 400, 'invalid_request', 'a claim_token of 19')
  refused(t, await inspect(`claim_token=${'x'.repeat(201)}`), 400, 'invalid_request', 'a claim_token of 201')
  refused(t, await inspect(''), 400, 'invalid_request', 'no claim_token')
  refused(t, await inspect(`claim_token=${'x'.repeat(40)}&claim_token=${'y'.repeat(40)}`), 400, 'invalid_request', 'claim_token twice')
  refused(t, await inspect(`claim_token=${'x'.repeat(40)}&verbose=1`), 400, 'invalid_request', 'another parameter')
  const claim = await startAgent()
  const found = await inspect(`claim_token=${claim.claim_token}`)
  t.equal(found.status, 200, 'a real claim', { body: found.text })
  t.equal(found.headers['cache-control'], 'no-store')
})

t.test('agent identity - POST /v1/agent/identity/claim/confirm: a signed-in person, client scopes only, organization_id a uuid', async (t) => {
  const claim = await startAgent()
  const body = { claim_token: claim.claim_token, organization_id: orgA, scopes: ['printers:read'] }
  const confirm = (b: Record<string, unknown>, headers: Record<string, string> = admin.auth) => request(url, '/v1/agent/identity/claim/confirm', { method: 'POST', headers, body: b })
  refused(t, await confirm(body, {}), 401, 'unauthorized', 'no token')
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: { ...admin.auth, 'x-organization-id': orgA }, body: { name: 'confirm probe', scopes: ['printers:read'] } })
  refused(t, await confirm(body, { 'x-api-key': key.json.key }), 403, 'session_required', 'an API key')
  for (const [what, change] of [
    ['host:pair (not a client scope)', { scopes: ['printers:read', 'host:pair'] }],
    ['print:launch (not a client scope)', { scopes: ['print:launch'] }],
    ['an unknown scope', { scopes: ['admin'] }],
    ['no scope', { scopes: [] }],
    ['a scope twice', { scopes: ['printers:read', 'printers:read'] }],
    ['an organization_id that is not a uuid', { organization_id: 'farm-a' }],
    ['a urn:uuid: organization_id', { organization_id: `urn:uuid:${orgA}` }],
    ['a claim_token of 19', { claim_token: 'x'.repeat(19) }],
    ['a claim_token of 201', { claim_token: 'x'.repeat(201) }],
    ['an unknown field', { email: 'ops@example.com' }],
  ] as const) {
    refused(t, await confirm({ ...body, ...change }), 400, 'invalid_request', what)
  }
  const { organization_id: _o, ...noOrganization } = body
  refused(t, await confirm(noOrganization), 400, 'invalid_request', 'no organization_id')
  refused(t, await confirm({ ...body, claim_token: 'x'.repeat(200) }), 404, 'agent_claim_not_found', 'a claim_token of 200 passes the bounds')
  const all17 = ['printers:read', 'printers:write', 'jobs:read', 'jobs:write', 'telemetry:read', 'models:read', 'models:write', 'files:read', 'files:write', 'print-jobs:read', 'print-jobs:write', 'inventory:read', 'inventory:write', 'makes:read', 'makes:write', 'fleet:read', 'fleet:write']
  const ok = await confirm({ ...body, scopes: all17 })
  t.equal(ok.status, 200, 'all 17 client scopes are accepted', { body: ok.text })
})

t.test('isolation - OAuth tokens and organization clients stay in their organization; a person who leaves loses their tokens', async (t) => {
  const client = await publicClient()
  const tokensA = await tokensFor(client, { organizationId: orgA })
  t.equal((await request(url, '/v1/printers', { headers: bearer(tokensA.access_token, orgA) })).status, 200, 'the token opens its own organization')
  const crossed = await request(url, '/v1/printers', { headers: bearer(tokensA.access_token, orgB) })
  t.equal(crossed.status, 404, 'x-organization-id of another organization: 404')
  t.equal(crossed.json.error, 'organization_not_found')
  const refreshed = await token({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: tokensA.refresh_token })
  t.equal(refreshed.status, 200, refreshed.text)
  t.equal((await request(url, '/v1/printers', { headers: bearer(refreshed.json.access_token, orgB) })).status, 404, 'a refreshed token stays in its organization')

  // An organization client of A cannot sign anyone in for B.
  const created = await request(url, '/v1/oauth-clients', { method: 'POST', headers: admin.auth, body: { organization_id: orgA, name: "Farm A's app", redirect_uris: [redirectUri], scopes: ['printers:read'] } })
  t.equal(created.status, 201, created.text)
  const orgClient = { client_id: created.json.client_id as string }
  const body = { clientId: orgClient.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }
  refused(t, await handoff(body, { ...admin.auth, 'x-organization-id': orgB }), 400, 'invalid_request', "A's client, for B, by a member of both")
  const outsiderSession = await signIn(url, outsider.email, outsider.password)
  refused(t, await handoff(body, { ...outsiderSession.auth, 'x-organization-id': orgB }), 400, 'invalid_request', "A's client, for B, by a member of B only")
  refused(t, await handoff(body, outsiderSession.auth), 404, 'organization_not_found', "A's client, by a member of B only, without naming an organization")
  refused(t, await handoff(body, { ...outsiderSession.auth, 'x-organization-id': orgA }), 404, 'organization_not_found', 'a person naming an organization they are not in')
  const auth = await authorizationUrl(as, orgClient, redirectUri, { scope: 'printers:read' })
  const viaAuthorize = await approve(url, auth.url, { authorizeExtra: { organization_id: orgB } })
  t.equal(viaAuthorize.status, 400, "A's client, B named at authorize: 400", { body: viaAuthorize.body })
  t.equal(viaAuthorize.location, undefined, 'no code')
  const ownTokens = await tokensFor(orgClient)
  t.equal((await request(url, '/v1/printers', { headers: bearer(ownTokens.access_token) })).status, 200, "A's client signs in for A")

  // A member of A who is removed: their access token is refused and their refresh token is invalid_grant.
  const leaver = { email: 'leaver@example.com', password: 'leaver-password-12' }
  const added = await request(url, `/v1/organizations/${orgA}/members`, { method: 'POST', headers: admin.auth, body: { ...leaver, role: 'member' } })
  t.equal(added.status, 200, added.text)
  const leaverTokens = await tokensFor(client, { person: leaver })
  t.equal((await request(url, '/v1/printers', { headers: bearer(leaverTokens.access_token) })).status, 200, 'while a member')
  const agent = await startAgent()
  const leaverSession = await signIn(url, leaver.email, leaver.password)
  const confirmed = await request(url, '/v1/agent/identity/claim/confirm', { method: 'POST', headers: leaverSession.auth, body: { claim_token: agent.claim_token, organization_id: orgA, scopes: ['printers:read'] } })
  t.equal(confirmed.status, 200, confirmed.text)
  const agentTokens = (await token({ grant_type: claimGrant, claim_token: agent.claim_token, client_id: agent.agent_id })).json
  t.equal((await request(url, '/v1/printers', { headers: bearer(agentTokens.access_token) })).status, 200, "the agent acting for them, while they are a member")
  const removed = await request(url, `/v1/organizations/${orgA}/members/${added.json.userId}`, { method: 'DELETE', headers: admin.auth })
  t.equal(removed.status, 204, removed.text)
  const after = await request(url, '/v1/printers', { headers: bearer(leaverTokens.access_token) })
  t.equal(after.status, 401, 'removed: the access token is refused')
  t.equal(after.json.error, 'unauthorized')
  refused(t, await token({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: leaverTokens.refresh_token }), 400, 'invalid_grant', "a removed person's refresh token")
  t.equal((await request(url, '/v1/printers', { headers: bearer(agentTokens.access_token) })).status, 401, "removed: the agent's access token is refused too")
  refused(t, await token({ grant_type: jwtBearer, assertion: agentTokens.identity_assertion, client_id: agent.agent_id }), 400, 'invalid_grant', "the agent's identity assertion of a removed person")
  refused(t, await handoff({ clientId: client.client_id, redirectUri, scopes: ['printers:read'], resource: '', codeChallenge: challenge43 }, leaverSession.auth), 404, 'organization_not_found', 'a person in no organization cannot consent')
})

t.test("revocation - a confidential client's wrong secret is invalid_client; another client's token answers 200 and keeps working; token is required", async (t) => {
  const confidential = await registerClient(as, { redirect_uris: [redirectUri], token_endpoint_auth_method: 'client_secret_post' })
  const confidentialTokens = await tokensFor(confidential, { secret: confidential.client_secret! })
  refused(t, await revoke({ token: confidentialTokens.access_token, client_id: confidential.client_id, client_secret: 'pfcs_wrong' }), 400, 'invalid_client', 'a wrong client_secret')
  refused(t, await revoke({ token: confidentialTokens.access_token, client_id: confidential.client_id }), 400, 'invalid_client', 'no client_secret for a confidential client')
  refused(t, await revoke({ token: confidentialTokens.access_token, client_id: 'pfc_nobody' }), 400, 'invalid_client', 'an unknown client_id')
  refused(t, await revoke({ token: confidentialTokens.access_token }), 400, 'invalid_client', "no client_id for a confidential client's access token (RFC 7009 section 2.1)")
  refused(t, await revoke({ token: confidentialTokens.refresh_token }), 400, 'invalid_client', "no client_id for a confidential client's refresh token")
  t.equal((await request(url, '/v1/printers', { headers: bearer(confidentialTokens.access_token) })).status, 200, 'a refused revocation changed nothing')
  const stillRotates = await token({ grant_type: 'refresh_token', client_id: confidential.client_id, client_secret: confidential.client_secret!, refresh_token: confidentialTokens.refresh_token })
  t.equal(stillRotates.status, 200, 'the refresh token too', { body: stillRotates.text })

  const a = await publicClient()
  const b = await publicClient()
  const tokensA = await tokensFor(a)
  const byB = await revoke({ token: tokensA.access_token, client_id: b.client_id })
  t.equal(byB.status, 200, "client B revoking A's access token: 200", { body: byB.text })
  t.equal(byB.headers['cache-control'], 'no-store')
  t.equal((await request(url, '/v1/printers', { headers: bearer(tokensA.access_token) })).status, 200, "A's access token still works")
  t.equal((await revoke({ token: tokensA.refresh_token, client_id: b.client_id })).status, 200, "client B revoking A's refresh token: 200")
  const stillRefreshes = await token({ grant_type: 'refresh_token', client_id: a.client_id, refresh_token: tokensA.refresh_token })
  t.equal(stillRefreshes.status, 200, "A's refresh token still works", { body: stillRefreshes.text })
  t.equal((await revoke({ token: tokensA.access_token, client_id: confidential.client_id, client_secret: confidential.client_secret! })).status, 200, 'an authenticated confidential client revoking a token not its own: 200')
  t.equal((await request(url, '/v1/printers', { headers: bearer(tokensA.access_token) })).status, 200, 'still works')

  refused(t, await revoke({ client_id: a.client_id }), 400, 'invalid_request', 'no token')
  refused(t, await revoke({ token: '', client_id: a.client_id }), 400, 'invalid_request', 'an empty token')
  refused(t, await revoke({ token: 't'.repeat(8193) }), 400, 'invalid_request', 'a token of 8193')
  refused(t, await request(url, '/v1/oauth/revoke', { method: 'POST', headers: formType, body: 'token=a&token=b' }), 400, 'invalid_request', 'token sent twice')
  refused(t, await request(url, '/v1/oauth/revoke', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'token=a' }), 415, 'unsupported_media_type', 'a text/plain body')
  refused(t, await revoke({ token: tokensA.access_token, client_id: a.client_id, client_secret: 'x' }), 400, 'invalid_client', 'a public client sending a secret')
})

t.test('discovery - the metadata documents have every documented field; the app directory challenge only when configured', async (t) => {
  const server = await request(url, '/.well-known/oauth-authorization-server')
  t.equal(server.status, 200)
  t.match(server.headers['content-type'], /^application\/json/)
  const meta = server.json
  for (const field of [
    'issuer',
    'authorization_endpoint',
    'token_endpoint',
    'revocation_endpoint',
    'registration_endpoint',
    'response_types_supported',
    'grant_types_supported',
    'code_challenge_methods_supported',
    'token_endpoint_auth_methods_supported',
    'scopes_supported',
    'service_documentation',
    'agent_auth',
    'resource',
    'authorization_servers',
    'bearer_methods_supported',
  ]) {
    t.ok(meta[field] !== undefined && meta[field] !== null && meta[field] !== '', `authorization server metadata: ${field}`)
  }
  t.equal(meta.issuer, url)
  t.equal(meta.authorization_endpoint, `${url}/v1/oauth/authorize`)
  t.equal(meta.token_endpoint, `${url}/v1/oauth/token`)
  t.equal(meta.revocation_endpoint, `${url}/v1/oauth/revoke`)
  t.equal(meta.registration_endpoint, `${url}/v1/oauth/register`)
  t.same(meta.response_types_supported, ['code'])
  t.same(meta.grant_types_supported, ['authorization_code', 'refresh_token', jwtBearer, claimGrant])
  t.same(meta.code_challenge_methods_supported, ['S256'])
  t.same(meta.token_endpoint_auth_methods_supported, ['none', 'client_secret_post'])
  t.equal(meta.scopes_supported.length, 19, 'the 19 consent scopes (host:pair and print:launch granted by an admin to a bridge application)')
  t.type(meta.agent_auth, 'object')
  t.notOk(Array.isArray(meta.agent_auth), 'agent_auth is an object')
  t.match(meta.agent_auth, { identity_endpoint: `${url}/agent/identity`, grant_type: claimGrant })
  t.equal(meta.resource, url)
  t.same(meta.authorization_servers, [url])
  t.same(meta.bearer_methods_supported, ['header'])
  t.equal(meta.authorization_response_iss_parameter_supported, true)

  const resourceFields = ['resource', 'resource_name', 'resource_logo_uri', 'authorization_servers', 'bearer_methods_supported', 'resource_signing_alg_values_supported', 'scopes_supported', 'resource_documentation']
  const api = await request(url, '/.well-known/oauth-protected-resource')
  t.equal(api.status, 200)
  for (const field of resourceFields) t.ok(api.json[field] !== undefined && api.json[field] !== null && api.json[field] !== '', `protected resource metadata: ${field}`)
  t.equal(api.json.resource, url)
  t.same(api.json.authorization_servers, [url])
  const mcp = await request(url, '/.well-known/oauth-protected-resource/v1/mcp')
  t.equal(mcp.status, 200)
  for (const field of resourceFields) t.ok(mcp.json[field] !== undefined && mcp.json[field] !== null && mcp.json[field] !== '', `MCP resource metadata: ${field}`)
  t.equal(mcp.json.resource, `${url}/v1/mcp`, 'names {base}/v1/mcp')

  for (const path of ['/.well-known/mcp/server-card.json', '/.well-known/integrations.json']) {
    const res = await request(url, path)
    t.equal(res.status, 200, `${path}: 200`)
    t.match(res.headers['content-type'], /^application\/json/, `${path}: JSON`)
    t.type(res.json, 'object', `${path}: a JSON object`)
  }

  for (const [what, linked] of [
    ['jwks_uri', meta.jwks_uri],
    ['service_documentation', meta.service_documentation],
    ['resource_logo_uri', api.json.resource_logo_uri],
    ['resource_documentation', mcp.json.resource_documentation],
    ['agent_auth.claim_page', meta.agent_auth.claim_page],
  ] as const) {
    t.equal((await request(url, new URL(String(linked)).pathname)).status, 200, `${what} answers 200`)
  }

  const unset = await request(url, '/.well-known/acme-apps-challenge')
  t.equal(unset.status, 404, 'not configured: 404')
  t.equal(unset.json.error, 'route_not_found')
  const configured = await request(small.url, '/.well-known/acme-apps-challenge')
  t.equal(configured.status, 200, 'APPS_CHALLENGE_VENDOR=acme: 200')
  t.match(configured.headers['content-type'], /^text\/plain/)
  t.equal(configured.text, challengeToken, 'the token, as is')
  const otherVendor = await request(small.url, '/.well-known/other-apps-challenge')
  t.equal(otherVendor.status, 404, "another vendor's path stays 404")
  t.equal(otherVendor.json.error, 'route_not_found')
  t.equal((await request(small.url, '/.well-known/acme-apps-challenge.txt')).status, 404, 'not a prefix match')
})
