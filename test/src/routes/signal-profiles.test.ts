/**
 * Signal profiles and status displays (docs/displays.md): the routes, who may
 * call them and their errors, with display
 * registration, over real HTTP against one service on the embedded broker.
 *
 * Actors: the farm's admin (organization A); a member of A who is not an
 * admin; an API key of A with fleet:read only; and organization B, reached
 * both by the shared admin's session naming B and by an admin of B only.
 */
import t, { type Test } from 'tap'
import { createHash, randomUUID } from 'node:crypto'
import { request, signIn, type HttpResult } from '../../helpers/http.js'
import { testAdmin } from '../../helpers/service.js'
import { addPrinter, type Farm } from '../../helpers/bridge.js'
import { assign, connectSimulator, getTarget, openDisplayFarm, publishedRevision, registerDisplay } from '../../helpers/displays.js'
import { waitFor } from '../../helpers/poll.js'
import { defaultDraft, type Draft } from '../../../protocol/signal-profile/draft.js'

const farm = await openDisplayFarm(t)
const url = farm.url
const adminUserId: string = (await request(url, '/v1/me', { headers: farm.admin })).json.user.id
const session = await signIn(url, testAdmin.email, testAdmin.password)

// A member of A who is not an admin.
const addedMember = await request(url, `/v1/organizations/${farm.orgId}/members`, {
  method: 'POST',
  headers: session.auth,
  body: { email: 'sp-member@test.printfarm', password: 'sp-member-password', role: 'member' },
})
if (addedMember.status !== 200) throw new Error(`member: ${addedMember.status} ${addedMember.text}`)
const member = { ...(await signIn(url, 'sp-member@test.printfarm', 'sp-member-password')).auth, 'x-organization-id': farm.orgId }

// An API key of A that may read the fleet but not change it.
const readerKey = await request(url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'fleet reader', scopes: ['fleet:read'] } })
if (readerKey.status !== 200) throw new Error(`reader key: ${readerKey.status} ${readerKey.text}`)
const reader = { 'x-api-key': readerKey.json.key as string }

// Organization B, with a printer and a published revision of its own.
const createdB = await request(url, '/v1/organizations', { method: 'POST', headers: session.auth, body: { name: 'Farm B' } })
if (createdB.status !== 201) throw new Error(`organization B: ${createdB.status} ${createdB.text}`)
const orgB: string = createdB.json.id
const farmB: Farm = { url, orgId: orgB, admin: { ...session.auth, 'x-organization-id': orgB }, bridge: {} }
const addedOutsider = await request(url, `/v1/organizations/${orgB}/members`, {
  method: 'POST',
  headers: session.auth,
  body: { email: 'sp-b-admin@test.printfarm', password: 'sp-b-admin-password', role: 'admin' },
})
if (addedOutsider.status !== 200) throw new Error(`B admin: ${addedOutsider.status} ${addedOutsider.text}`)
const outsider = (await signIn(url, 'sp-b-admin@test.printfarm', 'sp-b-admin-password')).auth
const printerB = await addPrinter(farmB)
const revisionB = await publishedRevision(farmB, undefined, 'B profile')

const actingAsB: [string, Record<string, string>][] = [
  ["the shared admin's session naming B", farmB.admin],
  ['an admin of B only', outsider],
]

const missingId = '00000000-0000-4000-8000-000000000000'
/** The limited controller of the brief: everything but white and CCT. */
const rgbOnly = { format_version: 1, max_decoded_bytes: 750, max_phases: 8, supports_white_output: false, supports_cct: false }

function call(path: string, method = 'GET', body?: unknown, headers: Record<string, string> = farm.admin): Promise<HttpResult> {
  return request(url, path, { method, headers, ...(body === undefined ? {} : { body }) })
}

/** The status and the coded error body; `message` must match when given. */
function refused(t: Test, res: HttpResult, status: number, code: string, label: string, message?: RegExp): void {
  t.equal(res.status, status, `${label}: ${status} (${res.text.slice(0, 200)})`)
  t.equal(res.json?.error, code, `${label}: ${code}`)
  t.type(res.json?.message, 'string', `${label}: with a message`)
  if (message !== undefined) t.match(res.json?.message, message, `${label}: the message says ${message}`)
}

/** The default draft with the idle pattern using the white channel. */
function whiteDraft(): Draft {
  const draft = defaultDraft('White')
  const idle = draft.patterns.find((p) => p.id === 'idle')!
  idle.program.initial = { ...idle.program.initial, white: 60 }
  return draft
}

/** The default draft with the running pattern recoloured: a different program, so different bytes. */
function greenRunning(): Draft {
  const draft = defaultDraft('Green')
  draft.patterns.find((p) => p.id === 'running')!.program.initial = { red: 0, green: 255, blue: 0, white: 0, cct: 0 }
  return draft
}

async function createProfile(name = 'Profile', headers = farm.admin): Promise<Record<string, any>> {
  const res = await call('/v1/mqtt/profiles', 'POST', { name }, headers)
  if (res.status !== 201) throw new Error(`profile: ${res.status} ${res.text}`)
  return res.json
}

const getProfile = (id: string, headers = farm.admin) => call(`/v1/mqtt/profiles/${id}`, 'GET', undefined, headers)

t.test('POST /mqtt/profiles creates a profile (201) with the default draft at draftRevision 1 and no published revision', async (t) => {
  const res = await call('/v1/mqtt/profiles', 'POST', { name: 'Front rack' })
  t.equal(res.status, 201, res.text)
  t.match(res.json, { id: String, name: 'Front rack', draftRevision: 1, latestPublishedRevision: null, archived: false, updatedAt: String })
  t.same(res.json.draft, defaultDraft('Front rack'), 'seeded with the default draft')
  t.same(Object.keys(res.json.draft.bindings).sort(), ['COMPLETE', 'ERROR', 'FILAMENT_RUNOUT', 'IDLE', 'OFFLINE', 'PAUSED', 'RUNNING', 'UNKNOWN', 'WAITING'])
  const compiled = await call('/v1/mqtt/profiles/compile', 'POST', { draft: res.json.draft })
  t.equal(compiled.status, 200, 'the default draft compiles')
})

t.test('GET /mqtt/profiles lists summaries and GET /mqtt/profiles/{id} returns the detail with its draft', async (t) => {
  const created = await createProfile('Listed')
  const list = await call('/v1/mqtt/profiles')
  t.equal(list.status, 200)
  const listed = list.json.find((p: { id: string }) => p.id === created.id)
  t.match(listed, { id: created.id, name: 'Listed', draftRevision: 1, latestPublishedRevision: null, archived: false, updatedAt: String })
  t.notOk('draft' in listed, 'the list holds summaries, without the draft')
  const one = await getProfile(created.id)
  t.equal(one.status, 200)
  t.same(one.json, created, 'the detail is what the create returned')
})

t.test('PATCH /mqtt/profiles/{id} renames and archives with expectedRevision; each change raises draftRevision', async (t) => {
  const p = await createProfile('Old name')
  const renamed = await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { name: 'New name', expectedRevision: 1 })
  t.equal(renamed.status, 200, renamed.text)
  t.match(renamed.json, { name: 'New name', draftRevision: 2, archived: false })
  const archived = await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { archived: true, expectedRevision: 2 })
  t.equal(archived.status, 200, archived.text)
  t.match(archived.json, { name: 'New name', draftRevision: 3, archived: true })
  const unarchived = await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { archived: false, name: 'Both', expectedRevision: 3 })
  t.match(unarchived.json, { name: 'Both', draftRevision: 4, archived: false })
  t.match((await getProfile(p.id)).json, { name: 'Both', draftRevision: 4, archived: false }, 'stored')
})

t.test('PATCH /mqtt/profiles/{id} with a stale expectedRevision is 409 signal_profile_revision_conflict and changes nothing', async (t) => {
  const p = await createProfile('Contended')
  await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { name: 'First', expectedRevision: 1 })
  const stale = await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { name: 'Second', expectedRevision: 1 })
  refused(t, stale, 409, 'signal_profile_revision_conflict', 'stale rename')
  const ahead = await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { archived: true, expectedRevision: 9 })
  refused(t, ahead, 409, 'signal_profile_revision_conflict', 'future revision')
  t.match((await getProfile(p.id)).json, { name: 'First', draftRevision: 2, archived: false })
})

t.test('PATCH /mqtt/profiles/{id} with only expectedRevision is 400 MQTT_DISPLAY_REQUEST_INVALID', async (t) => {
  const p = await createProfile('Unchanged')
  refused(t, await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { expectedRevision: 1 }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'no change')
  t.equal((await getProfile(p.id)).json.draftRevision, 1, 'draftRevision did not rise')
})

t.test('PUT /mqtt/profiles/{id}/draft saves a valid draft and raises draftRevision; a stale expectedRevision is 409', async (t) => {
  const p = await createProfile('Drafted')
  const draft = greenRunning()
  const saved = await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft, expectedRevision: 1 })
  t.equal(saved.status, 200, saved.text)
  t.equal(saved.json.draftRevision, 2)
  t.same(saved.json.draft, draft)
  t.same((await getProfile(p.id)).json.draft, draft, 'stored')
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: defaultDraft(), expectedRevision: 1 }), 409, 'signal_profile_revision_conflict', 'stale draft save')
  t.same((await getProfile(p.id)).json.draft, draft, 'the stale save changed nothing')
})

t.test('PUT /mqtt/profiles/{id}/draft with an invalid draft is 400 MQTT_DISPLAY_REQUEST_INVALID naming the field', async (t) => {
  const p = await createProfile('Invalid drafts')
  const missingPattern = defaultDraft()
  missingPattern.bindings.IDLE = 'no-such-pattern'
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: missingPattern, expectedRevision: 1 }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'binding to a missing pattern', /bindings\.IDLE/)
  const tooBright = { ...defaultDraft(), brightnessCap: 300 }
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: tooBright, expectedRevision: 1 }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'brightness cap above 255', /brightnessCap/)
  const staleMissing = defaultDraft()
  staleMissing.stale.pattern = 'ghost'
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: staleMissing, expectedRevision: 1 }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'stale pattern missing', /stale\.pattern/)
  const now = (await getProfile(p.id)).json
  t.equal(now.draftRevision, 1, 'draftRevision did not rise')
  t.same(now.draft, defaultDraft('Invalid drafts'), 'the draft is unchanged')
})

t.test('draft save and publish on an archived profile are 409 signal_profile_archived', async (t) => {
  const p = await createProfile('Archived')
  await call(`/v1/mqtt/profiles/${p.id}`, 'PATCH', { archived: true, expectedRevision: 1 })
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: greenRunning(), expectedRevision: 2 }), 409, 'signal_profile_archived', 'draft save')
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision: 2 }), 409, 'signal_profile_archived', 'publish')
  const now = (await getProfile(p.id)).json
  t.match(now, { draftRevision: 2, latestPublishedRevision: null, archived: true })
  t.same(now.draft, defaultDraft('Archived'))
  t.same((await call(`/v1/mqtt/profiles/${p.id}/revisions`)).json, [], 'no revision was made')
})

t.test('POST /mqtt/profiles/{id}/publish makes revision 1 of the draft with its compiled bytes and the publishing admin', async (t) => {
  const p = await createProfile('Published')
  const draft = greenRunning()
  const saved = await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft, expectedRevision: 1 })
  const compiled = (await call('/v1/mqtt/profiles/compile', 'POST', { draft })).json
  const res = await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision: saved.json.draftRevision })
  t.equal(res.status, 200, res.text)
  const rev = res.json
  t.match(rev, { id: String, profileId: p.id, revision: 1, compilerVersion: /\S/, publishedBy: adminUserId, publishedAt: String })
  t.same(rev.authoringSnapshot, draft, 'the snapshot is the draft')
  t.same(
    { byteLength: rev.byteLength, sha256: rev.sha256, data: rev.data, capabilityRequirements: rev.capabilityRequirements },
    compiled,
    'the bytes are what the compile route makes of the draft',
  )
  const bytes = Buffer.from(rev.data, 'base64')
  t.equal(bytes.length, rev.byteLength, 'byteLength is the decoded size')
  t.equal(createHash('sha256').update(bytes).digest('hex'), rev.sha256, 'sha256 is the hash of the bytes')
  t.equal((await getProfile(p.id)).json.latestPublishedRevision, 1)
})

t.test('publishing the same draftRevision again returns the same revision, not a duplicate', async (t) => {
  const p = await createProfile('Twice')
  const first = await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision: 1 })
  t.equal(first.status, 200, first.text)
  const expectedRevision = (await getProfile(p.id)).json.draftRevision
  const again = await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision })
  t.equal(again.status, 200, again.text)
  t.equal(again.json.id, first.json.id, 'same revision id')
  t.equal(again.json.revision, 1)
  const list = await call(`/v1/mqtt/profiles/${p.id}/revisions`)
  t.equal(list.json.length, 1, 'one revision stored')
  t.equal((await getProfile(p.id)).json.latestPublishedRevision, 1)
})

t.test('publish with a stale expectedRevision is 409 signal_profile_revision_conflict and publishes nothing', async (t) => {
  const p = await createProfile('Stale publish')
  await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: greenRunning(), expectedRevision: 1 })
  refused(t, await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision: 1 }), 409, 'signal_profile_revision_conflict', 'stale publish')
  t.same((await call(`/v1/mqtt/profiles/${p.id}/revisions`)).json, [])
  t.equal((await getProfile(p.id)).json.latestPublishedRevision, null)
})

t.test('GET /mqtt/profiles/{id}/revisions lists newest first and GET /mqtt/revisions/{id} returns one', async (t) => {
  const p = await createProfile('History')
  const r1 = (await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision: 1 })).json
  const current = (await getProfile(p.id)).json.draftRevision
  const saved = await call(`/v1/mqtt/profiles/${p.id}/draft`, 'PUT', { draft: greenRunning(), expectedRevision: current })
  const r2 = (await call(`/v1/mqtt/profiles/${p.id}/publish`, 'POST', { expectedRevision: saved.json.draftRevision })).json
  t.equal(r2.revision, 2)
  t.not(r2.id, r1.id)
  t.not(r2.sha256, r1.sha256, 'different drafts, different bytes')
  const list = await call(`/v1/mqtt/profiles/${p.id}/revisions`)
  t.equal(list.status, 200)
  t.same(list.json.map((r: { revision: number }) => r.revision), [2, 1], 'newest first')
  t.same(list.json, [r2, r1])
  t.equal((await getProfile(p.id)).json.latestPublishedRevision, 2)
  const one = await call(`/v1/mqtt/revisions/${r1.id}`)
  t.equal(one.status, 200)
  t.same(one.json, r1, 'revision 1 is unchanged by later publishes')
})

t.test('POST /mqtt/profiles/compile returns byteLength, sha256, data and requirements, and a member may call it', async (t) => {
  const draft = whiteDraft()
  const res = await call('/v1/mqtt/profiles/compile', 'POST', { draft }, member)
  t.equal(res.status, 200, res.text)
  const bytes = Buffer.from(res.json.data, 'base64')
  t.equal(res.json.byteLength, bytes.length)
  t.ok(bytes.length >= 29 && bytes.length <= 750, 'decoded size within 29-750')
  t.ok(res.json.data.length <= 1000, 'base64 at most 1,000 characters')
  t.equal(res.json.sha256, createHash('sha256').update(bytes).digest('hex'))
  t.match(res.json.capabilityRequirements, { decodedBytes: bytes.length, usesWhite: true, usesCct: false })
  const rgb = await call('/v1/mqtt/profiles/compile', 'POST', { draft: defaultDraft() }, member)
  t.equal(rgb.json.capabilityRequirements.usesWhite, false, 'the default draft needs no white output')
  const broken = defaultDraft()
  broken.bindings.ERROR = 'nope'
  refused(t, await call('/v1/mqtt/profiles/compile', 'POST', { draft: broken }, member), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'invalid draft', /bindings\.ERROR/)
})

t.test('strict bodies: an unknown field, invalid JSON and a missing body are 400 MQTT_DISPLAY_REQUEST_INVALID', async (t) => {
  const p = await createProfile('Strict')
  const display = await registerDisplay(farm)
  const rev = await publishedRevision(farm)
  const routes: [string, string, Record<string, unknown>, boolean][] = [
    ['POST', '/v1/mqtt/profiles', { name: 'x' }, true],
    ['POST', '/v1/mqtt/profiles/compile', { draft: defaultDraft() }, true],
    ['PATCH', `/v1/mqtt/profiles/${p.id}`, { name: 'x', expectedRevision: 1 }, true],
    ['PUT', `/v1/mqtt/profiles/${p.id}/draft`, { draft: defaultDraft(), expectedRevision: 1 }, true],
    ['POST', `/v1/mqtt/profiles/${p.id}/publish`, { expectedRevision: 1 }, true],
    ['POST', '/v1/mqtt/displays', { name: 'x', pixels: [] }, true],
    ['PATCH', `/v1/mqtt/displays/${display.id}`, { name: 'x' }, true],
    ['POST', `/v1/mqtt/displays/${display.id}/profile`, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }, true],
    // Rebind and retry take an empty body, so only the unknown field and bad JSON apply.
    ['POST', `/v1/mqtt/displays/${display.id}/rebind`, {}, false],
    ['POST', `/v1/mqtt/displays/${display.id}/profile/retry`, {}, false],
  ]
  for (const [method, path, valid, needsBody] of routes) {
    const label = `${method} ${path.replace(/[0-9a-f-]{36}/g, '{id}')}`
    refused(t, await call(path, method, { ...valid, surprise: 1 }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', `${label} unknown field`, /surprise|additional|unknown/i)
    const bad = await request(url, path, { method, headers: { ...farm.admin, 'content-type': 'application/json' }, body: '{"name": ' })
    refused(t, bad, 400, 'MQTT_DISPLAY_REQUEST_INVALID', `${label} invalid JSON`)
    if (needsBody) refused(t, await call(path, method), 400, 'MQTT_DISPLAY_REQUEST_INVALID', `${label} no body`)
  }
  refused(t, await call('/v1/mqtt/profiles/not-a-uuid'), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'a path id that is not a uuid')
  t.match((await getProfile(p.id)).json, { name: 'Strict', draftRevision: 1, latestPublishedRevision: null }, 'the profile is unchanged')
  t.match((await call(`/v1/mqtt/displays/${display.id}`)).json, { name: 'Rack A', bindingEpoch: 1, activationGeneration: 0 }, 'the display is unchanged')
  t.notOk((await call('/v1/mqtt/profiles')).json.some((x: { name: string }) => x.name === 'x'), 'no profile was created')
})

t.test('roles: a member reads everything but every mutation is 403 ORG_ADMIN_REQUIRED and changes nothing', async (t) => {
  const p = await createProfile('Admins only')
  const rev = await publishedRevision(farm, undefined, 'Member target')
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display)
  t.equal((await assign(farm, display.id, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })).status, 200)
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied')
  for (const path of ['/v1/mqtt/profiles', `/v1/mqtt/profiles/${p.id}`, `/v1/mqtt/profiles/${rev.profileId}/revisions`, `/v1/mqtt/revisions/${rev.id}`, '/v1/mqtt/displays', `/v1/mqtt/displays/${display.id}`, '/v1/mqtt/profile-targets', `/v1/mqtt/displays/${display.id}/profile`]) {
    const res = await call(path, 'GET', undefined, member)
    t.equal(res.status, 200, `member GET ${path}: 200`)
    t.same(res.json, (await call(path)).json, `member GET ${path}: what the admin sees`)
  }
  const printer = await addPrinter(farm)
  const before = { profile: (await getProfile(p.id)).json, display: (await call(`/v1/mqtt/displays/${display.id}`)).json, displays: (await call('/v1/mqtt/displays')).json.length, profiles: (await call('/v1/mqtt/profiles')).json.length }
  const mutations: [string, string, unknown][] = [
    ['POST', '/v1/mqtt/profiles', { name: 'by member' }],
    ['PATCH', `/v1/mqtt/profiles/${p.id}`, { name: 'by member', expectedRevision: 1 }],
    ['PUT', `/v1/mqtt/profiles/${p.id}/draft`, { draft: greenRunning(), expectedRevision: 1 }],
    ['POST', `/v1/mqtt/profiles/${p.id}/publish`, { expectedRevision: 1 }],
    ['POST', '/v1/mqtt/displays', { name: 'by member', pixels: [printer] }],
    ['PATCH', `/v1/mqtt/displays/${display.id}`, { name: 'by member' }],
    ['POST', `/v1/mqtt/displays/${display.id}/rebind`, {}],
    ['POST', `/v1/mqtt/displays/${display.id}/profile`, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 1 }],
    ['POST', `/v1/mqtt/displays/${display.id}/profile/retry`, {}],
  ]
  for (const [method, path, body] of mutations) refused(t, await call(path, method, body, member), 403, 'ORG_ADMIN_REQUIRED', `member ${method} ${path}`)
  t.same((await getProfile(p.id)).json, before.profile, 'the profile is unchanged')
  t.same((await call(`/v1/mqtt/displays/${display.id}`)).json, before.display, 'the display is unchanged (same binding, generation, name)')
  t.equal((await call('/v1/mqtt/displays')).json.length, before.displays, 'no display registered')
  t.equal((await call('/v1/mqtt/profiles')).json.length, before.profiles, 'no profile created')

  // An API key with fleet:read reads, but mutations need fleet:write.
  for (const path of ['/v1/mqtt/profiles', `/v1/mqtt/profiles/${p.id}`, `/v1/mqtt/revisions/${rev.id}`, `/v1/mqtt/displays/${display.id}`, `/v1/mqtt/displays/${display.id}/profile`]) {
    t.equal((await call(path, 'GET', undefined, reader)).status, 200, `fleet:read key GET ${path}: 200`)
  }
  for (const [method, path, body] of mutations) refused(t, await call(path, method, body, reader), 403, 'insufficient_scope', `fleet:read key ${method} ${path}`, /fleet:write/)
  t.same((await getProfile(p.id)).json, before.profile, 'still unchanged')
  t.same((await call(`/v1/mqtt/displays/${display.id}`)).json, before.display, 'still unchanged')
})

t.test('404: missing ids answer signal_profile_not_found, signal_profile_revision_not_found, display_not_found and signal_profile_target_not_found', async (t) => {
  for (const [method, path, body] of [
    ['GET', `/v1/mqtt/profiles/${missingId}`, undefined],
    ['PATCH', `/v1/mqtt/profiles/${missingId}`, { name: 'x', expectedRevision: 1 }],
    ['PUT', `/v1/mqtt/profiles/${missingId}/draft`, { draft: defaultDraft(), expectedRevision: 1 }],
    ['POST', `/v1/mqtt/profiles/${missingId}/publish`, { expectedRevision: 1 }],
    ['GET', `/v1/mqtt/profiles/${missingId}/revisions`, undefined],
  ] as const) {
    refused(t, await call(path, method, body), 404, 'signal_profile_not_found', `${method} ${path}`)
  }
  refused(t, await call(`/v1/mqtt/revisions/${missingId}`), 404, 'signal_profile_revision_not_found', 'GET revision')
  for (const [method, path, body] of [
    ['GET', `/v1/mqtt/displays/${missingId}`, undefined],
    ['PATCH', `/v1/mqtt/displays/${missingId}`, { name: 'x' }],
    ['POST', `/v1/mqtt/displays/${missingId}/rebind`, {}],
    ['GET', `/v1/mqtt/displays/${missingId}/profile`, undefined],
    ['POST', `/v1/mqtt/displays/${missingId}/profile/retry`, {}],
  ] as const) {
    refused(t, await call(path, method, body), 404, 'display_not_found', `${method} ${path}`)
  }
  const display = await registerDisplay(farm)
  const rev = await publishedRevision(farm)
  refused(t, await call(`/v1/mqtt/displays/${missingId}/profile`, 'POST', { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }), 404, 'display_not_found', 'assign to a missing display')
  refused(t, await getTarget(farm, display.id), 404, 'signal_profile_target_not_found', 'GET profile before any assignment')
  refused(t, await call(`/v1/mqtt/displays/${display.id}/profile/retry`, 'POST', {}), 404, 'signal_profile_target_not_found', 'retry before any assignment')
  refused(t, await assign(farm, display.id, { profileRevisionId: missingId, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }), 404, 'signal_profile_revision_not_found', 'assign a missing revision')
})

t.test("isolation: another organization's admin gets 404 for this organization's profile, revision and display, and changes nothing", async (t) => {
  const rev = await publishedRevision(farm, undefined, 'A private')
  const profileId: string = rev.profileId
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display)
  t.equal((await assign(farm, display.id, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })).status, 200)
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied')
  const before = { profile: (await getProfile(profileId)).json, display: (await call(`/v1/mqtt/displays/${display.id}`)).json, target: (await getTarget(farm, display.id)).json }
  const draftRevision: number = before.profile.draftRevision
  for (const [who, headers] of actingAsB) {
    for (const [method, path, body] of [
      ['GET', `/v1/mqtt/profiles/${profileId}`, undefined],
      ['PATCH', `/v1/mqtt/profiles/${profileId}`, { name: 'stolen', expectedRevision: draftRevision }],
      ['PUT', `/v1/mqtt/profiles/${profileId}/draft`, { draft: greenRunning(), expectedRevision: draftRevision }],
      ['POST', `/v1/mqtt/profiles/${profileId}/publish`, { expectedRevision: draftRevision }],
      ['GET', `/v1/mqtt/profiles/${profileId}/revisions`, undefined],
    ] as const) {
      refused(t, await call(path, method, body, headers), 404, 'signal_profile_not_found', `${who}: ${method} profile`)
    }
    refused(t, await call(`/v1/mqtt/revisions/${rev.id}`, 'GET', undefined, headers), 404, 'signal_profile_revision_not_found', `${who}: GET revision`)
    for (const [method, path, body] of [
      ['GET', `/v1/mqtt/displays/${display.id}`, undefined],
      ['PATCH', `/v1/mqtt/displays/${display.id}`, { name: 'stolen' }],
      ['POST', `/v1/mqtt/displays/${display.id}/rebind`, {}],
      ['GET', `/v1/mqtt/displays/${display.id}/profile`, undefined],
      ['POST', `/v1/mqtt/displays/${display.id}/profile`, { profileRevisionId: revisionB.id, expectedBindingEpoch: 1, expectedActivationGeneration: 1 }],
      ['POST', `/v1/mqtt/displays/${display.id}/profile/retry`, {}],
    ] as const) {
      refused(t, await call(path, method, body, headers), 404, 'display_not_found', `${who}: ${method} ${path.replace(display.id, '{id}')}`)
    }
    const lists = await Promise.all(['/v1/mqtt/profiles', '/v1/mqtt/displays', '/v1/mqtt/profile-targets'].map((p) => call(p, 'GET', undefined, headers)))
    for (const list of lists) {
      t.equal(list.status, 200)
      t.notMatch(list.text, new RegExp(`${profileId}|${display.id}|${rev.id}`), `${who}: A's ids are not listed`)
    }
  }
  t.same((await getProfile(profileId)).json, before.profile, "A's profile is unchanged")
  t.same((await call(`/v1/mqtt/displays/${display.id}`)).json, before.display, "A's display is unchanged")
  t.same((await getTarget(farm, display.id)).json.desired, before.target.desired, "A's target is unchanged")
})

t.test('POST /mqtt/displays registers a display (201) at bindingEpoch 1 with a credential shown once', async (t) => {
  const pixels = [await addPrinter(farm), await addPrinter(farm)]
  const res = await call('/v1/mqtt/displays', 'POST', { name: 'Rack B', pixels })
  t.equal(res.status, 201, res.text)
  t.match(res.json, { id: String, name: 'Rack B', bindingEpoch: 1, activationGeneration: 0, capabilities: null })
  t.same(res.json.pixels, pixels, 'pixels in order')
  t.match(res.json.credential, { credentialId: String, username: String, password: String })
  t.same(Object.keys(res.json.credential).sort(), ['credentialId', 'password', 'username'])
  t.ok(res.json.credential.password.length >= 16, 'a password of some length')
  t.equal(res.json.credential.credentialId, res.json.credentialId)
  const got = await call(`/v1/mqtt/displays/${res.json.id}`)
  t.equal(got.status, 200)
  t.notOk('credential' in got.json, 'GET has no credential object')
  t.notOk(got.text.includes(res.json.credential.password), 'GET never shows the password')
  t.notOk((await call('/v1/mqtt/displays')).text.includes(res.json.credential.password), 'nor does the list')
  t.match(got.json, { id: res.json.id, bindingEpoch: 1, credentialId: res.json.credential.credentialId, username: res.json.credential.username })
})

t.test("a pixel that is another organization's printer or an unknown id is 400 MQTT_DISPLAY_REQUEST_INVALID naming body.pixels[i]", async (t) => {
  const mine = await addPrinter(farm)
  const count = (await call('/v1/mqtt/displays')).json.length
  refused(t, await call('/v1/mqtt/displays', 'POST', { name: 'Bad', pixels: [mine, printerB] }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', "B's printer at pixel 1", /body\.pixels\[1\]/)
  refused(t, await call('/v1/mqtt/displays', 'POST', { name: 'Bad', pixels: [randomUUID(), mine] }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'unknown printer at pixel 0', /body\.pixels\[0\]/)
  t.equal((await call('/v1/mqtt/displays')).json.length, count, 'nothing registered')
  const display = await registerDisplay(farm, [mine])
  refused(t, await call(`/v1/mqtt/displays/${display.id}`, 'PATCH', { pixels: [mine, printerB] }), 400, 'MQTT_DISPLAY_REQUEST_INVALID', "PATCH with B's printer", /body\.pixels\[1\]/)
  t.same((await call(`/v1/mqtt/displays/${display.id}`)).json.pixels, [mine], 'pixels unchanged')
})

t.test('PATCH /mqtt/displays/{id} changes the pixels and the name', async (t) => {
  const [a, b, c] = [await addPrinter(farm), await addPrinter(farm), await addPrinter(farm)]
  const display = await registerDisplay(farm, [a, b])
  const res = await call(`/v1/mqtt/displays/${display.id}`, 'PATCH', { pixels: [c, a] })
  t.equal(res.status, 200, res.text)
  t.same(res.json.pixels, [c, a])
  t.equal(res.json.name, 'Rack A', 'name kept')
  t.equal(res.json.bindingEpoch, 1, 'a pixel change is not a rebind')
  const renamed = await call(`/v1/mqtt/displays/${display.id}`, 'PATCH', { name: 'Rack C' })
  t.match(renamed.json, { name: 'Rack C', pixels: [c, a] })
  t.same((await call(`/v1/mqtt/displays/${display.id}`)).json.pixels, [c, a], 'stored')
  refused(t, await call(`/v1/mqtt/displays/${display.id}`, 'PATCH', {}), 400, 'MQTT_DISPLAY_REQUEST_INVALID', 'an empty change')
})

t.test('POST /mqtt/displays/{id}/rebind raises bindingEpoch to 2 with a new credential and clears the activation to generation 0', async (t) => {
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display)
  const rev = await publishedRevision(farm)
  t.equal((await assign(farm, display.id, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })).status, 200)
  t.equal((await call(`/v1/mqtt/displays/${display.id}`)).json.activationGeneration, 1, 'generation 1 before the rebind')
  const res = await call(`/v1/mqtt/displays/${display.id}/rebind`, 'POST', {})
  t.equal(res.status, 200, res.text)
  t.match(res.json, { id: display.id, bindingEpoch: 2, activationGeneration: 0, capabilities: null })
  t.match(res.json.credential, { credentialId: String, username: String, password: String })
  t.not(res.json.credential.credentialId, display.credential.credentialId, 'new credential id')
  t.not(res.json.credential.password, display.credential.password, 'new password')
  t.equal(res.json.credentialId, res.json.credential.credentialId)
  const got = await call(`/v1/mqtt/displays/${display.id}`)
  t.match(got.json, { bindingEpoch: 2, activationGeneration: 0, credentialId: res.json.credential.credentialId })
  t.notOk(got.text.includes(res.json.credential.password), 'GET does not show the new password')
  refused(t, await getTarget(farm, display.id), 404, 'signal_profile_target_not_found', 'no target in the new binding')
  refused(t, await assign(farm, display.id, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 1 }), 409, 'display_binding_epoch_conflict', 'assign with the old epoch')
})

t.test('assign without an advertised capability is 409 signal_profile_capability_missing and assigns nothing', async (t) => {
  const rev = await publishedRevision(farm)
  const silent = await registerDisplay(farm)
  refused(t, await assign(farm, silent.id, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }), 409, 'signal_profile_capability_missing', 'no simulator')
  t.equal((await call(`/v1/mqtt/displays/${silent.id}`)).json.activationGeneration, 0)
  refused(t, await getTarget(farm, silent.id), 404, 'signal_profile_target_not_found', 'no target')
  // A controller whose report has no signal_profile keeps its built-in patterns.
  const legacy = await registerDisplay(farm)
  await connectSimulator(t, farm, legacy, { capability: null })
  refused(t, await assign(farm, legacy.id, { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }), 409, 'signal_profile_capability_missing', 'report without signal_profile')
  refused(t, await getTarget(farm, legacy.id), 404, 'signal_profile_target_not_found', 'no target')
})

t.test('assign of a revision using white output to an RGB-only display is 409 signal_profile_capability_insufficient', async (t) => {
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display, { capability: rgbOnly })
  t.same((await call(`/v1/mqtt/displays/${display.id}`)).json.capabilities, rgbOnly, 'the advertised capability is recorded')
  const white = await publishedRevision(farm, whiteDraft(), 'White')
  t.equal(white.capabilityRequirements.usesWhite, true)
  refused(t, await assign(farm, display.id, { profileRevisionId: white.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }), 409, 'signal_profile_capability_insufficient', 'white on RGB-only', /white/i)
  t.equal((await call(`/v1/mqtt/displays/${display.id}`)).json.activationGeneration, 0, 'no generation used')
  refused(t, await getTarget(farm, display.id), 404, 'signal_profile_target_not_found', 'no target')
  const rgb = await publishedRevision(farm, undefined, 'RGB')
  const ok = await assign(farm, display.id, { profileRevisionId: rgb.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(ok.status, 200, `an RGB revision fits the same display: ${ok.text}`)
})

t.test('assign fences: wrong epoch 409, wrong generation 409, another organization\'s revision 404, retry on a healthy target 409', async (t) => {
  const display = await registerDisplay(farm)
  const sim = await connectSimulator(t, farm, display)
  const rev = await publishedRevision(farm)
  const body = { profileRevisionId: rev.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 }
  refused(t, await assign(farm, display.id, { ...body, expectedBindingEpoch: 2 }), 409, 'display_binding_epoch_conflict', 'epoch 2 of a display at 1')
  refused(t, await assign(farm, display.id, { ...body, expectedActivationGeneration: 3 }), 409, 'signal_profile_activation_conflict', 'generation 3 of a display at 0')
  refused(t, await assign(farm, display.id, { ...body, profileRevisionId: revisionB.id }), 404, 'signal_profile_revision_not_found', "B's revision")
  refused(t, await getTarget(farm, display.id), 404, 'signal_profile_target_not_found', 'none of those assigned anything')

  const first = await assign(farm, display.id, body)
  t.equal(first.status, 200, first.text)
  t.match(first.json, { displayId: display.id, bindingEpoch: 1, status: 'sync_pending', applied: null, errorCode: null })
  t.same(first.json.desired, { activation_generation: 1, profile_revision_id: rev.id, sha256: rev.sha256 })
  t.ok((await call('/v1/mqtt/profile-targets')).json.some((x: { displayId: string }) => x.displayId === display.id), 'listed among the targets')
  refused(t, await assign(farm, display.id, body), 409, 'signal_profile_activation_conflict', 'generation 0 reused after the first assignment')
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied')
  t.equal(sim.active?.activation_generation, 1, 'the display runs generation 1')
  refused(t, await call(`/v1/mqtt/displays/${display.id}/profile/retry`, 'POST', {}), 409, 'signal_profile_target_healthy', 'retry on an applied target')
  t.equal((await getTarget(farm, display.id)).json.status, 'device_applied', 'the target is unchanged')
})
