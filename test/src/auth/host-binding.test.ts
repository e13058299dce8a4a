/**
 * A paired bridge's key speaks for the first host it names (docs/authentication.md,
 * pairing): events, the task poll and claims for another host are refused with
 * 403 api_key_host_mismatch; a key an admin created is not bound. And it
 * acts only on its own host's printers: their credentials, their writes and
 * their jobs; the ready gate's verdict and an operator's start are never a
 * paired key's (403 operator_only).
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { HostBindings } from '../../../src/auth/host-binding.js'
import type { Principal } from '../../../src/http/route.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)

async function pairedKey(): Promise<Record<string, string>> {
  const code = (await request(svc.url, '/v1/auth-codes', { method: 'POST' })).json.code
  const verified = await request(svc.url, '/v1/auth-codes/verify', { method: 'POST', headers: farm.admin, body: { code, organizationId: farm.orgId } })
  if (verified.status !== 200) throw new Error(`verify: ${verified.status} ${verified.text}`)
  const exchanged = await request(svc.url, `/v1/auth-codes/verify/${code}`)
  return { 'x-api-key': exchanged.json.key }
}

t.test('host binding - a paired key is bound to the first host it names; events, polls and claims for another are refused', async (t) => {
  const key = await pairedKey()
  const mine = await addPrinter(farm, 'host-own')
  const other = await addPrinter(farm, 'host-other')
  const first = await postBatch(farm, batch(mine, [item(0, { type: 'heartbeat', hostId: 'host-own' })], { hostId: 'host-own' }), key)
  t.equal(first.status, 200, 'the first host binds the key')
  t.equal((await request(svc.url, '/v1/hosts/host-own/printer-tasks', { headers: key })).status, 200)
  const foreign = await postBatch(farm, batch(other, [item(0, { type: 'heartbeat', hostId: 'host-other' })], { hostId: 'host-other' }), key)
  t.equal(foreign.status, 403)
  t.equal(foreign.json.error, 'api_key_host_mismatch')
  t.match(foreign.json.message, /host-own/)
  const poll = await request(svc.url, '/v1/hosts/host-other/printer-tasks', { headers: key })
  t.equal(poll.status, 403)
  t.equal(poll.json.error, 'api_key_host_mismatch')
  const claim = await request(svc.url, `/v1/printer-tasks/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}/claim`, { method: 'POST', headers: key, body: { hostId: 'host-other', assignmentEpoch: 1 } })
  t.equal(claim.status, 403)
  t.equal(claim.json.error, 'api_key_host_mismatch')
  const stored = await request(svc.url, `/v1/printers/${other}`, { headers: farm.admin })
  t.equal(stored.json.printer.last_seqn, null, "nothing of the other host's printer was stored")
})

t.test('host binding - two paired keys bind to their own hosts; a key an admin made serves any host', async (t) => {
  const a = await pairedKey()
  const b = await pairedKey()
  t.equal((await request(svc.url, '/v1/hosts/host-a1/printer-tasks', { headers: a })).status, 200)
  t.equal((await request(svc.url, '/v1/hosts/host-b1/printer-tasks', { headers: b })).status, 200)
  t.equal((await request(svc.url, '/v1/hosts/host-b1/printer-tasks', { headers: a })).status, 403)
  const made = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'farm tooling', scopes: [...bridgeScopes] } })
  const tooling = { 'x-api-key': made.json.key as string }
  for (const host of ['host-a1', 'host-b1', 'host-c1']) t.equal((await request(svc.url, `/v1/hosts/${host}/printer-tasks`, { headers: tooling })).status, 200, host)
})

t.test('host binding - a paired key stays paired after its pairing code is swept: bound on every node, for good', async (t) => {
  const key = await pairedKey()
  // Used pairing codes are deleted a day after they expire (by the public POST /v1/auth-codes): the key must not care.
  await svc.services.db.sql`delete from auth_codes`
  t.equal((await request(svc.url, '/v1/hosts/host-swept/printer-tasks', { headers: key })).status, 200, 'the first host binds the key')
  t.equal((await request(svc.url, '/v1/hosts/host-elsewhere/printer-tasks', { headers: key })).status, 403, 'another host is refused on this node')
  // Another node (or this one after a restart) knows nothing of the key but what the store holds.
  const { id } = (await svc.services.db.sql<{ id: string }[]>`select id from api_keys where bound_host_id = 'host-swept'`)[0] ?? { id: 'none' }
  const elsewhere = new HostBindings(svc.services.db.sql)
  await t.rejects(elsewhere.check({ kind: 'api_key', keyId: id } as Principal, 'host-elsewhere'), { code: 'api_key_host_mismatch' }, 'another node refuses another host too')
  await t.resolves(elsewhere.check({ kind: 'api_key', keyId: id } as Principal, 'host-swept'))
})

/** A paired key bound to `host` (its first poll binds it), with one printer on that host and one on another, both with LAN credentials. */
async function boundBridge(host: string) {
  const key = await pairedKey()
  t.equal((await request(svc.url, `/v1/hosts/${host}/printer-tasks`, { headers: key })).status, 200)
  const printer = (h: string) => addPrinter(farm, h, { enabled: true, serial_number: `SN-${h}-${Math.random().toString(36).slice(2, 8)}`, access_token: `secret-of-${h}` })
  return { key, own: await printer(host), other: await printer(`${host}-other`) }
}

t.test("host confinement - a paired key reads the LAN credentials of its own host's printers only", async (t) => {
  const { key, own, other } = await boundBridge('host-cred')
  const mine = await request(svc.url, `/v1/printer-config/${own}`, { headers: key })
  t.match(mine.json.printer, { access_token: 'secret-of-host-cred', credentials_redacted: false }, 'its own printer, with credentials')
  const theirs = await request(svc.url, `/v1/printer-config/${other}`, { headers: key })
  t.equal(theirs.status, 200, 'another host\'s printer is visible')
  t.match(theirs.json.printer, { access_token: null, credentials_redacted: true }, 'without its credentials')
  const listed = await request(svc.url, '/v1/printer-config?include_incomplete=true', { headers: key })
  const byId = new Map(listed.json.printers.map((p: any) => [p.id, p]))
  t.equal((byId.get(own) as any)?.access_token, 'secret-of-host-cred', 'the list shows its own credentials')
  t.equal((byId.get(other) as any)?.access_token, null, "and not another host's")
  t.ok([...byId.values()].every((p: any) => p.host_id === 'host-cred' || p.access_token === null), 'no other host\'s secret in the list')
})

t.test("host confinement - a paired key's printer writes reach its own host's printers only: 403 api_key_host_mismatch, nothing changed", async (t) => {
  const { key, own, other } = await boundBridge('host-writes')
  const writes = (printer: string) => [
    ['PATCH', `/v1/printer-config/${printer}`, { name: 'renamed by a bridge' }],
    ['POST', `/v1/printers/${printer}/filaments/assign`, { slots: [{ position: 0, materialType: 'PETG', color: 'FF0000FF' }] }],
    ['PATCH', `/v1/printers/${printer}/maintenance`, { maintenance: true }],
    ['POST', `/v1/printers/${printer}/error/acknowledge`, {}],
    ['POST', `/v1/printer-config/${printer}/test-connection`, undefined],
    ['PATCH', `/v1/printer-config/${printer}/connection-status`, { is_connected: true, last_heartbeat: new Date().toISOString() }],
  ] as const
  const before = (await request(svc.url, `/v1/printer-config/${other}`, { headers: farm.admin })).json.printer
  for (const [method, path, body] of writes(other)) {
    const res = await request(svc.url, path, { method, headers: key, ...(body === undefined ? {} : { body }) })
    t.equal(res.status, 403, `${method} ${path.replace(other, '{other}')} is refused`)
    t.equal(res.json.error, 'api_key_host_mismatch')
    t.match(res.json.message, /host-writes/, 'the message names the host the key speaks for')
  }
  const after = (await request(svc.url, `/v1/printer-config/${other}`, { headers: farm.admin })).json.printer
  t.same(after, before, "the other host's printer is as it was")
  const state = (await request(svc.url, `/v1/printers/${other}`, { headers: farm.admin })).json.printer
  t.equal(state.maintenance, false)
  t.equal(state.online, false, 'not marked online by another host\'s key')
  for (const [method, path, body] of writes(own)) {
    const res = await request(svc.url, path, { method, headers: key, ...(body === undefined ? {} : { body }) })
    t.equal(res.status, 200, `${method} ${path.replace(own, '{own}')} on its own printer works`, { body: res.text })
  }
  const bySerial = await request(svc.url, '/v1/printer-config', { method: 'POST', headers: key, body: { name: 'hijack', ip_address: '10.0.0.66', serial_number: before.serial_number } })
  t.equal(bySerial.status, 403, "an upsert naming another host's printer by its serial number is refused")
  t.equal(bySerial.json.error, 'api_key_host_mismatch')
  t.equal((await request(svc.url, `/v1/printer-config/${other}`, { headers: farm.admin })).json.printer.ip_address, before.ip_address, 'its address is unchanged')
  const discovered = await request(svc.url, '/v1/printer-config', { method: 'POST', headers: key, body: { name: 'found on the LAN', ip_address: '10.0.0.67', serial_number: `SN-new-${Math.random()}` } })
  t.equal(discovered.status, 200, 'reporting a new printer still works')
})

t.test("host confinement - the ready gate's verdict and an operator's start are never a paired key's (403 operator_only), not even on its own host", async (t) => {
  const { key, own } = await boundBridge('host-operator')
  const verdict = await request(svc.url, `/v1/printers/${own}/ready`, { method: 'PATCH', headers: key, body: { ready: true, event_type: 'operator:manual_verification:success' } })
  t.equal(verdict.status, 403)
  t.equal(verdict.json.error, 'operator_only')
  t.match(verdict.json.message, /operator/)
  const start = await request(svc.url, `/v1/printers/${own}/operator-device-start`, { method: 'POST', headers: key })
  t.equal(start.status, 403)
  t.equal(start.json.error, 'operator_only')
  const made = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'MES', scopes: [...bridgeScopes] } })
  const tooling = { 'x-api-key': made.json.key as string }
  const byTooling = await request(svc.url, `/v1/printers/${own}/operator-device-start`, { method: 'POST', headers: tooling })
  t.equal(byTooling.json.error, 'no_task_to_start', "a key an admin made may act as an operator (it reaches the route's own rule)")
})

t.test("host confinement - a paired key changes only jobs on its own host's printers; after a host move the old host's key reaches the printer no more", async (t) => {
  const { key, own, other } = await boundBridge('host-jobs')
  const model = await createModel(svc.url, farm.admin)
  const file = (await upload(svc.url, farm.admin, model, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id
  const job = async () => (await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'confined', model_file_id: file, print_options: { auto_assign: false } } })).json.id as number
  const queued = await job()
  const cancel = await request(svc.url, `/v1/print-jobs/${queued}/status`, { method: 'PATCH', headers: key, body: { status: 'cancelled' } })
  t.equal(cancel.status, 403, 'a job on no printer is no bridge\'s to cancel')
  t.equal(cancel.json.error, 'api_key_host_mismatch')
  const assignOther = await request(svc.url, `/v1/print-jobs/${queued}/assign`, { method: 'POST', headers: key, body: { printer_id: other } })
  t.equal(assignOther.status, 403, "nor to assign to another host's printer")
  t.equal(assignOther.json.error, 'api_key_host_mismatch')
  t.equal((await request(svc.url, `/v1/print-jobs/${queued}`, { headers: farm.admin })).json.status, 'queued', 'the job is still queued')
  const deleted = await request(svc.url, `/v1/print-jobs/${queued}`, { method: 'DELETE', headers: key })
  t.equal(deleted.status, 403, 'nor to delete')

  // The other host's printer is dispatched a job by an operator: the key cannot cancel it.
  await postBatch(farm, batch(other, [item(0, { type: 'heartbeat', hostId: 'host-jobs-other' })], { hostId: 'host-jobs-other' }))
  const elsewhere = await job()
  t.equal((await request(svc.url, `/v1/print-jobs/${elsewhere}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: other } })).status, 200)
  const cancelElsewhere = await request(svc.url, `/v1/print-jobs/${elsewhere}/status`, { method: 'PATCH', headers: key, body: { status: 'cancelled' } })
  t.equal(cancelElsewhere.status, 403)
  t.equal((await request(svc.url, `/v1/print-jobs/${elsewhere}`, { headers: farm.admin })).json.status, 'dispatching', 'the other host\'s job is untouched')

  // Its own printer is moved to another host: the key's reach goes with the assignment.
  const moved = await request(svc.url, `/v1/printers/${own}/host-assignment`, { method: 'PUT', headers: farm.admin, body: { hostId: 'host-jobs-new' } })
  t.equal(moved.status, 200, moved.text)
  const afterMove = await request(svc.url, `/v1/printers/${own}/maintenance`, { method: 'PATCH', headers: key, body: { maintenance: true } })
  t.equal(afterMove.status, 403, 'the old host\'s key is refused once the printer moved')
  t.equal(afterMove.json.error, 'api_key_host_mismatch')
  const credentials = await request(svc.url, `/v1/printer-config/${own}`, { headers: key })
  t.equal(credentials.json.printer.access_token, null, 'and reads its credentials no more')
})

t.test('host confinement - a paired key that has not spoken for a host yet acts on no printer', async (t) => {
  const key = await pairedKey()
  const printer = await addPrinter(farm, 'host-unbound', { enabled: true })
  const res = await request(svc.url, `/v1/printers/${printer}/maintenance`, { method: 'PATCH', headers: key, body: { maintenance: true } })
  t.equal(res.status, 403)
  t.equal(res.json.error, 'api_key_host_mismatch')
  t.match(res.json.message, /not spoken for a host/)
})
