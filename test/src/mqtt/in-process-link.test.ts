/** The in-memory stream pair the service's client uses to reach its embedded broker (src/mqtt/in-process-link.ts). */
import t from 'tap'
import { once } from 'node:events'
import { inProcessLink } from '../../../src/mqtt/in-process-link.js'

const drain = async (stream: NodeJS.ReadableStream): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

t.test('what one end writes the other reads, in order, in both directions', async (t) => {
  const [a, b] = inProcessLink()
  const atB = drain(b)
  const atA = drain(a)
  a.write('one ')
  b.write('uno ')
  a.write(Buffer.from('two'))
  b.write('dos')
  a.end()
  b.end()
  t.equal((await atB).toString(), 'one two')
  t.equal((await atA).toString(), 'uno dos')
})

t.test('a writer waits while the reader does not read, and everything arrives once it does', async (t) => {
  const [a, b] = inProcessLink()
  const chunk = Buffer.alloc(64 * 1024, 7)
  let accepted = true
  let written = 0
  while (accepted && written < 64) {
    accepted = a.write(chunk)
    written++
  }
  t.notOk(accepted, 'the writer is told to wait before 4 MiB pile up')
  const drained = once(a, 'drain')
  const received = drain(b)
  await drained
  a.end()
  t.equal((await received).length, written * chunk.length, 'every byte written arrives')
})

t.test('destroying one end closes the other, as a socket whose peer went away', async (t) => {
  const [a, b] = inProcessLink()
  const closed = once(b, 'close')
  a.destroy()
  await closed
  t.ok(b.destroyed)
  const late = await new Promise<Error | null | undefined>((resolve) => b.write('late', resolve))
  t.ok(late, 'a write after the close fails')
})
