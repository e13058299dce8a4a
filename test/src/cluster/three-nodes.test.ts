/**
 * Several nodes for real: three `printfarm serve` processes on one
 * PostgreSQL schema and one Redis, with short leases. Bridges post to any
 * node and retry a batch (deliveryAttempt + 1, on the next node) until it
 * gets a 200, as docs/printers-and-events.md asks of them; the store is then read directly:
 * every event a bridge was answered 200 for is stored, exactly once, and
 * each printer's state is at its last event.
 */
import t, { type Test as Tap } from 'tap'
import postgres from 'postgres'
import { randomBytes } from 'node:crypto'
import { childServiceEnv, startChildService, type ChildService } from '../../helpers/child-service.js'
import { addPrinter, batch, item, openFarm, type Farm } from '../../helpers/bridge.js'
import { metricValue, request } from '../../helpers/http.js'
import { tempDir, tempSchema, type TestContext } from '../../helpers/service.js'
import { assign, getDisplay, getTarget, publishedRevision, registerDisplay, simulatorOptions } from '../../helpers/displays.js'
import { waitFor } from '../../helpers/poll.js'
import { mosquittoSkip, startMosquitto } from '../../helpers/mosquitto.js'
import { placementOf } from '../../../src/cluster/redis-shard-directory.js'
import { setupServiceLogin } from '../../../src/mqtt/setup-cli.js'
import { DisplaySimulator } from '../../../src/simulators/display-sim.js'
import { shardCount, shardOf } from '../../../actors/shard-directory.js'

const shared = process.env['DATABASE_URL'] !== undefined && process.env['REDIS_URL'] !== undefined
if (!shared) t.plan(0, 'needs DATABASE_URL and REDIS_URL (three processes share them)')
// Four clusters of three processes each, with leases running out on purpose: about a minute on a quiet 2-core machine, more
// when CI runs other files beside it; the default per-file limit (180 s) would cut it off mid-way.
t.setTimeout(420_000)

const leaseMs = 2_000
const eventsPerBatch = 5

function expectedShards(nodeId: string, nodes: readonly string[]): number {
  let n = 0
  for (let s = 0; s < shardCount; s++) if (placementOf(s, nodes) === nodeId) n++
  return n
}

async function cluster(t: TestContext, extraEnv: Record<string, string> = {}) {
  const schema = tempSchema(t)
  // Nodes of one deployment share the sealing key (each opens the keyring the first one sealed)
  // and the public URL (the audience of their tokens), as behind one load balancer.
  const secretKey = randomBytes(32).toString('base64')
  const nodes = new Map<string, ChildService>()
  const start = async (name: string) => {
    const node = await startChildService(t, {
      env: { ...childServiceEnv(tempDir(t), schema), NODE_ID: name, PRINTFARM_SECRET_KEY: secretKey, PUBLIC_BASE_URL: 'http://farm.test', SHARD_LEASE_MS: String(leaseMs), FORWARD_TIMEOUT_MS: '3000', ...extraEnv },
    })
    nodes.set(name, node)
    return node
  }
  const sql = postgres(process.env['DATABASE_URL']!, { max: 2, onnotice: () => undefined, connection: { search_path: schema } })
  t.teardown(() => sql.end())
  const readiness = async (node: ChildService) => (await request(node.url, '/readyz', { timeoutMs: 2_000 })).json.checks.shards as { ok: boolean; owned: number; nodeId: string }
  const metrics = async (node: ChildService) => (await request(node.url, '/metrics', { timeoutMs: 2_000 })).text
  /** The leases settled: each of these nodes owns exactly the shards rendezvous placement gives it among them. */
  const settled = async (live: ChildService[]) => {
    const states = await Promise.all(live.map((n) => readiness(n)))
    const ids = states.map((r) => r.nodeId)
    return states.every((r) => r.ok && r.owned === expectedShards(r.nodeId, ids))
  }
  /**
   * The three nodes: the first alone (it migrates the schema, seals the keyring and creates the first
   * admin), then the other two at once, as a deployment scaled out.
   */
  const startThree = async (): Promise<[ChildService, ChildService, ChildService]> => {
    const first = await start('node-a')
    const [second, third] = await Promise.all([start('node-b'), start('node-c')])
    return [first, second, third]
  }
  return { start, startThree, nodes, sql, readiness, metrics, settled }
}

/**
 * One bridge per printer: batches in seqn order, each retried on the next live node until it
 * gets a 200. Returns the eventIds it was answered 200 for.
 */
function bridge(farm: Farm, printerId: string, batches: number, pick: (attempt: number) => ChildService | undefined, pauseMs = 0) {
  const acked: string[] = []
  let refusals = 0
  const run = async () => {
    for (let b = 0; b < batches; b++) {
      const seqns = Array.from({ length: eventsPerBatch }, (_, i) => b * eventsPerBatch + i)
      for (let attempt = 1; ; attempt++) {
        if (attempt > 200) throw new Error(`batch ${b} of ${printerId} got no 200 in 200 attempts`)
        const node = pick(b + attempt)
        if (node === undefined) throw new Error('no node to post to')
        const body = batch(printerId, seqns.map((s) => item(s, { deliveryAttempt: attempt })))
        const res = await request(node.url, '/v1/printer-events/batch', { method: 'POST', headers: farm.bridge, body, timeoutMs: 4_000 }).catch(() => undefined)
        if (res?.status === 200) {
          if (res.json.processed !== eventsPerBatch) throw new Error(`batch ${b}: processed ${res.json.processed}`)
          acked.push(...seqns.map((s) => `ev-${s}`))
          break
        }
        if (res !== undefined && res.status !== 503) throw new Error(`batch ${b} of ${printerId}: ${res.status} ${res.text}`)
        refusals++
        await new Promise((r) => setTimeout(r, 100))
      }
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs))
    }
  }
  return { acked, refusals: () => refusals, done: run() }
}

async function assertStoredExactlyOnce(t: Tap, sql: postgres.Sql, printers: string[], acked: Map<string, string[]>) {
  for (const printer of printers) {
    const rows = await sql<{ event_id: string; n: number }[]>`select event_id, count(*)::int as n from printer_events where printer_id = ${printer} group by event_id`
    const stored = new Map(rows.map((r) => [r.event_id, r.n]))
    const mine = acked.get(printer)!
    t.ok(
      mine.every((id) => stored.get(id) === 1),
      `printer ${printer.slice(0, 8)}: all ${mine.length} events answered 200 are stored once`,
    )
    t.equal(rows.length, mine.length, `printer ${printer.slice(0, 8)}: nothing else is stored`)
    const [state] = await sql<{ high_water_seqn: string }[]>`select high_water_seqn from printer_state where printer_id = ${printer}`
    t.equal(Number(state?.high_water_seqn), mine.length - 1, `printer ${printer.slice(0, 8)}: the state is at its last event`)
  }
}

/** The shards spread over three nodes, each answering for every printer (forwarding to the owner), as /metrics shows. */
async function assertSpreadAndForwarding(t: Tap, c: Awaited<ReturnType<typeof cluster>>, nodes: ChildService[], farm: Farm): Promise<void> {
  // Every node's owner table has caught up with the last moves (a round is a fifth of the lease).
  await new Promise((r) => setTimeout(r, leaseMs / 2))
  const owned = await Promise.all(nodes.map((n) => c.readiness(n)))
  t.ok(owned.every((r) => r.ok && r.owned > 40), `each node holds a share (${owned.map((r) => r.owned).join(', ')})`)
  const printers = await Promise.all(Array.from({ length: 6 }, () => addPrinter(farm)))
  let i = 0
  for (const printer of printers) {
    for (const node of nodes) {
      const seqn = i++
      const res = await request(node.url, '/v1/printer-events/batch', { method: 'POST', headers: farm.bridge, body: batch(printer, [item(seqn, { eventId: `e-${seqn}` })]) })
      t.equal(res.status, 200, `a batch posted to ${node.url} is answered (${res.text})`)
    }
    const maintenance = await request(nodes[2]!.url, `/v1/printers/${printer}/maintenance`, { method: 'PATCH', headers: farm.admin, body: { maintenance: false } })
    t.equal(maintenance.status, 200, `an admin call through any node reaches the printer (${maintenance.text})`)
  }
  const [count] = await c.sql<{ n: number }[]>`select count(*)::int as n from printer_events`
  t.equal(count?.n, printers.length * nodes.length, 'every event stored once')
  const forwarded = await Promise.all(nodes.map(async (n) => metricValue(await c.metrics(n), 'forwards_total{op="printer.ingest",outcome="ok"}')))
  t.ok(forwarded.reduce((a, b) => a + b, 0) > 0, `batches that landed on a non-owner were forwarded (${forwarded.join(', ')})`)
  const text = await c.metrics(nodes[0]!)
  t.match(text, /shards_owned \d+/)
  t.match(text, /shard_lease_renewals_total\{outcome="renewed"\} \d+/)
  t.match(text, /forward_seconds_bucket/)
}

// One cluster for both: the spread is checked first, then a node is killed.
t.test('three nodes - the shards spread over the nodes, each node answers for every printer (forwarding to the owner), and /metrics shows it; then a SIGKILL of a node during ingestion: its shards move after the lease, bridge retries succeed, every acknowledged event is stored exactly once', async (t) => {
  const c = await cluster(t)
  const [a, b, victim] = await c.startThree()
  await waitFor(() => c.settled([a, b, victim]), 'the leases to settle', 30_000)
  const farm = await openFarm(a.url)
  await assertSpreadAndForwarding(t, c, [a, b, victim], farm)
  const printers = await Promise.all(Array.from({ length: 8 }, () => addPrinter(farm)))
  let dead = false
  const pick = (n: number) => (dead ? [a, b][n % 2] : [a, b, victim][n % 3])
  const bridges = printers.map((p) => bridge(farm, p, 24, pick, 50))
  await waitFor(() => bridges.every((br) => br.acked.length >= 4 * eventsPerBatch), 'the bridges to get going', 30_000)
  const victimShards = (await c.readiness(victim)).owned
  t.ok(victimShards > 0, `the victim owns ${victimShards} shards when it is killed`)
  await victim.kill()
  dead = true
  await Promise.all(bridges.map((br) => br.done))
  // Every printer's shard has moved (the bridges finished); the shards without printers follow within a lease round.
  await waitFor(() => c.settled([a, b]), 'the two survivors to own every shard', 30_000)
  t.pass('the two survivors own every shard')
  await assertStoredExactlyOnce(t, c.sql, printers, new Map(printers.map((p, i) => [p, bridges[i]!.acked])))
  t.ok(bridges.some((br) => br.refusals() > 0), 'some deliveries were refused with 503 (or lost with the node) and retried')
})

t.test("three nodes - SIGSTOP of an owner past its lease, then SIGCONT: the others take its shards, it gives them up, and nothing it held is written twice or lost", async (t) => {
  const c = await cluster(t)
  const [a, b, stalled] = await c.startThree()
  await waitFor(() => c.settled([a, b, stalled]), 'the leases to settle', 30_000)
  const farm = await openFarm(a.url)
  const printers = await Promise.all(Array.from({ length: 8 }, () => addPrinter(farm)))
  // The bridges post to the stalled node too: requests in flight there when it stops are the late writes.
  const bridges = printers.map((p) => bridge(farm, p, 30, (n) => [a, b, stalled][n % 3], 50))
  await waitFor(() => bridges.every((br) => br.acked.length >= 4 * eventsPerBatch), 'the bridges to get going', 30_000)
  const tokensBefore = new Map((await c.sql<{ shard: number; token: string }[]>`select shard, token from shard_tokens`).map((r) => [r.shard, Number(r.token)]))
  process.kill(stalled.pid, 'SIGSTOP')
  let continued = false
  t.teardown(() => {
    if (!continued) process.kill(stalled.pid, 'SIGCONT')
  })
  // The others see its leases run out and take the shards, each with a higher token. Bounded by the
  // lease, then by PostgreSQL ending the stalled node's open transactions (fencedIdleTimeoutMs, 15 s),
  // which a loaded two-core machine stretches: a bound on the wait, not a figure.
  await waitFor(() => c.settled([a, b]), 'the survivors to take every shard', 60_000)
  const raised = await c.sql<{ shard: number; token: string; owner: string }[]>`select shard, token, owner from shard_tokens where owner <> 'node-c'`
  t.ok(raised.some((r) => Number(r.token) > (tokensBefore.get(r.shard) ?? 0)), 'the shards were taken again with higher fencing tokens')
  process.kill(stalled.pid, 'SIGCONT')
  continued = true
  await Promise.all(bridges.map((br) => br.done))
  // It gives up what it held: its renewals fail (or the store fences it), and it owns nothing the others own.
  await waitFor(async () => {
    const text = await c.metrics(stalled)
    return ['lost', 'expired', 'fenced'].some((outcome) => metricValue(text, `shard_lease_renewals_total{outcome="${outcome}"}`) > 0)
  }, 'the stalled node to give its shards up', 20_000)
  await waitFor(() => c.settled([a, b, stalled]), 'the leases to settle', 30_000)
  await assertStoredExactlyOnce(t, c.sql, printers, new Map(printers.map((p, i) => [p, bridges[i]!.acked])))
})

t.test('three nodes - a rolling restart (SIGTERM, start again, one node at a time) loses nothing', async (t) => {
  const c = await cluster(t)
  const names = ['node-a', 'node-b', 'node-c']
  const live: (ChildService | undefined)[] = await c.startThree()
  await waitFor(() => c.settled(live as ChildService[]), 'the leases to settle', 30_000)
  const farm = await openFarm(live[0]!.url)
  const printers = await Promise.all(Array.from({ length: 6 }, () => addPrinter(farm)))
  const pick = (n: number) => {
    const up = live.filter((x): x is ChildService => x !== undefined)
    return up[n % up.length]
  }
  const bridges = printers.map((p) => bridge(farm, p, 40, pick, 40))
  for (let i = 0; i < names.length; i++) {
    const node = live[i]!
    live[i] = undefined
    const exit = await node.stop(30_000)
    t.equal(exit.code, 0, `${names[i]} drained and exited cleanly`)
    live[i] = await c.start(names[i]!)
    await waitFor(() => c.settled(live as ChildService[]), 'the leases to settle', 30_000)
  }
  await Promise.all(bridges.map((br) => br.done))
  await assertStoredExactlyOnce(t, c.sql, printers, new Map(printers.map((p, i) => [p, bridges[i]!.acked])))
})

t.test('three nodes - display activations continue after their owner dies: the new owner publishes the pending activation again, takes its receipt and keeps the status feed going', { skip: mosquittoSkip }, async (t) => {
  // A Mosquitto of the test's own with dynamic security: every node manages display logins on it, as in production.
  const mosquitto = await startMosquitto(t)
  const service = { username: 'printfarm', password: randomBytes(16).toString('base64url') }
  await setupServiceLogin(mosquitto.url(mosquitto.admin.username, mosquitto.admin.password), service)
  const c = await cluster(t, { MQTT_URL: mosquitto.url(service.username, service.password), MQTT_DISPLAY_CREDENTIALS: 'dynamic-security' })
  const names = ['node-a', 'node-b', 'node-c']
  const all = await c.startThree()
  await waitFor(() => c.settled(all), 'the leases to settle', 30_000)
  const farm = await openFarm(all[0]!.url)
  const printers = [await addPrinter(farm), await addPrinter(farm)]
  const display = await registerDisplay(farm, printers)
  const ownerName = placementOf(shardOf(display.id), names)!
  const owner = c.nodes.get(ownerName)!
  const survivors = all.filter((n) => n !== owner)
  // Every call goes through a node that does not own the display (forwarded while the owner lives).
  const via = { ...farm, url: survivors[0]!.url }

  let holding = false
  // While holding, the device receives envelopes without applying them (nor answering), as one that is busy.
  const sim = await DisplaySimulator.connect(simulatorOptions({ ...farm, brokerUrl: `mqtt://127.0.0.1:${mosquitto.port}` }, display, { decide: () => (holding ? 'ignore' : 'apply') }))
  t.teardown(() => sim.close())
  // The owner records the device's capabilities asynchronously; an assignment before that is refused (capability missing).
  await waitFor(async () => (await getDisplay(via, display.id)).json.capabilitiesReportedAt !== null, 'capabilities recorded by the owner', 15_000)
  const statusOf = async (generation: number) => {
    const res = await getTarget(via, display.id).catch(() => undefined)
    return res?.status === 200 && res.json.desired.activation_generation === generation ? (res.json.status as string) : undefined
  }

  // 503 display_owner_unavailable asks the client to retry (a lease late under load can move the
  // shard for a moment); a conditional assignment is safe to send again.
  const assignRetrying = async (...args: Parameters<typeof assign>) => {
    let res = await assign(...args)
    for (let tries = 0; res.status === 503 && res.text.includes('display_owner_unavailable') && tries < 30; tries++) {
      await new Promise((r) => setTimeout(r, 500))
      res = await assign(...args)
    }
    return res
  }

  const first = await publishedRevision(via, undefined, 'First')
  const assigned = await assignRetrying(via, display.id, { profileRevisionId: first.id, expectedBindingEpoch: display.bindingEpoch, expectedActivationGeneration: 0 })
  t.equal(assigned.status, 200, `an assignment through a non-owner is forwarded to the owner (${assigned.text})`)
  await sim.waitFor(() => sim.active?.activation_generation === 1, 15_000, 'the first activation applied')
  await waitFor(async () => (await statusOf(1)) === 'device_applied', 'device_applied for the first activation', 15_000)

  holding = true
  const second = await publishedRevision(via, undefined, 'Second')
  const pending = await assignRetrying(via, display.id, { profileRevisionId: second.id, expectedBindingEpoch: display.bindingEpoch, expectedActivationGeneration: 1 })
  t.equal(pending.status, 200, `the next assignment is stored while the device holds it (${pending.text})`)
  await sim.waitFor(() => sim.envelopes.some((e) => e.activation_generation === 2), 15_000, 'the second envelope on the device')
  const envelopesBefore = sim.envelopes.length
  await owner.kill()
  holding = false

  // Its shard moves after the lease; the new owner resumes the display from the store and publishes again.
  await sim.waitFor(() => sim.active?.activation_generation === 2, 30_000, 'the second activation applied after the owner died')
  t.ok(sim.envelopes.length > envelopesBefore, 'the pending activation was published again after the owner died')
  await waitFor(async () => (await statusOf(2)) === 'device_applied', 'device_applied for the second activation (the new owner took the receipt)', 30_000)
  const [row] = await c.sql<{ owner: string }[]>`select owner from shard_tokens where shard = ${shardOf(display.id)}`
  t.not(row?.owner, ownerName, `the display's shard has a new owner (${row?.owner})`)

  // A new activation and the status feed go on from the new owner.
  const third = await publishedRevision(via, undefined, 'Third')
  const next = await assignRetrying({ ...farm, url: survivors[1]!.url }, display.id, { profileRevisionId: third.id, expectedBindingEpoch: display.bindingEpoch, expectedActivationGeneration: 2 })
  t.equal(next.status, 200, `a new assignment after the death reaches the new owner (${next.text})`)
  await sim.waitFor(() => sim.active?.activation_generation === 3, 15_000, 'the third activation applied')
  await waitFor(async () => {
    const res = await request(via.url, `/v1/printer-config/${printers[0]}/connection-status`, { method: 'PATCH', headers: farm.bridge, body: { is_connected: true, last_heartbeat: new Date().toISOString() } })
    return res.status === 200
  }, 'the printer to be reachable on its (possibly new) owner', 30_000)
  await sim.waitFor(() => sim.feed?.pixels[0] === 'WAITING', 15_000, 'the status feed to show the printer online')
})
