import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const farmId: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id

async function addMember(orgId: string, auth: Record<string, string>, body: Record<string, unknown>) {
  return request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: auth, body })
}

t.test('organizations - a signed-in person creates one and becomes its admin', async (t) => {
  const res = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Second farm' } })
  t.equal(res.status, 201)
  t.equal(res.json.name, 'Second farm')
  t.equal(res.json.role, 'admin')
  const list = await request(url, '/v1/organizations', { headers: admin.auth })
  t.ok(list.json.organizations.some((o: { id: string; role: string }) => o.id === res.json.id && o.role === 'admin'))
})

t.test('organizations - every route needs a signed-in caller', async (t) => {
  for (const [method, path] of [
    ['POST', '/v1/organizations'],
    ['GET', '/v1/organizations'],
    ['POST', `/v1/organizations/${farmId}/members`],
    ['GET', `/v1/organizations/${farmId}/members`],
    ['DELETE', `/v1/organizations/${farmId}/members/${farmId}`],
  ] as const) {
    const res = await request(url, path, { method, body: method === 'POST' ? { name: 'x' } : undefined })
    t.equal(res.status, 401, `${method} ${path}`)
  }
})

t.test('members - an admin adds a new account, which can then sign in as a member', async (t) => {
  const res = await addMember(farmId, admin.auth, { email: 'Operator@Test.Printfarm', password: 'operator-password-1', role: 'member' })
  t.equal(res.status, 200)
  t.equal(res.json.role, 'member')
  t.equal(res.json.email, 'Operator@Test.Printfarm')
  const operator = await signIn(url, 'operator@test.printfarm', 'operator-password-1')
  const me = await request(url, '/v1/me', { headers: operator.auth })
  t.same(me.json.organizations.map((o: { id: string; role: string }) => [o.id, o.role]), [[farmId, 'member']])
  const members = await request(url, `/v1/organizations/${farmId}/members`, { headers: admin.auth })
  t.ok(members.json.members.some((m: { email: string; role: string }) => m.email === 'Operator@Test.Printfarm' && m.role === 'member'))
  const asMember = await request(url, `/v1/organizations/${farmId}/members`, { headers: operator.auth })
  t.equal(asMember.status, 403, 'the member list is for admins')
  t.equal(asMember.json.error, 'ORG_ADMIN_REQUIRED')
})

t.test('members - a member may not change the organization: 403 ORG_ADMIN_REQUIRED', async (t) => {
  await addMember(farmId, admin.auth, { email: 'viewer@test.printfarm', password: 'viewer-password-1', role: 'member' })
  const viewer = await signIn(url, 'viewer@test.printfarm', 'viewer-password-1')
  const add = await addMember(farmId, viewer.auth, { email: 'friend@test.printfarm', password: 'friend-password-1', role: 'admin' })
  t.equal(add.status, 403)
  t.equal(add.json.error, 'ORG_ADMIN_REQUIRED')
  const adminId = (await request(url, '/v1/me', { headers: admin.auth })).json.user.id
  const remove = await request(url, `/v1/organizations/${farmId}/members/${adminId}`, { method: 'DELETE', headers: viewer.auth })
  t.equal(remove.status, 403)
  const [row] = await svc.services.db.sql`select count(*)::int as n from users where email_key = 'friend@test.printfarm'`
  t.equal(row?.['n'], 0, 'nothing was written')
})

t.test('isolation - another organization is invisible: its id answers 404 like a missing one', async (t) => {
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Private farm' } })
  const privateId = other.json.id
  await addMember(privateId, admin.auth, { email: 'private@test.printfarm', password: 'private-password-1', role: 'admin' })
  await addMember(farmId, admin.auth, { email: 'outsider@test.printfarm', password: 'outsider-password-1', role: 'admin' })
  const outsider = await signIn(url, 'outsider@test.printfarm', 'outsider-password-1')

  const missing = '00000000-0000-4000-8000-000000000000'
  for (const id of [privateId, missing]) {
    const list = await request(url, `/v1/organizations/${id}/members`, { headers: outsider.auth })
    t.equal(list.status, 404)
    t.equal(list.json.error, 'organization_not_found')
    t.notMatch(list.text, /private@test/, 'no member leaks')
    const add = await addMember(id, outsider.auth, { email: 'spy@test.printfarm', password: 'spy-password-123', role: 'admin' })
    t.equal(add.status, 404, 'an outsider admin cannot add to another organization')
    const del = await request(url, `/v1/organizations/${id}/members/${missing}`, { method: 'DELETE', headers: outsider.auth })
    t.equal(del.status, 404)
  }
  const listed = await request(url, '/v1/organizations', { headers: outsider.auth })
  t.notOk(listed.json.organizations.some((o: { id: string }) => o.id === privateId))
  const [spy] = await svc.services.db.sql`select count(*)::int as n from users where email_key = 'spy@test.printfarm'`
  t.equal(spy?.['n'], 0)
})

t.test('members - an existing account is added without a password; with one it is refused', async (t) => {
  const second = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Third farm' } })
  const withPassword = await addMember(second.json.id, admin.auth, { email: 'operator@test.printfarm', password: 'another-password', role: 'member' })
  t.equal(withPassword.status, 409)
  t.equal(withPassword.json.error, 'user_exists')
  const added = await addMember(second.json.id, admin.auth, { email: 'operator@test.printfarm', role: 'member' })
  t.equal(added.status, 200)
  await signIn(url, 'operator@test.printfarm', 'operator-password-1').then(() => t.pass('the password is unchanged'))
  const promoted = await addMember(second.json.id, admin.auth, { email: 'operator@test.printfarm', role: 'admin' })
  t.equal(promoted.json.role, 'admin', 'adding again changes the role')
  const newWithout = await addMember(second.json.id, admin.auth, { email: 'fresh@test.printfarm', role: 'member' })
  t.equal(newWithout.status, 400)
  t.equal(newWithout.json.error, 'password_required')
})

t.test('members - the last admin cannot be removed; others can', async (t) => {
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Solo farm' } })
  const orgId = org.json.id
  const adminId = (await request(url, '/v1/me', { headers: admin.auth })).json.user.id
  const last = await request(url, `/v1/organizations/${orgId}/members/${adminId}`, { method: 'DELETE', headers: admin.auth })
  t.equal(last.status, 409)
  t.equal(last.json.error, 'last_admin')
  const helper = await addMember(orgId, admin.auth, { email: 'helper@test.printfarm', password: 'helper-password-1', role: 'member' })
  const removed = await request(url, `/v1/organizations/${orgId}/members/${helper.json.userId}`, { method: 'DELETE', headers: admin.auth })
  t.equal(removed.status, 204)
  const again = await request(url, `/v1/organizations/${orgId}/members/${helper.json.userId}`, { method: 'DELETE', headers: admin.auth })
  t.equal(again.status, 404)
  t.equal(again.json.error, 'member_not_found')
})

t.test('members - two admins removing each other at once leave one admin', async (t) => {
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Duo farm' } })
  const orgId = org.json.id
  const adminId = (await request(url, '/v1/me', { headers: admin.auth })).json.user.id
  const other = await addMember(orgId, admin.auth, { email: 'coadmin@test.printfarm', password: 'coadmin-password-1', role: 'admin' })
  const coadmin = await signIn(url, 'coadmin@test.printfarm', 'coadmin-password-1')
  const results = await Promise.all([
    request(url, `/v1/organizations/${orgId}/members/${other.json.userId}`, { method: 'DELETE', headers: admin.auth }),
    request(url, `/v1/organizations/${orgId}/members/${adminId}`, { method: 'DELETE', headers: coadmin.auth }),
  ])
  const statuses = results.map((r) => r.status).sort((a, b) => a - b)
  t.equal(statuses.filter((s) => s === 204).length, 1, 'one removal wins')
  // The other is refused: 409 last_admin if it got that far, or 404 when its caller had already been removed.
  t.ok(statuses.some((s) => s === 409 || s === 404), `the other is refused (${statuses.join(', ')})`)
  const [row] = await svc.services.db.sql`select count(*)::int as n from memberships where organization_id = ${orgId} and role = 'admin'`
  t.equal(row?.['n'], 1)
})

t.test('bad input - each route answers 400 naming the field', async (t) => {
  const cases: [string, string, unknown, RegExp][] = [
    ['POST', '/v1/organizations', {}, /required field 'name'/],
    ['POST', '/v1/organizations', { name: '' }, /body\.name must NOT have fewer than 1/],
    ['POST', '/v1/organizations', { name: 'x'.repeat(201) }, /body\.name must NOT have more than 200/],
    ['POST', '/v1/organizations', { name: 'ok', plan: 'pro' }, /unknown field 'plan'/],
    ['POST', `/v1/organizations/${farmId}/members`, { email: 'a@b.c', role: 'owner' }, /body\.role must be one of: admin, member/],
    ['POST', `/v1/organizations/${farmId}/members`, { email: 'a@b.c', password: 'short', role: 'member' }, /body\.password must NOT have fewer than 12/],
    ['POST', `/v1/organizations/${farmId}/members`, { email: 'nope', password: 'long-enough-pw', role: 'member' }, /body\.email must match format "email"/],
    ['POST', '/v1/organizations/not-a-uuid/members', { email: 'a@b.c', role: 'member' }, /path\.id must match format "uuid"/],
    ['GET', '/v1/organizations/not-a-uuid/members', undefined, /path\.id must match format "uuid"/],
    ['DELETE', `/v1/organizations/${farmId}/members/42`, undefined, /path\.userId must match format "uuid"/],
  ]
  for (const [method, path, body, message] of cases) {
    const res = await request(url, path, { method, headers: admin.auth, body })
    t.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)}`)
    t.match(res.json.message, message)
  }
})

t.test('members - nobody can pull a stranger\'s existing account into their organization', async (t) => {
  await addMember(farmId, admin.auth, { email: 'victim@test.printfarm', password: 'victim-password-1', role: 'member' })
  // Anyone may create an organization and is its admin: that must not be enough to add existing people.
  await addMember(farmId, admin.auth, { email: 'stranger@test.printfarm', password: 'stranger-password', role: 'member' })
  const stranger = await signIn(url, 'stranger@test.printfarm', 'stranger-password')
  const own = await request(url, '/v1/organizations', { method: 'POST', headers: stranger.auth, body: { name: 'Lure' } })
  const pulled = await addMember(own.json.id, stranger.auth, { email: 'victim@test.printfarm', role: 'member' })
  t.equal(pulled.status, 409)
  t.equal(pulled.json.error, 'user_exists')
  const victim = await signIn(url, 'victim@test.printfarm', 'victim-password-1')
  const me = await request(url, '/v1/me', { headers: victim.auth })
  t.same(me.json.organizations.map((o: { id: string }) => o.id), [farmId], 'the victim is only where they were')
  const moved = await addMember(own.json.id, admin.auth, { email: 'victim@test.printfarm', role: 'member' })
  t.equal(moved.status, 404, 'the farm admin is not an admin of the lure, so that id is not found for them')
})

t.test('members - the last admin cannot be demoted either', async (t) => {
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Demotion farm' } })
  const demote = await addMember(org.json.id, admin.auth, { email: testAdmin.email, role: 'member' })
  t.equal(demote.status, 409)
  t.equal(demote.json.error, 'last_admin')
  const [row] = await svc.services.db.sql`select count(*)::int as n from memberships where organization_id = ${org.json.id} and role = 'admin'`
  t.equal(row?.['n'], 1)
})

t.test('members - a removed member loses access to the organization at once', async (t) => {
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Revocation farm' } })
  const added = await addMember(org.json.id, admin.auth, { email: 'leaver@test.printfarm', password: 'leaver-password-1', role: 'admin' })
  const leaver = await signIn(url, 'leaver@test.printfarm', 'leaver-password-1')
  const asLeaver = { ...leaver.auth, 'x-organization-id': org.json.id }
  t.equal((await request(url, '/v1/api-keys', { headers: asLeaver })).status, 200)
  await request(url, `/v1/organizations/${org.json.id}/members/${added.json.userId}`, { method: 'DELETE', headers: admin.auth })
  const after = await request(url, '/v1/api-keys', { headers: asLeaver })
  t.equal(after.status, 404, 'the same still-valid access token no longer reaches the organization')
  t.equal((await request(url, `/v1/organizations/${org.json.id}/members`, { headers: leaver.auth })).status, 404)
})
