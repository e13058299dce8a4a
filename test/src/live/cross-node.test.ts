import t from 'tap'
import { childServiceEnv, startChildService } from '../../helpers/child-service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { connectLive } from '../../helpers/live.js'
import { request } from '../../helpers/http.js'
import { tempDir, tempSchema, type TestContext } from '../../helpers/service.js'

const shared = process.env['DATABASE_URL'] !== undefined && process.env['REDIS_URL'] !== undefined
const schema = shared ? tempSchema(t) : 'public'
const skip = shared ? false : 'needs DATABASE_URL and REDIS_URL (two processes share them)'

/** Two nodes on this file's schema and Redis, each signed in as the admin. */
async function twoNodes(t: TestContext) {
  const a = await startChildService(t, { env: childServiceEnv(tempDir(t), schema) })
  const b = await startChildService(t, { env: childServiceEnv(tempDir(t), schema) })
  return { a, b, farmA: await openFarm(a.url), farmB: await openFarm(b.url) }
}

t.test('live feed across nodes - a dashboard on node B sees the printers node A ingests, through Redis', { skip }, async (t) => {
  const { a, b, farmA, farmB } = await twoNodes(t)
  const printer = await addPrinter(farmA)

  const dashboard = await connectLive(b.url, { headers: farmB.bridge })
  t.teardown(() => dashboard.close())
  dashboard.send({ op: 'subscribe', topics: ['printers', `printer:${printer}`] })
  const snapshot = await dashboard.next((f) => f.op === 'snapshot' && f.topic === 'printers')
  t.ok(snapshot.data.printers.some((p: { id: string }) => p.id === printer), "node B's snapshot comes from the shared store")

  // Right after start-up shards are still moving to node B, and a printer's may have no owner for a
  // moment: a bridge retries the 503, as this one does.
  const body = batch(printer, [item(0, { type: 'job:start', data: { name: 'relay' } })])
  let res = await postBatch(farmA, body)
  for (let tries = 0; res.status === 503 && tries < 100; tries++) {
    await new Promise((r) => setTimeout(r, 200))
    res = await postBatch(farmA, body)
  }
  t.equal(res.status, 200)
  const event = await dashboard.next((f) => f.op === 'event' && f.topic === 'printers' && f.data.printer.id === printer)
  t.match(event.data.printer, { online: true, status: 'RUNNING', job: { name: 'relay' } })
  const detail = await dashboard.next((f) => f.op === 'event' && f.topic === `printer:${printer}`)
  t.match(detail.data.events, [{ eventId: 'ev-0', type: 'job:start' }], 'with the stored events')
  t.equal(event.seq, snapshot.seq! + 1, "in node B's own sequence")
})

t.test('live feed across nodes - display changes reach the displays topic on every node, whichever node owns the display', { skip }, async (t) => {
  const { a, b, farmA, farmB } = await twoNodes(t)
  const dashboards = await Promise.all([connectLive(a.url, { headers: farmA.admin }), connectLive(b.url, { headers: farmB.admin })])
  t.teardown(() => dashboards.forEach((d) => d.close()))
  for (const d of dashboards) {
    d.send({ op: 'subscribe', topics: ['displays'] })
    await d.next((f) => f.op === 'snapshot' && f.topic === 'displays')
  }
  const printer = await addPrinter(farmA)
  // Right after start-up some shards have no live owner: the previous test's nodes were killed and
  // their leases have not run out yet, and the shards moving to node B have none for a moment. A
  // dozen registrations land on every kind of shard: owned by A, by B, or by nobody reachable (the
  // frame then comes from the node that made the change).
  const ids: string[] = []
  for (let i = 0; i < 12; i++) {
    const registered = await request(b.url, '/v1/mqtt/displays', { method: 'POST', headers: farmB.admin, body: { name: 'Rack A', pixels: [printer] } })
    if (registered.status !== 201) throw new Error(`registration: ${registered.status} ${registered.text}`)
    ids.push(registered.json.id as string)
  }
  for (const [name, d] of [['A', dashboards[0]!], ['B', dashboards[1]!]] as const) {
    for (const id of ids) {
      const frame = await d.next((f) => f.op === 'event' && f.topic === 'displays' && f.data.display.id === id)
      t.match(frame.data.display, { id, name: 'Rack A', pixels: [printer] })
    }
    t.pass(`every registration made through node B reaches node ${name}'s dashboard`)
  }
  const id = ids[0]!
  const renamed = await request(a.url, `/v1/mqtt/displays/${id}`, { method: 'PATCH', headers: farmA.admin, body: { name: 'Rack B' } })
  t.equal(renamed.status, 200, `renamed through node A (${renamed.status === 200 ? 'ok' : renamed.text})`)
  for (const [name, d] of [['A', dashboards[0]!], ['B', dashboards[1]!]] as const) {
    await d.next((f) => f.op === 'event' && f.topic === 'displays' && f.data.display.id === id && f.data.display.name === 'Rack B')
    t.pass(`the rename reaches node ${name}'s dashboard`)
  }
})
