/**
 * The queue of one organization on two nodes for real: two `printfarm serve`
 * processes on one PostgreSQL schema and one Redis, short leases, debug
 * logs. Jobs are created through both nodes while printers free up; each
 * pass logs `queue pass` with its node and fencing token, so the test reads
 * who ran the queue when. Then the node running it is SIGKILLed and the
 * survivor must take the queue, after the lease, with a higher token.
 *
 * The rules checked (actors/queue-runtime.ts, src/queue/queue-dispatch.ts):
 * every job is dispatched once; the passes of different nodes never overlap
 * unless the later one carries a higher token (a takeover, whose old pass
 * the store fences); a node's passes carry one token while it holds the
 * shard.
 */
import t, { type Test } from 'tap'
import postgres from 'postgres'
import { randomBytes, randomUUID } from 'node:crypto'
import { childServiceEnv, startChildService, type ChildService } from '../../helpers/child-service.js'
import { addPrinter, batch, item, openFarm, postBatch, type Farm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { tempDir, tempSchema } from '../../helpers/service.js'
import { waitFor } from '../../helpers/poll.js'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { placementOf } from '../../../src/cluster/redis-shard-directory.js'
import { queueKey } from '../../../actors/queue-runtime.js'
import { shardCount, shardOf } from '../../../actors/shard-directory.js'

const shared = process.env['DATABASE_URL'] !== undefined && process.env['REDIS_URL'] !== undefined
if (!shared) t.plan(0, 'needs DATABASE_URL and REDIS_URL (two processes share them)')

const leaseMs = 2_000
const printerCount = 20
const firstJobs = 40
const laterJobs = 5
/** Slack for the log's wall-clock time (ISO, whole milliseconds) when comparing passes of two processes. */
const clockSlackMs = 2
const hostId = 'host-queue'
/** The plate of bambuThreeMf() needs PLA #FFFFFF. */
const white = [{ position: 0, materialType: 'PLA', color: 'FFFFFFFF' }]

/** One `queue pass` debug line (src/queue/index.ts). */
interface Pass {
  organizationId: string
  node: string
  shard: number
  token: number
  queued: number
  offered: number
  /** Wall time the pass started and ended, ms since the epoch. */
  start: number
  end: number
}

/** Collects the `queue pass` lines a child writes from now on (its output() keeps only the last 64 KiB); lines that do not parse go to `bad`. */
function collectPasses(node: ChildService, into: Pass[], bad: string[]): void {
  let rest = ''
  node.child.stdout!.on('data', (chunk: Buffer) => {
    rest += chunk.toString('utf8')
    for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n')) {
      const line = rest.slice(0, nl)
      rest = rest.slice(nl + 1)
      if (!line.includes('"queue pass"')) continue
      let j: Record<string, unknown>
      try {
        j = JSON.parse(line) as Record<string, unknown>
      } catch {
        bad.push(line)
        continue
      }
      if (j['msg'] !== 'queue pass') continue
      const end = Date.parse(j['time'] as string)
      into.push({
        organizationId: j['organizationId'] as string,
        node: j['node'] as string,
        shard: j['shard'] as number,
        token: j['token'] as number,
        queued: j['queued'] as number,
        offered: j['offered'] as number,
        start: end - (j['readPlanMs'] as number) - (j['dispatchMs'] as number),
        end,
      })
    }
  })
}

const describe = (p: Pass) => `${p.node}@${p.token} [${new Date(p.start).toISOString()}, +${(p.end - p.start).toFixed(1)} ms] offered ${p.offered}`

/**
 * One node at a time: two passes of different nodes that overlap in time are allowed only when the
 * later one carries a higher token (it took the shard; the earlier one's writes are fenced). And the
 * runs of consecutive passes of one node each carry one token, higher than the run before.
 */
function assertOneNodeAtATime(t: Test, passes: readonly Pass[], what: string): void {
  const sorted = [...passes].sort((a, b) => a.start - b.start)
  const overlaps: string[] = []
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const [early, late] = [sorted[i]!, sorted[j]!]
      if (late.start >= early.end - clockSlackMs) continue
      if (early.node !== late.node && !(late.token > early.token)) overlaps.push(`${describe(early)} overlaps ${describe(late)}`)
    }
  }
  t.same(overlaps, [], `${what}: no two nodes ran passes at once without a takeover (a higher token)`)
  const runs: { node: string; tokens: Set<number> }[] = []
  for (const p of sorted) {
    const last = runs.at(-1)
    if (last?.node === p.node) last.tokens.add(p.token)
    else runs.push({ node: p.node, tokens: new Set([p.token]) })
  }
  t.ok(
    runs.every((r) => r.tokens.size === 1),
    `${what}: a node's passes carry one token while it holds the shard (${runs.map((r) => `${r.node}: ${[...r.tokens].join('/')}`).join(' → ')})`,
  )
  const firstTokens = runs.map((r) => Math.min(...r.tokens))
  t.ok(
    firstTokens.every((token, i) => i === 0 || token > firstTokens[i - 1]!),
    `${what}: each node that took the queue over carries a higher token than the one before (${firstTokens.join(' → ')})`,
  )
}

function expectedShards(nodeId: string, nodes: readonly string[]): number {
  let n = 0
  for (let s = 0; s < shardCount; s++) if (placementOf(s, nodes) === nodeId) n++
  return n
}

t.test('queue on two nodes - jobs created through both nodes are dispatched once each, by one node at a time; after a SIGKILL of that node the survivor takes the queue with a higher token', { skip: !shared }, async (t) => {
  const schema = tempSchema(t)
  const secretKey = randomBytes(32).toString('base64')
  const passes: Pass[] = []
  const unparsed: string[] = []
  const start = async (name: string) => {
    const node = await startChildService(t, {
      env: {
        ...childServiceEnv(tempDir(t), schema),
        NODE_ID: name,
        PRINTFARM_SECRET_KEY: secretKey,
        PUBLIC_BASE_URL: 'http://farm.test',
        SHARD_LEASE_MS: String(leaseMs),
        FORWARD_TIMEOUT_MS: '3000',
        LOG_LEVEL: 'debug',
        QUEUE_SWEEP_MS: '2000',
        // No start stagger, no offer expiry, no printer going silent within the test: every task is the queue's one dispatch of its job.
        QUEUE_MAX_STARTS: '0',
        TASK_OFFER_TTL_S: '600',
        PRESENCE_TIMEOUT_MS: '600000',
      },
    })
    collectPasses(node, passes, unparsed)
    return node
  }
  const sql = postgres(process.env['DATABASE_URL']!, { max: 2, onnotice: () => undefined, connection: { search_path: schema } })
  t.teardown(() => sql.end())

  const a = await start('node-a')
  const b = await start('node-b')
  const nodes = [a, b]
  const readiness = async (node: ChildService) => (await request(node.url, '/readyz', { timeoutMs: 2_000 })).json.checks.shards as { ok: boolean; owned: number; nodeId: string }
  await waitFor(async () => {
    const states = await Promise.all(nodes.map(readiness))
    return states.every((r) => r.ok && r.owned === expectedShards(r.nodeId, ['node-a', 'node-b']))
  }, 'the leases to settle', 30_000)

  // The organization, a bridge key, the plate, and the printers: events and calls through either node.
  const farm = await openFarm(a.url)
  const key = await request(a.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge', scopes: [...bridgeScopes] } })
  t.equal(key.status, 200, 'a key with the bridge scopes', { body: key.text })
  const bridge = { 'x-api-key': key.json.key as string }
  const modelId = await createModel(b.url, farm.admin)
  const uploaded = await upload(b.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
  t.equal(uploaded.status, 201, 'the plate is uploaded', { body: uploaded.json })
  const fileId: string = uploaded.json.id
  const orgId = farm.orgId
  const shard = shardOf(queueKey(orgId))
  const via = (i: number): Farm => ({ ...farm, url: nodes[i % 2]!.url, bridge })
  const refusedReports: string[] = []
  for (let i = 0; i < printerCount; i++) {
    const printer = await addPrinter(via(i), hostId, { enabled: true })
    const res = await postBatch(via(i + 1), batch(printer, [item(0, { type: 'printer:amsUpdate', data: { slots: white }, hostId, eventId: `ev-${randomUUID()}` })], { hostId }))
    if (res.status !== 200 || res.json.events?.[0]?.outcome !== 'applied') refusedReports.push(`${res.status} ${res.text}`)
  }
  t.same(refusedReports, [], `${printerCount} printers online with PLA white loaded, reported through both nodes`)

  const mine = () => passes.filter((p) => p.organizationId === orgId)
  const count = async (status: string) => (await sql<{ n: number }[]>`select count(*)::int as n from print_jobs where organization_id = ${orgId} and status = ${status}`)[0]!.n
  const createJob = async (node: ChildService, name: string): Promise<number> => {
    const res = await request(node.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name, model_file_id: fileId } })
    if (res.status !== 201) throw new Error(`create through ${node.url}: ${res.status} ${res.text}`)
    return res.json.id
  }
  /** Frees a printer: cancels the oldest job offered to one (its offered task is cancelled with it). */
  let cancels = 0
  const freeOne = async (): Promise<boolean> => {
    const [row] = await sql<{ id: string }[]>`select id from print_jobs where organization_id = ${orgId} and status = 'dispatching' order by id limit 1`
    if (row === undefined) return false
    const res = await request(nodes[cancels++ % 2]!.url, `/v1/print-jobs/${row.id}/status`, { method: 'PATCH', headers: farm.admin, body: { status: 'cancelled' } })
    if (res.status !== 200) throw new Error(`cancel ${row.id}: ${res.status} ${res.text}`)
    return true
  }
  const tasksPerJob = async (ids: readonly number[]) =>
    await sql<{ id: string; status: string; tasks: number; offered: number }[]>`
      select j.id, j.status, count(pt.id)::int as tasks, (count(pt.id) filter (where pt.state = 'offered'))::int as offered
      from print_jobs j left join printer_tasks pt on pt.job_id = j.id
      where j.id = any(${ids as number[]}::int8[]) group by j.id, j.status order by j.id`

  // Jobs through both nodes, alternating; once the printers are taken, every second job frees one.
  const jobs: number[] = []
  for (let i = 0; i < firstJobs; i++) {
    jobs.push(await createJob(nodes[i % 2]!, `job ${i}`))
    if (i >= printerCount && i % 2 === 1) await freeOne()
  }
  // Then free printers until every job has gone out once (each cancel frees one; the queue fills it).
  // Both counts from one snapshot: read apart, a pass between them made the loop free a printer no job then waited for.
  const counts = async () =>
    (await sql<{ queued: number; dispatching: number }[]>`
      select (count(*) filter (where status = 'queued'))::int as queued, (count(*) filter (where status = 'dispatching'))::int as dispatching
      from print_jobs where organization_id = ${orgId}`)[0]!
  await waitFor(async () => {
    const now = await counts()
    if (now.queued === 0) return true
    if (now.dispatching === printerCount) await freeOne()
    return false
  }, 'every job to be dispatched', 40_000)

  const firstRows = await tasksPerJob(jobs)
  t.equal(firstRows.length, firstJobs)
  const notOnce = firstRows.filter((r) => r.tasks !== 1 || r.offered > 1)
  t.same(notOnce, [], 'every job was dispatched exactly once: one printer task each (offered, or cancelled with its job)')
  t.ok(firstRows.every((r) => (r.status === 'dispatching' && r.offered === 1) || (r.status === 'cancelled' && r.offered === 0)), 'a dispatching job has its offered task; a cancelled one none')
  const [doubled] = await sql<{ n: number }[]>`select count(*)::int as n from (select printer_id from printer_tasks where organization_id = ${orgId} and state = 'offered' group by printer_id having count(*) > 1) x`
  t.equal(doubled?.n, 0, 'no printer was offered two tasks')

  // A pass logs just after its dispatch commits: the last line may trail the store by a moment.
  const taskCount = (await sql<{ n: number }[]>`select count(*)::int as n from printer_tasks where organization_id = ${orgId}`)[0]!.n
  const offeredIn = (list: readonly Pass[]) => list.reduce((sum, p) => sum + p.offered, 0)
  await waitFor(() => offeredIn(mine()) >= taskCount, 'the pass log lines of every stored task', 5_000).catch(() => undefined)
  const before = mine()
  t.ok(before.length > 0, `the passes were logged (${before.length})`)
  t.ok(before.every((p) => p.shard === shard), `every pass names the queue's shard ${shard}`)
  t.equal(offeredIn(before), taskCount, "the logged passes' offers add up to the tasks stored: every dispatch was a logged pass")
  assertOneNodeAtATime(t, before, 'while both nodes live')
  const owner = before.at(-1)!
  const [stored] = await sql<{ owner: string; token: string }[]>`select owner, token from shard_tokens where shard = ${shard}`
  t.same([stored?.owner, Number(stored?.token)], [owner.node, owner.token], 'the last pass ran on the holder of the shard, with its current token')
  t.comment(`passes by node: ${['node-a', 'node-b'].map((n) => `${n} ${before.filter((p) => p.node === n).length}`).join(', ')}; ${cancels} cancels`)

  // Room for the later jobs, then the node running the queue dies without a word.
  for (let i = 0; i < laterJobs; i++) t.ok(await freeOne(), 'a printer freed')
  t.equal(await count('dispatching'), printerCount - laterJobs, `${laterJobs} printers are free, no job waits`)
  const victim = owner.node === 'node-a' ? a : b
  const survivor = victim === a ? b : a
  const survivorName = survivor === a ? 'node-a' : 'node-b'
  const killedAt = Date.now()
  await victim.kill()
  const later: number[] = []
  for (let i = 0; i < laterJobs; i++) later.push(await createJob(survivor, `after the kill ${i}`))

  // The survivor takes the shard once the lease has run out (its sweep and the shard-gained wake find the jobs).
  await waitFor(async () => (await count('queued')) === 0, 'the survivor to dispatch the jobs created after the kill', 30_000)
  const takeoverPasses = () => mine().filter((p) => p.node === survivorName && p.start >= killedAt)
  await waitFor(() => offeredIn(takeoverPasses()) >= laterJobs, "the survivor's pass log lines", 5_000).catch(() => undefined)
  const takeover = takeoverPasses()
  t.ok(takeover.length > 0, `the survivor ${survivorName} ran the queue after the kill`)
  t.ok(takeover.every((p) => p.token > owner.token), `with a higher token than the dead node's ${owner.token} (${[...new Set(takeover.map((p) => p.token))].join(', ')})`)
  t.equal(offeredIn(takeover), laterJobs, 'its passes offered the new jobs')
  const laterRows = await tasksPerJob(later)
  t.ok(laterRows.length === laterJobs && laterRows.every((r) => r.status === 'dispatching' && r.tasks === 1 && r.offered === 1), 'each job created after the kill was dispatched exactly once', { laterRows })
  const [after] = await sql<{ owner: string; token: string }[]>`select owner, token from shard_tokens where shard = ${shard}`
  t.equal(after?.owner, survivorName, 'the store names the survivor as the holder of the shard')
  t.ok(takeover.every((p) => p.token === Number(after?.token)), 'and its passes carry the token the store raised for it')
  assertOneNodeAtATime(t, mine(), 'over the whole run')
  const rows = await tasksPerJob([...jobs, ...later])
  t.same(rows.filter((r) => r.tasks !== 1), [], 'still one task per job over the whole run')
  t.same(unparsed, [], 'every queue pass line was JSON')
})
