/**
 * One conformance suite for every FileStore (STYLE practice 10): the local
 * file system and S3-compatible storage (s3rver on loopback; it checks no
 * signatures, so this proves the protocol use, not the credentials). The S3
 * store talks to s3rver through a recording proxy, so a case can tell which
 * requests were sent (none for a bad key; an abort for a failed multipart
 * upload, which s3rver itself does not implement).
 */
import t, { type Test } from 'tap'
import S3rver from 's3rver'
import { createHash } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { FileStoreError, type FileStore } from '../../../src/files/file-store.js'
import { FsFileStore } from '../../../src/files/fs-file-store.js'
import { S3FileStore } from '../../../src/files/s3-file-store.js'
import { systemClock } from '../../../actors/clock.js'

const MiB = 1024 * 1024
const chunkBytes = 65_536
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex')
const bytesOf = async (stream: Readable): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
const source = (text: string): Readable => Readable.from([Buffer.from(text)])

/** Deterministic bytes (byte n is ⌊n / 64 KiB⌋ mod 251), streamed in 64 KiB chunks and never held whole. */
function generated(size: number): { stream: () => Readable; hash: string; slice: (start: number, end: number) => Buffer } {
  const count = Math.ceil(size / chunkBytes)
  const chunk = (i: number): Buffer => Buffer.alloc(Math.min(chunkBytes, size - i * chunkBytes), i % 251)
  const hash = createHash('sha256')
  for (let i = 0; i < count; i++) hash.update(chunk(i))
  return {
    stream: () => Readable.from((function* () { for (let i = 0; i < count; i++) yield chunk(i) })()),
    hash: hash.digest('hex'),
    slice: (start, end) => Buffer.from(Array.from({ length: end - start + 1 }, (_, n) => Math.floor((start + n) / chunkBytes) % 251)),
  }
}

/** `before` bytes, then an error, as a client whose connection breaks. */
const failingAfter = (before: number): Readable =>
  Readable.from((async function* () {
    for (let sent = 0; sent < before; sent += chunkBytes) yield Buffer.alloc(Math.min(chunkBytes, before - sent), 7)
    throw new Error('the client went away')
  })())

/** `before` bytes, then destroyed without an error, as an aborted request body is. */
function abortedAfter(before: number): Readable {
  const stream = new PassThrough()
  for (let sent = 0; sent < before; sent += chunkBytes) stream.write(Buffer.alloc(Math.min(chunkBytes, before - sent), 9))
  // Destroyed once the store has read what was written, so the bytes do reach it first.
  stream.once('drain', () => stream.destroy())
  return stream
}

/**
 * `before` bytes, then it waits for `release()` before the last chunk. `pulled` settles once
 * the reader took the bytes up to the wait (at most Readable.from's 16 chunks of read-ahead short of it).
 */
function gated(before: number): { stream: Readable; pulled: Promise<void>; release: () => void } {
  let release = (): void => undefined
  let pulledNow = (): void => undefined
  const gate = new Promise<void>((done) => (release = done))
  const pulled = new Promise<void>((done) => (pulledNow = done))
  const stream = Readable.from((async function* () {
    for (let sent = 0; sent < before; sent += chunkBytes) yield Buffer.alloc(chunkBytes, 3)
    pulledNow()
    await gate
    yield Buffer.from('end')
  })())
  return { stream, pulled, release }
}

/** Forwards to s3rver and tells of every request (method and path with query) before forwarding it. */
async function recordingProxy(target: number): Promise<{ server: Server; port: number; requests: string[]; events: EventEmitter }> {
  const requests: string[] = []
  const events = new EventEmitter()
  const server = createServer((req, res) => {
    const line = `${req.method} ${req.url}`
    requests.push(line)
    events.emit('request', line)
    const upstream = httpRequest({ host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    })
    upstream.on('error', () => res.destroy())
    req.pipe(upstream)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port, requests, events }
}

const root = mkdtempSync(join(tmpdir(), 'printfarm-store-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))
const s3dir = mkdtempSync(join(tmpdir(), 'printfarm-s3rver-'))
t.teardown(() => rmSync(s3dir, { recursive: true, force: true }))
const s3rver = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: s3dir, configureBuckets: [{ name: 'printfarm' }] })
const s3port = s3rver === undefined ? 0 : (await s3rver.run()).port
if (s3rver !== undefined) t.teardown(() => s3rver.close())
const proxy = await recordingProxy(s3port)
if (proxy !== undefined) {
  t.teardown(() => {
    proxy.server.closeAllConnections()
    proxy.server.close()
  })
}

/** A loopback port nobody listens on (fetch refuses to even try some low ones, such as 1). */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  server.close()
  await once(server, 'close')
  return port
}
const downEndpoint = `http://127.0.0.1:${await closedPort()}`

const filesRoot = join(root, 'files')
const s3Options = { bucket: 'printfarm', region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', prefix: 'farm/', forcePathStyle: true }
const stores: ['fs' | 's3', FileStore][] = [
  ['fs', new FsFileStore(filesRoot)],
  ['s3', new S3FileStore({ ...s3Options, endpoint: `http://127.0.0.1:${proxy?.port ?? 0}` }, systemClock)],
]
/** Stores where any I/O would fail otherwise (a root never created; a port nobody listens on). */
const unreachable: Record<'fs' | 's3', FileStore> = {
  fs: new FsFileStore(join(root, 'never-created')),
  s3: new S3FileStore({ ...s3Options, endpoint: downEndpoint }, systemClock),
}
const requestsSoFar = (): number => proxy?.requests.length ?? 0

for (const [kind, store] of stores) {
  const area = `file store (${kind})`
  const nothingStoredUnder = async (t: Test, prefix: string, key: string): Promise<void> => {
    t.equal(await store.stat(key), undefined, 'stat finds nothing')
    t.same(await store.list(prefix), [], 'list finds nothing')
    await t.rejects(store.get(key), { name: 'FileStoreError', reason: 'not_found' }, 'get finds nothing')
    if (kind === 'fs') t.same(readdirSync(join(filesRoot, '.tmp')), [], 'no temporary left')
  }

  t.test(`${area} - a put returns size and SHA-256 and the bytes read back whole and by range`, async (t) => {
    const bytes = Buffer.from("G28 ; home\nG1 X10 Y10 E1\n; ünïcode name ok (and S3's odd ones: !'()*+&=)\n")
    const key = "org/model/part v1.0 ü (copy)+'x'*!&=.gcode/part v1.0 ü (copy)+'x'*!&=.gcode"
    t.same(await store.put(key, source(bytes.toString()), { contentType: 'text/x.gcode' }), { size: bytes.length, sha256: sha256(bytes) })
    t.same(await bytesOf(await store.get(key)), bytes)
    const ranges: [string, number, number][] = [['first byte', 0, 0], ['last byte', bytes.length - 1, bytes.length - 1], ['middle', 3, 9], ['whole', 0, bytes.length - 1]]
    for (const [name, start, end] of ranges) t.same(await bytesOf(await store.get(key, { start, end })), bytes.subarray(start, end + 1), name)
    t.match(await store.stat(key), { key, size: bytes.length, modifiedAt: Number })
    t.ok(Math.abs((await store.stat(key))!.modifiedAt - Date.now()) < 86_400_000, 'modifiedAt is ms since the epoch')
    t.equal(await store.stat('org/model/absent'), undefined)
    t.same((await store.list('org/model/')).map((o) => o.key), [key])
  })

  t.test(`${area} - list returns the objects under a prefix, sorted, nested ones included, nothing else`, async (t) => {
    const keys = ['o1/m1/b/b', 'o1/m1/a/a', 'o1/m1/a/deeper/z', 'o1/m10/x/x', 'o1/m2/c/c', 'o2/m1/a/a']
    for (const key of keys) await store.put(key, source(key))
    const listed = await store.list('o1/m1/')
    t.same(listed.map((o) => o.key), ['o1/m1/a/a', 'o1/m1/a/deeper/z', 'o1/m1/b/b'], 'm10/ and o2/ are not under o1/m1/')
    t.match(listed, [{ size: 9, modifiedAt: Number }, { size: 16, modifiedAt: Number }, { size: 9, modifiedAt: Number }])
    t.same((await store.list('o1/')).map((o) => o.key), keys.filter((k) => k.startsWith('o1/')).sort())
    t.same(await store.list('o1/nothing/'), [])
    t.same(await store.list('nobody/'), [])
    t.same(await store.list('o1/m1/a/a/'), [], 'an object is not a folder')
  })

  t.test(`${area} - a key that only holds other objects is not an object`, async (t) => {
    await store.put('f/m/n/n', source('x'))
    t.equal(await store.stat('f/m'), undefined)
    await t.rejects(store.get('f/m'), { name: 'FileStoreError', reason: 'not_found' })
    t.equal(await store.delete('f/m'), false)
    t.equal(await store.stat('f/m/n/n/under-an-object'), undefined)
    t.equal(await store.delete('f/m/n/n/under-an-object'), false)
    t.equal((await bytesOf(await store.get('f/m/n/n'))).toString(), 'x', 'untouched')
  })

  t.test(`${area} - delete removes an object and says whether it existed`, async (t) => {
    await store.put('d/m/f/f', source('x'))
    await store.put('d/m/g/g', source('y'))
    t.equal(await store.delete('d/m/f/f'), true)
    t.equal(await store.delete('d/m/f/f'), false)
    t.equal(await store.delete('d/m/never/never'), false)
    t.equal(await store.stat('d/m/f/f'), undefined)
    await t.rejects(store.get('d/m/f/f'), { name: 'FileStoreError', reason: 'not_found' })
    await t.rejects(store.get('d/m/f/f', { start: 0, end: 0 }), { name: 'FileStoreError', reason: 'not_found' })
    t.same((await store.list('d/')).map((o) => o.key), ['d/m/g/g'], 'its neighbour stays')
    if (kind === 'fs') {
      t.notOk(existsSync(join(filesRoot, 'd', 'm', 'f')), 'its emptied folder went with it')
      t.ok(existsSync(join(filesRoot, 'd', 'm', 'g')), 'a folder still holding an object stays')
      t.equal(await store.delete('d/m/g/g'), true)
      t.notOk(existsSync(join(filesRoot, 'd')), 'empty folders go up to the root')
      t.ok(existsSync(filesRoot), 'the root stays')
    }
  })

  t.test(`${area} - putting an existing key fails with key_taken and the old bytes stay`, async (t) => {
    await store.put('k/m/f/f', source('first'))
    const second = source('second')
    await t.rejects(store.put('k/m/f/f', second), { name: 'FileStoreError', reason: 'key_taken' })
    t.ok(second.destroyed, 'the refused body is destroyed, not left for the caller to drain')
    t.equal((await bytesOf(await store.get('k/m/f/f'))).toString(), 'first')
    t.match(await store.stat('k/m/f/f'), { size: 5 })
    if (kind === 'fs') t.same(readdirSync(join(filesRoot, '.tmp')), [], 'no temporary left')
  })

  t.test(`${area} - a put over limitBytes fails with too_large and stores nothing`, async (t) => {
    const big = generated(300_000)
    const body = big.stream()
    await t.rejects(store.put('l/m/big/big', body, { limitBytes: 100_000 }), { name: 'FileStoreError', reason: 'too_large' })
    t.ok(body.destroyed, 'the source is destroyed, not read to its end')
    await nothingStoredUnder(t, 'l/', 'l/m/big/big')
    t.same(await store.put('l/m/exact/exact', big.stream(), { limitBytes: 300_000 }), { size: 300_000, sha256: big.hash }, 'exactly the limit is fine')
    t.equal(await store.delete('l/m/exact/exact'), true)
  })

  t.test(`${area} - a source that errors or is aborted midway fails the put and stores nothing`, async (t) => {
    await t.rejects(store.put('e/m/cut/cut', failingAfter(200_000)), /went away/, 'errors after some bytes')
    await t.rejects(store.put('e/m/cut/cut', failingAfter(0)), /went away/, 'errors before any byte')
    await t.rejects(store.put('e/m/cut/cut', abortedAfter(200_000)), { code: 'ERR_STREAM_PREMATURE_CLOSE' }, 'destroyed without an error')
    await nothingStoredUnder(t, 'e/', 'e/m/cut/cut')
  })

  t.test(`${area} - an object is invisible until its put completes`, async (t) => {
    const body = gated(10 * MiB)
    const put = store.put('v/m/f/f', body.stream)
    await body.pulled
    t.equal(await store.stat('v/m/f/f'), undefined, 'stat')
    t.same(await store.list('v/'), [], 'list')
    await t.rejects(store.get('v/m/f/f'), { name: 'FileStoreError', reason: 'not_found' }, 'get')
    body.release()
    t.match(await put, { size: 10 * MiB + 3 })
    t.match(await store.stat('v/m/f/f'), { size: 10 * MiB + 3 })
  })

  t.test(`${area} - bad keys are refused with key_invalid before any I/O`, async (t) => {
    const before = requestsSoFar()
    const badKeys = ['', '/abs', 'a/../b', '..', 'a//b', 'a\\b', 'a/./b', 'a\u0000b', 'a\nb', 'x'.repeat(2000), '.tmp/x', 'a/.hidden', 'a/', '../outside']
    for (const bad of [store, unreachable[kind]]) {
      for (const key of badKeys) {
        const name = JSON.stringify(key.slice(0, 20))
        const body = source('x')
        await t.rejects(bad.put(key, body), { name: 'FileStoreError', reason: 'key_invalid' }, `put ${name}`)
        t.ok(body.destroyed, `put ${name} destroys its body`)
        await t.rejects(bad.get(key), { name: 'FileStoreError', reason: 'key_invalid' }, `get ${name}`)
        await t.rejects(bad.get(key, { start: 0, end: 0 }), { name: 'FileStoreError', reason: 'key_invalid' }, `get ${name} by range`)
        await t.rejects(bad.stat(key), { name: 'FileStoreError', reason: 'key_invalid' }, `stat ${name}`)
        await t.rejects(bad.delete(key), { name: 'FileStoreError', reason: 'key_invalid' }, `delete ${name}`)
      }
      for (const prefix of ['', 'a', '/a/', 'a/../', '../', 'a//', '.tmp/', 'a\\b/']) {
        await t.rejects(bad.list(prefix), { name: 'FileStoreError', reason: 'key_invalid' }, `list ${JSON.stringify(prefix)}`)
      }
    }
    t.equal(requestsSoFar(), before, 'no request reached the bucket')
    if (kind === 'fs') t.notOk(existsSync(join(root, 'never-created')), 'no folder was created')
  })

  t.test(`${area} - a 20 MiB object (multipart on S3) round trips with the right hash, whole and by range`, async (t) => {
    const size = 20 * MiB + 123
    const big = generated(size)
    t.same(await store.put('big/m/f/f', big.stream()), { size, sha256: big.hash })
    const hash = createHash('sha256')
    for await (const chunk of await store.get('big/m/f/f')) hash.update(chunk as Buffer)
    t.equal(hash.digest('hex'), big.hash)
    for (const [start, end] of [[8 * MiB - 10, 8 * MiB + 10], [size - 5, size - 1], [0, 3]] as const) {
      t.same(await bytesOf(await store.get('big/m/f/f', { start, end })), big.slice(start, end), `range ${start}-${end}`)
    }
    t.match(await store.stat('big/m/f/f'), { size })
    t.equal(await store.delete('big/m/f/f'), true)
  })

  t.test(`${area} - objects at the 8 MiB part size round trip`, async (t) => {
    for (const size of [8 * MiB, 8 * MiB + 1, 16 * MiB]) {
      const bytes = generated(size)
      t.same(await store.put(`p/m/${size}/${size}`, bytes.stream()), { size, sha256: bytes.hash }, `${size} bytes`)
      const hash = createHash('sha256')
      for await (const chunk of await store.get(`p/m/${size}/${size}`)) hash.update(chunk as Buffer)
      t.equal(hash.digest('hex'), bytes.hash)
    }
  })
}

t.test('file store (s3) - a put sends one PUT up to 8 MiB, parts beyond, and aborts the upload when it fails', async (t) => {
  const store = stores[1]![1]
  const sent = (from: number): string[] => proxy!.requests.slice(from).map((line) => line.replace(/uploadId=[^&]+/, 'uploadId=…'))

  let from = requestsSoFar()
  await store.put('s/m/small/small', generated(8 * MiB).stream())
  t.same(sent(from), ['HEAD /printfarm/farm/s/m/small/small', 'PUT /printfarm/farm/s/m/small/small'])

  from = requestsSoFar()
  await store.put('s/m/large/large', generated(17 * MiB).stream())
  t.same(sent(from), [
    'HEAD /printfarm/farm/s/m/large/large',
    'POST /printfarm/farm/s/m/large/large?uploads=',
    'PUT /printfarm/farm/s/m/large/large?partNumber=1&uploadId=…',
    'PUT /printfarm/farm/s/m/large/large?partNumber=2&uploadId=…',
    'PUT /printfarm/farm/s/m/large/large?partNumber=3&uploadId=…',
    'POST /printfarm/farm/s/m/large/large?uploadId=…',
  ])

  for (const [why, body, options] of [
    ['a source that errors', failingAfter(9 * MiB), {}],
    ['a source that is aborted', abortedAfter(9 * MiB), {}],
    ['the limit', generated(12 * MiB).stream(), { limitBytes: 10 * MiB }],
  ] as const) {
    from = requestsSoFar()
    await t.rejects(store.put('s/m/cut/cut', body, options), why)
    const lines = sent(from)
    t.equal(lines.at(-1), 'DELETE /printfarm/farm/s/m/cut/cut?uploadId=…', `${why}: the multipart upload is aborted`)
    t.notOk(lines.some((line) => line.startsWith('POST /printfarm/farm/s/m/cut/cut?uploadId=')), `${why}: never completed`)
  }
  t.equal(await store.stat('s/m/cut/cut'), undefined)
})

t.test('file store (s3) - an unreachable or failing bucket is unavailable, without the credentials in the message', async (t) => {
  // s3rver knows one key id (S3RVER) and checks no SigV4 signature, so any secret passes.
  const secretAccessKey = 'never-in-a-message'
  const endpoint = `http://127.0.0.1:${proxy!.port}`
  const down = new S3FileStore({ ...s3Options, secretAccessKey, endpoint: downEndpoint }, systemClock)
  const missingBucket = new S3FileStore({ ...s3Options, secretAccessKey, bucket: 'no-such-bucket', endpoint }, systemClock)
  const unknownKey = new S3FileStore({ ...s3Options, secretAccessKey, accessKeyId: 'NOT-S3RVER', endpoint }, systemClock)
  const cases: [string, () => Promise<unknown>, RegExp][] = [
    ['put, bucket down', () => down.put('u/m/f/f', source('x')), /did not complete.*ECONNREFUSED/],
    ['get, bucket down', () => down.get('u/m/f/f'), /did not complete.*ECONNREFUSED/],
    ['stat, bucket down', () => down.stat('u/m/f/f'), /did not complete/],
    ['list, bucket down', () => down.list('u/'), /did not complete/],
    ['delete, bucket down', () => down.delete('u/m/f/f'), /did not complete/],
    ['get, no such bucket', () => missingBucket.get('u/m/f/f'), /404 \(NoSuchBucket\)/],
    ['list, no such bucket', () => missingBucket.list('u/'), /404 \(NoSuchBucket\)/],
    ['list, unknown key id', () => unknownKey.list('u/'), /403 \(InvalidAccessKeyId\)/],
  ]
  for (const [name, attempt, message] of cases) {
    const error = await attempt().then(() => undefined, (e: unknown) => e)
    t.match(error, { name: 'FileStoreError', reason: 'unavailable', message }, name)
    t.notMatch(error instanceof FileStoreError ? error.message : '', /never-in-a-message/, `${name}: no secret in the message`)
  }
})

t.test('file store (fs) - a temporary left by a crash is swept once stale', async (t) => {
  const store = stores[0]![1] as FsFileStore
  const tmp = join(filesRoot, '.tmp')
  mkdirSync(tmp, { recursive: true })
  writeFileSync(join(tmp, 'crashed.part'), 'half')
  writeFileSync(join(tmp, 'fresh.part'), 'now')
  const dayAgo = new Date(Date.now() - 86_400_000)
  utimesSync(join(tmp, 'crashed.part'), dayAgo, dayAgo)
  t.equal(await store.removeStaleTemporaries(3_600_000, Date.now()), 1)
  t.same(readdirSync(tmp), ['fresh.part'])
  t.same(await store.list('crashed/'), [], 'temporaries are never objects')
  rmSync(join(tmp, 'fresh.part'))
  t.equal(await new FsFileStore(join(root, 'no-tmp-yet')).removeStaleTemporaries(0, Date.now()), 0, 'no .tmp yet: nothing to sweep')
})

t.test('file store (fs) - a key can never land outside the root', async (t) => {
  const store = new FsFileStore(join(root, 'inner', 'files'))
  for (const key of ['../escaped', '../../escaped', 'a/../../escaped', '..', 'a/..', '/tmp/escaped', '../files-sibling/x']) {
    await t.rejects(store.put(key, source('out')), { name: 'FileStoreError', reason: 'key_invalid' }, JSON.stringify(key))
  }
  t.same(readdirSync(root).filter((name) => name.includes('escaped') || name.includes('sibling')), [])
  t.notOk(existsSync(join(root, 'inner', 'escaped')))
  t.notOk(existsSync(join(root, 'inner', 'files-sibling')))
})

t.test('file store (fs) - two puts racing for one key: one stores, the other gets key_taken', async (t) => {
  const store = stores[0]![1]
  const outcomes = await Promise.allSettled([store.put('r/m/f/f', source('one')), store.put('r/m/f/f', source('two'))])
  t.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1)
  const refused = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')
  t.match(refused?.reason, { name: 'FileStoreError', reason: 'key_taken' })
  t.match((await bytesOf(await store.get('r/m/f/f'))).toString(), /^(one|two)$/)
  t.same(readdirSync(join(filesRoot, '.tmp')), [], 'no temporary left')
})
