import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'
import postgres from 'postgres'
import { hashSecret } from '../../../src/auth/sessions.js'

const svc = await startTestService(t, { LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURES_PER_ADDRESS: '1000' })
const url = svc.url

async function addMember(email: string, password: string): Promise<void> {
  const admin = await signIn(url, testAdmin.email, testAdmin.password)
  const orgs = await request(url, '/v1/me', { headers: admin.auth })
  const org = orgs.json.organizations[0].id as string
  const res = await request(url, `/v1/organizations/${org}/members`, { method: 'POST', headers: admin.auth, body: { email, password, role: 'member' } })
  if (res.status !== 200 && res.status !== 201) throw new Error(`adding ${email}: ${res.status} ${res.text}`)
}

const change = (auth: Record<string, string>, body: unknown) => request(url, '/v1/me/password', { method: 'PATCH', headers: auth, body })

t.test('me/password - changes the password, answers a new sign-in, and ends every other sign-in', async (t) => {
  await addMember('changer@test.printfarm', 'first-password-123')
  const other = await signIn(url, 'changer@test.printfarm', 'first-password-123')
  const mine = await signIn(url, 'changer@test.printfarm', 'first-password-123')
  const res = await change(mine.auth, { current_password: 'first-password-123', new_password: 'second-password-456' })
  t.equal(res.status, 200, res.text)
  t.type(res.json.access_token, 'string')
  t.type(res.json.refresh_token, 'string')
  const stale = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: other.refresh } })
  t.equal(stale.json.error, 'refresh_token_invalid', "another device's sign-in has ended")
  const fresh = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: res.json.refresh_token } })
  t.equal(fresh.status, 200, 'the sign-in the answer carries works')
  const old = await request(url, '/v1/auth/login', { method: 'POST', body: { email: 'changer@test.printfarm', password: 'first-password-123' } })
  t.equal(old.json.error, 'invalid_credentials')
  await signIn(url, 'changer@test.printfarm', 'second-password-456')
})

t.test('me/password - a wrong current password is 401 and counts toward the sign-in limit (429 after it)', async (t) => {
  await addMember('guesser@test.printfarm', 'guess-me-password-1')
  const { auth } = await signIn(url, 'guesser@test.printfarm', 'guess-me-password-1')
  for (let i = 0; i < 3; i++) {
    const res = await change(auth, { current_password: `wrong-${i}`, new_password: 'whatever-password-9' })
    t.equal(res.status, 401)
    t.equal(res.json.error, 'invalid_credentials')
  }
  const limited = await change(auth, { current_password: 'guess-me-password-1', new_password: 'whatever-password-9' })
  t.equal(limited.status, 429)
  t.equal(limited.json.error, 'rate_limited')
  t.ok(limited.headers['retry-after'])
})

t.test('me/password - bad bodies are 400: too short, unchanged, unknown field; API keys cannot use it', async (t) => {
  await addMember('shape@test.printfarm', 'shape-password-12')
  const { auth } = await signIn(url, 'shape@test.printfarm', 'shape-password-12')
  const short = await change(auth, { current_password: 'shape-password-12', new_password: 'short' })
  t.equal(short.status, 400)
  t.match(short.json.message, /new_password/)
  const same = await change(auth, { current_password: 'shape-password-12', new_password: 'shape-password-12' })
  t.equal(same.status, 400)
  t.match(same.json.message, /is the current password/)
  const extra = await change(auth, { current_password: 'shape-password-12', new_password: 'another-password-1', admin: true })
  t.equal(extra.status, 400)
  const key = await request(url, '/v1/me/password', { method: 'PATCH', headers: { 'x-api-key': 'pf_live_nope' }, body: { current_password: 'a', new_password: 'another-password-1' } })
  t.equal(key.status, 403)
  t.equal(key.json.error, 'session_required')
})

t.test('auth - an API key sent as a bearer token is told to use x-api-key', async (t) => {
  const admin = await signIn(url, testAdmin.email, testAdmin.password)
  const created = await request(url, '/v1/api-keys', { method: 'POST', headers: admin.auth, body: { name: 'script', scopes: ['printers:read'] } })
  t.equal(created.status, 200, created.text)
  const res = await request(url, '/v1/printer-config', { headers: { authorization: `Bearer ${created.json.key}` } })
  t.equal(res.status, 401)
  t.match(res.json.message, /x-api-key/)
  t.equal((await request(url, '/v1/printer-config', { headers: { 'x-api-key': created.json.key } })).status, 200, 'the same key in x-api-key works')
})

t.test('me/password - a refresh in flight during the change cannot outlive it: the token it writes is revoked too', { skip: !svc.config.databaseUrl && 'needs a second connection to PostgreSQL' }, async (t) => {
  await addMember('racer@test.printfarm', 'racer-password-123')
  const session = await signIn(url, 'racer@test.printfarm', 'racer-password-123')
  // A real refresh is paused mid-way: a side transaction holds its token's row, so the refresh waits there,
  // after it has taken whatever it takes before the token. The password change then comes in behind it.
  const holder = postgres(svc.config.databaseUrl!, { max: 2, onnotice: () => undefined, connection: { search_path: svc.config.databaseSchema } })
  t.teardown(() => holder.end())
  const waiting = async (n: number): Promise<void> => {
    for (let i = 0; i < 5000; i++) {
      const [row] = await holder`select count(*)::int as n from pg_locks where not granted`
      if ((row?.['n'] as number) >= n) return
      await new Promise((r) => setImmediate(r))
    }
    throw new Error(`fewer than ${n} requests ever waited on a lock`)
  }
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => (release = resolve))
  let held: () => void = () => undefined
  const isHeld = new Promise<void>((resolve) => (held = resolve))
  const holding = holder.begin(async (tx) => {
    await tx`select 1 from refresh_tokens where token_hash = ${hashSecret(session.refresh)} for update`
    held()
    await released
  })
  await isHeld
  const refreshing = request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: session.refresh } })
  await waiting(1)
  const changing = change(session.auth, { current_password: 'racer-password-123', new_password: 'racer-password-456' })
  await waiting(2)
  release()
  await holding
  const [refreshed, changed] = await Promise.all([refreshing, changing])
  t.equal(changed.status, 200, changed.text)
  t.equal(refreshed.status, 200, 'the refresh that began first completed')
  const again = await request(url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: refreshed.json.refresh_token } })
  t.equal(again.status, 401, 'but the token it was given died with the password change')
  t.equal(again.json.error, 'refresh_token_invalid')
})
