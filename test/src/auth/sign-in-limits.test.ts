/**
 * Sign-in budgets per account and address, behind a reverse proxy (TRUSTED_PROXIES), and the
 * password hash's cost raised on sign-in (PASSWORD_HASH_COST):
 * - a stranger's failures lock the account only for the stranger's address; its owner signs in
 *   from another address, until the slower account-wide budget is spent;
 * - X-Forwarded-For is believed only from a configured proxy, right-most untrusted entry first;
 * - a sign-in whose stored hash is cheaper than the setting stores a new one at the setting.
 * Loopback is the proxy here: every request comes from 127.0.0.1.
 */
import t from 'tap'
import { TrustedProxies, trustedProxyProblems } from '../../../src/http/client-address.js'
import { hashPassword, setPasswordCost } from '../../../src/auth/passwords.js'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

t.test('client address - only a trusted proxy\'s X-Forwarded-For is believed, its right-most untrusted entry', async (t) => {
  const proxies = new TrustedProxies(['10.0.0.5', '192.168.0.0/16', '::1'])
  t.equal(proxies.clientOf('10.0.0.5', '203.0.113.9'), '203.0.113.9', 'one proxy')
  t.equal(proxies.clientOf('10.0.0.5', '198.51.100.1, 203.0.113.9, 192.168.4.4'), '203.0.113.9', 'two proxies: the entry the first untrusted hop wrote')
  t.equal(proxies.clientOf('10.0.0.5', '6.6.6.6, 203.0.113.9'), '203.0.113.9', 'what the client wrote itself (left) is not believed')
  t.equal(proxies.clientOf('198.51.100.7', '203.0.113.9'), '198.51.100.7', 'a client that is no proxy cannot name another address')
  t.equal(proxies.clientOf('10.0.0.5', undefined), '10.0.0.5', 'no header: the proxy itself')
  t.equal(proxies.clientOf('10.0.0.5', '192.168.1.1'), '10.0.0.5', 'only proxies in the chain: the connection')
  t.equal(proxies.clientOf('10.0.0.5', 'unknown, 203.0.113.9'), '203.0.113.9')
  t.equal(proxies.clientOf('10.0.0.5', '203.0.113.9, unknown'), '10.0.0.5', 'a hop that is no address stops the walk')
  t.equal(proxies.clientOf('::ffff:10.0.0.5', '::ffff:203.0.113.9'), '203.0.113.9', 'IPv4 on a dual-stack socket')
  t.equal(proxies.clientOf('::1', '2001:db8::1'), '2001:db8::1', 'IPv6')
  t.equal(new TrustedProxies([]).clientOf('10.0.0.5', '203.0.113.9'), '10.0.0.5', 'none configured: headers are ignored')
  t.same(trustedProxyProblems(['10.0.0.1', '10.0.0.0/8', '2001:db8::/32']), [])
  t.equal(trustedProxyProblems(['proxy.local', '10.0.0.0/33', '1.2.3.4/8/9', '::1/129']).length, 4, 'names, bad prefixes and extra parts are refused')
})

t.test('start - a TRUSTED_PROXIES entry that is no address is a start-up error naming it', async (t) => {
  await t.rejects(startTestService(t, { TRUSTED_PROXIES: '10.0.0.1, proxy.local' }), /TRUSTED_PROXIES: 'proxy.local'/)
})

t.test("sign-in limits - a stranger's failures lock the account at the stranger's address only; its owner signs in from another until the account-wide budget is spent", async (t) => {
  const svc = await startTestService(t, { TRUSTED_PROXIES: '127.0.0.1', LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURES_PER_ADDRESS: '6' })
  const from = (address: string) => ({ 'x-forwarded-for': address })
  const login = (address: string, password: string) => request(svc.url, '/v1/auth/login', { method: 'POST', headers: from(address), body: { email: testAdmin.email, password } })
  for (let i = 0; i < 3; i++) t.equal((await login('203.0.113.66', `guess-${i}`)).status, 401)
  t.equal((await login('203.0.113.66', testAdmin.password)).status, 429, 'the stranger is locked out')
  t.equal((await login('198.51.100.10, 203.0.113.66', testAdmin.password)).status, 429, 'and cannot escape by writing another address left of its own')
  t.equal((await login('198.51.100.10', testAdmin.password)).status, 200, 'the owner, from the office, is not')
  // Another stranger address, and another: the account-wide budget (6) is the slower one.
  for (let i = 0; i < 3; i++) await login('203.0.113.67', `guess-${i}`)
  const office = await login('198.51.100.10', testAdmin.password)
  t.equal(office.status, 429, 'six failures from anywhere lock the account for the window')
  t.equal(office.json.error, 'rate_limited')
})

t.test('sign-in limits - without TRUSTED_PROXIES a made-up X-Forwarded-For escapes nothing', async (t) => {
  const svc = await startTestService(t, { LOGIN_FAILURES_PER_ACCOUNT: '2', LOGIN_FAILURES_PER_ADDRESS: '1000' })
  for (let i = 0; i < 2; i++) await request(svc.url, '/v1/auth/login', { method: 'POST', headers: { 'x-forwarded-for': `203.0.113.${i}` }, body: { email: testAdmin.email, password: 'wrong' } })
  const blocked = await request(svc.url, '/v1/auth/login', { method: 'POST', headers: { 'x-forwarded-for': '203.0.113.200' }, body: { email: testAdmin.email, password: testAdmin.password } })
  t.equal(blocked.status, 429, 'every request is the connection\'s: one address')
})

t.test('password cost - a sign-in with a hash cheaper than PASSWORD_HASH_COST stores one at the setting; the password still works', async (t) => {
  const svc = await startTestService(t, { PASSWORD_HASH_COST: '16' })
  t.teardown(() => setPasswordCost(15))
  const sql = svc.services.db.sql
  setPasswordCost(15)
  const cheap = await hashPassword(testAdmin.password)
  setPasswordCost(16)
  await sql`update users set password_hash = ${cheap} where email = ${testAdmin.email.toLowerCase()}`
  await signIn(svc.url, testAdmin.email, testAdmin.password)
  const [row] = await sql<{ password_hash: string }[]>`select password_hash from users where email = ${testAdmin.email.toLowerCase()}`
  t.match(row?.password_hash, /^scrypt\$16\$8\$1\$/, 'rehashed at the setting')
  await signIn(svc.url, testAdmin.email, testAdmin.password)
  t.pass('the new hash verifies')
})
