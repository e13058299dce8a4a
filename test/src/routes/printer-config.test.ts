import t from 'tap'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const orgId: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id
const auth = { ...admin.auth, 'x-organization-id': orgId }

const upsert = (body: Record<string, unknown>, headers: Record<string, string> = auth) => request(url, '/v1/printer-config', { method: 'POST', headers, body })
const list = (query = '', headers: Record<string, string> = auth) => request(url, `/v1/printer-config${query}`, { headers })
const getOne = async (id: string) => (await request(url, `/v1/printer-config/${id}`, { headers: auth })).json.printer

t.test('printer config - create applies the documented defaults and answers updated: false', async (t) => {
  const res = await upsert({ name: 'X1C-01', ip_address: '192.168.1.21' })
  t.equal(res.status, 200)
  t.match(res.json, { success: true, updated: false })
  const printer = await getOne(res.json.id)
  t.match(printer, {
    id: res.json.id,
    name: 'X1C-01',
    ip_address: '192.168.1.21',
    organization_id: orgId,
    enabled: false,
    printer_type: 'bambu',
    secure: true,
    timeout: 30000,
    reconnect_interval: 5000,
    host_id: null,
    assignment_epoch: 0,
    serial_number: null,
    access_token: null,
  })
})

t.test('printer config - upsert by serial number updates the same printer', async (t) => {
  const first = await upsert({ name: 'P1S-07', ip_address: '10.0.0.7', serial_number: 'SN-0007', access_token: 'code-1234' })
  const second = await upsert({ name: 'P1S-07 renamed', ip_address: '10.0.0.8', serial_number: 'SN-0007' })
  t.equal(second.json.id, first.json.id)
  t.equal(second.json.updated, true)
  const printer = await getOne(first.json.id)
  t.match(printer, { name: 'P1S-07 renamed', ip_address: '10.0.0.8', access_token: 'code-1234' })
  const byId = await upsert({ id: first.json.id, name: 'by id', ip_address: '10.0.0.9' })
  t.same([byId.json.id, byId.json.updated], [first.json.id, true])
  const missing = await upsert({ id: '00000000-0000-4000-8000-000000000000', name: 'x', ip_address: 'h' })
  t.equal(missing.status, 404)
  t.equal(missing.json.error, 'printer_not_found')
})

t.test('printer config - concurrent creates of one serial make one printer', async (t) => {
  const results = await Promise.all([0, 1, 2, 3].map((i) => upsert({ name: `race ${i}`, ip_address: 'h', serial_number: 'SN-RACE' })))
  t.same(results.map((r) => r.status), [200, 200, 200, 200])
  t.equal(new Set(results.map((r) => r.json.id)).size, 1)
  t.equal(results.filter((r) => r.json.updated === false).length, 1, 'exactly one created it')
})

t.test('printer config - credentials are returned to readers but stored sealed', async (t) => {
  const res = await upsert({ name: 'sealed', ip_address: 'h', serial_number: 'SN-SEAL', access_token: 'plain-access-code-42', api_key: 'octo-key-99' })
  const printer = await getOne(res.json.id)
  t.same([printer.access_token, printer.api_key], ['plain-access-code-42', 'octo-key-99'])
  const [row] = await svc.services.db.sql`select * from printers where id = ${res.json.id}`
  const stored = JSON.stringify(row)
  t.notMatch(stored, /plain-access-code-42/)
  t.notMatch(stored, /octo-key-99/)
  t.match(String(row?.['access_token_sealed']), /^v1\./)
})

t.test('printer config - lists filter exactly and leave incomplete printers out unless asked', async (t) => {
  await upsert({ name: 'complete', ip_address: '10.1.0.1', serial_number: 'SN-L1', access_token: 'a', host_id: 'host-list', enabled: true })
  await upsert({ name: 'no credential', ip_address: '10.1.0.2', serial_number: 'SN-L2', host_id: 'host-list' })
  await upsert({ name: 'disabled', ip_address: '10.1.0.3', serial_number: 'SN-L3', api_key: 'k', host_id: 'host-list' })
  const names = async (q: string) => (await list(q)).json.printers.map((p: { name: string }) => p.name).sort()
  t.same(await names('?host_id=host-list'), ['complete', 'disabled'])
  t.same(await names('?host_id=host-list&include_incomplete=true'), ['complete', 'disabled', 'no credential'])
  t.same(await names('?host_id=host-list&enabled_only=true'), ['complete'])
  t.same(await names('?ip_address=10.1.0.3'), ['disabled'])
  t.same(await names('?serial_number=SN-L1'), ['complete'])
  t.same(await names('?name=complete&host_id=host-list'), ['complete'])
  const item = (await list('?serial_number=SN-L1')).json.printers[0]
  for (const field of ['id', 'name', 'serial_number', 'ip_address', 'access_token', 'organization_id']) t.ok(item[field] !== undefined, field)
})

t.test('host assignment - created with a host: epoch 1; each move +1; upsert never moves an assigned printer', async (t) => {
  const res = await upsert({ name: 'assigned', ip_address: 'h', serial_number: 'SN-HA', host_id: 'host-a' })
  t.match(await getOne(res.json.id), { host_id: 'host-a', assignment_epoch: 1 })
  const moved = await request(url, `/v1/printers/${res.json.id}/host-assignment`, { method: 'PUT', headers: auth, body: { hostId: 'host-b' } })
  t.equal(moved.status, 200)
  t.same(moved.json, { printerId: res.json.id, hostId: 'host-b', assignmentEpoch: 2 })
  const again = await request(url, `/v1/printers/${res.json.id}/host-assignment`, { method: 'PUT', headers: auth, body: { hostId: 'host-b' } })
  t.equal(again.json.assignmentEpoch, 3, 'the same host again still raises the epoch')
  const sneaky = await upsert({ name: 'assigned', ip_address: 'h', serial_number: 'SN-HA', host_id: 'host-c' })
  t.equal(sneaky.status, 400, 'printer-config routes answer 400, 404 or 500')
  t.equal(sneaky.json.error, 'printer_assigned_elsewhere')
  t.match(await getOne(res.json.id), { host_id: 'host-b', assignment_epoch: 3 }, 'nothing changed, not even the other fields')
  const same = await upsert({ name: 'assigned', ip_address: 'h2', serial_number: 'SN-HA', host_id: 'host-b' })
  t.equal(same.status, 200, 'the current host may be named')
  t.match(await getOne(res.json.id), { ip_address: 'h2', assignment_epoch: 3 })
  const unassigned = await upsert({ name: 'later', ip_address: 'h', serial_number: 'SN-LATER' })
  await upsert({ name: 'later', ip_address: 'h', serial_number: 'SN-LATER', host_id: 'host-a' })
  t.match(await getOne(unassigned.json.id), { host_id: 'host-a', assignment_epoch: 1 }, 'first host given by upsert: epoch 1')
})

t.test('printer config - PATCH changes fields but never id or host_id', async (t) => {
  const res = await upsert({ name: 'patchable', ip_address: 'h', serial_number: 'SN-P' })
  const ok = await request(url, `/v1/printer-config/${res.json.id}`, { method: 'PATCH', headers: auth, body: { enabled: true, port: 8883, communication_protocol: 'mqtt', capabilities: { ams: 4 } } })
  t.same(ok.json, { success: true })
  t.match(await getOne(res.json.id), { enabled: true, port: 8883, communication_protocol: 'mqtt', capabilities: { ams: 4 } })
  for (const body of [{ host_id: 'h' }, { id: res.json.id }, {}]) {
    const bad = await request(url, `/v1/printer-config/${res.json.id}`, { method: 'PATCH', headers: auth, body })
    t.equal(bad.status, 400, JSON.stringify(body))
  }
  const taken = await request(url, `/v1/printer-config/${res.json.id}`, { method: 'PATCH', headers: auth, body: { serial_number: 'SN-0007' } })
  t.equal(taken.status, 400)
  t.equal(taken.json.error, 'serial_number_taken')
})

t.test('isolation - another organization sees none of these printers and can change none', async (t) => {
  const mine = await upsert({ name: 'private', ip_address: 'h', serial_number: 'SN-PRIV', access_token: 'secret-code' })
  const other = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Rival farm' } })
  const rival = { ...admin.auth, 'x-organization-id': other.json.id }
  t.same((await list('?include_incomplete=true', rival)).json.printers, [])
  t.equal((await request(url, `/v1/printer-config/${mine.json.id}`, { headers: rival })).status, 404)
  t.equal((await request(url, `/v1/printer-config/${mine.json.id}`, { method: 'PATCH', headers: rival, body: { name: 'x' } })).status, 404)
  t.equal((await request(url, `/v1/printers/${mine.json.id}/host-assignment`, { method: 'PUT', headers: rival, body: { hostId: 'evil' } })).status, 404)
  t.equal((await upsert({ id: mine.json.id, name: 'x', ip_address: 'h' }, rival)).status, 404)
  const sameSerial = await upsert({ name: 'theirs', ip_address: 'h', serial_number: 'SN-PRIV' }, rival)
  t.equal(sameSerial.json.updated, false, 'serial numbers are per organization: theirs is a new printer')
  t.match(await getOne(mine.json.id), { name: 'private', access_token: 'secret-code' })
})

t.test('access - members read, admins write; keys need printers:read, printers:write or fleet:write', async (t) => {
  await request(url, `/v1/organizations/${orgId}/members`, { method: 'POST', headers: admin.auth, body: { email: 'tech@test.printfarm', password: 'technician-pass', role: 'member' } })
  const member = await signIn(url, 'tech@test.printfarm', 'technician-pass')
  t.equal((await list('', member.auth)).status, 200)
  const denied = await upsert({ name: 'x', ip_address: 'h' }, member.auth)
  t.equal(denied.status, 403)
  t.equal(denied.json.error, 'ORG_ADMIN_REQUIRED')
  const key = async (scopes: string[]) => (await request(url, '/v1/api-keys', { method: 'POST', headers: auth, body: { name: scopes.join(','), scopes } })).json.key
  const reader = { 'x-api-key': await key(['printers:read']) }
  const writer = { 'x-api-key': await key(['printers:read', 'printers:write']) }
  const fleet = { 'x-api-key': await key(['fleet:write']) }
  t.equal((await list('', reader)).status, 200)
  t.equal((await upsert({ name: 'x', ip_address: 'h' }, reader)).json.error, 'insufficient_scope')
  const created = await upsert({ name: 'by key', ip_address: 'h', serial_number: 'SN-KEY' }, writer)
  t.equal(created.status, 200, 'a key with printers:write stands in for the admin role')
  const move = (headers: Record<string, string>) => request(url, `/v1/printers/${created.json.id}/host-assignment`, { method: 'PUT', headers, body: { hostId: 'h9' } })
  t.equal((await move(writer)).json.error, 'insufficient_scope', 'printers:write does not move printers')
  t.equal((await move(fleet)).status, 200)
})

t.test('bad input - each printer route answers 400 naming the field', async (t) => {
  const { json } = await upsert({ name: 'target', ip_address: 'h' })
  const cases: [string, string, unknown, RegExp][] = [
    ['POST', '/v1/printer-config', { ip_address: 'h' }, /required field 'name'/],
    ['POST', '/v1/printer-config', { name: 'x' }, /required field 'ip_address'/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'has space' }, /body\.ip_address must match pattern/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', printer_type: 'reprap' }, /body\.printer_type must be one of: bambu, prusa_connect/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', port: 70000 }, /body\.port must be <= 65535/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', timeout: 5 }, /body\.timeout must be >= 100/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', communication_protocol: 'ftp' }, /must be one of: mqtt, http, websocket, serial/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', color: 'red' }, /unknown field 'color'/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', discovered_at: 'yesterday' }, /format "date-time"/],
    ['POST', '/v1/printer-config', { name: 'x', ip_address: 'h', access_token: 'a'.repeat(513) }, /must NOT have more than 512/],
    ['PATCH', `/v1/printer-config/${json.id}`, { enabled: 'yes' }, /body\.enabled must be boolean/],
    ['GET', '/v1/printer-config/not-a-uuid', undefined, /path\.id must match format "uuid"/],
    ['GET', '/v1/printer-config?enabled_only=maybe', undefined, /query\.enabled_only must be boolean/],
    ['GET', '/v1/printer-config?colour=red', undefined, /unknown field 'colour'/],
    ['PUT', `/v1/printers/${json.id}/host-assignment`, {}, /required field 'hostId'/],
    ['PUT', `/v1/printers/${json.id}/host-assignment`, { hostId: '' }, /body\.hostId must NOT have fewer than 1/],
  ]
  for (const [method, path, body, message] of cases) {
    const res = await request(url, path, { method, headers: auth, body })
    t.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)?.slice(0, 60)}`)
    t.match(res.json?.message, message)
  }
})
