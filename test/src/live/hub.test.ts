import t from 'tap'
import { decode } from '@msgpack/msgpack'
import { LiveHub, type LiveChange } from '../../../src/live/hub.js'
import { printerState } from '../../helpers/printer-state.js'

const org = '11111111-1111-4111-8111-111111111111'
const change = (id: string, rawStatus = 'x', name?: string): LiveChange => ({
  organizationId: org,
  printer: printerState(id, { raw_status: rawStatus, ...(name === undefined ? {} : { name }) }),
  events: [],
  jobs: [],
})

function setup(subscribed: Set<string>, options: { ringSize?: number; printerRingSize?: number } = {}) {
  const sent: { topic: string; message: string | Uint8Array; binary: boolean }[] = []
  const hub = new LiveHub({ publish: (topic, message, binary) => sent.push({ topic, message, binary }), subscribers: (topic) => (subscribed.has(topic) ? 1 : 0), ...options })
  return { hub, sent }
}

t.test('live hub - a frame is serialized once per encoding that has subscribers, never for one without', async (t) => {
  const { hub, sent } = setup(new Set([`j/${org}/printers`, `m/${org}/printers`]))
  hub.printerChanged(change('p1'))
  t.same(sent.map((s) => [s.topic, s.binary]), [[`j/${org}/printers`, false], [`m/${org}/printers`, true]])
  t.same(JSON.parse(sent[0]!.message as string), decode(sent[1]!.message as Uint8Array), 'the same frame in both encodings')
  t.match(JSON.parse(sent[0]!.message as string), { op: 'event', topic: 'printers', seq: 1, data: { printer: { id: 'p1' } } })
})

t.test('live hub - replay gives exactly the frames after a seq while the ring holds them, else asks for a snapshot', async (t) => {
  const { hub } = setup(new Set(), { ringSize: 5 })
  for (let i = 0; i < 8; i++) hub.printerChanged(change('p1', `s${i}`))
  t.equal(hub.currentSeq(org, 'printers'), 8)
  t.same(hub.replay(org, 'printers', 5)!.map((f) => f.seq), [6, 7, 8])
  t.same(hub.replay(org, 'printers', 8), [], 'up to date')
  t.same(hub.replay(org, 'printers', 3)!.map((f) => f.seq), [4, 5, 6, 7, 8], 'the oldest frame still held')
  t.equal(hub.replay(org, 'printers', 2), undefined, 'seq 3 is gone: snapshot')
  t.equal(hub.replay(org, 'printers', 9), undefined, 'a seq never issued: snapshot')
})

t.test("live hub - a printer's own topic buffers only while followed, with a small ring", async (t) => {
  const { hub } = setup(new Set(), { printerRingSize: 2 })
  hub.printerChanged(change('p2'))
  t.equal(hub.currentSeq(org, 'printer:p2'), 0, 'nobody follows it: nothing kept')
  hub.follow(org, 'printer:p2')
  for (let i = 0; i < 5; i++) hub.printerChanged(change('p2'))
  t.equal(hub.currentSeq(org, 'printer:p2'), 5)
  t.same(hub.replay(org, 'printer:p2', 3)!.map((f) => f.seq), [4, 5])
  t.equal(hub.replay(org, 'printer:p2', 2), undefined)
})

t.test('live hub - the latest state per printer is kept, a new name included (a rename never flips back)', async (t) => {
  const { hub } = setup(new Set())
  hub.remember(org, [printerState('p3', { name: 'Bay 3' })])
  hub.printerChanged(change('p3', 'first', 'Bay 3'))
  hub.printerChanged(change('p3', 'second', 'Bay 3 (renamed)'))
  hub.printerChanged(change('p3', 'third', 'Bay 3 (renamed)'))
  t.match(hub.latestPrinters(org, ['p3', 'unknown']), [{ id: 'p3', name: 'Bay 3 (renamed)', raw_status: 'third' }])
})

t.test('live hub - a deleted printer is announced on the printers topic, its state forgotten, and named as removed to a client that caught up late', async (t) => {
  const { hub, sent } = setup(new Set([`j/${org}/printers`]))
  hub.printerChanged(change('p4'))
  hub.printerRemoved({ organizationId: org, printerId: 'p4' })
  t.match(JSON.parse(sent.at(-1)!.message as string), { topic: 'printers', data: { printer: { id: 'p4', removed: true } } })
  t.same(hub.latestPrinters(org, ['p4']), [{ id: 'p4', removed: true }])
})
