/**
 * The live feed's `displays` topic over a real WebSocket: a snapshot of the
 * organization's displays with their targets, then one frame per committed
 * change, each the display's whole view as stored.
 */
import t from 'tap'
import { assign, connectSimulator, openDisplayFarm, publishedRevision, registerDisplay } from '../../helpers/displays.js'
import { request } from '../../helpers/http.js'
import { connectLive, type Frame } from '../../helpers/live.js'

t.test('the displays topic: snapshot with targets, then registration, assignment, the device receipt, rename and deletion as frames of the whole view', async (t) => {
  const farm = await openDisplayFarm(t)
  const first = await registerDisplay(farm)
  const live = await connectLive(farm.url, { headers: farm.admin })
  t.teardown(() => live.close())
  live.send({ op: 'subscribe', topics: ['displays'] })
  const snapshot = await live.next((f) => f.op === 'snapshot' && f.topic === 'displays')
  t.same(snapshot.data.displays.map((d: { id: string; target: unknown }) => [d.id, d.target]), [[first.id, null]], 'no target before the first assignment')
  t.type(snapshot.data.stream, 'string')

  const event = (match: (display: any) => boolean) => live.next((f: Frame) => f.op === 'event' && f.topic === 'displays' && match(f.data.display))
  const second = await registerDisplay(farm)
  const registered = await event((d) => d.id === second.id)
  t.same(registered.data.display.pixels, second.pixels)
  t.notOk('credential' in registered.data.display || 'password' in registered.data.display, 'the password never goes on the feed')

  const sim = await connectSimulator(t, farm, second)
  await event((d) => d.id === second.id && d.capabilities !== null)
  const revision = await publishedRevision(farm)
  const res = await assign(farm, second.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(res.status, 200, res.text)
  await sim.waitFor(() => sim.active?.activation_generation === 1, 10_000, 'applied')
  const applied = await event((d) => d.id === second.id && d.target?.status === 'device_applied')
  t.same(applied.data.display.target.applied, applied.data.display.target.desired)

  const renamed = await request(farm.url, `/v1/mqtt/displays/${second.id}`, { method: 'PATCH', headers: farm.admin, body: { name: 'Rack B' } })
  t.equal(renamed.status, 200, renamed.text)
  t.equal((await event((d) => d.id === second.id && d.name === 'Rack B')).data.display.target.status, 'device_applied')

  const removed = await request(farm.url, `/v1/mqtt/displays/${first.id}`, { method: 'DELETE', headers: farm.admin })
  t.equal(removed.status, 200, removed.text)
  t.same((await event((d) => d.id === first.id && d.deleted === true)).data.display, { id: first.id, deleted: true })

  const seqs = live.frames.filter((f) => f.topic === 'displays').map((f) => f.seq!)
  t.same(seqs, seqs.map((_, i) => seqs[0]! + i), 'one seq after another, no gaps')
})

t.test('another organization sees none of these displays on its displays topic', async (t) => {
  const farm = await openDisplayFarm(t)
  await registerDisplay(farm)
  const other = await request(farm.url, '/v1/organizations', { method: 'POST', headers: farm.admin, body: { name: 'Other farm' } })
  t.equal(other.status, 201, other.text)
  const live = await connectLive(farm.url, { headers: { ...farm.admin, 'x-organization-id': other.json.id } })
  t.teardown(() => live.close())
  live.send({ op: 'subscribe', topics: ['displays'] })
  const snapshot = await live.next((f) => f.op === 'snapshot' && f.topic === 'displays')
  t.same(snapshot.data.displays, [])
  const own = await connectLive(farm.url, { headers: farm.admin })
  t.teardown(() => own.close())
  own.send({ op: 'subscribe', topics: ['displays'] })
  await own.next((f) => f.op === 'snapshot')
  const added = await registerDisplay(farm)
  // Both sockets are sent a frame by the same publish: once the owner's arrived, a leaked one would be ahead of this pong.
  await own.next((f) => f.op === 'event' && f.data.display.id === added.id)
  live.send({ op: 'ping' })
  await live.next((f) => f.op === 'pong')
  t.same(live.frames.filter((f) => f.op === 'event'), [], 'no frame of the other organization')
})
