/**
 * The spool inventory over HTTP: a spool's life cycle, its bounds, loading
 * into a printer slot (one spool per slot), adjustments that never take a
 * spool below 0 g, the ledger, who may change it, organization isolation,
 * and the material a spool holds not being deleted from under it.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { addPrinter, openFarm } from '../../helpers/bridge.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin

async function material(body: Record<string, unknown> = { name: 'Generic PLA White', type: 'PLA', color_hex: '#ffffff' }): Promise<string> {
  const res = await request(url, '/v1/materials', { method: 'POST', headers: admin, body })
  if (res.status !== 201) throw new Error(`material: ${res.status} ${res.text}`)
  return res.json.id
}

async function spool(body: Record<string, unknown>): Promise<any> {
  const res = await request(url, '/v1/inventory', { method: 'POST', headers: admin, body })
  if (res.status !== 201) throw new Error(`spool: ${res.status} ${res.text}`)
  return res.json
}

const pla = await material()
const petg = await material({ name: 'Prusament PETG Orange', type: 'PETG', color_hex: '#FF8000' })

t.test('inventory - create, read, list with filters, patch, delete', async (t) => {
  const created = await request(url, '/v1/inventory', { method: 'POST', headers: admin, body: { material_id: pla, initial_g: 1000, label: 'PLA #1', location: 'Shelf A' } })
  t.equal(created.status, 201)
  t.match(created.json, {
    id: String,
    material_id: pla,
    material: { name: 'Generic PLA White', type: 'PLA', color_hex: '#FFFFFF' },
    label: 'PLA #1',
    initial_g: 1000,
    remaining_g: 1000,
    location: 'Shelf A',
    printer_id: null,
    slot: null,
  })
  t.ok(created.json.created_at && created.json.updated_at)
  const id: string = created.json.id
  const half = await spool({ material_id: petg, initial_g: 750, remaining_g: 300, label: 'petg opened' })
  t.equal(half.remaining_g, 300, 'a spool used already starts with what it holds')
  t.same((await request(url, `/v1/inventory/${id}`, { headers: admin })).json, created.json, 'GET reads it back')

  const ids = async (query: string) => ((await request(url, `/v1/inventory${query}`, { headers: admin })).json.spools as any[]).map((s) => s.id)
  const all = await request(url, '/v1/inventory', { headers: admin })
  t.match(all.json, { total: 2, limit: 100, offset: 0 })
  t.same(all.json.spools.map((s: any) => s.id), [id, half.id], 'sorted by material name: Generic before Prusament')
  t.same(await ids(`?material_id=${petg}`), [half.id])
  t.same(await ids('?search=shelf'), [id], 'search matches the location')
  t.same(await ids('?search=OPENED'), [half.id], 'and the label, in any case')
  t.same(await ids('?search=%25'), [], 'a LIKE wildcard is taken literally')
  t.same(await ids('?loaded=true'), [])
  t.same((await ids('?loaded=false')).length, 2)
  t.same(await ids('?limit=1&offset=1'), [half.id])

  const patched = await request(url, `/v1/inventory/${id}`, { method: 'PATCH', headers: admin, body: { label: null, location: 'Dry box 2', material_id: petg } })
  t.equal(patched.status, 200)
  t.match(patched.json, { label: null, location: 'Dry box 2', material_id: petg, material: { name: 'Prusament PETG Orange' }, remaining_g: 1000 })
  t.same((await request(url, `/v1/inventory/${id}`, { method: 'DELETE', headers: admin })).json, { success: true })
  t.match(await request(url, `/v1/inventory/${id}`, { headers: admin }), { status: 404, json: { error: 'spool_not_found' } })
  t.match(await request(url, `/v1/inventory/${id}`, { method: 'DELETE', headers: admin }), { status: 404, json: { error: 'spool_not_found' } })
  await request(url, `/v1/inventory/${half.id}`, { method: 'DELETE', headers: admin })
})

t.test('inventory - bounds: grams, labels, slots, uuids and unknown fields are refused with validation_failed', async (t) => {
  const post = (body: unknown) => request(url, '/v1/inventory', { method: 'POST', headers: admin, body })
  const edge = await post({ material_id: pla, initial_g: 100_000, remaining_g: 0, label: 'l'.repeat(200), location: 'x'.repeat(200) })
  t.equal(edge.status, 201, 'at the bounds')
  t.equal(edge.json.remaining_g, 0)
  for (const [what, body] of [
    ['no material', { initial_g: 1000 }],
    ['no initial grams', { material_id: pla }],
    ['zero initial grams', { material_id: pla, initial_g: 0 }],
    ['negative initial grams', { material_id: pla, initial_g: -1 }],
    ['too many grams', { material_id: pla, initial_g: 100_001 }],
    ['grams as text', { material_id: pla, initial_g: '1000' }],
    ['negative remaining', { material_id: pla, initial_g: 1000, remaining_g: -1 }],
    ['remaining above initial', { material_id: pla, initial_g: 1000, remaining_g: 1000.5 }],
    ['empty label', { material_id: pla, initial_g: 1000, label: '' }],
    ['long label', { material_id: pla, initial_g: 1000, label: 'l'.repeat(201) }],
    ['long location', { material_id: pla, initial_g: 1000, location: 'l'.repeat(201) }],
    ['material not a uuid', { material_id: 'pla', initial_g: 1000 }],
    ['printer without slot', { material_id: pla, initial_g: 1000, printer_id: randomUUID() }],
    ['slot without printer', { material_id: pla, initial_g: 1000, slot: 0 }],
    ['slot 64', { material_id: pla, initial_g: 1000, printer_id: randomUUID(), slot: 64 }],
    ['slot -1', { material_id: pla, initial_g: 1000, printer_id: randomUUID(), slot: -1 }],
    ['unknown field', { material_id: pla, initial_g: 1000, weight_g: 250 }],
  ] as const) {
    t.match(await post(body), { status: 400, json: { error: 'validation_failed' } }, what)
  }
  t.match(await post({ material_id: pla, initial_g: 1000, remaining_g: 1001 }), { json: { message: /remaining_g \(1001\) is above body.initial_g/ } }, 'the message names the rule')
  const id = edge.json.id
  const patch = (body: unknown) => request(url, `/v1/inventory/${id}`, { method: 'PATCH', headers: admin, body })
  for (const [what, body] of [
    ['empty patch', {}],
    ['grams are not patched', { remaining_g: 5 }],
    ['printer alone', { printer_id: null }],
    ['slot alone', { slot: 3 }],
    ['half an unload', { printer_id: null, slot: 3 }],
  ] as const) {
    t.match(await patch(body), { status: 400, json: { error: 'validation_failed' } }, what)
  }
  const adjust = (body: unknown) => request(url, `/v1/inventory/${id}/adjustments`, { method: 'POST', headers: admin, body })
  for (const [what, body] of [
    ['zero delta', { delta_g: 0, reason: 'nothing' }],
    ['delta below a milligram', { delta_g: 0.0001, reason: 'nothing' }],
    ['delta too large', { delta_g: 100_001, reason: 'x' }],
    ['delta too small', { delta_g: -100_001, reason: 'x' }],
    ['no reason', { delta_g: 5 }],
    ['empty reason', { delta_g: 5, reason: '' }],
    ['long reason', { delta_g: 5, reason: 'r'.repeat(201) }],
  ] as const) {
    t.match(await adjust(body), { status: 400, json: { error: 'validation_failed' } }, what)
  }
  t.match(await adjust({ delta_g: 0, reason: 'x' }), { json: { message: /delta_g must not be 0/ } })
  t.match(await request(url, '/v1/inventory/not-a-uuid', { headers: admin }), { status: 400, json: { error: 'validation_failed' } }, 'a path id must be a uuid')
  t.match(await request(url, '/v1/inventory?limit=201', { headers: admin }), { status: 400 })
  t.match(await request(url, '/v1/inventory?loaded=maybe', { headers: admin }), { status: 400 })
  t.match(await request(url, `/v1/inventory/${id}/ledger?limit=0`, { headers: admin }), { status: 400 })
  await request(url, `/v1/inventory/${id}`, { method: 'DELETE', headers: admin })
})

t.test('inventory - a material, printer or spool of nowhere is not found', async (t) => {
  t.match(await request(url, '/v1/inventory', { method: 'POST', headers: admin, body: { material_id: randomUUID(), initial_g: 1000 } }), { status: 404, json: { error: 'material_not_found' } })
  t.match(await request(url, '/v1/inventory', { method: 'POST', headers: admin, body: { material_id: pla, initial_g: 1000, printer_id: randomUUID(), slot: 0 } }), {
    status: 404,
    json: { error: 'printer_not_found' },
  })
  const s = await spool({ material_id: pla, initial_g: 1000 })
  t.match(await request(url, `/v1/inventory/${s.id}`, { method: 'PATCH', headers: admin, body: { material_id: randomUUID() } }), { status: 404, json: { error: 'material_not_found' } })
  t.match(await request(url, `/v1/inventory/${randomUUID()}/adjustments`, { method: 'POST', headers: admin, body: { delta_g: -5, reason: 'x' } }), { status: 404, json: { error: 'spool_not_found' } })
  t.match(await request(url, `/v1/inventory/${randomUUID()}/ledger`, { headers: admin }), { status: 404, json: { error: 'spool_not_found' } })
  t.equal((await request(url, `/v1/inventory/${s.id}`, { headers: admin })).json.material_id, pla, 'unchanged')
  await request(url, `/v1/inventory/${s.id}`, { method: 'DELETE', headers: admin })
})

t.test('inventory - adjustments: the floor is 0 g and the shortfall is written; the ledger reads newest first', async (t) => {
  const s = await spool({ material_id: pla, initial_g: 1000, remaining_g: 100 })
  const adjust = (delta_g: number, reason: string) => request(url, `/v1/inventory/${s.id}/adjustments`, { method: 'POST', headers: admin, body: { delta_g, reason } })
  const weighed = await adjust(-20.5, 'weighed')
  t.equal(weighed.status, 201)
  t.match(weighed.json, { entry: { spool_id: s.id, delta_g: -20.5, applied_g: -20.5, shortfall_g: 0, reason: 'weighed', job_id: null }, spool: { id: s.id, remaining_g: 79.5 } })
  const over = await adjust(-100, 'cleared a failed print by hand')
  t.match(over.json, { entry: { delta_g: -100, applied_g: -79.5, shortfall_g: 20.5 }, spool: { remaining_g: 0 } }, 'never below 0: the shortfall is recorded')
  const empty = await adjust(-5, 'again')
  t.match(empty.json, { entry: { delta_g: -5, applied_g: 0, shortfall_g: 5 }, spool: { remaining_g: 0 } })
  const found = await adjust(250.25, 'found a second roll of the same')
  t.match(found.json, { entry: { delta_g: 250.25, applied_g: 250.25, shortfall_g: 0 }, spool: { remaining_g: 250.25 } })
  const decimals = await adjust(-0.1, 'weighed')
  t.equal(decimals.json.spool.remaining_g, 250.15, 'kept to the milligram, no float noise')
  t.match(await adjust(100_000, 'too much'), { status: 400, json: { error: 'validation_failed', message: /at most 100000 g/ } }, 'a spool holds at most 100,000 g')

  const ledger = await request(url, `/v1/inventory/${s.id}/ledger`, { headers: admin })
  t.equal(ledger.status, 200)
  t.match(ledger.json, { total: 5, limit: 100, offset: 0 })
  t.same(ledger.json.entries.map((e: any) => e.delta_g), [-0.1, 250.25, -5, -100, -20.5], 'newest first')
  t.same(ledger.json.entries[0], decimals.json.entry)
  const page = await request(url, `/v1/inventory/${s.id}/ledger?limit=2&offset=1`, { headers: admin })
  t.same(page.json.entries.map((e: any) => e.delta_g), [250.25, -5])
  t.equal(page.json.total, 5)
})

t.test('inventory - loading into printer slots: one spool per slot, the other is named; unloading frees it', async (t) => {
  const printer = await addPrinter(farm)
  const first = await spool({ material_id: pla, initial_g: 1000, printer_id: printer, slot: 5 })
  t.match(first, { printer_id: printer, slot: 5 }, 'created loaded')
  const second = await spool({ material_id: petg, initial_g: 1000, label: 'next' })
  const load = (id: string, printer_id: string | null, slot: number | null) => request(url, `/v1/inventory/${id}`, { method: 'PATCH', headers: admin, body: { printer_id, slot } })
  const taken = await load(second.id, printer, 5)
  t.equal(taken.status, 409)
  t.match(taken.json, { error: 'spool_slot_taken', spool_id: first.id, message: new RegExp(first.id) })
  t.match(await request(url, '/v1/inventory', { method: 'POST', headers: admin, body: { material_id: pla, initial_g: 10, printer_id: printer, slot: 5 } }), {
    status: 409,
    json: { error: 'spool_slot_taken', spool_id: first.id },
  }, 'a new spool is not added into a taken slot either')
  t.equal((await load(first.id, printer, 5)).status, 200, 'a spool may be "loaded" where it already is')
  t.match((await load(second.id, printer, 6)).json, { printer_id: printer, slot: 6 }, 'the slot beside it is free')
  t.same(((await request(url, `/v1/inventory?printer_id=${printer}`, { headers: admin })).json.spools as any[]).map((s) => s.slot).sort(), [5, 6])
  t.equal((await request(url, '/v1/inventory?loaded=true', { headers: admin })).json.total, 2)
  t.match((await load(first.id, null, null)).json, { printer_id: null, slot: null }, 'unloaded')
  t.match((await load(second.id, printer, 5)).json, { slot: 5 }, 'a freed slot takes another spool')
  const raced = await Promise.all([spool({ material_id: pla, initial_g: 1 }), spool({ material_id: pla, initial_g: 1 })])
  const both = await Promise.all(raced.map((s) => load(s.id, printer, 7)))
  t.same(both.map((r) => r.status).sort(), [200, 409], 'two loads into one slot at once: one wins, the other is told')
  t.equal(both.find((r) => r.status === 409)!.json.error, 'spool_slot_taken')

  // A deleted printer unloads its spools; they stay in the inventory.
  t.equal((await request(url, `/v1/printer-config/${printer}`, { method: 'DELETE', headers: admin })).status, 200)
  const after = await request(url, `/v1/inventory/${second.id}`, { headers: admin })
  t.match(after.json, { printer_id: null, slot: null, remaining_g: 1000 })
})

t.test('inventory - a material a spool holds cannot be deleted', async (t) => {
  const held = await material({ name: 'Held', type: 'ASA' })
  const s = await spool({ material_id: held, initial_g: 500 })
  t.match(await request(url, `/v1/materials/${held}`, { method: 'DELETE', headers: admin }), { status: 409, json: { error: 'material_in_use', spools: 1, makes: 0, message: /1 spool\(s\)/ } })
  t.equal((await request(url, `/v1/materials/${held}`, { headers: admin })).status, 200, 'still there')
  await request(url, `/v1/inventory/${s.id}`, { method: 'DELETE', headers: admin })
  t.equal((await request(url, `/v1/materials/${held}`, { method: 'DELETE', headers: admin })).status, 200, 'deleted once no spool holds it')
})

t.test('inventory - members and inventory:read keys read; only admins and inventory:write keys change; other organizations see nothing', async (t) => {
  const s = await spool({ material_id: pla, initial_g: 1000, label: 'Shared' })
  const key = async (scopes: string[]) => ({ 'x-api-key': (await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: scopes.join(' '), scopes } })).json.key as string })
  const reader = await key(['inventory:read'])
  const writer = await key(['inventory:write'])
  t.equal((await request(url, `/v1/inventory/${s.id}`, { headers: reader })).status, 200)
  t.equal((await request(url, `/v1/inventory/${s.id}/ledger`, { headers: reader })).status, 200)
  for (const [method, path, body] of [
    ['POST', '/v1/inventory', { material_id: pla, initial_g: 1 }],
    ['PATCH', `/v1/inventory/${s.id}`, { label: 'y' }],
    ['POST', `/v1/inventory/${s.id}/adjustments`, { delta_g: -1, reason: 'x' }],
    ['DELETE', `/v1/inventory/${s.id}`, undefined],
  ] as const) {
    t.match(await request(url, path, { method, headers: reader, body }), { status: 403, json: { error: 'insufficient_scope' } }, `${method} ${path.replace(s.id, '{id}')} with inventory:read`)
  }
  t.equal((await request(url, `/v1/inventory/${s.id}`, { method: 'PATCH', headers: writer, body: { label: 'Shared PLA' } })).status, 200)
  await request(url, `/v1/organizations/${farm.orgId}/members`, { method: 'POST', headers: { authorization: admin['authorization']! }, body: { email: 'operator@test.printfarm', password: 'operator-password', role: 'member' } })
  const login = await request(url, '/v1/auth/login', { method: 'POST', body: { email: 'operator@test.printfarm', password: 'operator-password' } })
  const member = { authorization: `Bearer ${login.json.access_token}` }
  t.equal((await request(url, '/v1/inventory', { headers: member })).status, 200, 'a member reads')
  t.match(await request(url, `/v1/inventory/${s.id}/adjustments`, { method: 'POST', headers: member, body: { delta_g: -1, reason: 'x' } }), { status: 403, json: { error: 'ORG_ADMIN_REQUIRED' } })
  t.match(await request(url, '/v1/inventory', { method: 'POST', headers: member, body: { material_id: pla, initial_g: 1 } }), { status: 403, json: { error: 'ORG_ADMIN_REQUIRED' } })

  const org = await request(url, '/v1/organizations', { method: 'POST', headers: { authorization: admin['authorization']! }, body: { name: 'Other' } })
  const other = { authorization: admin['authorization']!, 'x-organization-id': org.json.id as string }
  for (const [method, path, body] of [
    ['GET', `/v1/inventory/${s.id}`, undefined],
    ['PATCH', `/v1/inventory/${s.id}`, { label: 'stolen' }],
    ['POST', `/v1/inventory/${s.id}/adjustments`, { delta_g: -999, reason: 'stolen' }],
    ['GET', `/v1/inventory/${s.id}/ledger`, undefined],
    ['DELETE', `/v1/inventory/${s.id}`, undefined],
  ] as const) {
    t.match(await request(url, path, { method, headers: other, body }), { status: 404, json: { error: 'spool_not_found' } }, `${method} ${path.replace(s.id, '{id}')} from another organization`)
  }
  t.equal((await request(url, '/v1/inventory', { headers: other })).json.total, 0)
  t.match(await request(url, '/v1/inventory', { method: 'POST', headers: other, body: { material_id: pla, initial_g: 1 } }), { status: 404, json: { error: 'material_not_found' } }, "another organization's material")
  const theirMaterial = (await request(url, '/v1/materials', { method: 'POST', headers: other, body: { name: 'Theirs', type: 'PLA' } })).json.id
  const myPrinter = await addPrinter(farm)
  t.match(await request(url, '/v1/inventory', { method: 'POST', headers: other, body: { material_id: theirMaterial, initial_g: 1, printer_id: myPrinter, slot: 0 } }), {
    status: 404,
    json: { error: 'printer_not_found' },
  }, "another organization's printer")
  t.match((await request(url, `/v1/inventory/${s.id}`, { headers: admin })).json, { label: 'Shared PLA', remaining_g: 1000 }, 'unchanged by the other organization')
})
