import t, { type Test } from 'tap'
import { ServiceError } from '../../../protocol/errors.js'
import { readBody, RequestAborted, type BodySource, type RequestLifecycle } from '../../../src/http/body.js'

type DataHandler = (chunk: ArrayBuffer, isLast: boolean) => void

/** Stands in for a uWS HttpResponse: keeps the onData handler so the test can feed chunks. */
class FakeSource implements BodySource {
  handler: DataHandler | undefined
  registrations = 0
  onData(handler: DataHandler): this {
    this.registrations++
    this.handler = handler
    return this
  }
  /**
   * Feeds a chunk the way uWS does: the ArrayBuffer is only valid during the
   * callback, so it is zeroed right after, as if uWS reused the memory.
   */
  feed(bytes: Uint8Array, isLast: boolean): void {
    if (!this.handler) throw new Error('onData was never registered')
    const ab = new ArrayBuffer(bytes.byteLength)
    new Uint8Array(ab).set(bytes)
    this.handler(ab, isLast)
    new Uint8Array(ab).fill(0)
  }
  /** Feeds `data` as chunks ending at the given offsets (the last offset is data.length). */
  feedSplit(data: Uint8Array, cuts: readonly number[]): void {
    let start = 0
    for (const end of cuts) {
      this.feed(data.subarray(start, end), end === data.length)
      start = end
    }
  }
}

const newLife = (): RequestLifecycle => ({ aborted: false, onAbort: undefined })

/** Resolves to the rejection reason, or fails the test if the promise resolves. */
async function rejection(t: Test, p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (value) => {
      t.fail(`expected a rejection, got ${String(value)}`)
      return undefined
    },
    (err: unknown) => err,
  )
}

/** Deterministic PRNG (mulberry32) so a failing split can be reproduced from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function randomCuts(length: number, random: () => number): number[] {
  const cuts = new Set<number>([length])
  const count = Math.floor(random() * 8)
  for (let i = 0; i < count; i++) cuts.add(Math.floor(random() * (length + 1)))
  // Cutting at 0 or twice at one offset yields empty chunks, which uWS can also send.
  return [...cuts].sort((a, b) => a - b)
}

const sample = (length: number): Uint8Array => Uint8Array.from({ length }, (_, i) => (i * 31 + 7) & 0xff)

t.test('body - a single chunk resolves to a copy of its bytes', async (t) => {
  for (const declared of [true, false]) {
    const source = new FakeSource()
    const data = sample(100)
    const p = readBody(source, 1024, declared ? data.length : undefined, newLife())
    t.equal(source.registrations, 1)
    source.feed(data, true)
    const body = await p
    t.ok(Buffer.isBuffer(body))
    t.same([...body], [...data], `declared length: ${declared}`)
  }
})

t.test('body - chunks are copied, so memory reused by uWS after the callback does not change the result', async (t) => {
  for (const declared of [true, false]) {
    const source = new FakeSource()
    const data = sample(12)
    const p = readBody(source, 1024, declared ? data.length : undefined, newLife())
    // One ArrayBuffer for every chunk, overwritten between callbacks and zeroed at the end.
    const shared = new ArrayBuffer(4)
    const view = new Uint8Array(shared)
    for (let offset = 0; offset < data.length; offset += 4) {
      view.set(data.subarray(offset, offset + 4))
      source.handler?.(shared, offset + 4 === data.length)
      view.fill(0xee)
    }
    view.fill(0)
    const body = await p
    t.same([...body], [...data], `declared length: ${declared}`)
  }
})

t.test('body - a single undeclared chunk is not the caller memory', async (t) => {
  const source = new FakeSource()
  const p = readBody(source, 1024, undefined, newLife())
  const ab = new ArrayBuffer(5)
  new Uint8Array(ab).set([1, 2, 3, 4, 5])
  source.handler?.(ab, true)
  new Uint8Array(ab).fill(9)
  const body = await p
  t.same([...body], [1, 2, 3, 4, 5])
  t.not(body.buffer, ab, 'the result does not alias the chunk')
})

t.test('body - a declared Content-Length over the limit is refused before reading', async (t) => {
  const source = new FakeSource()
  const err = await rejection(t, readBody(source, 100, 101, newLife()))
  t.ok(err instanceof ServiceError, 'a ServiceError')
  if (err instanceof ServiceError) {
    t.equal(err.code, 'payload_too_large')
    t.equal(err.status, 413)
    t.match(err.message, /100 bytes/)
  }
  t.equal(source.registrations, 0, 'onData is never registered')
})

t.test('body - an undeclared body that passes the limit is cut off and later chunks are ignored', async (t) => {
  const source = new FakeSource()
  const life = newLife()
  const p = readBody(source, 10, undefined, life)
  source.feed(sample(6), false)
  source.feed(sample(5), false) // 11 bytes: one past the limit
  const err = await rejection(t, p)
  t.ok(err instanceof ServiceError)
  if (err instanceof ServiceError) t.equal(err.code, 'payload_too_large')
  t.doesNotThrow(() => {
    source.feed(sample(3), false)
    source.feed(sample(1), true)
    life.onAbort?.()
  }, 'chunks and an abort after the cut-off are ignored')
})

t.test('body - a body longer than its declared length is refused, not overflowed', async (t) => {
  const source = new FakeSource()
  const p = readBody(source, 1024, 4, newLife())
  t.doesNotThrow(() => source.feed(sample(6), true))
  const err = await rejection(t, p)
  t.ok(err instanceof ServiceError)
  if (err instanceof ServiceError) t.equal(err.code, 'payload_too_large')
})

t.test('body - a body exactly at the limit resolves', async (t) => {
  for (const declared of [true, false]) {
    const source = new FakeSource()
    const data = sample(64)
    const p = readBody(source, 64, declared ? 64 : undefined, newLife())
    source.feedSplit(data, [10, 40, 64])
    const body = await p
    t.equal(body.length, 64, `declared length: ${declared}`)
    t.same([...body], [...data])
  }
})

t.test('body - an abort while reading rejects with RequestAborted', async (t) => {
  const source = new FakeSource()
  const life = newLife()
  const p = readBody(source, 1024, 10, life)
  t.type(life.onAbort, 'function', 'the reader registers for the abort')
  source.feed(sample(4), false)
  life.aborted = true
  life.onAbort?.()
  const err = await rejection(t, p)
  t.ok(err instanceof RequestAborted)
  t.doesNotThrow(() => source.feed(sample(6), true), 'a chunk after the abort is ignored')
})

t.test('body - an already aborted request rejects at once without registering onData', async (t) => {
  const source = new FakeSource()
  const life: RequestLifecycle = { aborted: true, onAbort: undefined }
  const err = await rejection(t, readBody(source, 1024, 10, life))
  t.ok(err instanceof RequestAborted)
  t.equal(source.registrations, 0)
})

t.test('body - a completed read releases the abort handler', async (t) => {
  const source = new FakeSource()
  const life = newLife()
  const p = readBody(source, 1024, undefined, life)
  source.feed(sample(3), true)
  t.equal((await p).length, 3)
  t.equal(life.onAbort, undefined)
})

t.test('body - an empty body resolves to an empty buffer', async (t) => {
  for (const declared of [0, undefined]) {
    const source = new FakeSource()
    const p = readBody(source, 1024, declared, newLife())
    source.feed(new Uint8Array(0), true)
    const body = await p
    t.ok(Buffer.isBuffer(body))
    t.equal(body.length, 0, `declared length: ${String(declared)}`)
  }
})

t.test('body - several chunks with a declared length are assembled in order', async (t) => {
  const source = new FakeSource()
  const data = Buffer.from('{"name":"printer-1","nozzle":0.4,"bed":[220,220]}')
  const p = readBody(source, 1024, data.length, newLife())
  source.feedSplit(data, [1, 9, 10, 30, data.length])
  const body = await p
  t.equal(body.toString('utf8'), data.toString('utf8'))
  t.equal(body.length, data.length)
})

t.test('body - whole, one byte at a time and random splits give the same bytes', async (t) => {
  const data = sample(257)
  const expected = [...data]
  for (const declared of [true, false]) {
    const label = `declared length: ${declared}`
    const read = async (cuts: readonly number[]): Promise<number[]> => {
      const source = new FakeSource()
      const p = readBody(source, 4096, declared ? data.length : undefined, newLife())
      source.feedSplit(data, cuts)
      return [...(await p)]
    }
    t.same(await read([data.length]), expected, `whole, ${label}`)
    t.same(await read(Array.from({ length: data.length }, (_, i) => i + 1)), expected, `one byte at a time, ${label}`)
    for (let seed = 1; seed <= 50; seed++) {
      const cuts = randomCuts(data.length, prng(seed))
      t.same(await read(cuts), expected, `random split seed ${seed} ${JSON.stringify(cuts)}, ${label}`)
    }
  }
})

t.test('body - the limit holds however the body is split', async (t) => {
  const data = sample(65)
  for (let seed = 1; seed <= 20; seed++) {
    const source = new FakeSource()
    const p = readBody(source, 64, undefined, newLife())
    source.feedSplit(data, randomCuts(data.length, prng(seed)))
    const err = await rejection(t, p)
    t.ok(err instanceof ServiceError && err.code === 'payload_too_large', `seed ${seed}`)
  }
})
