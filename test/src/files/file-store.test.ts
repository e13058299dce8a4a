/**
 * One conformance suite for every FileStore (STYLE practice 10): the local
 * file system and S3-compatible storage (s3rver on loopback; it checks no
 * signatures, so this proves the protocol use, not the credentials).
 */
import t from 'tap'
import S3rver from 's3rver'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import type { FileStore } from '../../../src/files/file-store.js'
import { FsFileStore } from '../../../src/files/fs-file-store.js'
import { S3FileStore } from '../../../src/files/s3-file-store.js'

// No database here: the suite is the same in both CI runs, so it runs once, in the real-services run
// (the embedded run covers every route group over HTTP, files on disk and on S3 included).
// PRINTFARM_TEST_ALL=1 runs it without DATABASE_URL too.
const skip = !process.env['DATABASE_URL'] && !process.env['PRINTFARM_TEST_ALL'] ? 'runs in the real-services run (no database involved)' : false

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex')
const bytesOf = async (stream: Readable): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
/** Deterministic bytes, streamed in 64 KiB chunks (never held twice). */
function generated(size: number): { stream: () => Readable; hash: string } {
  const chunk = (i: number): Buffer => Buffer.alloc(Math.min(65_536, size - i * 65_536), i % 251)
  const count = Math.ceil(size / 65_536)
  const hash = createHash('sha256')
  for (let i = 0; i < count; i++) hash.update(chunk(i))
  return {
    stream: () => Readable.from((function* () { for (let i = 0; i < count; i++) yield chunk(i) })()),
    hash: hash.digest('hex'),
  }
}
const failing = (): Readable =>
  new Readable({
    read() {
      this.push(Buffer.alloc(1000, 1))
      this.destroy(new Error('the client went away'))
    },
  })

const root = mkdtempSync(join(tmpdir(), 'printfarm-store-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))
const s3dir = mkdtempSync(join(tmpdir(), 'printfarm-s3rver-'))
t.teardown(() => rmSync(s3dir, { recursive: true, force: true }))
const s3rver = skip ? undefined : new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: s3dir, configureBuckets: [{ name: 'printfarm' }] })
const port = s3rver === undefined ? 0 : (await s3rver.run()).port
if (s3rver !== undefined) t.teardown(() => s3rver.close())

const stores: [string, FileStore][] = [
  ['fs', new FsFileStore(join(root, 'files'))],
  ['s3', new S3FileStore({ endpoint: `http://127.0.0.1:${port}`, bucket: 'printfarm', region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', prefix: 'farm/', forcePathStyle: true })],
]

for (const [kind, store] of stores) {
  const area = `file store (${kind})`

  t.test(`${area} - a put answers size and SHA-256; the bytes read back whole and by range`, { skip }, async (t) => {
    const bytes = Buffer.from('G28 ; home\nG1 X10 Y10 E1\n; ünïcode name ok\n')
    const key = 'org/model/part v1.0 ü.gcode/part v1.0 ü.gcode'
    t.same(await store.put(key, Readable.from([bytes])), { size: bytes.length, sha256: sha256(bytes) })
    t.same(await bytesOf(await store.get(key)), bytes)
    for (const [start, end] of [[0, 0], [bytes.length - 1, bytes.length - 1], [3, 9], [0, bytes.length - 1]] as const) {
      t.same(await bytesOf(await store.get(key, { start, end })), bytes.subarray(start, end + 1), `range ${start}-${end}`)
    }
    t.match(await store.stat(key), { key, size: bytes.length, modifiedAt: Number })
    t.equal(await store.stat('org/model/absent'), undefined)
  })

  t.test(`${area} - list answers the objects under a prefix, sorted, nested ones included`, { skip }, async (t) => {
    for (const key of ['o1/m1/b/b', 'o1/m1/a/a', 'o1/m10/x/x', 'o1/m2/c/c']) await store.put(key, Readable.from([Buffer.from(key)]))
    t.same((await store.list('o1/m1/')).map((o) => o.key), ['o1/m1/a/a', 'o1/m1/b/b'], 'm10 is not under m1/')
    t.same(await store.list('o1/nothing/'), [])
    t.match((await store.list('o1/m2/'))[0], { key: 'o1/m2/c/c', size: 'o1/m2/c/c'.length })
  })

  t.test(`${area} - delete removes an object and says whether it existed`, { skip }, async (t) => {
    await store.put('d/m/f/f', Readable.from([Buffer.from('x')]))
    t.equal(await store.delete('d/m/f/f'), true)
    t.equal(await store.delete('d/m/f/f'), false)
    t.equal(await store.stat('d/m/f/f'), undefined)
    t.same(await store.list('d/'), [])
    await t.rejects(store.get('d/m/f/f'), { name: 'FileStoreError', reason: 'not_found' })
  })

  t.test(`${area} - an existing key is never replaced`, { skip }, async (t) => {
    await store.put('k/m/f/f', Readable.from([Buffer.from('first')]))
    await t.rejects(store.put('k/m/f/f', Readable.from([Buffer.from('second')])), { name: 'FileStoreError', reason: 'key_taken' })
    t.equal((await bytesOf(await store.get('k/m/f/f'))).toString(), 'first')
  })

  t.test(`${area} - over the limit, or a source that fails midway, stores nothing`, { skip }, async (t) => {
    const big = generated(300_000)
    await t.rejects(store.put('l/m/big/big', big.stream(), { limitBytes: 100_000 }), { name: 'FileStoreError', reason: 'too_large' })
    await t.rejects(store.put('l/m/cut/cut', failing()), /went away/)
    t.same(await store.list('l/'), [])
    if (kind === 'fs') t.same(readdirSync(join(root, 'files', '.tmp')), [], 'no temporary left')
  })

  t.test(`${area} - keys that could leave the root are refused before any I/O`, { skip }, async (t) => {
    for (const key of ['', '/abs', 'a/../b', '..', 'a//b', 'a\\b', 'a/./b', 'a\u0000b', 'x'.repeat(2000), '.tmp/x']) {
      await t.rejects(store.put(key, Readable.from([Buffer.from('x')])), { name: 'FileStoreError', reason: 'key_invalid' }, JSON.stringify(key.slice(0, 20)))
      await t.rejects(store.get(key), { name: 'FileStoreError', reason: 'key_invalid' })
    }
    await t.rejects(store.list('a/../'), { name: 'FileStoreError', reason: 'key_invalid' })
  })

  t.test(`${area} - a 20 MiB object (several parts on S3) round trips with its hash`, { skip }, async (t) => {
    const big = generated(20 * 1024 * 1024 + 123)
    const put = await store.put('big/m/f/f', big.stream())
    t.same(put, { size: 20 * 1024 * 1024 + 123, sha256: big.hash })
    const hash = createHash('sha256')
    for await (const chunk of await store.get('big/m/f/f')) hash.update(chunk as Buffer)
    t.equal(hash.digest('hex'), big.hash)
  })
}

t.test('file store (fs) - a temporary left by a crash is swept once stale', { skip }, async (t) => {
  const store = stores[0]![1] as FsFileStore
  const tmp = join(root, 'files', '.tmp')
  mkdirSync(tmp, { recursive: true })
  writeFileSync(join(tmp, 'crashed.part'), 'half')
  writeFileSync(join(tmp, 'fresh.part'), 'now')
  const dayAgo = new Date(Date.now() - 86_400_000)
  utimesSync(join(tmp, 'crashed.part'), dayAgo, dayAgo)
  t.equal(await store.removeStaleTemporaries(3_600_000, Date.now()), 1)
  t.same(readdirSync(tmp), ['fresh.part'])
  rmSync(join(tmp, 'fresh.part'))
})
