import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { normaliseAuthCode } from '../../../src/routes/auth-codes.js'
import { request, signIn } from '../../helpers/http.js'
import { whoamiRoute } from '../../helpers/routes.js'
import { startTestService, testAdmin } from '../../helpers/service.js'
import { raceBehindRowLock } from '../../helpers/barrier.js'
import { createHash } from 'node:crypto'

const svc = await startTestService(t, { AUTH_CODE_FAILURES_PER_SOURCE: '1000' }, { extraRoutes: [whoamiRoute('printers:write')] })
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const orgId: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id

const newCode = async (): Promise<string> => {
  const res = await request(url, '/v1/auth-codes', { method: 'POST' })
  if (res.status !== 200) throw new Error(`code: ${res.status} ${res.text}`)
  return res.json.code
}
const verify = (code: string, auth = admin.auth, extra: Record<string, unknown> = {}) =>
  request(url, '/v1/auth-codes/verify', { method: 'POST', headers: auth, body: { code, ...extra } })
const exchange = (code: string) => request(url, `/v1/auth-codes/verify/${encodeURIComponent(code)}`)

t.test('pairing - code, verify, exchange: the bridge gets a working key with the bridge scopes', async (t) => {
  const created = await request(url, '/v1/auth-codes', { method: 'POST', body: {} })
  t.equal(created.status, 200)
  t.match(created.json.code, /^[0-9A-HJKMNP-TV-Z]{5}-[0-9A-HJKMNP-TV-Z]{5}$/)
  const lifetime = Date.parse(created.json.expires_at) - Date.now()
  t.ok(lifetime > 9 * 60_000 && lifetime <= 10 * 60_000 + 5_000, 'valid about 10 minutes')

  const pending = await exchange(created.json.code)
  t.equal(pending.status, 400)
  t.same(pending.json, { error: 'auth_code_pending' }, 'exchange before verify: {error} only')

  // Typed the way a person types it: lower case, no hyphen.
  const verified = await verify(created.json.code.toLowerCase().replace('-', ''))
  t.equal(verified.status, 200)
  t.match(verified.json, { code: created.json.code, status: 'verified', used_at: null, used_by: null })
  t.type(verified.json.verified_at, 'string')
  t.type(verified.json.verified_by, 'string')

  const paired = await exchange(created.json.code)
  t.equal(paired.status, 200)
  t.match(paired.json, { organization_id: orgId, enabled: true, verified: true, expires_at: null })
  t.same([...paired.json.scopes].sort(), [...bridgeScopes].sort())
  for (const field of ['id', 'key', 'name', 'organization_id', 'created_at', 'expires_at', 'enabled', 'scopes', 'verified']) t.ok(field in paired.json, field)
  const asBridge = await request(url, '/test/whoami', { headers: { 'x-api-key': paired.json.key } })
  t.equal(asBridge.status, 200)
  t.equal(asBridge.json.organizationId, orgId)

  const twice = await exchange(created.json.code)
  t.equal(twice.status, 400)
  t.same(twice.json, { error: 'auth_code_used' })
  const reverify = await verify(created.json.code)
  t.equal(reverify.status, 400)
  t.same(reverify.json, { error: 'auth_code_used' })
  const [row] = await svc.services.db.sql`select status, api_key_id from auth_codes where id = ${verified.json.id}`
  t.same(row, { status: 'used', api_key_id: paired.json.id })
})

t.test('pairing - concurrent exchanges of one code: exactly one gets a key', async (t) => {
  const code = await newCode()
  await verify(code)
  const results = await Promise.all(Array.from({ length: 6 }, () => exchange(code)))
  t.equal(results.filter((r) => r.status === 200).length, 1)
  t.equal(results.filter((r) => r.status === 400 && r.json.error === 'auth_code_used').length, 5)
  const [keys] = await svc.services.db.sql`select count(*)::int as n from api_keys where name like ${'bridge ' + normaliseAuthCode(code)!.slice(0, 5) + '%'}`
  t.equal(keys?.['n'], 1, 'one key was created')
})

t.test('pairing - expired codes can be neither verified nor exchanged', async (t) => {
  const verifiedFirst = await newCode()
  await verify(verifiedFirst)
  const neverVerified = await newCode()
  await svc.services.db.sql`update auth_codes set expires_at = now() - interval '1 second' where status in ('pending', 'verified')`
  t.same((await exchange(verifiedFirst)).json, { error: 'auth_code_expired' })
  t.equal((await exchange(neverVerified)).status, 400)
  const late = await verify(neverVerified)
  t.equal(late.status, 400)
  t.same(late.json, { error: 'auth_code_expired' })
})

t.test('pairing - unknown and malformed codes are 404 {error}', async (t) => {
  for (const code of ['ZZZZZ-ZZZZZ', 'not a code', 'x']) {
    const res = await exchange(code)
    t.equal(res.status, 404, code)
    t.same(res.json, { error: 'auth_code_not_found' })
  }
  const res = await verify('ZZZZZ-ZZZZZ')
  t.equal(res.status, 404)
  t.same(res.json, { error: 'auth_code_not_found' })
})

t.test('pairing - codes are stored only as hashes', async (t) => {
  const code = await newCode()
  const rows = await svc.services.db.sql`select * from auth_codes`
  t.notMatch(JSON.stringify(rows), normaliseAuthCode(code)!)
})

t.test('pairing - verification needs a signed-in admin of the organization it pairs into', async (t) => {
  const code = await newCode()
  t.equal((await request(url, '/v1/auth-codes/verify', { method: 'POST', body: { code } })).status, 401)
  await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: admin.auth, body: { email: 'op@test.printfarm', password: 'operator-password', role: 'member' } })
  const member = await signIn(url, 'op@test.printfarm', 'operator-password')
  const byMember = await verify(code, member.auth)
  t.equal(byMember.status, 403)
  t.equal(byMember.json.error, 'ORG_ADMIN_REQUIRED')

  const second = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Annex' } })
  const ambiguous = await verify(code)
  t.equal(ambiguous.status, 400, 'an admin of two organizations names one')
  t.equal(ambiguous.json.error, 'organization_required')
  const foreign = await verify(code, member.auth, { organizationId: second.json.id })
  t.equal(foreign.status, 404, "another organization's id is not found")
  const chosen = await verify(code, admin.auth, { organizationId: second.json.id })
  t.equal(chosen.status, 200)
  const paired = await exchange(code)
  t.equal(paired.json.organization_id, second.json.id, 'the key belongs to the chosen organization')
})

t.test('pairing - bad bodies are 400 {error}', async (t) => {
  for (const body of ['{"x":1}', '[]']) {
    const res = await request(url, '/v1/auth-codes', { method: 'POST', body, headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400)
    t.same(res.json, { error: 'validation_failed' })
  }
  const res = await request(url, '/v1/auth-codes/verify', { method: 'POST', headers: admin.auth, body: { code: 'ABCDE-FGHJK', extra: true } })
  t.same(res.json, { error: 'validation_failed' })
  const long = await exchange('A'.repeat(40))
  t.same(long.json, { error: 'validation_failed' })
})

t.test('pairing - abuse limits: code generation, unknown codes and failed verifications per source; pending polls never', async (t) => {
  const strict = await startTestService(t, { AUTH_CODES_PER_ADDRESS: '3', AUTH_CODE_FAILURES_PER_SOURCE: '3' })
  const s = strict.url
  const codes: string[] = []
  for (let i = 0; i < 3; i++) codes.push((await request(s, '/v1/auth-codes', { method: 'POST' })).json.code)
  const fourth = await request(s, '/v1/auth-codes', { method: 'POST' })
  t.equal(fourth.status, 429)
  t.equal(fourth.json.error, 'rate_limited')
  t.ok(Number(fourth.headers['retry-after']) > 0)

  for (let i = 0; i < 10; i++) t.equal((await request(s, `/v1/auth-codes/verify/${codes[0]}`)).status, 400, `pending poll ${i} is answered`)

  for (let i = 0; i < 3; i++) t.equal((await request(s, `/v1/auth-codes/verify/ZZZZZ-ZZZZ${i}`)).status, 404)
  const guessed = await request(s, `/v1/auth-codes/verify/ZZZZZ-ZZZZZ`)
  t.equal(guessed.status, 429, 'unknown codes are limited per address')

  const strictAdmin = await signIn(s, testAdmin.email, testAdmin.password)
  for (let i = 0; i < 3; i++) {
    await request(s, '/v1/auth-codes/verify', { method: 'POST', headers: strictAdmin.auth, body: { code: `YYYYY-YYYY${i}` } })
  }
  const blocked = await request(s, '/v1/auth-codes/verify', { method: 'POST', headers: strictAdmin.auth, body: { code: codes[1] } })
  t.equal(blocked.status, 429, 'failed verifications are limited per user')
})

t.test('pairing - exchanges truly overlapping (held behind the code\'s row lock): exactly one key', { skip: !svc.config.databaseUrl && 'needs a second connection to PostgreSQL' }, async (t) => {
  const code = await newCode()
  // By now the admin belongs to two organizations: name the one the bridge joins.
  t.equal((await verify(code, admin.auth, { organizationId: orgId })).status, 200)
  const hash = createHash('sha256').update(normaliseAuthCode(code)!).digest()
  const results = await raceBehindRowLock({
    databaseUrl: svc.config.databaseUrl!,
    schema: svc.config.databaseSchema,
    lock: (tx) => tx`select 1 from auth_codes where code_hash = ${hash} for update`,
    racers: 4,
    start: () => exchange(code),
  })
  const seen = results.map((r) => `${r.status} ${r.json?.error ?? ''}`)
  t.equal(results.filter((r) => r.status === 200).length, 1, seen.join('; '))
  t.equal(results.filter((r) => r.json?.error === 'auth_code_used').length, 3, seen.join('; '))
})
