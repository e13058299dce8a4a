/**
 * Materials over HTTP: the catalogue's life cycle, its bounds, who may
 * change it, organization isolation, and the refusal to delete a material a
 * make uses.
 */
import t from 'tap'
import { request } from '../../helpers/http.js'
import { openFarm } from '../../helpers/bridge.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin
const petg = { name: 'Prusament PETG Orange', type: 'PETG', color_hex: '#ff8000', vendor: 'Prusament', density_g_cm3: 1.27, nozzle_temp_min_c: 230, nozzle_temp_max_c: 250, cost_per_kg: 29.99 }

t.test('materials - create, read, list by type and search, patch, delete', async (t) => {
  const created = await request(url, '/v1/materials', { method: 'POST', headers: admin, body: petg })
  t.equal(created.status, 201)
  t.match(created.json, { ...petg, color_hex: '#FF8000', diameter_mm: 1.75, id: String }, 'colour upper-cased, diameter 1.75 by default')
  const id: string = created.json.id
  await request(url, '/v1/materials', { method: 'POST', headers: admin, body: { name: 'Generic PLA White', type: 'PLA', color_hex: '#FFFFFF' } })
  t.same((await request(url, '/v1/materials?type=petg', { headers: admin })).json.materials.map((m: { id: string }) => m.id), [id])
  t.same((await request(url, '/v1/materials?search=prusa', { headers: admin })).json.materials.map((m: { id: string }) => m.id), [id], 'search matches the vendor')
  t.equal((await request(url, '/v1/materials', { headers: admin })).json.total, 2)
  const patched = await request(url, `/v1/materials/${id}`, { method: 'PATCH', headers: admin, body: { cost_per_kg: null, nozzle_temp_max_c: 255 } })
  t.match(patched.json, { cost_per_kg: null, nozzle_temp_max_c: 255, nozzle_temp_min_c: 230 })
  t.same((await request(url, `/v1/materials/${id}`, { method: 'DELETE', headers: admin })).json, { success: true })
  t.match(await request(url, `/v1/materials/${id}`, { headers: admin }), { status: 404, json: { error: 'material_not_found' } })
})

t.test('materials - bounds: names, types, colours, temperatures (min above max too), diameters; unknown fields refused', async (t) => {
  const post = (body: unknown) => request(url, '/v1/materials', { method: 'POST', headers: admin, body })
  t.equal((await post({ name: 'n'.repeat(200), type: 'T'.repeat(32), diameter_mm: 3.5, density_g_cm3: 3, nozzle_temp_min_c: 0, nozzle_temp_max_c: 500, cost_per_kg: 0 })).status, 201, 'at the bounds')
  t.equal((await post({ name: 'n', type: 'PLA', diameter_mm: 1, density_g_cm3: 0.5 })).status, 201, 'at the lower bounds')
  for (const [what, body] of [
    ['no name', { type: 'PLA' }],
    ['long name', { name: 'n'.repeat(201), type: 'PLA' }],
    ['long type', { name: 'x', type: 'T'.repeat(33) }],
    ['odd type', { name: 'x', type: 'PLA;drop' }],
    ['colour with alpha', { name: 'x', type: 'PLA', color_hex: '#FF8000FF' }],
    ['colour name', { name: 'x', type: 'PLA', color_hex: 'orange' }],
    ['too hot', { name: 'x', type: 'PLA', nozzle_temp_max_c: 501 }],
    ['min above max', { name: 'x', type: 'PLA', nozzle_temp_min_c: 260, nozzle_temp_max_c: 200 }],
    ['diameter below 1.0', { name: 'x', type: 'PLA', diameter_mm: 0.9 }],
    ['diameter above 3.5', { name: 'x', type: 'PLA', diameter_mm: 3.6 }],
    ['density above 3.0', { name: 'x', type: 'PLA', density_g_cm3: 3.1 }],
    ['negative temperature', { name: 'x', type: 'PLA', nozzle_temp_min_c: -1 }],
    ['negative cost', { name: 'x', type: 'PLA', cost_per_kg: -1 }],
    ['unknown field', { name: 'x', type: 'PLA', spool_weight: 1000 }],
  ] as const) {
    t.match(await post(body), { status: 400, json: { error: 'validation_failed' } }, what)
  }
  const id = (await post({ name: 'x', type: 'PLA', nozzle_temp_min_c: 200 })).json.id
  t.match(await request(url, `/v1/materials/${id}`, { method: 'PATCH', headers: admin, body: { nozzle_temp_max_c: 190 } }), { status: 400, json: { message: /above nozzle_temp_max_c/ } }, 'min above max after a patch')
  t.match(await request(url, `/v1/materials/${id}`, { method: 'PATCH', headers: admin, body: {} }), { status: 400 }, 'an empty patch')
  t.match(await request(url, '/v1/materials?limit=201', { headers: admin }), { status: 400 })
})

t.test('materials - a material a make uses cannot be deleted', async (t) => {
  const material = (await request(url, '/v1/materials', { method: 'POST', headers: admin, body: { name: 'In use', type: 'PLA' } })).json.id
  const sql = svc.services.db.sql
  const [model] = await sql`insert into models (id, organization_id, name) values (gen_random_uuid(), ${farm.orgId}, 'm') returning id`
  const [file] = await sql`
    insert into files (id, organization_id, model_id, filename, final_name, file_path, file_type, file_size, sha256)
    values (gen_random_uuid(), ${farm.orgId}, ${model!.id}, 'a.3mf', 'a-v1.0.3mf', ${`${farm.orgId}/${model!.id}/a-v1.0.3mf/a-v1.0.3mf`}, 'model/3mf', 1, 'x') returning id`
  await sql`insert into makes (id, organization_id, model_file_id, name, materials) values (gen_random_uuid(), ${farm.orgId}, ${file!.id}, 'default', ${sql.json([{ filament_index: 0, material_id: material }])})`
  t.match(await request(url, `/v1/materials/${material}`, { method: 'DELETE', headers: admin }), { status: 409, json: { error: 'material_in_use', makes: 1 } })
  t.equal((await request(url, `/v1/materials/${material}`, { headers: admin })).status, 200, 'still there')
})

t.test('materials - members and inventory:read keys read; only admins and inventory:write keys change; other organizations see nothing', async (t) => {
  const id = (await request(url, '/v1/materials', { method: 'POST', headers: admin, body: { name: 'Shared', type: 'ASA' } })).json.id
  const reader = { 'x-api-key': (await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'r', scopes: ['inventory:read'] } })).json.key as string }
  const writer = { 'x-api-key': (await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'w', scopes: ['inventory:write'] } })).json.key as string }
  t.equal((await request(url, `/v1/materials/${id}`, { headers: reader })).status, 200)
  t.match(await request(url, `/v1/materials/${id}`, { method: 'PATCH', headers: reader, body: { name: 'y' } }), { status: 403, json: { error: 'insufficient_scope' } })
  t.equal((await request(url, `/v1/materials/${id}`, { method: 'PATCH', headers: writer, body: { name: 'Shared ASA' } })).status, 200)
  await request(url, `/v1/organizations/${farm.orgId}/members`, { method: 'POST', headers: { authorization: admin['authorization']! }, body: { email: 'operator@test.printfarm', password: 'operator-password', role: 'member' } })
  const login = await request(url, '/v1/auth/login', { method: 'POST', body: { email: 'operator@test.printfarm', password: 'operator-password' } })
  const member = { authorization: `Bearer ${login.json.access_token ?? login.json.accessToken}` }
  t.equal((await request(url, '/v1/materials', { headers: member })).status, 200, 'a member reads')
  t.match(await request(url, '/v1/materials', { method: 'POST', headers: member, body: { name: 'x', type: 'PLA' } }), { status: 403, json: { error: 'ORG_ADMIN_REQUIRED' } })

  const org = await request(url, '/v1/organizations', { method: 'POST', headers: { authorization: admin['authorization']! }, body: { name: 'Other' } })
  const other = { authorization: admin['authorization']!, 'x-organization-id': org.json.id as string }
  for (const [method, body] of [['GET'], ['PATCH', { name: 'stolen' }], ['DELETE']] as [string, unknown?][]) {
    t.match(await request(url, `/v1/materials/${id}`, { method, headers: other, body }), { status: 404, json: { error: 'material_not_found' } }, method)
  }
  t.equal((await request(url, '/v1/materials', { headers: other })).json.total, 0)
  t.equal((await request(url, `/v1/materials/${id}`, { headers: admin })).json.name, 'Shared ASA', 'unchanged by the other organization')
})
