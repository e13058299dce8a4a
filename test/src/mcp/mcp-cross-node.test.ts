/**
 * MCP change notifications across nodes: two `printfarm serve` processes on one PostgreSQL schema and
 * one Redis. An agent signs in through node B (its own OAuth flow: B's PUBLIC_BASE_URL is B's
 * address) and streams `subscriptions/listen` from B, while every change is made through node A:
 * - a printer whose shard node A holds: its events are ingested by A's actor and reach B only
 *   through the Redis relay; one whose shard B holds: A forwards the batch to B's actor. Either way
 *   the agent on B hears notifications/resources/updated for that printer, and never for a
 *   printer it does not follow;
 * - a print job and the queue, in an organization whose queue node A runs (its passes' news reaches
 *   B through the relay) and in one whose queue node B runs (A's wake crosses the relay): a job
 *   created through A changes the queue B's agent follows, a job cancelled through A is announced
 *   on B, and neither an unchanged followed job nor an unfollowed one is;
 * - what the stream announced is what a read on B then shows.
 * Leases are left to settle first, so which node holds a shard is known (rendezvous placement over
 * the two NODE_IDs) and stays so during the test.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import type { Client } from '@modelcontextprotocol/client'
import { queueKey } from '../../../actors/queue-runtime.js'
import { shardCount, shardOf } from '../../../actors/shard-directory.js'
import { placementOf } from '../../../src/cluster/redis-shard-directory.js'
import { addPrinter, batch, EventSender, type Farm, openFarm, postBatch } from '../../helpers/bridge.js'
import { childServiceEnv, freePort, startChildService, type ChildService } from '../../helpers/child-service.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request, type HttpResult } from '../../helpers/http.js'
import { connectAgent, heard, jsonOf, TestAuthProvider, waitFor } from '../../helpers/mcp.js'
import { until } from '../../helpers/poll.js'
import { tempDir, tempSchema } from '../../helpers/service.js'

const shared = process.env['DATABASE_URL'] !== undefined && process.env['REDIS_URL'] !== undefined
const skip = shared ? false : 'needs DATABASE_URL and REDIS_URL (two processes share them)'

const nodeNames = ['mcp-node-a', 'mcp-node-b'] as const
const [nameA, nameB] = nodeNames
const queueUri = 'printfarm://queue'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Which node holds a shard once the leases have settled (what both nodes compute). */
const ownerOf = (key: string): string | undefined => placementOf(shardOf(key), nodeNames)
function expectedShards(node: string): number {
  let n = 0
  for (let s = 0; s < shardCount; s++) if (placementOf(s, nodeNames) === node) n++
  return n
}

/** A node on this file's schema whose issuer is its own address (the OAuth flow runs against it). */
async function startNode(schema: string, name: string): Promise<ChildService> {
  const port = await freePort()
  return startChildService(t, { port, env: { ...childServiceEnv(tempDir(t), schema), NODE_ID: name, PUBLIC_BASE_URL: `http://127.0.0.1:${port}` } })
}

async function shardStates(nodes: readonly ChildService[]): Promise<({ ok: boolean; owned: number; nodeId: string } | undefined)[]> {
  return Promise.all(nodes.map(async (node) => (await request(node.url, '/readyz', { timeoutMs: 2_000 }).catch(() => undefined))?.json?.checks?.shards))
}
const settledStates = (states: Awaited<ReturnType<typeof shardStates>>) => states.every((s) => s !== undefined && s.ok && s.owned === expectedShards(s.nodeId))

/** Right after start-up a shard may have no owner for a moment: a caller retries the 503, as a bridge does. */
async function retry503(attempt: () => Promise<HttpResult>): Promise<HttpResult> {
  let res = await attempt()
  for (let tries = 0; res.status === 503 && tries < 100; tries++) {
    await sleep(200)
    res = await attempt()
  }
  return res
}

/** A counter's value on a node's /metrics (0 when it has no sample yet), summed over the samples matching `labels`. */
async function metric(node: ChildService, name: string, labels: RegExp = /.*/): Promise<number> {
  const text = (await request(node.url, '/metrics')).text
  let sum = 0
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line)
    if (m !== null && labels.test(m[1] ?? '')) sum += Number(m[2])
  }
  return sum
}

interface Cluster {
  a: ChildService
  b: ChildService
  /** The admin and a bridge key, on node A (every change goes through it). */
  farmA: Farm
}

async function startCluster(): Promise<Cluster> {
  const schema = tempSchema(t)
  // One after the other: the first creates the schema, the signing keys and the sealing key; the second finds them.
  const a = await startNode(schema, nameA)
  const b = await startNode(schema, nameB)
  const states = await until(() => shardStates([a, b]), settledStates, 60_000)
  if (!settledStates(states)) throw new Error(`the leases never settled: ${JSON.stringify(states)} (expected ${nodeNames.map((n) => `${n}=${expectedShards(n)}`).join(', ')})`)
  return { a, b, farmA: await openFarm(a.url) }
}

const cluster = shared ? await startCluster() : undefined

let events: EventSender | undefined
/** One event of `printer` posted through node A (retrying 503s), which must be applied. */
async function send(printer: string, type: string, data: Record<string, unknown> = {}): Promise<void> {
  const { farmA } = cluster!
  events ??= new EventSender(farmA)
  const body = events.next(printer, type, data)
  const res = await retry503(() => postBatch(farmA, body))
  if (res.status !== 200 || res.json.events?.[0]?.outcome !== 'applied') throw new Error(`${type} for ${printer}: ${res.status} ${res.text}`)
}

/** A printer created through node A whose shard `node` holds (a new id until one lands there). */
async function printerOn(node: string): Promise<string> {
  const { farmA } = cluster!
  for (let tries = 0; tries < 40; tries++) {
    const id = await addPrinter(farmA, 'host-a', { enabled: true })
    if (ownerOf(id.toLowerCase()) === node) return id
  }
  throw new Error(`40 printers and none on ${node}`)
}

/** An organization of the admin whose queue `node` runs, with a plate uploaded through node A. */
interface QueueOrg {
  orgId: string
  admin: Record<string, string>
  fileId: string
}

/** Organizations are made through node A until one's queue shard is held by `node` (the admin's first one may be). */
async function organizationQueuedOn(node: string): Promise<QueueOrg> {
  const { a, farmA } = cluster!
  let orgId = farmA.orgId
  for (let tries = 0; ownerOf(queueKey(orgId)) !== node; tries++) {
    if (tries === 40) throw new Error(`40 organizations and none whose queue ${node} runs`)
    const created = await request(a.url, '/v1/organizations', { method: 'POST', headers: farmA.admin, body: { name: `Farm ${randomUUID().slice(0, 6)}` } })
    if (created.status !== 200 && created.status !== 201) throw new Error(`organization: ${created.status} ${created.text}`)
    orgId = created.json.id as string
  }
  const admin = { ...farmA.admin, 'x-organization-id': orgId }
  const modelId = await createModel(a.url, admin, { name: 'Cross-node Benchy' })
  const uploaded = await upload(a.url, admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
  return { orgId, admin, fileId: uploaded.json.id as string }
}

/** A print job created through node A, waiting for a hand assignment (no pass dispatches it). */
async function createJob(org: QueueOrg, name: string): Promise<number> {
  const { a } = cluster!
  const res = await retry503(() => request(a.url, '/v1/print-jobs/create', { method: 'POST', headers: org.admin, body: { name, model_file_id: org.fileId, print_options: { auto_assign: false } } }))
  if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
  return res.json.id as number
}

/** An agent of the admin (for `organizationId`, else their first organization), signed in through node B and connected there (2026-07-28). */
async function agentOnB(t: Test, organizationId?: string): Promise<Client> {
  const { b } = cluster!
  const { client } = await connectAgent(b.url, new TestAuthProvider(b.url, organizationId === undefined ? {} : { organizationId }), 'modern')
  t.teardown(() => client.close())
  return client
}

// What the tests changed, for the last one to read back on node B.
const changed: { printer?: string; jobs: { org: QueueOrg; jobId: number; queueNode: string }[] } = { jobs: [] }

t.test('mcp listen across nodes - a printer change posted through node A is heard by an agent streaming from node B', { skip }, async (t) => {
  const { a, b } = cluster!
  const relayed = await printerOn(nameA)
  const forwarded = await printerOn(nameB)
  const quiet = await printerOn(nameA)
  const uri = (id: string) => `printfarm://printers/${id}`

  const client = await agentOnB(t)
  const counts = heard(client)
  const subscription = await client.listen({ resourceSubscriptions: [uri(relayed), uri(forwarded)] })
  t.same(subscription.honoredFilter.resourceSubscriptions, [uri(relayed), uri(forwarded)], 'node B honours both printers')

  // The printer not followed changes first, through the same node and relay as the followed one after it.
  const forwardsBefore = await metric(a, 'forwards_total', /op="printer\.ingest"/)
  const relayedBefore = await metric(b, 'live_relay_received_total')
  await send(quiet, 'heartbeat')
  await send(relayed, 'heartbeat')
  await waitFor(() => (counts.get(uri(relayed)) ?? 0) >= 1, `node B's agent hears the printer whose events node A ingested (${relayed})`)
  t.pass("the change of a printer node A's actor runs is announced on node B")
  t.equal(await metric(a, 'forwards_total', /op="printer\.ingest"/), forwardsBefore, "node A's own actors took both batches (none forwarded): the change crossed through the relay")
  t.ok((await metric(b, 'live_relay_received_total')) >= relayedBefore + 2, 'node B received the changes through Redis')

  await send(forwarded, 'heartbeat')
  await waitFor(() => (counts.get(uri(forwarded)) ?? 0) >= 1, `node B's agent hears the printer whose batch node A forwarded to node B (${forwarded})`)
  t.pass("the change of a printer node B's actor runs, posted through node A, is announced on node B")
  t.equal(await metric(a, 'forwards_total', /op="printer\.ingest",outcome="ok"/), forwardsBefore + 1, 'node A forwarded that batch to its owner')

  t.notOk(counts.has(uri(quiet)), 'a printer not followed is not announced')
  t.ok(settledStates(await shardStates([a, b])), 'the leases did not move during the test (the placement the printers were chosen by held)')
  await subscription.close()
  t.equal(await subscription.closed, 'local', 'the stream on node B ends when the agent closes it')
  changed.printer = relayed
})

// The queue's pass runs on the node holding the organization's queue shard: on node A the pass's news
// reaches node B through the relay; on node B, node A's wake crosses the relay and B passes itself.
for (const [queueNode, how] of [
  [nameA, "node A runs the organization's queue: node B learns of each pass through the relay"],
  [nameB, "node B runs the organization's queue: node A's wake crosses the relay"],
] as const) {
  t.test(`mcp listen across nodes - a job created and a job cancelled through node A are heard on node B (${how})`, { skip }, async (t) => {
    const { a } = cluster!
    const org = await organizationQueuedOn(queueNode)
    const jobId = await createJob(org, 'Cross-node job')
    const jobUri = `printfarm://print-jobs/${jobId}`

    const client = await agentOnB(t, org.orgId)
    const counts = heard(client)
    const subscription = await client.listen({ resourceSubscriptions: [jobUri, queueUri] })
    t.same(subscription.honoredFilter.resourceSubscriptions, [jobUri, queueUri], 'node B honours the job and the queue')

    const second = await createJob(org, 'Cross-node second')
    await waitFor(() => (counts.get(queueUri) ?? 0) >= 1, 'the job created through node A changes the queue followed on node B')
    t.pass('the new job is announced as a queue change on node B')
    t.notOk(counts.has(jobUri), 'the followed job, unchanged by it, is not announced')

    const cancelled = await retry503(() => request(a.url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: org.admin, body: { status: 'cancelled' } }))
    t.equal(cancelled.status, 200, `cancelled through node A${cancelled.status === 200 ? '' : `: ${cancelled.text}`}`)
    t.equal(cancelled.json?.status, 'cancelled', 'node A cancelled it')
    await waitFor(() => (counts.get(jobUri) ?? 0) >= 1, `the job cancelled through node A is heard on node B (${jobUri})`)
    t.pass('the cancellation is announced on node B')
    t.notOk(counts.has(`printfarm://print-jobs/${second}`), 'a job not followed is not announced')
    await subscription.close()
    t.equal(await subscription.closed, 'local', 'the stream on node B ends when the agent closes it')
    changed.jobs.push({ org, jobId, queueNode })
  })
}

t.test('mcp resources across nodes - what node B announced is what a read on node B shows', { skip }, async (t) => {
  const { a, farmA } = cluster!
  if (changed.printer === undefined || changed.jobs.length !== 2) throw new Error('the tests before did not get to make their changes')

  const client = await agentOnB(t)
  const printer = jsonOf(await client.readResource({ uri: `printfarm://printers/${changed.printer}` }))
  t.equal(printer?.printer?.online, true, 'the printer reads online on node B: the heartbeat node A ingested (its first event) is seen')
  t.same(printer, (await request(a.url, `/v1/printers/${changed.printer}`, { headers: farmA.admin })).json, 'as node A answers GET /v1/printers/{id}')

  for (const { org, jobId, queueNode } of changed.jobs) {
    const agent = org.orgId === farmA.orgId ? client : await agentOnB(t, org.orgId)
    const job = jsonOf(await agent.readResource({ uri: `printfarm://print-jobs/${jobId}` }))
    t.equal(job?.status, 'cancelled', `the job reads cancelled on node B (queue on ${queueNode})`)
    t.same(job, (await request(a.url, `/v1/print-jobs/${jobId}`, { headers: org.admin })).json, 'as node A answers GET /v1/print-jobs/{id}')
    const queue = jsonOf(await agent.readResource({ uri: queueUri }))
    t.notOk((queue?.jobs as { id: number }[]).some((j) => j.id === jobId), 'the cancelled job is no longer in the queue read on node B')
  }
})
