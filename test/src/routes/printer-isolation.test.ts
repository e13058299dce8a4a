/**
 * Organization isolation on every printer route, over real HTTP: acting for
 * organization B (its API key, the shared admin's session naming B, and an
 * admin who belongs to B only), organization A's printer is never listed,
 * answers 404 printer_not_found on every route, and nothing about it changes.
 * A member (not admin) of A reads but cannot change A's printers.
 */
import t, { type Test } from 'tap'
import { request, signIn, type HttpResult } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch, postEvent, single } from '../../helpers/bridge.js'

const svc = await startTestService(t)
const url = svc.url
const sql = svc.services.db.sql

// Organization A: the test admin's own, with a bridge key and one complete printer that has a history.
// Its job has finished, so every mutation B tries would succeed if the organization check let it through.
const farm = await openFarm(url)
const printerA = await addPrinter(farm, 'host-a', { name: 'A-printer', serial_number: 'SN-A-1', access_token: 'lan-code-a', port: 8883 })
const history = await postBatch(farm, batch(printerA, [item(0, { type: 'job:start', data: { name: 'a.3mf' } }), item(1), item(2, { type: 'job:finish' })]))
if (history.status !== 200) throw new Error(`history: ${history.status} ${history.text}`)
const slots = await request(url, `/v1/printers/${printerA}/filaments/assign`, { method: 'POST', headers: farm.bridge, body: { slots: [{ position: 0, materialType: 'PLA', color: '#ffffff' }] } })
if (slots.status !== 200) throw new Error(`filaments: ${slots.status} ${slots.text}`)

// Organization B: created by the same admin, with its own key and printer on a host of the same name.
const session = await signIn(url, testAdmin.email, testAdmin.password)
const created = await request(url, '/v1/organizations', { method: 'POST', headers: session.auth, body: { name: 'Farm B' } })
if (created.status !== 201) throw new Error(`organization B: ${created.status} ${created.text}`)
const orgB: string = created.json.id
const adminAsB = { ...session.auth, 'x-organization-id': orgB }
const keyB = await request(url, '/v1/api-keys', { method: 'POST', headers: adminAsB, body: { name: 'B bridge', scopes: ['printers:read', 'printers:write', 'fleet:write'] } })
if (keyB.status !== 200) throw new Error(`B key: ${keyB.status} ${keyB.text}`)
const outsiderEmail = 'b-only-admin@test.printfarm'
const addOutsider = await request(url, `/v1/organizations/${orgB}/members`, { method: 'POST', headers: session.auth, body: { email: outsiderEmail, password: 'b-only-admin-password', role: 'admin' } })
if (addOutsider.status !== 200) throw new Error(`B admin: ${addOutsider.status} ${addOutsider.text}`)
const outsider = await signIn(url, outsiderEmail, 'b-only-admin-password')
const printerB = (await request(url, '/v1/printer-config', { method: 'POST', headers: adminAsB, body: { name: 'B-printer', ip_address: '10.0.0.2', serial_number: 'SN-B-1', access_token: 'lan-code-b', host_id: 'host-a' } })).json.id as string

/** Every way of acting for organization B. */
const actingAsB: [string, Record<string, string>][] = [
  ["B's API key", { 'x-api-key': keyB.json.key }],
  ["the shared admin's session naming B", adminAsB],
  ['an admin of B only', outsider.auth],
]

/** Everything the store and the API say about A's printer. */
async function snapshotA() {
  const config = await request(url, `/v1/printer-config/${printerA}`, { headers: farm.admin })
  const state = await sql`select * from printer_state where printer_id = ${printerA}`
  const events = await sql`select * from printer_events where printer_id = ${printerA} order by assignment_epoch, seqn`
  const jobs = await sql`select * from print_jobs where printer_id = ${printerA} order by id`
  return { status: config.status, printer: config.json?.printer, state, events, jobs }
}
const before = await snapshotA()

function notFound(t: Test, res: HttpResult, label: string, coded = false): void {
  t.equal(res.status, 404, `${label}: 404`)
  t.match(res.json, { error: 'printer_not_found', message: String }, `${label}: printer_not_found`)
  if (coded) t.equal(res.json?.code, 'printer_not_found', `${label}: with code`)
}

async function unchanged(t: Test): Promise<void> {
  t.same(await snapshotA(), before, "A's printer, its state, events and jobs are unchanged")
}

const ids = (res: HttpResult): string[] => (res.json?.printers ?? []).map((p: { id: string }) => p.id)

t.test('printer isolation - the setup is what the tests assume', async (t) => {
  t.equal(before.status, 200)
  t.match(before.printer, { id: printerA, name: 'A-printer', host_id: 'host-a', assignment_epoch: 1, organization_id: farm.orgId })
  t.equal(before.events.length, 3, 'A has an event history')
  t.equal(before.state.length, 1, 'A has a printer state')
  t.equal(before.jobs.length, 1, 'A has a job')
  t.not(orgB, farm.orgId)
  t.ok(printerB, 'B has a printer of its own')
})

t.test("printer isolation - another organization's list leaves the printer out, with and without filters", async (t) => {
  for (const [who, headers] of actingAsB) {
    for (const query of ['', '?include_incomplete=true', '?host_id=host-a', '?host_id=host-a&include_incomplete=true', '?serial_number=SN-A-1', '?name=A-printer']) {
      const res = await request(url, `/v1/printer-config${query}`, { headers })
      t.equal(res.status, 200, `${who} ${query || '(no filter)'}: 200`)
      t.notOk(ids(res).includes(printerA), `${who} ${query || '(no filter)'}: A's printer is not listed`)
      t.ok(res.json.printers.every((p: { organization_id: string }) => p.organization_id === orgB), `${who} ${query || '(no filter)'}: only B's printers`)
    }
    const hostA = await request(url, '/v1/printer-config?host_id=host-a', { headers })
    t.same(ids(hostA), [printerB], `${who}: host-a in B is B's printer alone`)
  }
  const asA = await request(url, '/v1/printer-config?host_id=host-a', { headers: farm.bridge })
  t.same(ids(asA), [printerA], "A's own bridge sees A's printer only")
})

t.test("printer isolation - an API key cannot reach another organization's printers by naming it", async (t) => {
  const key = { 'x-api-key': keyB.json.key }
  const viaHeader = await request(url, '/v1/printer-config', { headers: { ...key, 'x-organization-id': farm.orgId } })
  t.equal(viaHeader.status, 404, 'x-organization-id of A with B\'s key')
  t.equal(viaHeader.json.error, 'organization_not_found')
  const viaQuery = await request(url, `/v1/printer-config?organizationId=${farm.orgId}`, { headers: key })
  t.equal(viaQuery.status, 404, 'organizationId of A with B\'s key')
  t.notOk(ids(viaQuery).includes(printerA))
  const one = await request(url, `/v1/printer-config/${printerA}`, { headers: { ...key, 'x-organization-id': farm.orgId } })
  t.equal(one.status, 404)
  const events = await postBatch(farm, batch(printerA, [item(3)]), { ...key, 'x-organization-id': farm.orgId })
  t.equal(events.status, 404)
  t.equal(events.json.code, 'organization_not_found')
  const outsiderNamingA = await request(url, `/v1/printer-config/${printerA}`, { headers: { ...outsider.auth, 'x-organization-id': farm.orgId } })
  t.equal(outsiderNamingA.status, 404, 'a person outside A cannot name A')
  t.equal(outsiderNamingA.json.error, 'organization_not_found')
  await unchanged(t)
})

t.test("printer isolation - GET /v1/printer-config/{id} of another organization's printer is 404", async (t) => {
  for (const [who, headers] of actingAsB) notFound(t, await request(url, `/v1/printer-config/${printerA}`, { headers }), who)
  await unchanged(t)
})

t.test("printer isolation - PATCH /v1/printer-config/{id} of another organization's printer is 404 and changes nothing", async (t) => {
  for (const [who, headers] of actingAsB) {
    notFound(t, await request(url, `/v1/printer-config/${printerA}`, { method: 'PATCH', headers, body: { name: 'hijacked', ip_address: '6.6.6.6', enabled: true } }), who)
  }
  await unchanged(t)
})

t.test("printer isolation - POST /v1/printer-config naming another organization's printer id is 404; its serial makes B's own printer", async (t) => {
  for (const [who, headers] of actingAsB) {
    notFound(t, await request(url, '/v1/printer-config', { method: 'POST', headers, body: { id: printerA, name: 'hijacked', ip_address: '6.6.6.6' } }), `${who} by id`)
    notFound(t, await request(url, '/v1/printer-config', { method: 'POST', headers, body: { id: printerA, name: 'hijacked', ip_address: '6.6.6.6', host_id: 'host-evil' } }), `${who} by id with host_id`)
  }
  const bySerial = await request(url, '/v1/printer-config', { method: 'POST', headers: adminAsB, body: { name: 'B copy', ip_address: '10.0.0.3', serial_number: 'SN-A-1' } })
  t.equal(bySerial.status, 200)
  t.equal(bySerial.json.updated, false, "A's serial number is not an upsert key in B: a new printer")
  t.not(bySerial.json.id, printerA)
  await unchanged(t)
})

t.test("printer isolation - PATCH connection-status of another organization's printer is 404 and changes nothing", async (t) => {
  for (const [who, headers] of actingAsB) {
    for (const is_connected of [true, false]) {
      notFound(t, await request(url, `/v1/printer-config/${printerA}/connection-status`, { method: 'PATCH', headers, body: { is_connected, last_heartbeat: new Date().toISOString(), status: 'FAILED', hostId: 'host-a', assignmentEpoch: 1 } }), `${who} is_connected ${is_connected}`)
    }
  }
  await unchanged(t)
})

t.test("printer isolation - POST test-connection of another organization's printer is 404", async (t) => {
  for (const [who, headers] of actingAsB) notFound(t, await request(url, `/v1/printer-config/${printerA}/test-connection`, { method: 'POST', headers }), who)
  await unchanged(t)
})

t.test("printer isolation - PUT host-assignment of another organization's printer is 404 and does not raise its epoch", async (t) => {
  for (const [who, headers] of actingAsB) {
    notFound(t, await request(url, `/v1/printers/${printerA}/host-assignment`, { method: 'PUT', headers, body: { hostId: 'host-evil' } }), `${who} to another host`)
    notFound(t, await request(url, `/v1/printers/${printerA}/host-assignment`, { method: 'PUT', headers, body: { hostId: 'host-a' } }), `${who} to the same host`)
  }
  await unchanged(t)
})

t.test("printer isolation - POST filaments/assign on another organization's printer is 404 and leaves its slots", async (t) => {
  for (const [who, headers] of actingAsB) {
    notFound(t, await request(url, `/v1/printers/${printerA}/filaments/assign`, { method: 'POST', headers, body: { slots: [{ position: 0, materialType: 'ABS', color: '#000000' }], jobId: 1 } }), who)
  }
  await unchanged(t)
  t.match(before.state[0]?.['state'], { ams: [{ position: 0, materialType: 'PLA' }] }, "A's slot still holds what A set")
})

t.test("printer isolation - PATCH maintenance of another organization's printer is 404 and leaves the flag", async (t) => {
  for (const [who, headers] of actingAsB) {
    notFound(t, await request(url, `/v1/printers/${printerA}/maintenance`, { method: 'PATCH', headers, body: { maintenance: true } }), `${who} on`)
    notFound(t, await request(url, `/v1/printers/${printerA}/maintenance`, { method: 'PATCH', headers, body: { maintenance: false } }), `${who} off`)
  }
  await unchanged(t)
})

t.test("printer isolation - printer events naming another organization's printer are 404 printer_not_found and store nothing", async (t) => {
  for (const [who, headers] of actingAsB) {
    // host-a at epoch 1 is A's real fence: only the organization check stands in the way.
    notFound(t, await postEvent(farm, single(printerA, 10, { eventId: `b-${who}` }), headers), `${who} single`, true)
    notFound(t, await postEvent(farm, { ...single(printerA, 11, { eventId: `bd-${who}`, data: { printerId: printerA } }), printerId: undefined }, headers), `${who} single via data.printerId`, true)
    notFound(t, await postBatch(farm, batch(printerA, [item(10, { eventId: `bb-${who}` }), item(11, { eventId: `bb2-${who}`, type: 'job:start' })]), headers), `${who} batch`, true)
  }
  const rows = await sql`select event_id from printer_events where printer_id = ${printerA} and seqn >= 10`
  t.same(rows, [], 'no rows stored for the printer')
  await unchanged(t)
})

t.test("printer isolation - the read model: another organization's list leaves the printer out; get, history, acknowledge and delete are 404", async (t) => {
  for (const [who, headers] of actingAsB) {
    for (const query of ['', '?host_id=host-a', '?search=A-printer', '?search=SN-A', '?status=WAITING,COMPLETE,UNKNOWN,OFFLINE', '?online=false']) {
      const res = await request(url, `/v1/printers${query}`, { headers })
      t.equal(res.status, 200, `${who} ${query || '(no filter)'}: 200`)
      t.notOk(ids(res).includes(printerA), `${who} ${query || '(no filter)'}: A's printer is not listed`)
    }
    notFound(t, await request(url, `/v1/printers/${printerA}`, { headers }), `${who} get`)
    notFound(t, await request(url, `/v1/printers/${printerA}/events`, { headers }), `${who} history`)
    notFound(t, await request(url, `/v1/printers/${printerA}/events?type=job:start&limit=1`, { headers }), `${who} history by type`)
    notFound(t, await request(url, `/v1/printers/${printerA}/error/acknowledge`, { method: 'POST', headers, body: {} }), `${who} acknowledge`)
    notFound(t, await request(url, `/v1/printer-config/${printerA}`, { method: 'DELETE', headers }), `${who} delete`)
  }
  const own = await request(url, '/v1/printers?host_id=host-a', { headers: farm.bridge })
  t.same(ids(own), [printerA], "A's own bridge reads A's printer")
  await unchanged(t)
})

t.test("printer isolation - after all of B's attempts, A's printer is as A left it", async (t) => {
  const now = await snapshotA()
  t.same(now, before)
  t.match(now.printer, { name: 'A-printer', host_id: 'host-a', assignment_epoch: 1, ip_address: '127.0.0.1', enabled: false, serial_number: 'SN-A-1', access_token: 'lan-code-a' })
  t.notMatch(JSON.stringify(now.state), /maintenance":true/, 'maintenance never turned on')
  const ok = await postBatch(farm, batch(printerA, [item(4)]))
  t.match(ok.json, { success: true, processed: 1, failed: 0, refused: [], events: [{ eventId: 'ev-4', outcome: 'applied' }], last_seqn: 4 }, "A's bridge goes on at epoch 1")
})

t.test('printer isolation - a member of the organization reads its printers but cannot change them (403)', async (t) => {
  const added = await request(url, `/v1/organizations/${farm.orgId}/members`, { method: 'POST', headers: session.auth, body: { email: 'a-member@test.printfarm', password: 'a-member-password', role: 'member' } })
  t.equal(added.status, 200)
  const member = await signIn(url, 'a-member@test.printfarm', 'a-member-password')
  const headers = { ...member.auth, 'x-organization-id': farm.orgId }
  const snapshot = await snapshotA()

  const read = await request(url, `/v1/printer-config/${printerA}`, { headers })
  t.equal(read.status, 200, 'a member reads')
  t.ok(ids(await request(url, '/v1/printer-config', { headers })).includes(printerA), 'a member lists')
  t.equal((await request(url, `/v1/printers/${printerA}`, { headers })).status, 200, 'a member reads the state')
  t.equal((await request(url, `/v1/printers/${printerA}/events`, { headers })).status, 200, 'a member reads the history')

  const attempts: [string, () => Promise<HttpResult>, boolean][] = [
    ['PATCH maintenance', () => request(url, `/v1/printers/${printerA}/maintenance`, { method: 'PATCH', headers, body: { maintenance: true } }), false],
    ['PUT host-assignment', () => request(url, `/v1/printers/${printerA}/host-assignment`, { method: 'PUT', headers, body: { hostId: 'host-m' } }), false],
    ['POST batch', () => postBatch(farm, batch(printerA, [item(20)]), headers), true],
    ['POST event', () => postEvent(farm, single(printerA, 21), headers), true],
    ['PATCH printer-config', () => request(url, `/v1/printer-config/${printerA}`, { method: 'PATCH', headers, body: { name: 'renamed by member' } }), false],
    ['POST printer-config', () => request(url, '/v1/printer-config', { method: 'POST', headers, body: { id: printerA, name: 'renamed', ip_address: 'h' } }), false],
    ['PATCH connection-status', () => request(url, `/v1/printer-config/${printerA}/connection-status`, { method: 'PATCH', headers, body: { is_connected: false, last_heartbeat: new Date().toISOString() } }), false],
    ['POST test-connection', () => request(url, `/v1/printer-config/${printerA}/test-connection`, { method: 'POST', headers }), false],
    ['POST filaments/assign', () => request(url, `/v1/printers/${printerA}/filaments/assign`, { method: 'POST', headers, body: { slots: [{ position: 0, materialType: 'TPU' }] } }), false],
    ['POST error/acknowledge', () => request(url, `/v1/printers/${printerA}/error/acknowledge`, { method: 'POST', headers, body: {} }), false],
    ['DELETE printer-config', () => request(url, `/v1/printer-config/${printerA}`, { method: 'DELETE', headers }), false],
  ]
  for (const [label, attempt, coded] of attempts) {
    const res = await attempt()
    t.equal(res.status, 403, `${label}: 403`)
    t.equal(res.json?.error, 'ORG_ADMIN_REQUIRED', `${label}: ORG_ADMIN_REQUIRED`)
    if (coded) t.equal(res.json?.code, 'ORG_ADMIN_REQUIRED', `${label}: with code`)
  }
  t.same(await snapshotA(), snapshot, 'nothing changed')
})
