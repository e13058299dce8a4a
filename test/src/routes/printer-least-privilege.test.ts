/**
 * Least privilege on printers: the printers' own credentials reach only those who connect to
 * printers, and putting a printer into service (a host, enabled) takes fleet:write, whatever the route.
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { request, signIn } from '../../helpers/http.js'
import { openFarm } from '../../helpers/bridge.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)

async function apiKey(scopes: readonly string[]): Promise<Record<string, string>> {
  const res = await request(url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: `key ${scopes.join(' ')}`, scopes } })
  if (res.status !== 200) throw new Error(`api key: ${res.status} ${res.text}`)
  return { 'x-api-key': res.json.key }
}

const member = await (async () => {
  const add = await request(url, `/v1/organizations/${farm.orgId}/members`, {
    method: 'POST',
    headers: farm.admin,
    body: { email: 'viewer@test.printfarm', password: 'viewer-password-1', role: 'member' },
  })
  if (add.status !== 200) throw new Error(`member: ${add.status} ${add.text}`)
  return (await signIn(url, 'viewer@test.printfarm', 'viewer-password-1')).auth
})()
const bridge = await apiKey(bridgeScopes)
const reader = await apiKey(['printers:read'])
const fleet = await apiKey(['printers:read', 'printers:write', 'fleet:write'])

const secret = await request(url, '/v1/printer-config', {
  method: 'POST',
  headers: farm.admin,
  body: { name: 'secretive', ip_address: '127.0.0.1', serial_number: 'SN-SECRET', access_token: 'lan-code-1234', api_key: 'octo-key-5678', host_id: 'host-a', enabled: true },
})
const printerId: string = secret.json.id

t.test('credentials - a member and a read-only key see no printer secret, in the list or one by one', async (t) => {
  for (const [who, headers] of [
    ['member', member],
    ['printers:read key', reader],
  ] as const) {
    const list = await request(url, '/v1/printer-config', { headers })
    t.equal(list.status, 200, who)
    const item = list.json.printers.find((p: { id: string }) => p.id === printerId)
    t.match(item, { access_token: null, api_key: null, credentials_redacted: true, serial_number: 'SN-SECRET' }, `${who}: list`)
    t.notMatch(list.text, /lan-code-1234|octo-key-5678/, `${who}: not anywhere in the answer`)
    const one = await request(url, `/v1/printer-config/${printerId}`, { headers })
    t.match(one.json.printer, { access_token: null, api_key: null, credentials_redacted: true }, `${who}: one`)
  }
})

t.test('credentials - an admin and a bridge key (printers:write) read them', async (t) => {
  for (const [who, headers] of [
    ['admin', farm.admin],
    ['bridge key', bridge],
  ] as const) {
    const one = await request(url, `/v1/printer-config/${printerId}`, { headers })
    t.match(one.json.printer, { access_token: 'lan-code-1234', api_key: 'octo-key-5678', credentials_redacted: false }, who)
    const list = await request(url, '/v1/printer-config?host_id=host-a', { headers })
    t.match(list.json.printers[0], { access_token: 'lan-code-1234', credentials_redacted: false }, `${who}: list`)
  }
})

const byName = async (name: string) =>
  (await request(url, `/v1/printer-config?include_incomplete=true&name=${encodeURIComponent(name)}`, { headers: farm.admin })).json.printers as Record<string, unknown>[]

t.test('fleet - a bridge reports a discovered printer: created disabled and on no host', async (t) => {
  const res = await request(url, '/v1/printer-config', {
    method: 'POST',
    headers: bridge,
    body: { name: 'found-on-lan', ip_address: '127.0.0.1', serial_number: 'SN-FOUND', discovery_method: 'ssdp', discovered_at: '2026-11-23T10:00:00Z' },
  })
  t.equal(res.status, 200, res.text)
  const [found] = await byName('found-on-lan')
  t.match(found, { enabled: false, host_id: null, assignment_epoch: 0, discovery_method: 'ssdp' })
  const again = await request(url, '/v1/printer-config', { method: 'POST', headers: bridge, body: { name: 'found-on-lan', ip_address: '127.0.0.1', serial_number: 'SN-FOUND', enabled: false } })
  t.equal(again.status, 200, 'reporting it again (an upsert by serial) is fine')
})

t.test('fleet - a bridge key cannot give a printer a host or enable it, on create, on upsert or on update; nothing is stored', async (t) => {
  const hosted = await request(url, '/v1/printer-config', { method: 'POST', headers: bridge, body: { name: 'grab-1', ip_address: '127.0.0.1', host_id: 'bridge-host' } })
  t.equal(hosted.status, 403)
  t.equal(hosted.json.error, 'insufficient_scope')
  t.match(hosted.json.message, /fleet:write/)
  t.same(await byName('grab-1'), [], 'no printer was created')

  const enabled = await request(url, '/v1/printer-config', { method: 'POST', headers: bridge, body: { name: 'grab-2', ip_address: '127.0.0.1', enabled: true } })
  t.equal(enabled.status, 403)
  t.same(await byName('grab-2'), [])

  const [found] = await byName('found-on-lan')
  const upsertHost = await request(url, '/v1/printer-config', { method: 'POST', headers: bridge, body: { id: found!['id'], name: 'found-on-lan', ip_address: '127.0.0.1', host_id: 'bridge-host' } })
  t.equal(upsertHost.status, 403, 'an upsert by id cannot assign it either')
  const patchEnable = await request(url, `/v1/printer-config/${String(found!['id'])}`, { method: 'PATCH', headers: bridge, body: { enabled: true } })
  t.equal(patchEnable.status, 403)
  t.equal(patchEnable.json.error, 'insufficient_scope')
  const assign = await request(url, `/v1/printers/${String(found!['id'])}/host-assignment`, { method: 'PUT', headers: bridge, body: { hostId: 'bridge-host' } })
  t.equal(assign.status, 403)
  const [after] = await byName('found-on-lan')
  t.match(after, { enabled: false, host_id: null, assignment_epoch: 0 }, 'still out of service')

  const rename = await request(url, `/v1/printer-config/${String(found!['id'])}`, { method: 'PATCH', headers: bridge, body: { ip_address: '127.0.0.2' } })
  t.equal(rename.status, 200, 'describing it (a new address after DHCP) is fine')
  const keepEnabled = await request(url, `/v1/printer-config/${printerId}`, { method: 'PATCH', headers: bridge, body: { enabled: true, timeout: 5000 } })
  t.equal(keepEnabled.status, 200, 're-sending enabled: true for an enabled printer is no change')
})

t.test('fleet - a key with fleet:write, and an admin, put a reported printer into service', async (t) => {
  const [found] = await byName('found-on-lan')
  const id = String(found!['id'])
  const withHost = await request(url, '/v1/printer-config', { method: 'POST', headers: fleet, body: { id, name: 'found-on-lan', ip_address: '127.0.0.1', host_id: 'host-b' } })
  t.equal(withHost.status, 200, withHost.text)
  const enable = await request(url, `/v1/printer-config/${id}`, { method: 'PATCH', headers: farm.admin, body: { enabled: true } })
  t.equal(enable.status, 200)
  const [after] = await byName('found-on-lan')
  t.match(after, { enabled: true, host_id: 'host-b', assignment_epoch: 1 })
})
