/**
 * The live topic `host:<hostId>` over a real service (docs/print-jobs.md): a
 * bridge follows its host's printer tasks on the feed as it would poll them.
 * The snapshot is the poll's answer; every committed change of a task of the
 * host (assignment, claim, command) is a frame with the whole task; scopes and
 * organizations bound who sees it; and, with Redis, a change made through one
 * node reaches a bridge connected to another.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { ServiceError } from '../../../protocol/errors.js'
import type { PrinterTask } from '../../../protocol/schemas/print-jobs.js'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { HostTaskFeed } from '../../../src/live/host-tasks.js'
import { LiveHub } from '../../../src/live/hub.js'
import { createLogger } from '../../../src/observability/log.js'
import { addPrinter, EventSender, type Farm, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request, signIn } from '../../helpers/http.js'
import { connectLive, type Frame, type LiveClient } from '../../helpers/live.js'
import { startTestService, testAdmin, type TestContext } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const launch = await newKey(svc.url, farm, [...bridgeScopes])
const bridge: Farm = { ...farm, bridge: launch }
const fileId = await uploadPlate(svc.url, farm)

async function newKey(url: string, farm: Farm, scopes: string[]): Promise<Record<string, string>> {
  const res = await request(url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: `key ${randomUUID().slice(0, 8)}`, scopes } })
  if (res.status !== 200) throw new Error(`api key: ${res.status} ${res.text}`)
  return { 'x-api-key': res.json.key as string }
}

async function uploadPlate(url: string, farm: Farm): Promise<string> {
  const modelId = await createModel(url, farm.admin)
  const uploaded = await upload(url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
  return uploaded.json.id as string
}

/** Each printer's bridge numbers its own events. */
const senders = new Map<Farm, EventSender>()
async function send(farm: Farm, printer: string, hostId: string, type: string, data: Record<string, unknown> = {}) {
  if (!senders.has(farm)) senders.set(farm, new EventSender(farm))
  const res = await senders.get(farm)!.post(printer, type, data, { hostId })
  if (res.status !== 200) throw new Error(`${type}: ${res.status} ${res.text}`)
  return res
}

async function onlinePrinter(farm: Farm, hostId: string): Promise<string> {
  const printer = await addPrinter(farm, hostId, { enabled: true })
  await send(farm, printer, hostId, 'heartbeat')
  return printer
}

/** A job of the uploaded plate, offered to `printer`. */
async function dispatched(url: string, farm: Farm, fileId: string, printer: string): Promise<{ jobId: number; taskId: string }> {
  const created = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'Benchy', model_file_id: fileId } })
  if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`)
  const assigned = await request(url, `/v1/print-jobs/${created.json.id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  if (assigned.status !== 200) throw new Error(`assign: ${assigned.status} ${assigned.text}`)
  return { jobId: created.json.id as number, taskId: assigned.json.task.id as string }
}

async function claim(url: string, headers: Record<string, string>, taskId: string, hostId: string) {
  const res = await request(url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers, body: { hostId, assignmentEpoch: 1 } })
  if (res.status !== 200) throw new Error(`claim: ${res.status} ${res.text}`)
  return res.json
}

const poll = async (url: string, headers: Record<string, string>, hostId: string) =>
  (await request(url, `/v1/hosts/${encodeURIComponent(hostId)}/printer-tasks`, { headers })).json.tasks as unknown[]

/** A bridge on the feed, speaking MessagePack, subscribed to its host's topic: resolves with the snapshot. */
async function follow(t: TestContext, url: string, headers: Record<string, string>, hostId: string): Promise<{ client: LiveClient; snapshot: Frame }> {
  const client = await connectLive(url, { headers, protocols: ['printfarm.v1.msgpack'] })
  t.teardown(() => client.close())
  client.send({ op: 'subscribe', topics: [`host:${hostId}`] })
  const snapshot = await client.next((f) => f.topic === `host:${hostId}` && (f.op === 'snapshot' || f.op === 'error'))
  if (snapshot.op !== 'snapshot') throw new Error(`no snapshot: ${JSON.stringify(snapshot)}`)
  return { client, snapshot }
}

const taskFrame = (taskId: string, match: (task: any) => boolean) => (f: Frame) => f.op === 'event' && f.data?.task?.id === taskId && match(f.data.task)

t.test('host topic - a subscription answers with the offered tasks of the host, exactly as the poll lists them', async (t) => {
  const printer = await onlinePrinter(bridge, 'host-snapshot')
  const { taskId } = await dispatched(svc.url, farm, fileId, printer)
  const { snapshot } = await follow(t, svc.url, launch, 'host-snapshot')
  t.match(snapshot.data.tasks, [{ id: taskId, state: 'offered', host_id: 'host-snapshot', printer_id: printer, file_id: fileId, commands: [] }])
  t.same(snapshot.data.tasks, await poll(svc.url, launch, 'host-snapshot'), 'the same tasks as GET /v1/hosts/{hostId}/printer-tasks')
  t.type(snapshot.data.stream, 'string')
  const empty = await follow(t, svc.url, launch, 'host with no printers/ünïcode')
  t.same(empty.snapshot.data.tasks, [], 'a host without tasks has an empty list, as its poll does')
})

t.test('host topic - an assignment, a claim and a pause command each reach the bridge as a frame with the whole task, in seq order', async (t) => {
  const hostId = 'host-live'
  const printer = await onlinePrinter(bridge, hostId)
  const { client, snapshot } = await follow(t, svc.url, launch, hostId)
  t.same(snapshot.data.tasks, [])

  const { jobId, taskId } = await dispatched(svc.url, farm, fileId, printer)
  const offered = await client.next(taskFrame(taskId, (task) => task.state === 'offered'))
  t.match(offered, { op: 'event', topic: `host:${hostId}`, seq: snapshot.seq! + 1 })
  t.match(offered.data.task, { id: taskId, job_id: jobId, printer_id: printer, host_id: hostId, assignment_epoch: 1, file_id: fileId, claim_generation: null, commands: [] })
  t.same(Object.keys(offered.data), ['task'], 'the frame carries the task, nothing else')

  const claimed = await claim(svc.url, launch, taskId, hostId)
  const claimFrame = await client.next(taskFrame(taskId, (task) => task.state === 'claimed'))
  t.match(claimFrame.data.task, { state: 'claimed', claim_generation: claimed.claim_generation, start_deadline_at: String })
  t.equal(claimFrame.seq, offered.seq! + 1)

  await send(bridge, printer, hostId, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  const paused = await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'paused' } })
  t.equal(paused.status, 200, 'the pause is accepted')
  const command = await client.next(taskFrame(taskId, (task) => task.commands.length > 0))
  t.match(command.data.task, { id: taskId, state: 'started', commands: [{ id: String, kind: 'pause', issued_at: String }] })
  t.same(command.data.task.commands, ((await poll(svc.url, launch, hostId)) as any[]).find((task) => task.id === taskId).commands, 'the same command, same id, as the poll lists')
  const seqs = client.frames.filter((f) => f.op === 'event').map((f) => f.seq!)
  t.ok(seqs.every((s, i) => s === snapshot.seq! + i + 1), `consecutive seqs from the snapshot's on: ${seqs.join(', ')}`)
})

t.test("host topic - the bridge's own events are frames too: the start it linked, the pause it answered, the end it reported", async (t) => {
  const hostId = 'host-events'
  const printer = await onlinePrinter(bridge, hostId)
  const { client } = await follow(t, svc.url, launch, hostId)
  const { jobId, taskId } = await dispatched(svc.url, farm, fileId, printer)
  const claimed = await claim(svc.url, launch, taskId, hostId)
  await send(bridge, printer, hostId, 'job:start', { jobId, printerTaskId: taskId, claimGeneration: claimed.claim_generation })
  await client.next(taskFrame(taskId, (task) => task.state === 'started'))
  await request(svc.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'paused' } })
  await client.next(taskFrame(taskId, (task) => task.commands.length === 1))
  await send(bridge, printer, hostId, 'job:pause')
  const answered = await client.next(taskFrame(taskId, (task) => task.state === 'started' && task.commands.length === 0))
  t.same(answered.data.task.commands, [], 'the pause is answered')
  await send(bridge, printer, hostId, 'job:finish', { result: 'success' })
  const finished = await client.next(taskFrame(taskId, (task) => task.state === 'finished'))
  t.ok(finished.data.task.ended_at, 'the end is in the frame')
})

t.test('host topic - a paired bridge key follows only the host it is bound to', async (t) => {
  const code = (await request(svc.url, '/v1/auth-codes', { method: 'POST' })).json.code
  await request(svc.url, '/v1/auth-codes/verify', { method: 'POST', headers: farm.admin, body: { code } })
  const paired = { 'x-api-key': (await request(svc.url, `/v1/auth-codes/verify/${code}`)).json.key as string }
  t.equal((await request(svc.url, '/v1/hosts/host-bound/printer-tasks', { headers: paired })).status, 200, 'the poll binds it')
  await follow(t, svc.url, paired, 'host-bound')
  const client = await connectLive(svc.url, { headers: paired, protocols: ['printfarm.v1.msgpack'] })
  t.teardown(() => client.close())
  client.send({ op: 'subscribe', topics: ['host:host-elsewhere'] })
  const refused = await client.next((f) => f.topic === 'host:host-elsewhere')
  t.match(refused, { op: 'error', data: { error: 'api_key_host_mismatch' } })
})

t.test('host topic - a bridge that reconnects with since gets the task frames it missed, not a snapshot', async (t) => {
  const hostId = 'host-resume'
  const printer = await onlinePrinter(bridge, hostId)
  const first = await follow(t, svc.url, launch, hostId)
  const { taskId } = await dispatched(svc.url, farm, fileId, printer)
  const offered = await first.client.next(taskFrame(taskId, (task) => task.state === 'offered'))
  // Another socket stays on the topic, so this node keeps buffering it while the first is away.
  const watcher = await follow(t, svc.url, launch, hostId)
  first.client.close()
  await claim(svc.url, launch, taskId, hostId)
  const missed = await watcher.client.next(taskFrame(taskId, (task) => task.state === 'claimed'))
  const again = await connectLive(svc.url, { headers: launch, protocols: ['printfarm.v1.msgpack'] })
  t.teardown(() => again.close())
  again.send({ op: 'subscribe', topics: [`host:${hostId}`], since: { [`host:${hostId}`]: offered.seq }, stream: first.snapshot.data.stream })
  const replayed = await again.next((f) => f.op === 'event' || f.op === 'snapshot')
  t.match(replayed, { op: 'event', seq: missed.seq, data: { task: { id: taskId, state: 'claimed' } } })
})

t.test('host topic - a key without print:launch is refused the topic; a member needs to be an admin, as for the poll', async (t) => {
  const reader = await connectLive(svc.url, { headers: farm.bridge })
  t.teardown(() => reader.close())
  reader.send({ op: 'subscribe', topics: ['host:host-live', 'printers'] })
  t.match((await reader.next((f) => f.op === 'error' && f.topic === 'host:host-live')).data, { error: 'insufficient_scope', message: /print:launch/ })
  await reader.next((f) => f.op === 'snapshot' && f.topic === 'printers')
  t.notOk(reader.frames.some((f) => f.topic === 'host:host-live' && f.op !== 'error'), 'no snapshot and no frames of the host')

  const admin = await follow(t, svc.url, farm.admin, 'host-live')
  t.ok(Array.isArray(admin.snapshot.data.tasks), "an organization admin's session follows it")

  const email = `member-${randomUUID().slice(0, 8)}@test.printfarm`
  const added = await request(svc.url, `/v1/organizations/${farm.orgId}/members`, { method: 'POST', headers: farm.admin, body: { email, password: 'member-password-1', role: 'member' } })
  t.equal(added.status, 200, 'a member who is not an admin is added')
  const member = await signIn(svc.url, email, 'member-password-1')
  const person = await connectLive(svc.url, { headers: { ...member.auth, 'x-organization-id': farm.orgId } })
  t.teardown(() => person.close())
  person.send({ op: 'subscribe', topics: ['host:host-live'] })
  t.match((await person.next((f) => f.op === 'error' && f.topic === 'host:host-live')).data, { error: 'ORG_ADMIN_REQUIRED' })
})

t.test('host topic - names are bounded like the poll route: 1 to 200 characters, none of them U+0000', async (t) => {
  const client = await connectLive(svc.url, { headers: launch })
  t.teardown(() => client.close())
  const errors = () => client.frames.filter((f) => f.op === 'error')
  for (const [i, topic] of ['host:', `host:${'h'.repeat(201)}`, 'host:a\u0000b', 'HOST:host-live'].entries()) {
    client.send({ op: 'subscribe', topics: [topic] })
    await client.next(() => errors().length === i + 1)
    t.match(errors()[i]!.data, { error: 'validation_failed', message: /topics/ }, `${JSON.stringify(topic.slice(0, 12))}… (${topic.length} characters) is refused`)
  }
  const longest = `host:${'é'.repeat(199)}\n`
  client.send({ op: 'subscribe', topics: [longest] })
  t.same((await client.next((f) => f.op === 'snapshot' && f.topic === longest)).data.tasks, [], '200 characters of any kind are a host id')
})

t.test('host topic - isolation: another organization with a host of the same name sees none of these tasks', async (t) => {
  const hostId = 'host-shared-name'
  const session = await signIn(svc.url, testAdmin.email, testAdmin.password)
  const other = await request(svc.url, '/v1/organizations', { method: 'POST', headers: session.auth, body: { name: `Other ${randomUUID().slice(0, 6)}` } })
  t.equal(other.status, 201, 'another organization is made')
  const otherFarm: Farm = { ...farm, orgId: other.json.id, admin: { ...session.auth, 'x-organization-id': other.json.id } }
  const theirs = await follow(t, svc.url, await newKey(svc.url, otherFarm, [...bridgeScopes]), hostId)
  const printer = await onlinePrinter(bridge, hostId)
  await dispatched(svc.url, farm, fileId, printer)
  const ours = await follow(t, svc.url, launch, hostId)
  t.equal(ours.snapshot.data.tasks.length, 1, 'our bridge sees the offer')
  t.same(theirs.snapshot.data.tasks, [], 'theirs has none in its snapshot')
  const { taskId } = await dispatched(svc.url, farm, fileId, await onlinePrinter(bridge, hostId))
  await ours.client.next(taskFrame(taskId, (task) => task.state === 'offered'))
  t.same(theirs.client.frames.filter((f) => f.op === 'event'), [], 'and no frame of ours reached theirs')
})

const shared = process.env['DATABASE_URL'] !== undefined && process.env['REDIS_URL'] !== undefined
t.test('host topic across nodes - a bridge on node B sees the offer and the claim made through node A', { skip: shared ? false : 'needs DATABASE_URL and REDIS_URL (two nodes share them)' }, async (t) => {
  const a = await startTestService(t)
  const farmA = await openFarm(a.url)
  const keyA = await newKey(a.url, farmA, [...bridgeScopes])
  const fileA = await uploadPlate(a.url, farmA)
  const hostId = 'host-across'
  // Online before node B starts: node A owns every printer shard then, so no event meets a shard on the move.
  const printer = await onlinePrinter({ ...farmA, bridge: keyA }, hostId)
  const b = await startTestService(t, { DATABASE_SCHEMA: a.config.databaseSchema })
  const { client, snapshot } = await follow(t, b.url, keyA, hostId)
  t.same(snapshot.data.tasks, [])
  const { taskId } = await dispatched(a.url, farmA, fileA, printer)
  t.match((await client.next(taskFrame(taskId, (task) => task.state === 'offered'))).data.task, { id: taskId, host_id: hostId })
  await claim(a.url, keyA, taskId, hostId)
  t.match((await client.next(taskFrame(taskId, (task) => task.state === 'claimed'))).seq, snapshot.seq! + 2, "in node B's own sequence")
})

t.test('host topic feed - reads of one task run one at a time, notices meanwhile coalesce into one more read, frames follow the store on the host named; an unfollowed host is not read', async (t) => {
  const org = '11111111-1111-4111-8111-111111111111'
  const taskId = '22222222-2222-4222-8222-222222222222'
  const states: string[] = []
  const topics = new Set<string>()
  let published = () => {}
  const hub = new LiveHub({
    publish: (topic, message) => (topics.add(topic), states.push(JSON.parse(message as string).data.task.state), published()),
    subscribers: (topic) => (topic === `j/${org}/host:followed` ? 1 : 0),
  })
  /** The task as the store holds it now; a read sees the state when it starts and answers when released. */
  let stored = 'offered'
  const reads: { release: () => void }[] = []
  let started = () => {}
  const feed = new HostTaskFeed(
    hub,
    {
      task: (_organizationId, id) =>
        new Promise<PrinterTask>((resolve, reject) => {
          const state = stored
          reads.push({ release: () => (state === 'gone' ? reject(new ServiceError('printer_task_not_found', 'gone')) : resolve({ id, host_id: 'offered-to', state } as PrinterTask)) })
          started()
        }),
    },
    createLogger('silent', { now: systemClock.now }),
  )
  const readStarts = () => new Promise<void>((resolve) => (started = resolve))
  const publishes = () => new Promise<void>((resolve) => (published = resolve))
  const notice = { organizationId: org, hostId: 'followed', taskId }

  let reading = readStarts()
  feed.changed(notice)
  await reading
  stored = 'claimed'
  feed.changed(notice)
  stored = 'started'
  feed.changed(notice)
  t.equal(reads.length, 1, 'one read at a time')
  reading = readStarts()
  reads[0]!.release()
  await reading
  t.same(states, ['offered'])
  let publishing = publishes()
  reads[1]!.release()
  await publishing
  t.same(states, ['offered', 'started'], 'the two changes made meanwhile are one more read, of the latest state')
  t.equal(reads.length, 2)

  feed.changed({ ...notice, hostId: 'nobody-follows' })
  t.equal(reads.length, 2, 'a host nobody on this node follows is not read')

  stored = 'gone'
  reading = readStarts()
  feed.changed(notice)
  await reading
  reads[2]!.release()
  stored = 'cancelled'
  reading = readStarts()
  publishing = publishes()
  feed.changed(notice)
  await reading
  reads[3]!.release()
  await publishing
  t.same(states, ['offered', 'started', 'cancelled'], 'a task gone from the store publishes nothing, and the next change is read again')
  t.same([...topics], [`j/${org}/host:followed`], "frames go to the host the dispatcher named (a moved printer's new host), not the task's host_id")
})
