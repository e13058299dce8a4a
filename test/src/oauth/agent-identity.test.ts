/**
 * Agent identity and the grants it leads to, with a real client library (oauth4webapi) where the agent
 * talks OAuth: an agent starts a claim, polls with the claim grant (authorization_pending), a signed-in
 * person inspects and confirms it, the agent collects tokens once (with an identity assertion), the
 * tokens open the API as the person within the agent's scopes, the assertion is exchanged once with the
 * jwt-bearer grant (a replay is refused), an expired claim answers expired_token and is renewed by
 * email, after which only that person may confirm it.
 */
import * as oauth from 'oauth4webapi'
import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { discover, insecure, rfcError, startOAuthService } from '../../helpers/oauth.js'
import { testAdmin } from '../../helpers/service.js'
import { ForwardClock } from '../../helpers/clock.js'

const clock = new ForwardClock()
const svc = await startOAuthService(t, { AGENT_CLAIM_TTL_S: '2' }, { clock })
const url = svc.url
const as = await discover(url)
const claimGrant = 'urn:printfarm:agent-auth:grant-type:claim'
const jwtBearer = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const organizationId = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id as string

/** The agent is a public client named by its agent_id (RFC 7523 grants need no client authentication). */
let agent: oauth.Client = { client_id: 'pfa_unset' }
async function grant(type: string, parameters: Record<string, string>) {
  const response = await oauth.genericTokenEndpointRequest(as, agent, oauth.None(), type, new URLSearchParams(parameters), insecure)
  return oauth.processGenericTokenEndpointResponse(as, agent, response)
}


async function startClaim(body: Record<string, unknown> = { type: 'claude-code', login_hint: 'ops@example.com' }) {
  const res = await request(url, '/agent/identity', { method: 'POST', body })
  if (res.status !== 201) throw new Error(`agent identity: ${res.status} ${res.text}`)
  agent = { client_id: res.json.agent_id }
  return res.json as { agent_id: string; claim_token: string; claim_url: string; expires_at: string; interval: number }
}

async function confirm(claimToken: string, scopes: string[], auth = admin.auth, organization = organizationId) {
  return request(url, '/v1/agent/identity/claim/confirm', { method: 'POST', headers: auth, body: { claim_token: claimToken, organization_id: organization, scopes } })
}

t.test('claim - pending until a person confirms, then tokens once, acting for that person within the scopes', async (t) => {
  const claim = await startClaim()
  t.match(claim.agent_id, /^pfa_/)
  t.equal(claim.interval, 5)
  t.equal(claim.claim_url, `${url}/agent/claim#claim_token=${claim.claim_token}`, 'the token rides in the fragment')
  await rfcError(t, grant(claimGrant, { claim_token: claim.claim_token }), 'authorization_pending', 'before confirmation')

  const inspect = await request(url, `/v1/agent/identity/claim/inspect?claim_token=${claim.claim_token}`)
  t.equal(inspect.status, 200)
  t.same(Object.keys(inspect.json).sort(), ['expires_at', 'login_hint', 'status', 'type'], 'the inspection shows only type, hint, status, expiry')
  t.match(inspect.json, { type: 'claude-code', login_hint: 'ops@example.com', status: 'pending' })

  const confirmed = await confirm(claim.claim_token, ['printers:read', 'print-jobs:read'])
  t.equal(confirmed.status, 200, confirmed.text)
  t.match(confirmed.json, { agent_id: claim.agent_id, organization_id: organizationId, status: 'confirmed' })
  t.equal((await confirm(claim.claim_token, ['printers:read'])).json.error, 'claim_already_confirmed')

  const tokens = await grant(claimGrant, { claim_token: claim.claim_token })
  t.equal(tokens.scope, 'printers:read print-jobs:read')
  t.type(tokens['identity_assertion'], 'string')
  t.ok(Number(tokens['assertion_expires']) > Date.now() / 1000, 'assertion_expires in Unix seconds, in the future')
  t.notOk('refresh_token' in tokens, 'no refresh token: the assertion renews')
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 200, 'the token opens printers:read')
  t.equal((await request(url, '/v1/model-files', { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 403, 'not beyond the scopes confirmed')
  await rfcError(t, grant(claimGrant, { claim_token: claim.claim_token }), 'invalid_grant', 'collecting twice')

  const renewed = await grant(jwtBearer, { assertion: String(tokens['identity_assertion']), scope: 'printers:read' })
  t.equal(renewed.scope, 'printers:read', 'scope narrows')
  t.not(renewed['identity_assertion'], tokens['identity_assertion'], 'a new assertion each time')
  await rfcError(t, grant(jwtBearer, { assertion: String(renewed['identity_assertion']), scope: 'files:write' }), 'invalid_scope', 'a scope the agent was not given')
  await rfcError(t, grant(jwtBearer, { assertion: tokens.access_token }), 'invalid_grant', 'an access token is not an assertion')
  const mcp = await grant(jwtBearer, { assertion: String(renewed['identity_assertion']), resource: `${url}/v1/mcp` })
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${mcp.access_token}` } })).status, 401, 'a token for the MCP resource does not open the API')
  const latest = await grant(jwtBearer, { assertion: String(mcp['identity_assertion']) })
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${latest.access_token}` } })).status, 200, 'the newest token works')

  // A copied chain: the old assertion comes back. The agent ends; neither holder keeps access.
  await rfcError(t, grant(jwtBearer, { assertion: String(tokens['identity_assertion']) }), 'invalid_grant', 'an assertion replayed')
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${latest.access_token}` } })).status, 401, 'a replay revokes the agent: its tokens are refused')
  await rfcError(t, grant(jwtBearer, { assertion: String(latest['identity_assertion']) }), 'invalid_grant', 'and its newest assertion renews nothing')
})

t.test('claim - collecting needs the agent_id, which the claim URL does not carry', async (t) => {
  const claim = await startClaim()
  t.notOk(claim.claim_url.includes(claim.agent_id), 'the claim URL does not name the agent')
  t.equal((await confirm(claim.claim_token, ['printers:read'])).status, 200)
  const bare = await request(url, '/v1/oauth/token', { method: 'POST', body: { grant_type: claimGrant, claim_token: claim.claim_token } })
  t.equal(bare.status, 400)
  t.equal(bare.json.error, 'invalid_client', 'whoever holds only the URL gets nothing')
  const tokens = await grant(claimGrant, { claim_token: claim.claim_token })
  t.type(tokens.access_token, 'string', 'the agent still collects its tokens')
})

t.test('revocation - revoking an identity assertion ends the agent', async (t) => {
  const claim = await startClaim()
  t.equal((await confirm(claim.claim_token, ['printers:read'])).status, 200)
  const tokens = await grant(claimGrant, { claim_token: claim.claim_token })
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, agent, oauth.None(), String(tokens['identity_assertion']), insecure))
  t.equal((await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 401, "the agent's access token is refused")
  await rfcError(t, grant(jwtBearer, { assertion: String(tokens['identity_assertion']) }), 'invalid_grant', 'its assertion renews nothing')
})

t.test('claim - an expired claim answers expired_token, is renewed by email, and then only that person confirms it', async (t) => {
  const claim = await startClaim({ type: 'cursor' })
  const early = await request(url, '/agent/identity/claim', { method: 'POST', body: { claim_token: claim.claim_token, email: 'someone@example.com' } })
  t.equal(early.status, 409)
  t.equal(early.json.error, 'claim_attempt_active')
  clock.forward(2_500)
  await rfcError(t, grant(claimGrant, { claim_token: claim.claim_token }), 'expired_token', 'an expired claim')
  t.equal((await confirm(claim.claim_token, ['printers:read'])).json.error, 'expired_token', 'cannot be confirmed once expired')
  t.equal((await request(url, `/v1/agent/identity/claim/inspect?claim_token=${claim.claim_token}`)).json.status, 'expired')

  const renewal = await request(url, '/agent/identity/claim', { method: 'POST', body: { claim_token: claim.claim_token, email: 'someone@example.com' } })
  t.equal(renewal.status, 200, renewal.text)
  t.equal(renewal.json.agent_id, claim.agent_id)
  t.not(renewal.json.claim_token, claim.claim_token)
  t.equal((await request(url, `/v1/agent/identity/claim/inspect?claim_token=${claim.claim_token}`)).status, 404, 'the old claim token is gone')
  const mismatch = await confirm(renewal.json.claim_token, ['printers:read'])
  t.equal(mismatch.status, 403)
  t.equal(mismatch.json.error, 'claim_email_mismatch')

  const unknown = await request(url, '/agent/identity/claim', { method: 'POST', body: { claim_token: 'pfct_' + 'x'.repeat(40), email: 'someone@example.com' } })
  t.equal(unknown.status, 404)
  t.equal(unknown.json.error, 'agent_claim_not_found')
})

t.test('claim - a person confirms only for an organization of theirs', async (t) => {
  const claim = await startClaim()
  const res = await confirm(claim.claim_token, ['printers:read'], admin.auth, '00000000-0000-4000-8000-000000000000')
  t.equal(res.status, 404)
  t.equal(res.json.error, 'organization_not_found')
  const anonymous = await request(url, '/v1/agent/identity/claim/confirm', { method: 'POST', body: { claim_token: claim.claim_token, organization_id: organizationId, scopes: ['printers:read'] } })
  t.equal(anonymous.status, 401, 'confirming needs a signed-in person')
})
