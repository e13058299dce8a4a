/**
 * Makes over HTTP (POST /v1/model-files/{fileId}/full-workshop/makes, /v1/makes): the save is
 * atomic (a refusal after the make was written leaves the store as it was: no new make, the old
 * default still the default, the revision unchanged), guarded by the revision (of two concurrent
 * updates from one revision exactly one wins, the other answers 409 and changes nothing), checks
 * filament indexes against the file's project filaments and materials against the organization,
 * keeps one default per file, and a job created from a make carries the make's materials as its
 * required materials all the way into the queue's matching (the job waits for, then goes to, the
 * printer holding the make's material, not the one holding what the slicer recorded).
 *
 * Each case opens its own organization (the queue is per organization); one service serves all.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { openFarm } from '../../helpers/bridge.js'
import { request } from '../../helpers/http.js'
import { until } from '../../helpers/poll.js'
import { eventSender, openOrg as openFarmOrg, queueCalls, white, type Org } from '../../helpers/queue-farm.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const openOrg = (name: string): Promise<Org> => openFarmOrg(svc.url, farm.admin, name)
const send = eventSender(svc.url)
const { createJob, getJob, getQueue, entryOf, hostTasks } = queueCalls(svc.url)

const saveMake = (org: Org, body: Record<string, unknown>, fileId = org.fileId) =>
  request(svc.url, `/v1/model-files/${fileId}/full-workshop/makes`, { method: 'POST', headers: org.admin, body })
const makesOf = async (org: Org, fileId = org.fileId) => (await request(svc.url, `/v1/makes?model_file_id=${fileId}`, { headers: org.admin })).json.makes as any[]

async function material(org: Org, body: Record<string, unknown> = { name: 'Red PETG', type: 'PETG', color_hex: '#FF0000' }): Promise<string> {
  const res = await request(svc.url, '/v1/materials', { method: 'POST', headers: org.admin, body })
  if (res.status !== 201) throw new Error(`material: ${res.status} ${res.text}`)
  return res.json.id
}

t.test('save - creates at revision 1, updates to the next revision, and reads back as saved', async (t) => {
  const org = await openOrg('save')
  const red = await material(org)
  const created = await saveMake(org, { name: 'Red body', materials: [{ filament_index: 0, material_id: red }], quantity_to_print: 2 })
  t.equal(created.status, 201, 'created', { body: created.text })
  t.match(created.json, { model_file_id: org.fileId, name: 'Red body', materials: [{ filament_index: 0, material_id: red }], quantity_to_print: 2, is_default: false, sku_id: null, revision: 1 })
  const updated = await saveMake(org, { make_id: created.json.id, expected_revision: 1, name: 'Red body v2', materials: [], quantity_to_print: 3 })
  t.equal(updated.status, 200, 'updated', { body: updated.text })
  t.match(updated.json, { id: created.json.id, name: 'Red body v2', materials: [], quantity_to_print: 3, revision: 2 })
  const read = await request(svc.url, `/v1/makes/${created.json.id}`, { headers: org.admin })
  t.same(read.json, updated.json, 'GET /v1/makes/{id} answers what the save stored')
  t.same((await makesOf(org)).map((m) => m.id), [created.json.id], 'the file lists its one make')
  const stale = await saveMake(org, { make_id: created.json.id, expected_revision: 1, name: 'from an old form', materials: [] })
  t.equal(stale.status, 409)
  t.match(stale.json, { error: 'make_revision_conflict', revision: 2 }, 'the answer names the current revision')
  const noRevision = await saveMake(org, { make_id: created.json.id, name: 'x', materials: [] })
  t.equal(noRevision.status, 400, 'an update without expected_revision is refused')
  t.match(noRevision.json.message, /expected_revision/)
  t.match((await request(svc.url, `/v1/makes/${created.json.id}`, { headers: org.admin })).json, { name: 'Red body v2', revision: 2 }, 'refused saves changed nothing')
})

t.test('concurrency - of updates racing from one revision exactly one wins; the others answer 409 and change nothing', async (t) => {
  const org = await openOrg('race')
  const make = (await saveMake(org, { name: 'base', materials: [] })).json
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => saveMake(org, { make_id: make.id, expected_revision: 1, name: `editor ${i}`, materials: [] })))
  const won = answers.filter((a) => a.status === 200)
  t.equal(won.length, 1, 'one update wins', { statuses: answers.map((a) => a.status) })
  t.equal(answers.filter((a) => a.status === 409 && a.json.error === 'make_revision_conflict').length, 5, 'every other one is a revision conflict')
  const stored = (await request(svc.url, `/v1/makes/${make.id}`, { headers: org.admin })).json
  t.match(stored, { revision: 2, name: won[0]!.json.name }, "the stored make is the winner's, at revision 2")
})

t.test('atomic - a save refused after the make was written leaves nothing: no new make, the old default kept, no revision spent', async (t) => {
  const org = await openOrg('atomic')
  const first = (await saveMake(org, { name: 'default', materials: [], is_default: true })).json
  const missingSku = randomUUID()
  // The make is written and the file's other default cleared before the SKU is looked up.
  const create = await saveMake(org, { name: 'would be default', materials: [], is_default: true, sku_id: missingSku })
  t.equal(create.status, 404)
  t.equal(create.json.error, 'sku_not_found')
  const makes = await makesOf(org)
  t.same(makes.map((m) => [m.id, m.is_default]), [[first.id, true]], 'no new make, and the first is still the default')
  const update = await saveMake(org, { make_id: first.id, expected_revision: 1, name: 'renamed', materials: [], is_default: true, sku_id: missingSku })
  t.equal(update.status, 404, 'an update refused at the last step')
  t.match((await request(svc.url, `/v1/makes/${first.id}`, { headers: org.admin })).json, { name: 'default', revision: 1, is_default: true, sku_id: null }, 'the make is as it was')
  const next = await saveMake(org, { make_id: first.id, expected_revision: 1, name: 'renamed', materials: [], is_default: true })
  t.equal(next.status, 200, 'the revision read before the refusal still saves')
})

t.test('ids - a urn:uuid: id is refused as malformed, an upper-case one works like its lower-case form', async (t) => {
  const org = await openOrg('ids')
  const make = (await saveMake(org, { name: 'm', materials: [] })).json
  const urn = await request(svc.url, `/v1/makes/urn:uuid:${make.id}`, { headers: org.admin })
  t.equal(urn.status, 400, 'urn:uuid: in a path')
  const urnBody = await saveMake(org, { name: 'm', materials: [], make_id: `urn:uuid:${make.id}`, expected_revision: 1 })
  t.equal(urnBody.status, 400, 'urn:uuid: in a body')
  const upper = await saveMake(org, { name: 'M', materials: [], make_id: make.id.toUpperCase(), expected_revision: 1 }, org.fileId.toUpperCase())
  t.equal(upper.status, 200, 'upper-case ids update the make', { body: upper.text })
})

t.test('sku pointer - a SKU that takes a make moves its revision, so a form read before cannot save the pointer away', async (t) => {
  const org = await openOrg('pointer')
  const make = (await saveMake(org, { name: 'm', materials: [] })).json
  const sku = await request(svc.url, '/v1/skus', { method: 'POST', headers: org.admin, body: { sku: 'PTR-1', name: 'Ptr', makes: [{ make_id: make.id, quantity: 1 }] } })
  t.equal(sku.status, 201)
  const now = (await request(svc.url, `/v1/makes/${make.id}`, { headers: org.admin })).json
  t.match(now, { sku_id: sku.json.id, revision: 2 }, 'the make points at the SKU, at the next revision')
  const stale = await saveMake(org, { make_id: make.id, expected_revision: 1, name: 'm', materials: [] })
  t.equal(stale.status, 409, 'the form read before the SKU took it is stale')
  // Dropped from the SKU, a re-save that still names it does not put it back.
  await request(svc.url, '/v1/skus/PTR-1', { method: 'PATCH', headers: org.admin, body: { makes: [{ make_id: (await saveMake(org, { name: 'other', materials: [] })).json.id, quantity: 1 }] } })
  const resaved = await saveMake(org, { make_id: make.id, expected_revision: 2, name: 'm2', materials: [], sku_id: sku.json.id })
  t.equal(resaved.status, 200)
  const composition = (await request(svc.url, '/v1/skus/PTR-1', { headers: org.admin })).json.makes.map((m: any) => m.make_id)
  t.notOk(composition.includes(make.id), 'the SKU stays as its admin left it')
})

t.test('default - one default per file: a new default takes over from the old one', async (t) => {
  const org = await openOrg('default')
  const a = (await saveMake(org, { name: 'A', materials: [], is_default: true })).json
  const b = (await saveMake(org, { name: 'B', materials: [], is_default: true })).json
  const makes = await makesOf(org)
  t.same(makes.map((m) => [m.name, m.is_default]), [['B', true], ['A', false]], 'B is the default (listed first), A no longer')
  t.equal((await request(svc.url, `/v1/makes/${a.id}`, { headers: org.admin })).json.is_default, false)
  const racing = await Promise.all(['C', 'D', 'E'].map((name) => saveMake(org, { name, materials: [], is_default: true })))
  t.same(racing.map((r) => r.status), [201, 201, 201], 'concurrent defaults all save')
  t.equal((await makesOf(org)).filter((m) => m.is_default).length, 1, 'and the file still has exactly one default')
  t.ok(b.id)
})

t.test('checks - filament indexes, materials, the file and the make are checked and named', async (t) => {
  const org = await openOrg('checks')
  const red = await material(org)
  const outside = await saveMake(org, { name: 'x', materials: [{ filament_index: 1, material_id: red }] })
  t.equal(outside.status, 400)
  t.match(outside.json.message, /filament_index 1 .*has 1 \(indexes 0-0\)/, 'names the index and what the file has')
  const twice = await saveMake(org, { name: 'x', materials: [{ filament_index: 0, material_id: red }, { filament_index: 0, material_id: red }] })
  t.equal(twice.status, 400)
  t.match(twice.json.message, /filament_index 0 is given twice/)
  const unknown = await saveMake(org, { name: 'x', materials: [{ filament_index: 0, material_id: randomUUID() }] })
  t.equal(unknown.status, 404)
  t.equal(unknown.json.error, 'material_not_found')
  const other = await openOrg('checks-other')
  const theirs = await material(other)
  const foreign = await saveMake(org, { name: 'x', materials: [{ filament_index: 0, material_id: theirs }] })
  t.equal(foreign.json.error, 'material_not_found', "another organization's material is unknown here")
  t.equal((await saveMake(other, { name: 'x', materials: [] }, org.fileId)).status, 404, "another organization's file is unknown")
  const mine = (await saveMake(org, { name: 'mine', materials: [] })).json
  t.equal((await request(svc.url, `/v1/makes/${mine.id}`, { headers: other.admin })).status, 404, "another organization cannot read the make")
  t.equal((await request(svc.url, `/v1/makes/${mine.id}`, { method: 'DELETE', headers: other.admin })).status, 404, '… nor delete it')
  t.equal((await saveMake(other, { make_id: mine.id, expected_revision: 1, name: 'x', materials: [] }, other.fileId)).json.error, 'make_not_found', '… nor update it')
  for (const [body, what] of [
    [{ name: '', materials: [] }, 'empty name'],
    [{ name: 'x' }, 'no materials'],
    [{ name: 'x', materials: [], quantity_to_print: 0 }, 'quantity_to_print 0'],
    [{ name: 'x', materials: [{ filament_index: 0 }] }, 'a material without its id'],
    [{ name: 'x', materials: [{ filament_index: -1, material_id: red }] }, 'a negative index'],
    [{ name: 'x', materials: [{ filament_index: 0, material_id: 'red' }] }, 'a material id that is not a uuid'],
    [{ name: 'x', materials: [], make_id: 'nope', expected_revision: 1 }, 'a make id that is not a uuid'],
    [{ name: 'x', materials: [], colour: 'red' }, 'an unknown field'],
  ] as const) {
    const res = await saveMake(org, body as Record<string, unknown>)
    t.equal(res.status, 400, `${what} is refused`, { body: res.text })
  }
  t.equal((await makesOf(org)).length, 1, 'none of the refused saves stored a make')
  const deleted = await request(svc.url, `/v1/files/${org.fileId}`, { method: 'DELETE', headers: org.admin })
  t.equal(deleted.status, 200)
  const onDeleted = await saveMake(org, { name: 'x', materials: [] })
  t.equal(onDeleted.status, 409)
  t.equal(onDeleted.json.error, 'file_deleted')
})

t.test('scopes - a makes:read key reads makes but cannot save or delete them', async (t) => {
  const org = await openOrg('scopes')
  const make = (await saveMake(org, { name: 'm', materials: [] })).json
  const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: org.admin, body: { name: 'reader', scopes: ['makes:read'] } })
  const reader = { 'x-api-key': key.json.key as string }
  t.equal((await request(svc.url, `/v1/makes/${make.id}`, { headers: reader })).status, 200)
  t.equal((await request(svc.url, `/v1/model-files/${org.fileId}/full-workshop/makes`, { method: 'POST', headers: reader, body: { name: 'x', materials: [] } })).status, 403)
  t.equal((await request(svc.url, `/v1/makes/${make.id}`, { method: 'DELETE', headers: reader })).status, 403)
})

t.test("delete - refused while a SKU is made of the make or a job of it waits; allowed once they're gone", async (t) => {
  const org = await openOrg('delete')
  const make = (await saveMake(org, { name: 'm', materials: [] })).json
  const sku = await request(svc.url, '/v1/skus', { method: 'POST', headers: org.admin, body: { sku: 'DEL-1', name: 'Del', makes: [{ make_id: make.id, quantity: 1 }] } })
  t.equal(sku.status, 201)
  const bySku = await request(svc.url, `/v1/makes/${make.id}`, { method: 'DELETE', headers: org.admin })
  t.equal(bySku.status, 409)
  t.match(bySku.json, { error: 'make_in_use', skus: ['DEL-1'], active_jobs: 0 })
  t.equal((await request(svc.url, '/v1/skus/DEL-1', { method: 'DELETE', headers: org.admin })).status, 200)
  const jobId = await createJob(org, { make_id: make.id, print_options: { auto_assign: false } })
  const byJob = await request(svc.url, `/v1/makes/${make.id}`, { method: 'DELETE', headers: org.admin })
  t.match(byJob.json, { error: 'make_in_use', skus: [], active_jobs: 1 })
  await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: org.admin, body: { status: 'cancelled' } })
  const gone = await request(svc.url, `/v1/makes/${make.id}`, { method: 'DELETE', headers: org.admin })
  t.equal(gone.status, 200, 'deleted', { body: gone.text })
  t.equal((await request(svc.url, `/v1/makes/${make.id}`, { headers: org.admin })).status, 404)
  t.equal((await getJob(org, jobId)).make_id, null, 'the ended job keeps its record without the make')
})

t.test("queue - a job from a make requires the make's materials: it waits for them, then goes where they are loaded", async (t) => {
  const org = await openOrg('queue')
  const red = await material(org)
  const make = (await saveMake(org, { name: 'Red', materials: [{ filament_index: 0, material_id: red }] })).json
  // The printer holds what the slicer recorded (white PLA), not the make's red PETG.
  const created = await request(svc.url, '/v1/printer-config', { method: 'POST', headers: org.admin, body: { name: 'P1', ip_address: '127.0.0.1', enabled: true, host_id: org.hostId } })
  const printer = created.json.id as string
  await send(org, printer, 'printer:amsUpdate', { slots: white })
  const jobId = await createJob(org, { make_id: make.id })
  const job = await getJob(org, jobId)
  t.match(job.constraints.required_materials, [{ filament_index: 0, type: 'PETG', color_hex: '#FF0000', material_id: red, used_g: 11.66 }], "the job requires the make's material")
  const waiting = await until(() => getQueue(org), (q) => (entryOf(q, jobId)?.match.reasons ?? []).some((r: any) => r.code === 'material_missing'))
  t.ok(
    entryOf(waiting, jobId)?.match.reasons.some((r: any) => r.printer_id === printer && r.code === 'material_missing'),
    'the white-PLA printer lacks the material',
    { match: entryOf(waiting, jobId)?.match },
  )
  await send(org, printer, 'printer:amsUpdate', { slots: [...white, { position: 2, materialType: 'PETG', color: 'FF0000FF' }] })
  const dispatched = await until(() => getJob(org, jobId), (j) => j.status === 'dispatching')
  t.equal(dispatched.status, 'dispatching', 'loaded, the job goes to the printer')
  const task = (await hostTasks(org)).find((task) => task.job_id === jobId)
  t.same(task?.ams_mapping, [2], 'the filament maps to the slot holding the red PETG')
  const asSliced = (await saveMake(org, { name: 'as sliced', materials: [] })).json
  const plain = await getJob(org, await createJob(org, { make_id: asSliced.id, print_options: { auto_assign: false } }))
  t.match(plain.constraints.required_materials, [{ filament_index: 0, type: 'PLA', color_hex: '#FFFFFF', material_id: null }], 'a filament the make does not name keeps what the slicer recorded')
})
