/**
 * A paired bridge's key speaks for the first host it names (DESIGN section
 * 14): events, the task poll and claims for another host are refused with
 * 403 api_key_host_mismatch; a key an admin created is not bound.
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
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
