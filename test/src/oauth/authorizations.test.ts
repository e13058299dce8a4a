/**
 * The applications and agents acting in an organization: a person sees and ends what acts for them, an
 * admin everything in the organization; ending a sign-in revokes its refresh tokens and the access
 * tokens they gave at once, ending an agent refuses its tokens and renewals; nobody sees or ends
 * another organization's, and API keys and OAuth tokens cannot use these routes.
 */
import * as oauth from 'oauth4webapi'
import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { approve, authorizationUrl, discover, insecure, registerClient, startOAuthService } from '../../helpers/oauth.js'
import { testAdmin } from '../../helpers/service.js'

const svc = await startOAuthService(t)
const url = svc.url
const as = await discover(url)
const redirectUri = 'http://127.0.0.1:45123/callback'
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const organizationId = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id as string
const member = { email: 'member@test.printfarm', password: 'member-password-123' }
const added = await request(url, `/v1/organizations/${organizationId}/members`, { method: 'POST', headers: admin.auth, body: { ...member, role: 'member' } })
if (added.status !== 201 && added.status !== 200) throw new Error(`adding a member: ${added.status} ${added.text}`)
const memberSession = await signIn(url, member.email, member.password)
const client = await registerClient(as, { redirect_uris: [redirectUri], client_name: 'Dashboard', token_endpoint_auth_method: 'none' })

async function signInThrough(email: string, password: string): Promise<oauth.TokenEndpointResponse> {
  const auth = await authorizationUrl(as, client, redirectUri, { scope: 'printers:read' })
  const approval = await approve(url, auth.url, { email, password })
  const params = oauth.validateAuthResponse(as, client, approval.location!, auth.state)
  const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirectUri, auth.verifier, insecure)
  return oauth.processAuthorizationCodeResponse(as, client, response)
}
/** The RFC 6749 error a token request ended with ('accepted' when it was not refused). */
async function grantError(attempt: Promise<unknown>): Promise<string> {
  try {
    await attempt
    return 'accepted'
  } catch (error) {
    return error instanceof oauth.ResponseBodyError ? error.error : String(error)
  }
}
const opens = async (token: string) => (await request(url, '/v1/printers', { headers: { authorization: `Bearer ${token}` } })).status

t.test('authorizations - each person sees their own, an admin everyone\'s; ending one revokes its tokens at once', async (t) => {
  const mine = await signInThrough(testAdmin.email, testAdmin.password)
  const theirs = await signInThrough(member.email, member.password)

  const all = await request(url, '/v1/oauth/authorizations', { headers: admin.auth })
  t.equal(all.status, 200, all.text)
  t.equal(all.json.authorizations.length, 2, 'the admin sees both sign-ins')
  t.match(all.json.authorizations[0], { kind: 'application', client_id: client.client_id, name: 'Dashboard', scopes: ['printers:read'] })
  const own = await request(url, '/v1/oauth/authorizations', { headers: memberSession.auth })
  t.equal(own.json.authorizations.length, 1, 'a member sees only their own')
  t.equal(own.json.authorizations[0].user_email, member.email)

  const adminsId = all.json.authorizations.find((a: { user_email: string }) => a.user_email === testAdmin.email).id
  const refused = await request(url, `/v1/oauth/authorizations/${adminsId}`, { method: 'DELETE', headers: memberSession.auth })
  t.equal(refused.status, 404, "a member cannot end someone else's")
  t.equal(refused.json.error, 'oauth_authorization_not_found')
  t.equal(await opens(mine.access_token), 200, 'still working')

  const ended = await request(url, `/v1/oauth/authorizations/${own.json.authorizations[0].id}`, { method: 'DELETE', headers: admin.auth })
  t.equal(ended.status, 200, "an admin ends a member's")
  t.equal(await opens(theirs.access_token), 401, 'its access token is refused at once')
  const refresh = oauth.refreshTokenGrantRequest(as, client, oauth.None(), theirs.refresh_token!, insecure).then((r) => oauth.processRefreshTokenResponse(as, client, r))
  t.equal(await grantError(refresh), 'invalid_grant', 'its refresh token too')
  t.equal((await request(url, '/v1/oauth/authorizations', { headers: admin.auth })).json.authorizations.length, 1, 'no longer listed')
  t.equal((await request(url, `/v1/oauth/authorizations/${own.json.authorizations[0].id}`, { method: 'DELETE', headers: admin.auth })).status, 404, 'ending it twice: 404')
})

t.test('authorizations - agents are listed and ended the same way', async (t) => {
  const started = await request(url, '/agent/identity', { method: 'POST', body: { type: 'claude-code' } })
  const { agent_id: agentId, claim_token: claimToken } = started.json
  await request(url, '/v1/agent/identity/claim/confirm', { method: 'POST', headers: memberSession.auth, body: { claim_token: claimToken, organization_id: organizationId, scopes: ['printers:read'] } })
  const agent: oauth.Client = { client_id: agentId }
  const response = await oauth.genericTokenEndpointRequest(as, agent, oauth.None(), 'urn:printfarm:agent-auth:grant-type:claim', { claim_token: claimToken }, insecure)
  const tokens = await oauth.processGenericTokenEndpointResponse(as, agent, response)
  const listed = (await request(url, '/v1/oauth/authorizations', { headers: memberSession.auth })).json.authorizations
  t.match(listed.find((a: { id: string }) => a.id === agentId), { kind: 'agent', name: 'claude-code', scopes: ['printers:read'], user_email: member.email, expires_at: null })
  t.equal((await request(url, `/v1/oauth/authorizations/${agentId}`, { method: 'DELETE', headers: memberSession.auth })).status, 200, 'the person ends their agent')
  t.equal(await opens(tokens.access_token), 401, "the agent's token is refused")
  const renew = oauth.genericTokenEndpointRequest(as, agent, oauth.None(), 'urn:ietf:params:oauth:grant-type:jwt-bearer', { assertion: String(tokens['identity_assertion']) }, insecure).then((r) =>
    oauth.processGenericTokenEndpointResponse(as, agent, r),
  )
  t.equal(await grantError(renew), 'invalid_grant', 'and it renews nothing')
})

t.test('authorizations - for people only, and within their organization', async (t) => {
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin.auth, body: { name: 'k', scopes: ['printers:read'] } })
  const byKey = await request(url, '/v1/oauth/authorizations', { headers: { 'x-api-key': key.json.key } })
  t.equal(byKey.status, 403)
  t.equal(byKey.json.error, 'session_required')
  const token = await signInThrough(testAdmin.email, testAdmin.password)
  const byToken = await request(url, '/v1/oauth/authorizations', { headers: { authorization: `Bearer ${token.access_token}` } })
  t.equal(byToken.status, 403, 'an OAuth token cannot list or end grants')
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Other farm' } })
  const elsewhere = await request(url, '/v1/oauth/authorizations', { headers: { ...admin.auth, 'x-organization-id': other.json.id } })
  t.same(elsewhere.json.authorizations, [], "another organization's list does not show this one's")
  const here = { ...admin.auth, 'x-organization-id': organizationId }
  const id = (await request(url, '/v1/oauth/authorizations', { headers: here })).json.authorizations[0].id
  t.equal((await request(url, `/v1/oauth/authorizations/${id}`, { method: 'DELETE', headers: { ...admin.auth, 'x-organization-id': other.json.id } })).status, 404, 'nor ends it')
  t.equal(await opens(token.access_token), 200, 'which still works')
  t.equal((await request(url, '/v1/oauth/authorizations/not-an-id', { method: 'DELETE', headers: here })).status, 400, 'a malformed id: 400')
})
