import t from 'tap'
import { createLocalJWKSet, decodeProtectedHeader, generateKeyPair, jwtVerify, SignJWT } from 'jose'
import { loadConfig } from '../../../src/node/config.js'
import { startService } from '../../../src/node/service.js'
import { request, signIn } from '../../helpers/http.js'
import { captureLogger, startTestService, testAdmin, testEnv } from '../../helpers/service.js'
import { raceBehindRowLock } from '../../helpers/barrier.js'
import { hashSecret } from '../../../src/auth/sessions.js'
import { ForwardClock } from '../../helpers/clock.js'

const clock = new ForwardClock()
const svc = await startTestService(t, { LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURES_PER_ADDRESS: '1000' }, { clock })
const url = svc.url

t.test('bootstrap - the first start creates one organization and its admin from PRINTFARM_ADMIN_*', async (t) => {
  t.same(svc.bootstrap, { email: testAdmin.email, generatedPassword: undefined }, 'the given password is not echoed')
  const { auth } = await signIn(url, testAdmin.email, testAdmin.password)
  const me = await request(url, '/v1/me', { headers: auth })
  t.equal(me.status, 200)
  t.equal(me.json.user.email, testAdmin.email)
  t.equal(me.json.organizations.length, 1)
  t.equal(me.json.organizations[0].role, 'admin')
})

t.test('bootstrap - without PRINTFARM_ADMIN_PASSWORD a password is generated, works, and is stored only as a hash', async (t) => {
  const { logger } = captureLogger()
  const fresh = await startService(loadConfig(testEnv(t, { PRINTFARM_ADMIN_EMAIL: undefined, PRINTFARM_ADMIN_PASSWORD: undefined })), { logger })
  t.teardown(() => fresh.stop())
  const generated = fresh.bootstrap?.generatedPassword
  t.type(generated, 'string')
  t.ok((generated ?? '').length >= 20)
  t.equal(fresh.bootstrap?.email, 'admin@printfarm.local')
  await signIn(fresh.url, 'admin@printfarm.local', generated!)
  const [row] = await fresh.services.db.sql<{ password_hash: string }[]>`select password_hash from users`
  t.match(row?.password_hash, /^scrypt\$/)
  t.notMatch(row?.password_hash, generated!)
})

t.test('bootstrap - a second node on the same database creates nobody', { skip: !svc.config.databaseUrl && 'one embedded database cannot be shared by two nodes' }, async (t) => {
  const second = await startService({ ...svc.config, port: 0 }, { logger: captureLogger().logger })
  t.teardown(() => second.stop())
  t.equal(second.bootstrap, undefined, 'the second start created no admin')
  const [row] = await svc.services.db.sql<{ n: number }[]>`select count(*)::int as n from users`
  t.equal(row?.n, 1)
})

t.test('login - wrong password and unknown email get the same 401 invalid_credentials', async (t) => {
  const wrong = await request(url, '/v1/auth/login', { method: 'POST', body: { email: testAdmin.email, password: 'not-the-password' } })
  const unknown = await request(url, '/v1/auth/login', { method: 'POST', body: { email: 'nobody@test.printfarm', password: 'not-the-password' } })
  for (const res of [wrong, unknown]) {
    t.equal(res.status, 401)
    t.equal(res.json.error, 'invalid_credentials')
  }
  t.equal(wrong.json.message, unknown.json.message, 'nothing tells which emails exist')
})

t.test('login - the email is case-insensitive', async (t) => {
  const res = await request(url, '/v1/auth/login', { method: 'POST', body: { email: testAdmin.email.toUpperCase(), password: testAdmin.password } })
  t.equal(res.status, 200)
})

t.test('login - bad bodies are 400 with the field named', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{ email: testAdmin.email }, /required field 'password'/],
    [{ password: 'x' }, /required field 'email'/],
    [{ email: 'not-an-email', password: 'x' }, /body\.email must match format "email"/],
    [{ email: testAdmin.email, password: 'x', remember: true }, /unknown field 'remember'/],
    [{ email: testAdmin.email, password: 'x'.repeat(201) }, /body\.password must NOT have more than 200 characters/],
    [{ email: testAdmin.email, password: 12345 }, /body\.password must be string/],
  ]
  for (const [body, message] of cases) {
    const res = await request(url, '/v1/auth/login', { method: 'POST', body })
    t.equal(res.status, 400, JSON.stringify(body))
    t.match(res.json.message, message)
  }
})

t.test('tokens - the access token is an ES256 JWT verifiable with the published JWKS', async (t) => {
  const { access } = await signIn(url, testAdmin.email, testAdmin.password)
  const jwks = await request(url, '/.well-known/jwks.json')
  t.equal(jwks.status, 200)
  t.ok(jwks.json.keys.length >= 1)
  for (const key of jwks.json.keys) t.notOk('d' in key, 'no private key material is published')
  const header = decodeProtectedHeader(access)
  t.equal(header.alg, 'ES256')
  t.equal(header.typ, 'at+jwt')
  t.ok(jwks.json.keys.some((k: { kid: string }) => k.kid === header.kid), 'kid names a published key')
  const { payload } = await jwtVerify(access, createLocalJWKSet(jwks.json), { issuer: svc.config.publicBaseUrl })
  t.equal(typeof payload.sub, 'string')
  t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 900, '15 minutes')
})

t.test('tokens - missing, malformed, forged and expired tokens are refused with 401', async (t) => {
  const none = await request(url, '/v1/me')
  t.equal(none.status, 401)
  t.equal(none.json.error, 'unauthorized')
  for (const header of ['Bearer', 'Basic abc', 'Bearer not.a.jwt', 'Bearer ' + 'a'.repeat(5000)]) {
    const res = await request(url, '/v1/me', { headers: { authorization: header } })
    t.equal(res.status, 401, header.slice(0, 20))
    t.equal(res.json.error, 'unauthorized')
  }
  const { access } = await signIn(url, testAdmin.email, testAdmin.password)
  const [h, p, s] = access.split('.')
  const tampered = `${h}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), sub: '00000000-0000-4000-8000-000000000000' })).toString('base64url')}.${s}`
  t.equal((await request(url, '/v1/me', { headers: { authorization: `Bearer ${tampered}` } })).status, 401, 'a changed payload breaks the signature')

  const { privateKey } = await generateKeyPair('ES256')
  const claims = { token_use: 'session' }
  const forged = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: decodeProtectedHeader(access).kid!, typ: 'at+jwt' })
    .setIssuer(svc.config.publicBaseUrl).setAudience(`${svc.config.publicBaseUrl}/v1`).setSubject('x').setJti('j').setIssuedAt().setExpirationTime('5m')
    .sign(privateKey)
  t.equal((await request(url, '/v1/me', { headers: { authorization: `Bearer ${forged}` } })).status, 401, 'signed by a key that is not ours')

  const { kid, key } = svc.services.keyring.signingKey()
  const expired = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
    .setIssuer(svc.config.publicBaseUrl).setAudience(`${svc.config.publicBaseUrl}/v1`).setSubject('x').setJti('j')
    .setIssuedAt(Math.floor(Date.now() / 1000) - 3600).setExpirationTime(Math.floor(Date.now() / 1000) - 60)
    .sign(key)
  const res = await request(url, '/v1/me', { headers: { authorization: `Bearer ${expired}` } })
  t.equal(res.status, 401)
  t.equal(res.json.error, 'token_expired')

  const wrongType = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
    .setIssuer(svc.config.publicBaseUrl).setAudience(`${svc.config.publicBaseUrl}/v1`).setSubject('x').setJti('j').setIssuedAt().setExpirationTime('5m')
    .sign(key)
  t.equal((await request(url, '/v1/me', { headers: { authorization: `Bearer ${wrongType}` } })).status, 401, 'only at+jwt tokens are access tokens')
})

t.test('tokens - a token accepted before (its check remembered) is refused with token_expired once its expiry passes', async (t) => {
  const { auth } = await signIn(url, testAdmin.email, testAdmin.password)
  const userId: string = (await request(url, '/v1/me', { headers: auth })).json.user.id
  const { kid, key } = svc.services.keyring.signingKey()
  const expiresAt = Math.floor(clock.now() / 1000) + 2
  const shortLived = await new SignJWT({ token_use: 'session' })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
    .setIssuer(svc.config.publicBaseUrl).setAudience(`${svc.config.publicBaseUrl}/v1`).setSubject(userId).setJti('short')
    .setIssuedAt().setExpirationTime(expiresAt)
    .sign(key)
  const headers = { authorization: `Bearer ${shortLived}` }
  t.equal((await request(url, '/v1/me', { headers })).status, 200, 'checked')
  t.equal((await request(url, '/v1/me', { headers })).status, 200, 'remembered')
  const [head, payload, signature] = shortLived.split('.')
  const otherSignature = `${head}.${payload}.${signature!.slice(0, -2)}${signature!.endsWith('AA') ? 'BB' : 'AA'}`
  t.equal((await request(url, '/v1/me', { headers: { authorization: `Bearer ${otherSignature}` } })).status, 401, 'the same claims with another signature are checked, not remembered')
  // The node's time moves past the expiry second.
  clock.forward(3_000)
  const late = await request(url, '/v1/me', { headers })
  t.equal(late.status, 401)
  t.equal(late.json.error, 'token_expired')
})

t.test('refresh - a refresh token is single use and rotates', async (t) => {
  const first = await signIn(url, testAdmin.email, testAdmin.password)
  const res = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: first.refresh } })
  t.equal(res.status, 200)
  t.equal(res.json.token_type, 'Bearer')
  t.not(res.json.refresh_token, first.refresh)
  t.equal((await request(url, '/v1/me', { headers: { authorization: `Bearer ${res.json.access_token}` } })).status, 200)
})

t.test('refresh - reuse of a rotated token revokes the whole sign-in', async (t) => {
  const first = await signIn(url, testAdmin.email, testAdmin.password)
  const second = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: first.refresh } })
  t.equal(second.status, 200)
  const replay = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: first.refresh } })
  t.equal(replay.status, 401)
  t.equal(replay.json.error, 'refresh_token_reused')
  const descendant = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: second.json.refresh_token } })
  t.equal(descendant.status, 401, 'the token issued by the legitimate refresh is revoked too')
  t.equal(descendant.json.error, 'refresh_token_invalid')
  const other = await signIn(url, testAdmin.email, testAdmin.password)
  t.equal((await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: other.refresh } })).status, 200, 'other sign-ins are untouched')
})

t.test('refresh - two concurrent refreshes of one token: exactly one succeeds', async (t) => {
  const { refresh } = await signIn(url, testAdmin.email, testAdmin.password)
  const results = await Promise.all([0, 1, 2].map(() => request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: refresh } })))
  t.equal(results.filter((r) => r.status === 200).length, 1)
  t.equal(results.filter((r) => r.status === 401).length, 2)
})

t.test('refresh - unknown tokens and bad bodies are refused', async (t) => {
  const unknown = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: 'pfr_nothing' } })
  t.equal(unknown.status, 401)
  t.equal(unknown.json.error, 'refresh_token_invalid')
  t.equal((await request(url, '/v1/auth/refresh', { method: 'POST', body: {} })).status, 400)
  t.equal((await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: '' } })).status, 400)
})

t.test('logout - the refresh token stops working; logging out twice is fine', async (t) => {
  const { refresh } = await signIn(url, testAdmin.email, testAdmin.password)
  t.equal((await request(url, '/v1/auth/logout', { method: 'POST', body: { refresh_token: refresh } })).status, 204)
  t.equal((await request(url, '/v1/auth/logout', { method: 'POST', body: { refresh_token: refresh } })).status, 204)
  const after = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: refresh } })
  t.equal(after.status, 401)
})

t.test('rate limits - failed sign-ins lock the account for the window, even for the right password', async (t) => {
  const email = 'limited@test.printfarm'
  const { auth } = await signIn(url, testAdmin.email, testAdmin.password)
  const me = await request(url, '/v1/me', { headers: auth })
  const orgId = me.json.organizations[0].id
  await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: auth, body: { email, password: 'limited-password-1', role: 'member' } })
  for (let i = 0; i < 3; i++) {
    t.equal((await request(url, '/v1/auth/login', { method: 'POST', body: { email, password: `wrong-${i}` } })).status, 401)
  }
  const blocked = await request(url, '/v1/auth/login', { method: 'POST', body: { email, password: 'limited-password-1' } })
  t.equal(blocked.status, 429)
  t.equal(blocked.json.error, 'rate_limited')
  t.ok(Number(blocked.headers['retry-after']) > 0, 'Retry-After says how long')
  t.equal((await request(url, '/v1/auth/login', { method: 'POST', body: { email: testAdmin.email, password: testAdmin.password } })).status, 200, 'other accounts are unaffected')
  const locks = svc.logs.filter((l) => l['msg'] === 'sign-ins locked after repeated failures' && l['account'] === email)
  t.equal(locks.length, 1, 'the lock is logged once, for an operator to find')
  t.match(locks[0], { level: 'warn', budget: 'account at address', address: String, retryAfterSeconds: Number })
})

t.test('rate limits - many successful sign-ins from one address are never limited', async (t) => {
  const strict = await startTestService(t, { LOGIN_FAILURES_PER_ACCOUNT: '2', LOGIN_FAILURES_PER_ADDRESS: '2' })
  for (let i = 0; i < 12; i++) await signIn(strict.url, testAdmin.email, testAdmin.password)
  t.pass('12 sign-ins in a row from one address')
  for (let i = 0; i < 2; i++) await request(strict.url, '/v1/auth/login', { method: 'POST', body: { email: `x${i}@test.printfarm`, password: 'nope' } })
  const blocked = await request(strict.url, '/v1/auth/login', { method: 'POST', body: { email: 'y@test.printfarm', password: 'nope' } })
  t.equal(blocked.status, 429, 'failures from one address across accounts are limited too')
})

t.test('rate limits - parallel wrong passwords cannot slip past the limit', async (t) => {
  const strict = await startTestService(t, { LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURES_PER_ADDRESS: '1000' })
  const attempts = await Promise.all(
    Array.from({ length: 20 }, (_, i) => request(strict.url, '/v1/auth/login', { method: 'POST', body: { email: testAdmin.email, password: `wrong-${i}` } })),
  )
  const checked = attempts.filter((r) => r.status === 401).length
  t.ok(checked <= 3, `${checked} passwords were checked; the limit is 3`)
  t.equal(attempts.filter((r) => r.status === 429).length, 20 - checked)
})

t.test('refresh - racers truly overlapping on one token (held behind its row lock): exactly one wins', { skip: !svc.config.databaseUrl && 'needs a second connection to PostgreSQL' }, async (t) => {
  const { refresh } = await signIn(url, testAdmin.email, testAdmin.password)
  const results = await raceBehindRowLock({
    databaseUrl: svc.config.databaseUrl!,
    schema: svc.config.databaseSchema,
    lock: (tx) => tx`select 1 from refresh_tokens where token_hash = ${hashSecret(refresh)} for update`,
    racers: 3,
    start: () => request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: refresh } }),
  })
  t.equal(results.filter((r) => r.status === 200).length, 1)
})
