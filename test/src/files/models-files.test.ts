/**
 * Models and files over real HTTP (embedded or real PostgreSQL, files on the
 * file system): models' life cycle, uploads with versioned names and slicer
 * metadata, content with ranges and etags, signed download URLs, soft delete
 * and restore, and the scopes that guard them.
 */
import t from 'tap'
import { strToU8 } from 'fflate'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { readdirSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { waitFor } from '../../helpers/poll.js'
import { hostileForms, sendRaw } from '../../helpers/hostile-forms.js'
import { request } from '../../helpers/http.js'
import { openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, prusaGcode, upload } from '../../helpers/files.js'
import { startTestService } from '../../helpers/service.js'

const svc = await startTestService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex')

t.test('models - create, read, list by search and tag, patch merges metadata, delete hides, restore brings back', async (t) => {
  const created = await request(url, '/v1/models', {
    method: 'POST',
    headers: admin,
    body: { name: 'Calibration Cube', designer: 'Ada', source: 'printables', sourceUrl: 'https://example.com/m/1', sourceId: 'm-1', images: ['https://example.com/1.png'], metadata: { tags: ['calibration', 'small'], colour: 'any' } },
  })
  t.equal(created.status, 201)
  t.match(created.json, { name: 'Calibration Cube', designer: 'Ada', sourceUrl: 'https://example.com/m/1', sourceId: 'm-1', file_count: 0, metadata: { tags: ['calibration', 'small'] } })
  const id: string = created.json.id
  await createModel(url, admin, { name: 'Other thing', designer: 'Bob' })

  t.same((await request(url, '/v1/models?search=ADA', { headers: admin })).json.models.map((m: { id: string }) => m.id), [id], 'search matches the designer, case-insensitively')
  t.same((await request(url, '/v1/models?tag=small', { headers: admin })).json.models.map((m: { id: string }) => m.id), [id], 'tag matches metadata.tags')
  t.equal((await request(url, '/v1/models?search=%25', { headers: admin })).json.total, 0, '% is a literal, not a wildcard')

  const patched = await request(url, `/v1/models/${id}`, { method: 'PATCH', headers: admin, body: { name: 'Cube v2', metadata: { colour: null, infill: 15 } } })
  t.equal(patched.status, 200)
  t.same(patched.json.metadata, { tags: ['calibration', 'small'], infill: 15 }, 'keys merge; null removes one')

  t.same((await request(url, `/v1/models/${id}`, { method: 'DELETE', headers: admin })).json, { success: true })
  t.match((await request(url, `/v1/models/${id}`, { headers: admin })).json, { error: 'model_not_found' })
  t.notOk((await request(url, '/v1/models', { headers: admin })).json.models.some((m: { id: string }) => m.id === id), 'not listed')
  t.equal((await upload(url, admin, id, { name: 'a.gcode', bytes: prusaGcode() })).status, 404, 'a deleted model takes no uploads')
  t.equal((await request(url, `/v1/models/${id}/restore`, { method: 'POST', headers: admin })).status, 204)
  t.equal((await request(url, `/v1/models/${id}`, { headers: admin })).json.name, 'Cube v2')
})

t.test('uploads - a Bambu 3MF is stored under a versioned name with its metadata read; the same name again is the next version', async (t) => {
  const modelId = await createModel(url, admin)
  const bytes = bambuThreeMf()
  const first = await upload(url, admin, modelId, { name: 'benchy.3mf', bytes }, { tags: 'boat, test ,boat' })
  t.equal(first.status, 201, JSON.stringify(first.json))
  t.match(first.json, {
    filename: 'benchy.3mf',
    file_path: `${farm.orgId}/${modelId}/benchy-v1.0.3mf/benchy-v1.0.3mf`,
    file_type: 'model/3mf',
    file_size: bytes.length,
    sha256: sha256(bytes),
    model_id: modelId,
    activePlateNumber: 1,
    metadata: { processing: { status: 'succeeded' }, estimated_seconds: 3723, tags: ['boat', 'test'] },
  })
  t.same(first.json.project_filaments.map((f: { id: string }) => f.id), ['1'], 'a filament with 0 g is not listed')
  const second = await upload(url, admin, modelId, { name: 'benchy.3mf', bytes })
  t.equal(second.json.file_path, `${farm.orgId}/${modelId}/benchy-v1.1.3mf/benchy-v1.1.3mf`)
  const hostile = await upload(url, admin, modelId, { name: '../../etc/passwd', bytes: new TextEncoder().encode('root:x:0:0') })
  t.equal(hostile.status, 201)
  t.equal(hostile.json.file_path, `${farm.orgId}/${modelId}/passwd-v1.0/passwd-v1.0`, 'a path in the name is reduced to its base name')
  t.equal(hostile.json.file_type, 'application/octet-stream')
  t.equal((await request(url, `/v1/models/${modelId}`, { headers: admin })).json.file_count, 3)
})

t.test('uploads - G-code is typed by content and its header and footer read', async (t) => {
  const modelId = await createModel(url, admin)
  const res = await upload(url, admin, modelId, { name: 'part.gcode', bytes: prusaGcode(), type: 'text/plain' })
  t.equal(res.status, 201)
  t.match(res.json, { file_type: 'application/gcode', metadata: { processing: { status: 'succeeded' }, slicer: 'PrusaSlicer', estimated_seconds: 3723 } })
})

t.test('uploads - a damaged 3MF is stored with processing failed, never a 500', async (t) => {
  const modelId = await createModel(url, admin)
  const res = await upload(url, admin, modelId, { name: 'broken.3mf', bytes: new TextEncoder().encode('PK\u0003\u0004 not really a zip') })
  t.equal(res.status, 201)
  t.match(res.json, { file_type: 'application/octet-stream', metadata: { processing: { status: 'failed', error: String } } })
})

t.test('uploads - refused without a usable multipart body, a part named file, or the scope; nothing is stored', async (t) => {
  const modelId = await createModel(url, admin)
  const json = await request(url, `/v1/models/${modelId}/files`, { method: 'POST', headers: admin, body: { file: 'x' } })
  t.match(json, { status: 400, json: { error: 'multipart_invalid' } })
  const form = new FormData()
  form.append('document', new Blob(['x']), 'x.gcode')
  const wrongPart = await fetch(`${url}/v1/models/${modelId}/files`, { method: 'POST', headers: admin, body: form })
  t.equal(wrongPart.status, 400)
  t.match(await wrongPart.json(), { error: 'multipart_invalid', message: /named file/ })
  const noFile = await upload(url, admin, modelId, { name: 'x', bytes: new Uint8Array() }).then(async () => {
    const onlyTags = new FormData()
    onlyTags.append('tags', 'a')
    return fetch(`${url}/v1/models/${modelId}/files`, { method: 'POST', headers: admin, body: onlyTags })
  })
  t.equal(noFile.status, 400)
  t.match(await noFile.json(), { error: 'multipart_invalid', message: /no part named file/ })

  const bridge = await upload(url, farm.bridge, modelId, { name: 'a.gcode', bytes: prusaGcode() })
  t.match(bridge, { status: 403, json: { error: 'insufficient_scope' } }, "a bridge's key (printers scopes) cannot upload")
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'uploader', scopes: ['files:write'] } })
  t.equal((await upload(url, { 'x-api-key': key.json.key }, modelId, { name: 'a.gcode', bytes: prusaGcode() })).status, 201, 'files:write is enough')
  const files = await svc.services.db.sql`select filename from files where model_id = ${modelId} order by created_at`
  t.same(files.map((f) => f.filename), ['x', 'a.gcode'], 'only the accepted uploads have rows')
})

t.test('content - whole, by range, 416 past the end, 304 on the etag; headers name the file', async (t) => {
  const modelId = await createModel(url, admin)
  const bytes = prusaGcode()
  const file = (await upload(url, admin, modelId, { name: 'Läufer "v2".gcode', bytes })).json
  const whole = await fetch(`${url}/v1/files/${file.id}`, { headers: admin })
  t.equal(whole.status, 200)
  t.same(Buffer.from(await whole.arrayBuffer()), Buffer.from(bytes))
  t.equal(whole.headers.get('content-type'), 'application/gcode')
  t.equal(whole.headers.get('etag'), `"${sha256(bytes)}"`)
  t.equal(whole.headers.get('content-length'), String(bytes.length))
  t.match(whole.headers.get('content-disposition'), /^attachment; filename="L_ufer _v2_.gcode"; filename\*=UTF-8''L%C3%A4ufer%20%22v2%22.gcode$/)
  const part = await fetch(`${url}/v1/files/${file.id}`, { headers: { ...admin, range: 'bytes=2-11' } })
  t.equal(part.status, 206)
  t.equal(part.headers.get('content-range'), `bytes 2-11/${bytes.length}`)
  t.same(Buffer.from(await part.arrayBuffer()), Buffer.from(bytes.subarray(2, 12)))
  const suffix = await fetch(`${url}/v1/files/${file.id}`, { headers: { ...admin, range: 'bytes=-5' } })
  t.same(Buffer.from(await suffix.arrayBuffer()), Buffer.from(bytes.subarray(bytes.length - 5)))
  const past = await fetch(`${url}/v1/files/${file.id}`, { headers: { ...admin, range: `bytes=${bytes.length}-` } })
  t.equal(past.status, 416)
  t.equal(past.headers.get('content-range'), `bytes */${bytes.length}`)
  t.match(await past.json(), { error: 'range_not_satisfiable' })
  const cached = await fetch(`${url}/v1/files/${file.id}`, { headers: { ...admin, 'if-none-match': `"${sha256(bytes)}"` } })
  t.equal(cached.status, 304)
  t.match((await request(url, `/v1/files/${file.id}/metadata`, { headers: admin })).json, { id: file.id, filename: 'Läufer "v2".gcode' })
})

t.test('download URLs - open the file with no credential; altered or for another file they answer 403', async (t) => {
  const modelId = await createModel(url, admin)
  const bytes = bambuThreeMf()
  const a = (await upload(url, admin, modelId, { name: 'a.3mf', bytes })).json
  const b = (await upload(url, admin, modelId, { name: 'b.gcode', bytes: prusaGcode() })).json
  const signed = await request(url, `/v1/files/${a.id}/download-url`, { headers: admin })
  t.equal(signed.status, 200)
  const link = new URL(signed.json.download_url)
  t.equal(`${link.protocol}//${link.host}`, svc.config.publicBaseUrl)
  const local = `${url}${link.pathname}${link.search}`
  const opened = await fetch(local)
  t.equal(opened.status, 200)
  t.same(Buffer.from(await opened.arrayBuffer()), Buffer.from(bytes))
  const expires = Number(link.searchParams.get('expires'))
  t.ok(expires * 1000 > Date.now() + 14 * 60_000 && expires * 1000 <= Date.now() + 15 * 60_000 + 1000, 'valid for 15 minutes')

  const later = new URL(local)
  later.searchParams.set('expires', String(expires + 3600))
  const otherFile = local.replace(a.id, b.id)
  const badSignature = new URL(local)
  badSignature.searchParams.set('signature', 'A'.repeat(43))
  for (const [what, target] of [['a later expiry', later.toString()], ['another file', otherFile], ['another signature', badSignature.toString()]] as const) {
    const res = await fetch(target)
    t.equal(res.status, 403, what)
    t.match(await res.json(), { error: 'download_url_invalid' }, what)
  }
  t.equal((await fetch(`${url}/v1/files/${a.id}`)).status, 401, 'no signature, no credential: 401')
  await request(url, `/v1/files/${a.id}`, { method: 'DELETE', headers: admin })
  t.equal((await fetch(local)).status, 403, 'a deleted file no longer opens')
})

t.test('delete and restore - a deleted file reads as not found; restore brings it back, unless its model is deleted', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'x.gcode', bytes: prusaGcode() })).json
  t.same((await request(url, `/v1/files/${file.id}`, { method: 'DELETE', headers: admin })).json, { success: true })
  for (const path of [`/v1/files/${file.id}`, `/v1/files/${file.id}/metadata`, `/v1/files/${file.id}/download-url`]) {
    t.match((await request(url, path, { headers: admin })).json, { error: 'file_not_found' }, path)
  }
  t.match((await request(url, `/v1/files/${file.id}`, { method: 'DELETE', headers: admin })).json, { error: 'file_not_found' }, 'twice: not found')
  t.equal((await request(url, `/v1/files/${file.id}/restore`, { method: 'POST', headers: admin })).status, 204)
  t.equal((await request(url, `/v1/files/${file.id}/metadata`, { headers: admin })).status, 200)
  t.equal((await request(url, `/v1/files/${file.id}/restore`, { method: 'POST', headers: admin })).status, 204, 'restoring an active file: 204, nothing changes')

  await request(url, `/v1/files/${file.id}`, { method: 'DELETE', headers: admin })
  await request(url, `/v1/models/${modelId}`, { method: 'DELETE', headers: admin })
  t.match((await request(url, `/v1/files/${file.id}/restore`, { method: 'POST', headers: admin })).json, { error: 'model_unavailable' })
  await request(url, `/v1/models/${modelId}/restore`, { method: 'POST', headers: admin })
  await svc.services.db.sql`update files set purged_at = now() where id = ${file.id}`
  t.match((await request(url, `/v1/files/${file.id}/restore`, { method: 'POST', headers: admin })), { status: 409, json: { error: 'file_purged' } })
})

t.test('isolation - another organization never sees or changes a model or file', async (t) => {
  const modelId = await createModel(url, admin)
  const file = (await upload(url, admin, modelId, { name: 'mine.gcode', bytes: prusaGcode() })).json
  const org = await request(url, '/v1/organizations', { method: 'POST', headers: { authorization: admin['authorization']! }, body: { name: 'Other farm' } })
  const other = { authorization: admin['authorization']!, 'x-organization-id': org.json.id as string }
  const checks: [string, string, unknown?][] = [
    ['GET', `/v1/models/${modelId}`],
    ['PATCH', `/v1/models/${modelId}`, { name: 'stolen' }],
    ['DELETE', `/v1/models/${modelId}`],
    ['POST', `/v1/models/${modelId}/restore`],
    ['GET', `/v1/files/${file.id}`],
    ['GET', `/v1/files/${file.id}/metadata`],
    ['GET', `/v1/files/${file.id}/download-url`],
    ['DELETE', `/v1/files/${file.id}`],
    ['POST', `/v1/files/${file.id}/restore`],
  ]
  for (const [method, path, body] of checks) {
    const res = await request(url, path, { method, headers: other, body })
    t.equal(res.status, 404, `${method} ${path}`)
  }
  t.equal((await upload(url, other, modelId, { name: 'x.gcode', bytes: prusaGcode() })).status, 404, 'upload into it')
  t.equal((await request(url, '/v1/models', { headers: other })).json.total, 0)
  t.equal((await request(url, `/v1/files/${file.id}/metadata`, { headers: admin })).json.deleted_at, null, 'unchanged')
  t.equal((await request(url, `/v1/models/${modelId}`, { headers: admin })).json.name, 'Benchy')
})

t.test('uploads - over UPLOAD_LIMIT_BYTES is 413 and leaves no bytes and no row', async (t) => {
  const small = await startTestService(t, { UPLOAD_LIMIT_BYTES: '4096' })
  const smallFarm = await openFarm(small.url)
  const modelId = await createModel(small.url, smallFarm.admin)
  t.equal((await upload(small.url, smallFarm.admin, modelId, { name: 'ok.gcode', bytes: new Uint8Array(4000).fill(59) })).status, 201, 'under the limit')
  const res = await upload(small.url, smallFarm.admin, modelId, { name: 'big.gcode', bytes: new Uint8Array(200_000).fill(59) })
  t.equal(res.status, 413)
  t.match(res.json, { error: 'payload_too_large', message: /UPLOAD_LIMIT_BYTES/ })
  const rows = await small.services.db.sql`select filename from files where model_id = ${modelId}`
  t.same(rows.map((r) => r.filename), ['ok.gcode'])
  const stored = readdirSync(join(small.config.dataDir, 'files', smallFarm.orgId, modelId))
  t.same(stored, ['ok-v1.0.gcode'], 'no object of the refused upload')
  t.same(readdirSync(join(small.config.dataDir, 'files', '.tmp')), [], 'no temporary left')
})

t.test('uploads - hostile zips (a bomb, names that climb out, 10,000 entries) are stored with processing failed', async (t) => {
  const modelId = await createModel(url, admin)
  const bomb = bambuThreeMf({ 'Metadata/slice_info.config': new Uint8Array(64 * 1024 * 1024) })
  t.ok(bomb.length < 1024 * 1024, `the bomb is small (${bomb.length} bytes) and inflates to 64 MiB`)
  const climbing = bambuThreeMf({ '../../outside.txt': strToU8('x'), '/etc/cron.d/x': strToU8('x') })
  const many: Record<string, Uint8Array> = {}
  for (let i = 0; i < 10_000; i++) many[`Metadata/junk/${i}.txt`] = new Uint8Array(0)
  const crowded = bambuThreeMf(many)
  for (const [what, bytes, error] of [
    ['zip bomb', bomb, /slice_info\.config is \d+ bytes; at most/],
    ['path traversal', climbing, /damaged or unsafe/],
    ['10,000 entries', crowded, /entries; at most 5000/],
  ] as const) {
    const res = await upload(url, admin, modelId, { name: `${what}.3mf`, bytes })
    t.equal(res.status, 201, what)
    t.match(res.json.metadata, { processing: { status: 'failed', error } }, what)
    t.equal(res.json.file_size, bytes.length, `${what}: the bytes are kept as sent`)
  }
  t.match(await (await fetch(`${url}/metrics`)).text(), /^file_metadata_failures_total [3-9]/m)
})

t.test('uploads - a client that goes away mid-upload leaves no row, no object and no temporary', async (t) => {
  const modelId = await createModel(url, admin)
  const metrics = async (): Promise<string> => (await fetch(`${url}/metrics`)).text()
  const failedBefore = Number(/^file_uploads_total\{outcome="failed"\} (\d+)/m.exec(await metrics())?.[1] ?? 0)
  const boundary = 'abort-test-boundary'
  const preamble = `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="cut.gcode"\r\ncontent-type: application/octet-stream\r\n\r\n`
  const socket = connect(svc.port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write(
    `POST /v1/models/${modelId}/files HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${admin['authorization']}\r\nx-organization-id: ${farm.orgId}\r\n` +
      `content-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n${preamble}`,
  )
  socket.write(Buffer.alloc(512 * 1024, 0x3b))
  await waitFor(async () => readdirSync(join(svc.config.dataDir, 'files', '.tmp')).length > 0, 'the upload to start writing')
  socket.destroy()
  await waitFor(async () => Number(/^file_uploads_total\{outcome="failed"\} (\d+)/m.exec(await metrics())?.[1] ?? 0) > failedBefore, 'the upload to be counted as failed')
  t.same(readdirSync(join(svc.config.dataDir, 'files', '.tmp')), [], 'no temporary')
  t.same(await svc.services.db.sql`select id from files where model_id = ${modelId}`, [], 'no row')
  t.same(await svc.services.files.store.list(`${farm.orgId}/${modelId}/`), [], 'no object')
})

t.test('uploads - a form that ends early, before or inside its part, answers 400 multipart_invalid; no row, no object, no temporary, and the node answers on', async (t) => {
  const modelId = await createModel(url, admin)
  const path = `/v1/models/${modelId}/files`
  const forms = new Map(hostileForms().map((form) => [form.kind, form]))
  for (const kind of ['unterminated (no closing boundary)', 'cut inside the part headers', 'only the opening boundary', 'empty body', 'no boundary parameter']) {
    const form = forms.get(kind)!
    for (const framing of ['content-length', 'chunked'] as const) {
      const answer = await sendRaw(url, { method: 'POST', path, headers: admin, contentType: form.contentType, body: form.body, framing })
      t.equal(answer.status, 400, `${kind} (${framing}): ${answer.text}`)
      t.match(JSON.parse(answer.text || '{}'), { error: 'multipart_invalid' }, `${kind} (${framing}) names what to fix`)
      t.equal((await request(url, '/healthz')).status, 200, `${kind} (${framing}): the node still answers`)
    }
  }
  t.same(await svc.services.db.sql`select id from files where model_id = ${modelId}`, [], 'no row')
  t.same(await svc.services.files.store.list(`${farm.orgId}/${modelId}/`), [], 'no object')
  t.same(readdirSync(join(svc.config.dataDir, 'files', '.tmp')), [], 'no temporary')
})

t.test('uploads - concurrent uploads of one name get distinct versions', async (t) => {
  const modelId = await createModel(url, admin)
  const answers = await Promise.all(Array.from({ length: 6 }, () => upload(url, admin, modelId, { name: 'same.gcode', bytes: prusaGcode() })))
  t.same(answers.map((a) => a.status), [201, 201, 201, 201, 201, 201])
  t.same(answers.map((a) => a.json.file_path.split('/')[2]).sort(), [0, 1, 2, 3, 4, 5].map((n) => `same-v1.${n}.gcode`))
})

t.test('content - clients that go away mid-download release their file handles, and a slow reader is paused, not buffered', async (t) => {
  const modelId = await createModel(url, admin)
  const bytes = new Uint8Array(8 * 1024 * 1024).fill(0x3b)
  const file = (await upload(url, admin, modelId, { name: 'big.gcode', bytes })).json
  const handles = (): number => readdirSync('/proc/self/fd').length
  const before = handles()
  for (let i = 0; i < 20; i++) {
    const socket = connect(svc.port, '127.0.0.1')
    await once(socket, 'connect')
    socket.write(`GET /v1/files/${file.id} HTTP/1.1\r\nhost: x\r\nauthorization: ${admin['authorization']}\r\nx-organization-id: ${farm.orgId}\r\n\r\n`)
    await once(socket, 'data')
    socket.destroy()
  }
  await waitFor(() => handles() <= before, 'the aborted downloads to close their files')
  t.ok(handles() <= before, 'no file handle left open')
  // A reader that takes its time still gets every byte.
  const res = await fetch(`${url}/v1/files/${file.id}`, { headers: admin })
  const reader = res.body!.getReader()
  let got = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    got += value.length
    if (got < 1024 * 1024) await new Promise((r) => setImmediate(r))
  }
  t.equal(got, bytes.length)
  t.equal((await request(url, '/healthz')).status, 200)
})
