/**
 * The model-files read model, reprocessing, audit and cleanup over real
 * HTTP: views, filters and their options, counts, filament labels, durable
 * reprocess receipts, and a cleanup that never leaves its model's prefix.
 */
import t from 'tap'
import { writeFileSync, mkdirSync, utimesSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { request } from '../../helpers/http.js'
import { openFarm } from '../../helpers/bridge.js'
import { waitFor } from '../../helpers/poll.js'
import { bambuThreeMf, createModel, prusaGcode, upload } from '../../helpers/files.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin
const sql = svc.services.db.sql

t.test('model files - views, search, filters and their options; counts; one file active or deleted', async (t) => {
  const modelId = await createModel(url, admin)
  const threeMf = (await upload(url, admin, modelId, { name: 'Benchy.3mf', bytes: bambuThreeMf() }, { tags: 'boat,blue' })).json
  const gcode = (await upload(url, admin, modelId, { name: 'bracket.gcode', bytes: prusaGcode() }, { tags: 'boat' })).json
  const gone = (await upload(url, admin, modelId, { name: 'old.gcode', bytes: prusaGcode() })).json
  await request(url, `/v1/files/${gone.id}`, { method: 'DELETE', headers: admin })
  // A queued job of the 3MF and a make of the G-code (the tables the filters read).
  await sql`insert into print_jobs (organization_id, name, state, model_file_id, source) values (${farm.orgId}, 'job', 'queued', ${threeMf.id}, 'api')`
  await sql`insert into makes (id, organization_id, model_file_id, name) values (gen_random_uuid(), ${farm.orgId}, ${gcode.id}, 'default make')`

  const list = async (query: string) => (await request(url, `/v1/model-files?modelId=${modelId}&${query}`, { headers: admin })).json
  const active = await list('view=active')
  t.same(active.files.map((f: { id: string }) => f.id), [gcode.id, threeMf.id], 'newest first, the deleted one left out')
  t.equal(active.total, 2)
  t.same(active.filter_options.file_types, [
    { value: 'application/gcode', count: 1 },
    { value: 'model/3mf', count: 1 },
  ])
  t.same(active.filter_options.tags, [
    { value: 'boat', count: 2 },
    { value: 'blue', count: 1 },
  ])
  t.same(active.filter_options.printer_profiles, [
    { value: 'Bambu Lab P1S', count: 1 },
    { value: 'MK4', count: 1 },
  ])
  t.same(active.filter_options.filters, { printing: 0, queued: 1, has_makes: 1, missing_label: 2 })
  t.same((await list('view=deleted')).files.map((f: { id: string }) => f.id), [gone.id])
  t.same((await list('view=active&filters=queued')).files.map((f: { id: string }) => f.id), [threeMf.id])
  t.same((await list('view=active&filters=has_makes, missing_label')).files.map((f: { id: string }) => f.id), [gcode.id], 'all filters must hold')
  t.same((await list('view=active&tags=blue,,blue')).files.map((f: { id: string }) => f.id), [threeMf.id], 'comma lists may repeat and be empty')
  t.same((await list('view=active&printer_profiles=MK4&file_types=application/gcode,model/stl')).files.map((f: { id: string }) => f.id), [gcode.id])
  t.same((await list('view=active&search=BENCH')).files.map((f: { id: string }) => f.id), [threeMf.id])
  const second = await list('view=active&limit=1&offset=1')
  t.equal(second.files.length, 1)
  t.equal(second.filter_options, undefined, 'no filter options past the first page')
  t.same((await request(url, `/v1/model-files/counts?modelId=${modelId}`, { headers: admin })).json, { active: 2, deleted: 1 })
  t.match((await request(url, `/v1/model-files/${gone.id}`, { headers: admin })).json, { id: gone.id, deleted_at: String })

  for (const bad of ['view=archived', 'filters=printing,flying', `search=${'x'.repeat(121)}`, 'limit=201', 'offset=-1']) {
    t.match((await request(url, `/v1/model-files?modelId=${modelId}&${bad}${bad.startsWith('view') ? '' : '&view=active'}`, { headers: admin })).json, { error: 'validation_failed' }, bad)
  }
  t.match((await request(url, '/v1/model-files?view=active', { headers: admin })).json, { error: 'validation_failed', message: /modelId/ })
})

t.test('filament labels - keyed by project filament id, merged, "" clears; other keys 400; a deleted file 409', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'a.3mf', bytes: bambuThreeMf() })).json
  const patch = (labels: Record<string, string>) => request(url, `/v1/model-files/${file.id}/filament-labels`, { method: 'PATCH', headers: admin, body: { labels } })
  const labelled = await patch({ '1': 'White PLA, bay 3' })
  t.equal(labelled.status, 200)
  t.same(labelled.json.filament_labels, { '1': 'White PLA, bay 3' })
  t.equal(labelled.json.project_filaments[0].label, 'White PLA, bay 3')
  t.same((await request(url, `/v1/model-files?modelId=${modelId}&view=active`, { headers: admin })).json.filter_options.filters.missing_label, 0)
  t.same((await patch({ '1': '' })).json.filament_labels, {}, '"" clears')
  t.match(await patch({ '7': 'x' }), { status: 400, json: { error: 'validation_failed', message: /"7" not a project filament id of this file; its project filaments are 1/ } })
  t.match(await patch({ '1': 'x'.repeat(121) }), { status: 400, json: { error: 'validation_failed' } })
  const tooMany = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [String(i + 1), 'x']))
  t.match(await patch(tooMany), { status: 400, json: { error: 'validation_failed' } })
  t.match(await request(url, `/v1/model-files/${file.id}/filament-labels`, { method: 'PATCH', headers: admin, body: { labels: {}, extra: 1 } }), { status: 400 })
  await request(url, `/v1/files/${file.id}`, { method: 'DELETE', headers: admin })
  t.match(await patch({ '1': 'x' }), { status: 409, json: { error: 'file_deleted' } })
})

t.test('live operations - a file whose metadata could not be read at upload is listed as a failure until it is reprocessed or deleted', async (t) => {
  // An organization of its own: the other tests' commands are not in its list.
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: admin, body: { name: `broken files ${Date.now()}` } })
  const headers = { ...admin, 'x-organization-id': org.json.id as string }
  const modelId = await createModel(url, headers)
  const broken = await upload(url, headers, modelId, { name: 'broken.3mf', bytes: Buffer.from('PK\u0003\u0004 this is no zip archive') })
  t.equal(broken.status, 201, 'stored all the same')
  t.equal(broken.json.metadata.processing.status, 'failed')
  const listed = async () => (await request(url, '/v1/model-files/live-operations', { headers })).json.operations as any[]
  t.match(await listed(), [{ kind: 'upload', command_id: null, file_id: broken.json.id, model_id: modelId, status: 'failed', error: String, created_at: String }], 'listed as an unresolved failure')
  t.equal((await listed()).length, 1)
  // Reprocessing it replaces the upload's entry by the command's (it fails again: still listed, once).
  const command = await request(url, `/v1/model-files/${broken.json.id}/reprocess`, { method: 'POST', headers })
  await waitFor(async () => (await request(url, `/v1/model-files/${broken.json.id}/reprocess/${command.json.command_id}`, { headers })).json.status === 'failed', 'the reprocess to fail')
  t.match(await listed(), [{ kind: 'reprocess', command_id: command.json.command_id, file_id: broken.json.id, status: 'failed' }], 'the failed command stands for it now')
  t.equal((await listed()).length, 1, 'once')
  const other = await upload(url, headers, modelId, { name: 'also-broken.3mf', bytes: Buffer.from('not a zip at all') })
  t.ok((await listed()).some((o) => o.file_id === other.json.id && o.kind === 'upload'))
  t.equal((await request(url, `/v1/files/${other.json.id}`, { method: 'DELETE', headers })).status, 200)
  t.notOk((await listed()).some((o) => o.file_id === other.json.id), 'a deleted file is no longer listed')
  const fine = await upload(url, headers, modelId, { name: 'fine.3mf', bytes: bambuThreeMf() })
  t.notOk((await listed()).some((o) => o.file_id === fine.json.id), 'a file read at upload is not listed')
})

t.test('reprocess - 202 with a durable receipt; asked again while queued it is the same command; keys are refused', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'a.gcode', bytes: prusaGcode() }, { tags: 'keep' })).json
  // As if an older version had stored nothing: reprocess reads it all again, the tags kept.
  await sql`update files set metadata = '{"tags":["keep"]}'::jsonb, project_filaments = '[]'::jsonb where id = ${file.id}`
  const first = await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: admin })
  t.equal(first.status, 202)
  t.match(first.json, { command_id: String, file_id: file.id, status: /^(queued|running|succeeded)$/ })
  const receiptPath = `/v1/model-files/${file.id}/reprocess/${first.json.command_id}`
  await waitFor(async () => (await request(url, receiptPath, { headers: admin })).json.status === 'succeeded', 'the reprocess to finish')
  t.match((await request(url, receiptPath, { headers: admin })).json, { status: 'succeeded', error: null, finished_at: String })
  t.match((await request(url, `/v1/files/${file.id}/metadata`, { headers: admin })).json, { metadata: { slicer: 'PrusaSlicer', tags: ['keep'], processing: { status: 'succeeded' } }, project_filaments: [{ id: '1' }] })

  // A queued command (as a restart finds it) is answered again, then run by the worker.
  await svc.services.files.reprocessor.stop()
  const queued = await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: admin })
  const again = await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: admin })
  t.equal(again.json.command_id, queued.json.command_id, 'the same command while one is queued')
  t.match((await request(url, '/v1/model-files/live-operations', { headers: admin })).json.operations, [{ command_id: queued.json.command_id, status: 'queued', model_id: modelId, kind: 'reprocess' }])

  const other = (await upload(url, admin, modelId, { name: 'b.gcode', bytes: prusaGcode() })).json
  t.match(await request(url, `/v1/model-files/${other.id}/reprocess/${queued.json.command_id}`, { headers: admin }), { status: 404, json: { error: 'command_not_found' } }, 'a receipt under another file')
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'all files', scopes: ['files:read', 'files:write', 'models:write'] } })
  t.match(await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: { 'x-api-key': key.json.key } }), { status: 403, json: { error: 'session_required' } })
  await request(url, `/v1/files/${other.id}`, { method: 'DELETE', headers: admin })
  t.match(await request(url, `/v1/model-files/${other.id}/reprocess`, { method: 'POST', headers: admin }), { status: 409, json: { error: 'file_deleted' } })
})

t.test('reprocess - a command queued when the node stopped is run by the next start', async (t) => {
  const { Reprocessor } = await import('../../../src/files/reprocess.js')
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'c.gcode', bytes: prusaGcode() })).json
  const [command] = await sql`insert into file_commands (id, organization_id, file_id, kind, status) values (gen_random_uuid(), ${farm.orgId}, ${file.id}, 'reprocess', 'queued') returning id`
  const worker = new Reprocessor(sql, svc.services.files.store, svc.services.logger, svc.services.clock, { pollMs: 60_000 })
  worker.start()
  t.teardown(() => worker.stop())
  await waitFor(async () => (await request(url, `/v1/model-files/${file.id}/reprocess/${command!.id}`, { headers: admin })).json.status === 'succeeded', 'the restarted worker to run it')
  t.pass('run once by the worker of the new start')
})

t.test('audit and cleanup - orphans are listed and removed; a used, young, missing or outside path is refused with its reason', async (t) => {
  const modelId = await createModel(url, admin)
  const otherModel = await createModel(url, admin)
  const kept = (await upload(url, admin, modelId, { name: 'kept.gcode', bytes: prusaGcode() })).json
  const inOther = (await upload(url, admin, otherModel, { name: 'other.gcode', bytes: prusaGcode() })).json
  const root = join(svc.config.dataDir, 'files')
  const orphan = `${farm.orgId}/${modelId}/lost-v1.0.gcode/lost-v1.0.gcode`
  const young = `${farm.orgId}/${modelId}/new-v1.0.gcode/new-v1.0.gcode`
  for (const key of [orphan, young]) {
    mkdirSync(dirname(join(root, key)), { recursive: true })
    writeFileSync(join(root, key), 'G28\n')
  }
  const hourAgo = new Date(Date.now() - 3_600_000)
  utimesSync(join(root, orphan), hourAgo, hourAgo)

  const audit = (await request(url, `/v1/models/${modelId}/files/audit`, { headers: admin })).json
  t.same(audit.summary, { total_database_files: 1, total_storage_files: 3, total_orphaned_files: 2 })
  t.same(audit.orphaned_files.map((o: { path: string }) => o.path).sort(), [orphan, young].sort())
  t.match(audit.database_files, [{ id: kept.id, file_path: kept.file_path }])

  const cleanup = await request(url, `/v1/models/${modelId}/files/cleanup`, {
    method: 'DELETE',
    headers: admin,
    body: { orphaned_file_paths: [orphan, young, kept.file_path, inOther.file_path, `${farm.orgId}/${modelId}/../${otherModel}/x`, '/etc/passwd', `${farm.orgId}/${modelId}/nothing-here`] },
  })
  t.equal(cleanup.status, 200)
  t.same(cleanup.json.deleted_files, [orphan])
  t.equal(cleanup.json.success, false)
  const reasons = Object.fromEntries(cleanup.json.failed_deletions.map((f: { path: string; error: string }) => [f.path, f.error]))
  t.same(reasons, {
    [young]: 'not_orphaned',
    [kept.file_path]: 'not_orphaned',
    [inOther.file_path]: 'outside_model',
    [`${farm.orgId}/${modelId}/../${otherModel}/x`]: 'outside_model',
    '/etc/passwd': 'outside_model',
    [`${farm.orgId}/${modelId}/nothing-here`]: 'not_found',
  })
  t.equal((await fetch(`${url}/v1/files/${inOther.id}`, { headers: admin })).status, 200, "the other model's file is untouched")
  t.equal((await fetch(`${url}/v1/files/${kept.id}`, { headers: admin })).status, 200)
  t.match(await request(url, `/v1/models/${modelId}/files/cleanup`, { method: 'DELETE', headers: admin, body: { orphaned_file_paths: [], organizationId: '00000000-0000-4000-8000-000000000000' } }), {
    status: 404,
    json: { error: 'organization_not_found' },
  })
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'reader', scopes: ['files:read'] } })
  t.equal((await request(url, `/v1/models/${modelId}/files/audit`, { headers: { 'x-api-key': key.json.key } })).status, 200, 'files:read audits')
  t.match(await request(url, `/v1/models/${modelId}/files/cleanup`, { method: 'DELETE', headers: { 'x-api-key': key.json.key }, body: { orphaned_file_paths: [orphan] } }), { status: 403, json: { error: 'insufficient_scope' } })
})

t.test('grace sweep - bytes of files deleted longer ago than the grace period go; the row stays; restore answers file_purged', async (t) => {
  const modelId = await createModel(url, admin)
  const old = (await upload(url, admin, modelId, { name: 'old.gcode', bytes: prusaGcode() })).json
  const recent = (await upload(url, admin, modelId, { name: 'recent.gcode', bytes: prusaGcode() })).json
  for (const id of [old.id, recent.id]) await request(url, `/v1/files/${id}`, { method: 'DELETE', headers: admin })
  await sql`update files set deleted_at = now() - interval '31 days' where id = ${old.id}`
  t.equal(await svc.services.files.audit.purgeExpired(30, Date.now()), 1)
  t.equal(await svc.services.files.store.stat(old.file_path), undefined, 'the old bytes are gone')
  t.ok(await svc.services.files.store.stat(recent.file_path), 'the recent ones are kept')
  t.match((await request(url, `/v1/model-files/${old.id}`, { headers: admin })).json, { id: old.id, deleted_at: String }, 'the row stays as a tombstone')
  t.match(await request(url, `/v1/files/${old.id}/restore`, { method: 'POST', headers: admin }), { status: 409, json: { error: 'file_purged' } })
  t.equal((await request(url, `/v1/files/${recent.id}/restore`, { method: 'POST', headers: admin })).status, 204)
})

t.test('isolation - another organization gets 404 on every model-files route', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'a.3mf', bytes: bambuThreeMf() })).json
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: { authorization: admin['authorization']! }, body: { name: 'Elsewhere' } })
  const other = { authorization: admin['authorization']!, 'x-organization-id': org.json.id as string }
  const command = (await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: admin })).json.command_id
  for (const [method, path, body] of [
    ['GET', `/v1/model-files?modelId=${modelId}&view=active`],
    ['GET', `/v1/model-files/counts?modelId=${modelId}`],
    ['GET', `/v1/model-files/${file.id}`],
    ['PATCH', `/v1/model-files/${file.id}/filament-labels`, { labels: { '1': 'x' } }],
    ['POST', `/v1/model-files/${file.id}/reprocess`],
    ['GET', `/v1/model-files/${file.id}/reprocess/${command}`],
    ['GET', `/v1/models/${modelId}/files/audit`],
    ['DELETE', `/v1/models/${modelId}/files/cleanup`, { orphaned_file_paths: [file.file_path] }],
  ] as [string, string, unknown?][]) {
    t.equal((await request(url, path, { method, headers: other, body })).status, 404, `${method} ${path}`)
  }
  t.same((await request(url, '/v1/model-files/live-operations', { headers: other })).json, { operations: [] })
  t.equal((await fetch(`${url}/v1/files/${file.id}`, { headers: admin })).status, 200)
})

t.test('limits - every documented bound of the file, model-file and model routes holds at its edge: the bound passes, one past it is 400', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'a.3mf', bytes: bambuThreeMf() })).json
  const list = (query: string) => request(url, `/v1/model-files?modelId=${modelId}&view=active&${query}`, { headers: admin })
  const filters80 = 'printing,queued,has_makes,missing_label,'.padEnd(80, ' ')
  const commaList = (n: number) => 'x,'.repeat(n).slice(0, n)
  for (const [name, ok, over] of [
    ['limit', 'limit=200', 'limit=201'],
    ['limit low', 'limit=1', 'limit=0'],
    ['offset', 'offset=0', 'offset=-1'],
    ['search', `search=${'s'.repeat(120)}`, `search=${'s'.repeat(121)}`],
    ['filters', `filters=${encodeURIComponent(filters80)}`, `filters=${encodeURIComponent(filters80 + ' ')}`],
    ['tags', `tags=${commaList(4096)}`, `tags=${commaList(4097)}`],
    ['printer_profiles', `printer_profiles=${commaList(4096)}`, `printer_profiles=${commaList(4097)}`],
    ['file_types', `file_types=${commaList(4096)}`, `file_types=${commaList(4097)}`],
  ] as const) {
    t.equal((await list(ok)).status, 200, `${name} at its bound`)
    t.match(await list(over), { status: 400, json: { error: 'validation_failed' } }, `${name} past its bound`)
  }
  const labels = (n: number, length = 1) => Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i + 1), 'l'.repeat(length)]))
  const patch = (body: unknown) => request(url, `/v1/model-files/${file.id}/filament-labels`, { method: 'PATCH', headers: admin, body })
  t.equal((await patch({ labels: { '1': 'l'.repeat(120) } })).status, 200, 'a label of 120 characters')
  t.match(await patch({ labels: { '1': 'l'.repeat(121) } }), { status: 400 })
  // 64 entries pass the schema (then only the file's own filament ids are accepted); 65 do not.
  t.match(await patch({ labels: labels(64) }), { status: 400, json: { message: /not a project filament id/ } })
  t.match(await patch({ labels: labels(65) }), { status: 400, json: { message: /labels/ } })
  t.match(await request(url, `/v1/models`, { method: 'POST', headers: admin, body: { name: '' } }), { status: 400 }, 'a model needs a name')
  t.equal((await request(url, `/v1/models`, { method: 'POST', headers: admin, body: { name: 'n'.repeat(200) } })).status, 201)
  t.match(await request(url, `/v1/models`, { method: 'POST', headers: admin, body: { name: 'n'.repeat(201) } }), { status: 400 })
  t.match(await request(url, `/v1/models`, { method: 'POST', headers: admin, body: { name: 'x', sourceUrl: 'javascript:alert(1)' } }), { status: 400 }, 'sourceUrl is an http(s) URL')
  t.match(await request(url, `/v1/models`, { method: 'POST', headers: admin, body: { name: 'x', metadata: { tags: 'not-a-list' } } }), { status: 400 })
  t.match(await request(url, `/v1/models`, { method: 'POST', headers: admin, body: { name: 'x', metadata: { blob: 'b'.repeat(40_000) } } }), { status: 400, json: { message: /at most 32768/ } })
  t.match(await request(url, `/v1/files/not-a-uuid/restore`, { method: 'POST', headers: admin }), { status: 400 }, 'restore takes a uuid')
  t.match(await request(url, `/v1/models/${modelId}/files/cleanup`, { method: 'DELETE', headers: admin, body: {} }), { status: 400, json: { message: /orphaned_file_paths/ } })
})

t.test('api keys - accepted on every file and model-file route with the scope the route names; reprocess refuses them', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'a.3mf', bytes: bambuThreeMf() })).json
  const command = (await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: admin })).json.command_id
  const reader = { 'x-api-key': (await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'r', scopes: ['files:read'] } })).json.key as string }
  const writer = { 'x-api-key': (await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'w', scopes: ['files:write'] } })).json.key as string }
  for (const path of [
    `/v1/files/${file.id}/metadata`,
    `/v1/files/${file.id}`,
    `/v1/files/${file.id}/download-url`,
    `/v1/models/${modelId}/files/audit`,
    '/v1/model-files/live-operations',
    `/v1/model-files?modelId=${modelId}&view=active`,
    `/v1/model-files/counts?modelId=${modelId}`,
    `/v1/model-files/${file.id}`,
    `/v1/model-files/${file.id}/reprocess/${command}`,
  ]) {
    t.equal((await request(url, path, { headers: reader })).status, 200, `files:read reads ${path}`)
    t.match(await request(url, path, { headers: writer }), { status: 403, json: { error: 'insufficient_scope' } }, `files:write alone does not read ${path}`)
  }
  t.equal((await request(url, `/v1/model-files/${file.id}/filament-labels`, { method: 'PATCH', headers: writer, body: { labels: { '1': 'x' } } })).status, 200)
  t.match(await request(url, `/v1/model-files/${file.id}/filament-labels`, { method: 'PATCH', headers: reader, body: { labels: { '1': 'x' } } }), { status: 403 })
  t.equal((await request(url, `/v1/files/${file.id}`, { method: 'DELETE', headers: writer })).status, 200)
  t.equal((await request(url, `/v1/files/${file.id}/restore`, { method: 'POST', headers: writer })).status, 204)
  t.match(await request(url, `/v1/model-files/${file.id}/reprocess`, { method: 'POST', headers: writer }), { status: 403, json: { error: 'session_required' } })
})

t.test('download URLs - an expired URL, correctly signed, answers 403', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'a.gcode', bytes: prusaGcode() })).json
  // Signed as the service would have signed it 16 minutes ago: its 15 minutes are over.
  const { download_url } = svc.services.files.downloads.url(file.id, file.sha256, Date.now() - 16 * 60_000)
  const link = new URL(download_url)
  const res = await fetch(`${url}${link.pathname}${link.search}`)
  t.equal(res.status, 403)
  t.match(await res.json(), { error: 'download_url_invalid' })
  const fresh = new URL(svc.services.files.downloads.url(file.id, file.sha256, Date.now()).download_url)
  t.equal((await fetch(`${url}${fresh.pathname}${fresh.search}`)).status, 200, 'the same file, signed now, opens')
})

t.test('cleanup - a path of another organization is outside the model and is never touched', async (t) => {
  const modelId = await createModel(url, admin)
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: { authorization: admin['authorization']! }, body: { name: 'Neighbour' } })
  const theirs = { authorization: admin['authorization']!, 'x-organization-id': org.json.id as string }
  const theirModel = await createModel(url, theirs)
  const theirFile = (await upload(url, theirs, theirModel, { name: 'theirs.gcode', bytes: prusaGcode() })).json
  const res = await request(url, `/v1/models/${modelId}/files/cleanup`, { method: 'DELETE', headers: admin, body: { orphaned_file_paths: [theirFile.file_path, `${farm.orgId}/${modelId}/../../${org.json.id}/${theirModel}/x`] } })
  t.same(res.json.failed_deletions.map((f: { error: string }) => f.error), ['outside_model', 'outside_model'])
  t.equal((await fetch(`${url}/v1/files/${theirFile.id}`, { headers: theirs })).status, 200)
})
