import t from 'tap'
import { printerState } from '../../helpers/printer-state.js'
import { request, signIn } from '../../helpers/http.js'
import { startTestService, testAdmin, type TestContext } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { connectLive, type LiveClient } from '../../helpers/live.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const session = await signIn(svc.url, testAdmin.email, testAdmin.password)
const token = session.access
const printerA = await addPrinter(farm)

const open = async (t: TestContext, options: Parameters<typeof connectLive>[1] = { headers: farm.bridge }): Promise<LiveClient> => {
  const client = await connectLive(svc.url, options)
  t.teardown(() => client.close())
  return client
}
const refused = (options: Parameters<typeof connectLive>[1]) => connectLive(svc.url, options).then(
  (c) => (c.close(), { status: 101, body: undefined }),
  (e: { status?: number; body?: unknown }) => ({ status: e.status, body: e.body }),
)

t.test('live auth - an API key, a Bearer header and an access_token query parameter each open the feed', async (t) => {
  for (const options of [{ headers: farm.bridge }, { headers: { authorization: `Bearer ${token}` } }, { query: `access_token=${encodeURIComponent(token)}` }]) {
    const client = await open(t, options)
    client.send({ op: 'ping' })
    t.equal((await client.next((f) => f.op === 'pong')).op, 'pong')
  }
})

t.test('live auth - bad credentials are refused with a clear HTTP status before the upgrade', async (t) => {
  t.match(await refused({}), { status: 401, body: { error: 'unauthorized' } })
  t.match(await refused({ headers: { authorization: 'Bearer not-a-token' } }), { status: 401 })
  t.match(await refused({ query: 'access_token=forged.token.value' }), { status: 401 })
  t.match(await refused({ headers: { 'x-api-key': 'pfk_0000000000_' + 'A'.repeat(43) } }), { status: 401 })
  const writer = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'no read', scopes: ['jobs:read'] } })
  t.match(await refused({ headers: { 'x-api-key': writer.json.key } }), { status: 403, body: { error: 'insufficient_scope' } })
  t.match(await refused({ headers: { ...farm.bridge, 'x-organization-id': '00000000-0000-4000-8000-000000000000' } }), { status: 404 })
  t.match(await refused({ headers: farm.bridge, protocols: ['chat.v2'] }), { status: 400, body: { error: 'validation_failed', message: /printfarm\.v1\.json/ } })
})

t.test('live auth - an API key deleted, disabled or stripped of printers:read while its socket is open closes that socket with 4001; a session socket stays', async (t) => {
  const newKey = async (scopes: string[]) => {
    const res = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'dashboard', scopes } })
    if (res.status !== 200) throw new Error(res.text)
    return { id: res.json.id as string, headers: { 'x-api-key': res.json.key as string } }
  }
  const deleted = await newKey(['printers:read'])
  const disabled = await newKey(['printers:read'])
  const rescoped = await newKey(['printers:read'])
  const sockets = await Promise.all([deleted, disabled, rescoped].map((k) => open(t, { headers: k.headers })))
  const person = await open(t, { headers: { authorization: `Bearer ${token}`, 'x-organization-id': farm.orgId } })
  t.equal((await request(svc.url, `/v1/api-keys/${deleted.id}?organizationId=${farm.orgId}`, { method: 'DELETE', headers: farm.admin })).status, 204)
  t.equal((await request(svc.url, `/v1/api-keys/${disabled.id}`, { method: 'PATCH', headers: farm.admin, body: { enabled: false } })).status, 200)
  t.equal((await request(svc.url, `/v1/api-keys/${rescoped.id}`, { method: 'PATCH', headers: farm.admin, body: { scopes: ['jobs:read'] } })).status, 200)
  for (const [name, socket] of [['deleted', sockets[0]!], ['disabled', sockets[1]!], ['re-scoped', sockets[2]!]] as const) {
    t.match(await socket.closedWith(15_000), { code: 4001, reason: /API key/ }, `the ${name} key's socket is closed`)
  }
  person.send({ op: 'ping' })
  t.equal((await person.next((f) => f.op === 'pong')).op, 'pong', 'a socket on a session is not touched')
  const metrics = await request(svc.url, '/metrics')
  t.match(metrics.text, /live_closed_key_revoked_total 3/)
})

t.test('live auth - a key that loses a topic\'s scope while subscribed leaves that topic with an insufficient_scope error and keeps the others', async (t) => {
  const res = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'wall', scopes: ['printers:read', 'jobs:read'] } })
  const client = await open(t, { headers: { 'x-api-key': res.json.key } })
  client.send({ op: 'subscribe', topics: ['printers', 'jobs'] })
  await client.next((f) => f.op === 'snapshot' && f.topic === 'jobs')
  await client.next((f) => f.op === 'snapshot' && f.topic === 'printers')
  t.equal((await request(svc.url, `/v1/api-keys/${res.json.id}`, { method: 'PATCH', headers: farm.admin, body: { scopes: ['printers:read'] } })).status, 200)
  t.match((await client.next((f) => f.op === 'error' && f.topic === 'jobs', 15_000)).data, { error: 'insufficient_scope', message: /jobs:read/ })
  const printer = await addPrinter(farm)
  await postBatch(farm, batch(printer, [item(0, { type: 'heartbeat' })]))
  t.match((await client.next((f) => f.op === 'event' && f.topic === 'printers' && f.data.printer.id === printer && f.data.printer.online)).data.printer, { id: printer, online: true }, 'the printers topic keeps coming')
  client.send({ op: 'subscribe', topics: ['jobs'] })
  t.match((await client.next((f) => f.op === 'error' && f.topic === 'jobs' && /needs/.test(f.data.message))).data, { error: 'insufficient_scope' }, 'and it cannot subscribe to it again')
})

t.test('live feed - a subscription answers with a snapshot, then every change in seq order', async (t) => {
  const client = await open(t)
  client.send({ op: 'subscribe', topics: ['printers', `printer:${printerA}`] })
  const snapshot = await client.next((f) => f.op === 'snapshot' && f.topic === 'printers')
  t.ok(snapshot.data.printers.some((p: { id: string }) => p.id === printerA), 'the organization\'s printers')
  t.type(snapshot.data.stream, 'string')
  await client.next((f) => f.op === 'snapshot' && f.topic === `printer:${printerA}`)
  const start = snapshot.seq!
  await postBatch(farm, batch(printerA, [item(0, { type: 'job:start', data: { name: 'cube' } })]))
  await postBatch(farm, batch(printerA, [item(1, { type: 'job:update', data: { progress: 50 } })]))
  const second = await client.next((f) => f.op === 'event' && f.topic === 'printers' && f.data.printer.job?.progress === 50)
  const events = client.frames.filter((f) => f.op === 'event' && f.topic === 'printers')
  t.same(events.map((f) => f.seq), [start + 1, start + 2], 'consecutive seqs, no gap')
  t.match(second.data.printer, { id: printerA, online: true, status: 'RUNNING', job: { name: 'cube', progress: 50, state: 'printing' } })
  const detail = await client.next((f) => f.topic === `printer:${printerA}` && f.op === 'event' && f.data.events.some((e: { type: string }) => e.type === 'job:update'))
  t.match(detail.data.events, [{ eventId: 'ev-1', type: 'job:update', seqn: 1 }], "the printer's topic carries its stored events")
})

t.test('live feed - isolation: another organization sees none of these printers and cannot name them', async (t) => {
  const other = await request(svc.url, '/v1/organizations', { method: 'POST', headers: session.auth, body: { name: 'Live other farm' } })
  const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: { ...session.auth, 'x-organization-id': other.json.id }, body: { name: 'b', scopes: ['printers:read'] } })
  const client = await open(t, { headers: { 'x-api-key': key.json.key } })
  client.send({ op: 'subscribe', topics: ['printers', `printer:${printerA}`] })
  const snapshot = await client.next((f) => f.op === 'snapshot' && f.topic === 'printers')
  t.same(snapshot.data.printers, [])
  const error = await client.next((f) => f.op === 'error' && f.topic === `printer:${printerA}`)
  t.equal(error.data.error, 'topic_not_found')
  await postBatch(farm, batch(printerA, [item(100, { type: 'heartbeat' })]))
  const mine = await open(t)
  mine.send({ op: 'subscribe', topics: ['printers'] })
  await mine.next((f) => f.op === 'snapshot')
  await postBatch(farm, batch(printerA, [item(101, { type: 'heartbeat' })]))
  await mine.next((f) => f.op === 'event')
  t.same(client.frames.filter((f) => f.op === 'event'), [], 'nothing of organization A reached B')
})

t.test('live feed - a client that missed events resumes from its last seq; another stream gets a fresh snapshot', async (t) => {
  const first = await open(t)
  first.send({ op: 'subscribe', topics: ['printers'] })
  const snapshot = await first.next((f) => f.op === 'snapshot')
  await postBatch(farm, batch(printerA, [item(200, { type: 'heartbeat' })]))
  const last = await first.next((f) => f.op === 'event')
  first.close()
  await postBatch(farm, batch(printerA, [item(201, { type: 'heartbeat' })]))
  await postBatch(farm, batch(printerA, [item(202, { type: 'heartbeat' })]))
  const again = await open(t)
  again.send({ op: 'subscribe', topics: ['printers'], since: { printers: last.seq }, stream: snapshot.data.stream })
  const replayed = await again.next((f) => f.op === 'event' && f.seq === last.seq! + 2)
  t.ok(replayed)
  t.same(again.frames.map((f) => [f.op, f.seq]), [['event', last.seq! + 1], ['event', last.seq! + 2]], 'only what was missed, no snapshot')
  const elsewhere = await open(t)
  elsewhere.send({ op: 'subscribe', topics: ['printers'], since: { printers: last.seq }, stream: 'another-node' })
  t.equal((await elsewhere.next((f) => f.op === 'snapshot' || f.op === 'event')).op, 'snapshot')
})

t.test('live feed - MessagePack frames for clients that ask for them', async (t) => {
  const client = await open(t, { headers: farm.bridge, protocols: ['printfarm.v1.msgpack'] })
  t.equal(client.ws.protocol, 'printfarm.v1.msgpack')
  client.send({ op: 'subscribe', topics: ['printers'] })
  await client.next((f) => f.op === 'snapshot')
  await postBatch(farm, batch(printerA, [item(300, { type: 'heartbeat' })]))
  t.match((await client.next((f) => f.op === 'event')).data.printer, { id: printerA, online: true })
})

t.test('live feed - bad frames get an error frame naming the problem; the connection stays usable', async (t) => {
  const client = await open(t)
  client.ws.send('not json')
  t.match((await client.next((f) => f.op === 'error')).data, { error: 'invalid_frame' })
  client.send({ op: 'subscribe', topics: ['PRINTERS'] })
  t.match((await client.next((f) => f.op === 'error' && /topics/.test(f.data.message))).data, { error: 'validation_failed' })
  client.send({ op: 'subscribe', topics: ['jobs'] })
  t.match((await client.next((f) => f.op === 'error' && f.topic === 'jobs')).data, { error: 'insufficient_scope', message: /jobs:read/ }, "a key's scopes limit its topics")
  const person = await open(t, { headers: { authorization: `Bearer ${token}`, 'x-organization-id': farm.orgId } })
  person.send({ op: 'subscribe', topics: ['jobs'] })
  t.match((await person.next((f) => f.op === 'snapshot' && f.topic === 'jobs')).data, { jobs: Array })
})

t.test('live feed - a client that stops reading is taken off its topics and gets the latest state, coalesced, once it reads again (deletions included); a fast client misses nothing', async (t) => {
  const fast = await open(t)
  const slow = await open(t)
  for (const c of [fast, slow]) {
    c.send({ op: 'subscribe', topics: ['printers'] })
    await c.next((f) => f.op === 'snapshot')
  }
  const socket = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket
  socket.pause()
  const ids = Array.from({ length: 50 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`)
  // ~10 KB frames: enough to fill the kernel's socket buffers and then the server's.
  const padding = 'x'.repeat(3_000)
  const hub = svc.services.live.hub
  const total = 3_000
  const metrics = async () => (await request(svc.url, '/metrics')).text
  const deleted = ids[(total - 2) % ids.length]!
  for (let i = 0; i < total; i++) {
    const id = ids[i % ids.length]!
    // The next-to-last change is a deletion: the slow client must not keep that tile.
    if (i === total - 2) {
      hub.printerRemoved({ organizationId: farm.orgId, printerId: id })
      continue
    }
    hub.printerChanged({
      organizationId: farm.orgId,
      printer: printerState(id, { raw_status: `step ${i}`, error: { code: 'E', message: padding, at: new Date(i).toISOString() } }),
      events: [],
      jobs: [],
    })
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 60))
  }
  await new Promise((r) => setTimeout(r, 200))
  t.match(await metrics(), /^live_lagging_total [1-9]/m, 'the slow client was taken off its topics')
  const last = await fast.next((f) => f.op === 'event' && f.data.printer?.raw_status === `step ${total - 1}`, 30_000)
  const seqs = fast.frames.filter((f) => f.op === 'event').map((f) => f.seq!)
  t.equal(seqs.length, total, 'the fast client got every frame')
  t.ok(seqs.every((s, i) => i === 0 || s === seqs[i - 1]! + 1), 'in order, without a gap')

  socket.resume()
  const merged = await slow.next((f) => f.op === 'event' && f.data.coalesced === true, 30_000)
  t.equal(merged.seq, last.seq, 'the coalesced frame carries the current seq: the jump tells the client frames were merged')
  const byId = new Map((merged.data.printers as { id: string; raw_status: string }[]).map((p) => [p.id, p.raw_status]))
  t.equal(byId.get(ids[(total - 1) % ids.length]!), `step ${total - 1}`, 'latest state wins')
  t.ok(byId.size <= ids.length, 'one entry per printer, not one per change')
  t.same(
    (merged.data.printers as { id: string }[]).find((p) => p.id === deleted),
    { id: deleted, removed: true },
    'a printer deleted while the client lagged is named as removed',
  )
  hub.printerChanged({ organizationId: farm.orgId, printer: printerState(ids[0]!, { online: false, status: 'OFFLINE', raw_status: 'after' }), events: [], jobs: [] })
  const after = await slow.next((f) => f.op === 'event' && f.data.printer?.raw_status === 'after', 30_000)
  t.equal(after.seq, last.seq! + 1, 'back on the topic, in sequence again')
})
