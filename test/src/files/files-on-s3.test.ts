/**
 * The service with its files in S3-compatible storage (s3rver on loopback),
 * over HTTP: the same uploads, content, ranges, signed URLs, audit and
 * cleanup as on the file system.
 */
import t from 'tap'
import S3rver from 's3rver'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, prusaGcode, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'

const s3dir = mkdtempSync(join(tmpdir(), 'printfarm-s3rver-'))
t.teardown(() => rmSync(s3dir, { recursive: true, force: true }))
const s3rver = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: s3dir, configureBuckets: [{ name: 'farm-files' }] })
const { port } = await s3rver.run()
t.teardown(() => s3rver.close())

const svc = await startTestService(t, {
  FILES_S3_ENDPOINT: `http://127.0.0.1:${port}`,
  FILES_S3_BUCKET: 'farm-files',
  FILES_S3_ACCESS_KEY_ID: 'S3RVER',
  FILES_S3_SECRET_ACCESS_KEY: 'S3RVER',
  FILES_S3_PREFIX: 'printfarm/',
})
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin

t.test('files on S3 - upload, metadata, content by range, signed URL, delete and restore', async (t) => {
  t.equal(svc.services.files.store.kind, 's3')
  const modelId = await createModel(url, admin)
  const bytes = bambuThreeMf()
  const file = await upload(url, admin, modelId, { name: 'benchy.3mf', bytes })
  t.equal(file.status, 201)
  t.match(file.json, { file_type: 'model/3mf', file_path: `${farm.orgId}/${modelId}/benchy-v1.0.3mf/benchy-v1.0.3mf`, metadata: { processing: { status: 'succeeded' }, estimated_seconds: 3723 } })
  const whole = await fetch(`${url}/v1/files/${file.json.id}`, { headers: admin })
  t.same(Buffer.from(await whole.arrayBuffer()), Buffer.from(bytes))
  const part = await fetch(`${url}/v1/files/${file.json.id}`, { headers: { ...admin, range: 'bytes=0-3' } })
  t.equal(part.status, 206)
  t.same(Buffer.from(await part.arrayBuffer()), Buffer.from('PK\u0003\u0004', 'latin1'))
  const link = new URL((await request(url, `/v1/files/${file.json.id}/download-url`, { headers: admin })).json.download_url)
  t.equal((await fetch(`${url}${link.pathname}${link.search}`)).status, 200)
  await request(url, `/v1/files/${file.json.id}`, { method: 'DELETE', headers: admin })
  t.equal((await fetch(`${url}/v1/files/${file.json.id}`, { headers: admin })).status, 404)
  t.equal((await request(url, `/v1/files/${file.json.id}/restore`, { method: 'POST', headers: admin })).status, 204)
  t.equal((await fetch(`${url}/v1/files/${file.json.id}`, { headers: admin })).status, 200)
})

t.test('files on S3 - a 12 MiB G-code goes up in parts and comes back whole; audit and cleanup see the bucket', async (t) => {
  const modelId = await createModel(url, admin)
  const body = Buffer.concat([Buffer.from(prusaGcode()), Buffer.alloc(12 * 1024 * 1024, 0x0a)])
  const big = await upload(url, admin, modelId, { name: 'big.gcode', bytes: body })
  t.equal(big.status, 201)
  t.equal(big.json.sha256, createHash('sha256').update(body).digest('hex'))
  const back = createHash('sha256')
  const res = await fetch(`${url}/v1/files/${big.json.id}`, { headers: admin })
  for await (const chunk of Readable.fromWeb(res.body! as never)) back.update(chunk as Buffer)
  t.equal(back.digest('hex'), big.json.sha256)

  const orphan = `${farm.orgId}/${modelId}/lost-v1.0.gcode/lost-v1.0.gcode`
  await svc.services.files.store.put(orphan, Readable.from([Buffer.from('G28\n')]))
  const audit = (await request(url, `/v1/models/${modelId}/files/audit`, { headers: admin })).json
  t.same(audit.summary, { total_database_files: 1, total_storage_files: 2, total_orphaned_files: 1 })
  t.same(audit.orphaned_files.map((o: { path: string }) => o.path), [orphan])
  // Just written, so it counts as an upload about to be claimed: not deleted.
  const cleanup = await request(url, `/v1/models/${modelId}/files/cleanup`, { method: 'DELETE', headers: admin, body: { orphaned_file_paths: [orphan, big.json.file_path] } })
  t.same(cleanup.json.failed_deletions.map((f: { error: string }) => f.error), ['not_orphaned', 'not_orphaned'])
  const later = await svc.services.files.audit.cleanup(farm.orgId, modelId, [orphan], Date.now() + 3_600_000)
  t.same(later.deleted_files, [orphan], 'an hour on, it is an orphan and goes')
  t.equal(await svc.services.files.store.stat(orphan), undefined)
})
