/**
 * The authorization code flow driven by a real client library (oauth4webapi): discovery, registration,
 * PKCE S256, the person's approval through the session handoff, the code exchanged for tokens that
 * open the API, refresh rotation and reuse detection, revocation; and the RFC error for each way a
 * request can be wrong (wrong verifier, reused code, redirect mismatch, expired code, wrong client
 * secret, wrong resource).
 */
import * as oauth from 'oauth4webapi'
import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { testAdmin } from '../../helpers/service.js'
import { approve, authorizationUrl, consentRequest, discover, follow, insecure, registerClient, rfcError, startOAuthService } from '../../helpers/oauth.js'
import { ForwardClock } from '../../helpers/clock.js'

const clock = new ForwardClock()
const svc = await startOAuthService(t, { OAUTH_CODE_TTL_S: '2' }, { clock })
const url = svc.url
const as = await discover(url)
const redirectUri = 'http://127.0.0.1:45123/callback'

async function publicClient(extra: Record<string, unknown> = {}): Promise<oauth.Client> {
  return registerClient(as, { redirect_uris: [redirectUri], client_name: 'Test app', token_endpoint_auth_method: 'none', ...extra })
}

/** Approve and return the callback parameters as the library validates them (state, iss). */
async function codeFor(client: oauth.Client, options: { scope?: string; resource?: string } = {}): Promise<{ params: URLSearchParams; verifier: string }> {
  const auth = await authorizationUrl(as, client, redirectUri, options)
  const approval = await approve(url, auth.url)
  if (approval.location === undefined) throw new Error(`no redirect: ${approval.status} ${approval.body}`)
  return { params: oauth.validateAuthResponse(as, client, approval.location, auth.state), verifier: auth.verifier }
}

async function exchange(client: oauth.Client, params: URLSearchParams, verifier: string, auth: oauth.ClientAuth = oauth.None(), extra?: Record<string, string>) {
  const response = await oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectUri, verifier, { ...insecure, ...(extra ? { additionalParameters: extra } : {}) })
  return oauth.processAuthorizationCodeResponse(as, client, response)
}


t.test('discovery - the metadata documents describe this service', async (t) => {
  t.equal(as.issuer, url)
  t.equal(as.token_endpoint, `${url}/v1/oauth/token`)
  t.same(as.code_challenge_methods_supported, ['S256'])
  t.equal(as.authorization_response_iss_parameter_supported, true)
  t.ok(as.grant_types_supported?.includes('urn:ietf:params:oauth:grant-type:jwt-bearer'))
  const resource = await oauth.processResourceDiscoveryResponse(new URL(url), await oauth.resourceDiscoveryRequest(new URL(url), insecure))
  t.equal(resource.resource, url)
  t.same(resource.authorization_servers, [url])
  const mcp = await oauth.processResourceDiscoveryResponse(new URL(`${url}/v1/mcp`), await oauth.resourceDiscoveryRequest(new URL(`${url}/v1/mcp`), insecure))
  t.equal(mcp.resource, `${url}/v1/mcp`)
})

t.test('authorization code + PKCE - the code becomes tokens that open the API with the scopes granted', async (t) => {
  const client = await publicClient()
  const { params, verifier } = await codeFor(client, { scope: 'printers:read print-jobs:read' })
  t.match(params.get('code'), /^pfoc_/)
  t.equal(params.get('iss'), url, 'iss names the issuer (RFC 9207)')
  const tokens = await exchange(client, params, verifier)
  t.equal(tokens.token_type, 'bearer')
  t.equal(tokens.scope, 'printers:read print-jobs:read')
  t.equal(tokens.expires_in, 3600)
  t.match(tokens.refresh_token, /^pfor_/)
  const printers = await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })
  t.equal(printers.status, 200, 'the token opens a printers:read route')
  const files = await request(url, '/v1/model-files', { headers: { authorization: `Bearer ${tokens.access_token}` } })
  t.equal(files.status, 403, 'not a route of a scope it was not granted')
  t.equal(files.json.error, 'insufficient_scope')
  const stored = await svc.services.db.sql`select count(*)::int as n from oauth_codes where code_hash = sha256(${params.get('code')!}::bytea)`
  t.equal(stored[0]!.n, 1, 'the code is stored only as its hash')
})

t.test('authorization code - wrong verifier, reused code, redirect mismatch, expired code, wrong resource: the RFC error each time', async (t) => {
  const client = await publicClient()
  const wrong = await codeFor(client, { scope: 'printers:read' })
  await rfcError(t, exchange(client, wrong.params, oauth.generateRandomCodeVerifier()), 'invalid_grant', 'a wrong code_verifier')

  const good = await codeFor(client, { scope: 'printers:read' })
  const first = await exchange(client, good.params, good.verifier)
  await rfcError(t, exchange(client, good.params, good.verifier), 'invalid_grant', 'the same code again')
  const after = await request(url, '/v1/printers', { headers: { authorization: `Bearer ${first.access_token}` } })
  t.equal(after.status, 401, 'a reused code revokes the access token it gave')
  await rfcError(
    t,
    (async () => oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), first.refresh_token!, insecure)))(),
    'invalid_grant',
    'the refresh token of a reused code',
  )

  const other = await codeFor(client, { scope: 'printers:read' })
  const response = await request(url, '/v1/oauth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: other.params.get('code')!, redirect_uri: 'http://127.0.0.1:45123/other', client_id: client.client_id, code_verifier: other.verifier }).toString(),
  })
  t.equal(response.status, 400)
  t.equal(response.json.error, 'invalid_grant', 'a redirect_uri other than the authorization request')

  const target = await codeFor(client, { scope: 'printers:read' })
  await rfcError(t, exchange(client, target.params, target.verifier, oauth.None(), { resource: 'https://elsewhere.example.com/' }), 'invalid_target', 'a resource this service does not serve')
  const target2 = await codeFor(client, { scope: 'printers:read' })
  await rfcError(t, exchange(client, target2.params, target2.verifier, oauth.None(), { resource: `${url}/v1/mcp` }), 'invalid_target', 'a resource other than the one authorized')

  const late = await codeFor(client, { scope: 'printers:read' })
  clock.forward(2_500)
  await rfcError(t, exchange(client, late.params, late.verifier), 'invalid_grant', 'a code past OAUTH_CODE_TTL_S')
})

t.test('authorization code - a reused code revokes its access token also for a client without refresh tokens', async (t) => {
  const client = await publicClient({ grant_types: ['authorization_code'] })
  const { params, verifier } = await codeFor(client, { scope: 'printers:read' })
  const tokens = await exchange(client, params, verifier)
  t.notOk(tokens.refresh_token, 'no refresh token for this client')
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 200)
  await rfcError(t, exchange(client, params, verifier), 'invalid_grant', 'the code again')
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 401, 'the access token the code gave is refused')
})

t.test('confidential client - a wrong or missing client_secret is invalid_client', async (t) => {
  const client = await registerClient(as, { redirect_uris: [redirectUri], token_endpoint_auth_method: 'client_secret_post' })
  const secret = client.client_secret!
  const a = await codeFor(client, { scope: 'printers:read' })
  await rfcError(t, exchange(client, a.params, a.verifier, oauth.ClientSecretPost('pfcs_wrong')), 'invalid_client', 'a wrong client_secret')
  const b = await codeFor(client, { scope: 'printers:read' })
  await rfcError(t, exchange(client, b.params, b.verifier, oauth.None()), 'invalid_client', 'no client_secret')
  const c = await codeFor(client, { scope: 'printers:read' })
  const tokens = await exchange(client, c.params, c.verifier, oauth.ClientSecretPost(secret))
  t.equal(tokens.scope, 'printers:read', 'the right secret gets tokens')
  const d = await codeFor(client, { scope: 'printers:read' })
  const basic = await exchange(client, d.params, d.verifier, oauth.ClientSecretBasic(secret))
  t.equal(basic.scope, 'printers:read', 'the secret in an HTTP Basic header is understood too')
  const e = await codeFor(client, { scope: 'printers:read' })
  try {
    await exchange(client, e.params, e.verifier, oauth.ClientSecretBasic('pfcs_wrong'))
    t.fail('a wrong Basic secret was accepted')
  } catch (error) {
    t.ok(error instanceof oauth.WWWAuthenticateChallengeError, 'a wrong Basic secret: 401 with a Basic challenge (RFC 6749 §5.2)', { error: String(error) })
  }
})

t.test('refresh - each use rotates; a rotated token used again revokes the whole sign-in', async (t) => {
  const client = await publicClient()
  const { params, verifier } = await codeFor(client, { scope: 'printers:read printers:write' })
  const first = await exchange(client, params, verifier)
  const refresh = async (token: string, scope?: string) =>
    oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), token, { ...insecure, ...(scope ? { additionalParameters: { scope } } : {}) }))
  const second = await refresh(first.refresh_token!, 'printers:read')
  t.not(second.refresh_token, first.refresh_token, 'a new refresh token')
  t.equal(second.scope, 'printers:read', 'scope narrows the access token')
  const third = await refresh(second.refresh_token!)
  t.equal(third.scope, 'printers:read printers:write', 'the refresh token keeps the whole grant')
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${third.access_token}` } })).status, 200)

  await rfcError(t, refresh(first.refresh_token!), 'invalid_grant', 'a rotated refresh token')
  await rfcError(t, refresh(third.refresh_token!), 'invalid_grant', 'the newest token of a family revoked for reuse')
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${third.access_token}` } })).status, 401, "the family's access tokens are refused too")
})

t.test('revocation - an access token is refused from then on; a refresh token ends its sign-in; unknown tokens answer 200', async (t) => {
  const client = await publicClient()
  const a = await codeFor(client, { scope: 'printers:read' })
  const tokens = await exchange(client, a.params, a.verifier)
  // Used once first: the service remembers a checked signature, never whether the token still stands.
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 200, 'accepted before its revocation')
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, oauth.None(), tokens.access_token, insecure))
  const refused = await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })
  t.equal(refused.status, 401)
  t.match(refused.json.message, /revoked/)

  await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, oauth.None(), tokens.refresh_token!, insecure))
  await rfcError(
    t,
    (async () => oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure)))(),
    'invalid_grant',
    'a revoked refresh token',
  )
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, oauth.None(), 'pfor_not-a-token', insecure))
  t.pass('an unknown token answers 200')
})

t.test('authorize - unknown client or redirect URI: 400 and no redirect; deny: access_denied on the redirect URI', async (t) => {
  const client = await publicClient()
  const unknown = await authorizationUrl(as, { client_id: 'pfc_unknown' }, redirectUri)
  const a = await follow(unknown.url, { accept: 'text/html' })
  t.equal(a.status, 400)
  t.equal(a.location, undefined, 'no redirect for an unknown client')
  t.match(a.body, /<h1>This sign-in cannot continue/)
  const other = await authorizationUrl(as, client, 'https://attacker.example.com/cb')
  const b = await follow(other.url)
  t.equal(b.status, 400)
  t.equal(b.location, undefined, 'no redirect to an unregistered URI')
  t.equal(JSON.parse(b.body).error, 'invalid_request', 'JSON for a client that does not ask for HTML')

  const deny = await authorizationUrl(as, client, redirectUri)
  deny.url.searchParams.set('decision', 'deny')
  const crafted = await follow(deny.url)
  t.equal(crafted.status, 400, 'a deny link nobody clicked on the consent page: 400')
  t.equal(crafted.location, undefined, 'and nothing is sent to an application that registered itself')
  // Deny on the consent page comes back with the page's consent token.
  const shown = new URL(deny.url)
  shown.searchParams.delete('decision')
  const denyPage = await consentRequest(shown)
  t.type(denyPage.request?.consent_token, 'string', 'the consent page carries its token')
  deny.url.searchParams.set('consent', denyPage.request.consent_token)
  const d = await follow(deny.url)
  t.equal(d.status, 302)
  t.equal(d.location?.origin + d.location!.pathname, redirectUri)
  t.throws(() => oauth.validateAuthResponse(as, client, d.location!, deny.state), 'the library reads access_denied')
  t.equal(d.location?.searchParams.get('error'), 'access_denied')
  t.equal(d.location?.searchParams.get('state'), deny.state)

  const loopback = await authorizationUrl(as, client, 'http://127.0.0.1:50999/callback')
  const page = await follow(loopback.url)
  t.equal(page.status, 200, 'a loopback redirect URI on another port is the same one (RFC 8252)')

  const noPkce = await authorizationUrl(as, client, redirectUri, { pkce: false })
  const n = await follow(noPkce.url)
  t.equal(n.status, 400)
  t.equal(n.location, undefined, 'a public client without PKCE is refused, and an application that registered itself is not sent back to')
  t.match(JSON.parse(n.body), { error: 'invalid_request', error_description: /PKCE/ })
})

t.test('handoff - bound to its request: another scope, client or challenge gets no code; a handoff is used once', async (t) => {
  const client = await publicClient()
  const auth = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
  const widened = await approve(url, auth.url, { handoff: { scopes: ['printers:read', 'printers:write'] } })
  t.equal(widened.status, 400, 'a handoff for more scopes than the request')
  t.equal(widened.location, undefined)
  const challenge = await approve(url, auth.url, { handoff: { codeChallenge: 'x'.repeat(43) } })
  t.equal(challenge.status, 400, 'a handoff for another code challenge')
  const unknownClient = await approve(url, auth.url, { handoff: { clientId: 'pfc_nobody' } })
  t.equal(unknownClient.status, 400)
  t.equal(JSON.parse(unknownClient.body).error, 'invalid_client', 'an unknown client at the handoff')

  const session = await signIn(url, testAdmin.email, testAdmin.password)
  const page = (await consentRequest(auth.url)).request
  const handoff = await request(url, '/v1/oauth/session-handoff', {
    method: 'POST',
    headers: session.auth,
    body: { clientId: client.client_id, redirectUri, scopes: page.scopes, resource: page.resource, codeChallenge: page.code_challenge },
  })
  t.equal(handoff.status, 200)
  t.equal(handoff.json.expires_in, 300)
  const withHandoff = new URL(auth.url)
  withHandoff.searchParams.set('handoff', handoff.json.handoff)
  const first = await follow(withHandoff)
  t.equal(first.status, 302)
  t.ok(first.location?.searchParams.get('code'), 'a code')
  const second = await follow(withHandoff)
  t.equal(second.status, 400, 'the same handoff again gets no code')
  t.equal(JSON.parse(second.body).error, 'invalid_request')
})
