import t from 'tap'
import { childServiceEnv, startChildService } from '../../helpers/child-service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { connectLive } from '../../helpers/live.js'
import { tempDir, tempSchema } from '../../helpers/service.js'

const shared = process.env['DATABASE_URL'] !== undefined && process.env['REDIS_URL'] !== undefined
const schema = shared ? tempSchema(t) : 'public'

t.test('live feed across nodes - a dashboard on node B sees the printers node A ingests, through Redis', { skip: shared ? false : 'needs DATABASE_URL and REDIS_URL (two processes share them)' }, async (t) => {
  const env = (dataDir: string) => childServiceEnv(dataDir, schema)
  const a = await startChildService(t, { env: env(tempDir(t)) })
  const b = await startChildService(t, { env: env(tempDir(t)) })
  const farmA = await openFarm(a.url)
  const farmB = await openFarm(b.url)
  const printer = await addPrinter(farmA)

  const dashboard = await connectLive(b.url, { headers: farmB.bridge })
  t.teardown(() => dashboard.close())
  dashboard.send({ op: 'subscribe', topics: ['printers', `printer:${printer}`] })
  const snapshot = await dashboard.next((f) => f.op === 'snapshot' && f.topic === 'printers')
  t.ok(snapshot.data.printers.some((p: { id: string }) => p.id === printer), "node B's snapshot comes from the shared store")

  const res = await postBatch(farmA, batch(printer, [item(0, { type: 'job:start', data: { name: 'relay' } })]))
  t.equal(res.status, 200)
  const event = await dashboard.next((f) => f.op === 'event' && f.topic === 'printers' && f.data.printer.id === printer)
  t.match(event.data.printer, { online: true, status: 'RUNNING', job: { name: 'relay' } })
  const detail = await dashboard.next((f) => f.op === 'event' && f.topic === `printer:${printer}`)
  t.match(detail.data.events, [{ eventId: 'ev-0', type: 'job:start' }], 'with the stored events')
  t.equal(event.seq, snapshot.seq! + 1, "in node B's own sequence")
})
