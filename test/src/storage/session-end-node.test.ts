/**
 * PostgreSQL ends every session of a running node (pg_terminate_backend by the
 * node's application_name, as a server restart or a managed failover does)
 * while bridges post batches, a flush is inside its transaction, a display
 * assignment and a task claim run. The node keeps running (same process),
 * answers again within seconds (GET /readyz), and every event it acknowledged
 * is stored exactly once. The node runs as a child process, so that its exit
 * would be seen as one. Real PostgreSQL only: the embedded store has one
 * session that nothing ends.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { addPrinter, batch, item, openFarm, type Farm } from '../../helpers/bridge.js'
import { childServiceEnv, freePort, startChildService } from '../../helpers/child-service.js'
import { assign, getDisplay, publishedRevision, registerDisplay, simulatorOptions } from '../../helpers/displays.js'
import { waitFor } from '../../helpers/poll.js'
import { DisplaySimulator } from '../../../src/simulators/display-sim.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request, type HttpResult } from '../../helpers/http.js'
import { tempDir, tempSchema, usingRealPostgres } from '../../helpers/service.js'

const skip = usingRealPostgres() ? false : 'needs a real PostgreSQL (DATABASE_URL): the embedded store has one session that nothing ends'

t.test('session end - PostgreSQL ending every session of the node mid-ingest, mid-flush, mid-assignment and mid-claim: the node lives, answers again, and stores each acknowledged event once', { skip }, async (t) => {
  const schema = tempSchema(t)
  const nodeId = `session-end-${randomBytes(4).toString('hex')}`
  const mqttPort = await freePort()
  const node = await startChildService(t, { env: { ...childServiceEnv(tempDir(t), schema), NODE_ID: nodeId, MQTT_PORT: String(mqttPort) } })
  const admin = postgres(process.env['DATABASE_URL']!, { max: 1, onnotice: () => undefined, connection: { search_path: schema } })
  t.teardown(() => admin.end())
  const applicationName = `printfarm ${nodeId}`
  const sessions = async (): Promise<number> => (await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = ${applicationName}`)[0]!.n
  t.ok((await sessions()) > 0, `the node's sessions are named '${applicationName}'`)

  const farm = await openFarm(node.url)
  const key = await request(node.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge', scopes: [...bridgeScopes] } })
  const bridge: Farm = { ...farm, bridge: { 'x-api-key': key.json.key as string } }
  const printers = await Promise.all(Array.from({ length: 6 }, () => addPrinter(farm, 'host-a', { enabled: true })))
  const display = await registerDisplay(farm, printers.slice(0, 2))
  const revision = await publishedRevision(farm)
  // The display itself, on the node's embedded broker: an assignment needs its advertised capability.
  const device = await DisplaySimulator.connect(simulatorOptions({ ...farm, brokerUrl: `mqtt://127.0.0.1:${mqttPort}` }, display))
  t.teardown(() => device.close())
  await waitFor(async () => (await getDisplay(farm, display.id)).json.capabilitiesReportedAt !== null, 'the display advertised its capabilities')
  const modelId = await createModel(node.url, farm.admin)
  const fileId: string = (await upload(node.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id

  /** Retries what answers 503 (or no answer: the connection was cut) as a client is told to; bounded. */
  const retried = async (send: () => Promise<HttpResult>, what: string): Promise<HttpResult> => {
    let last = ''
    for (let attempt = 0; attempt < 100; attempt++) {
      const res = await send().catch((error: unknown) => void (last = String(error)))
      if (res !== undefined && res.status !== 503) return res
      if (res !== undefined) last = `${res.status} ${res.text}`
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error(`${what}: still unanswered after 100 attempts (last: ${last.slice(0, 300)}); the node's log ends:\n${node.output().slice(-20000)}`)
  }

  // Bridges: each printer's events numbered from 1, in batches of 25, each batch resent as it was until it is answered.
  const acknowledged = new Map<string, Set<string>>(printers.map((p) => [p, new Set()]))
  let ingesting = true
  const bridges = printers.map(async (printer) => {
    for (let n = 0; n < 400 && ingesting; n++) {
      const events = Array.from({ length: 25 }, (_, i) => item(n * 25 + i + 1, { eventId: `ev-${printer}-${n * 25 + i + 1}`, data: { nozzleTemp: 200 + i } }))
      // A bound on each request: a node that stopped answering fails the test instead of hanging it.
      const answer = await retried(() => request(node.url, '/v1/printer-events/batch', { method: 'POST', headers: bridge.bridge, body: batch(printer, events), timeoutMs: 30_000 }), `batch ${n} of ${printer}`)
      if (answer.status !== 200) throw new Error(`batch ${n} of ${printer}: ${answer.status} ${answer.text}`)
      for (const e of answer.json.events as { eventId: string; outcome: string }[]) if (e.outcome === 'applied' || e.outcome === 'duplicate') acknowledged.get(printer)!.add(e.eventId)
    }
  })

  const jobs: number[] = []
  const terminations: number[] = []
  for (let round = 0; round < 3; round++) {
    // A job dispatched to a printer, for a claim to be in flight when the sessions end.
    const created = await retried(() => request(node.url, '/v1/print-jobs/create', { method: 'POST', headers: { ...farm.admin, 'idempotency-key': `round-${round}-${schema}` }, body: { name: `round ${round}`, model_file_id: fileId } }), 'create')
    t.ok(created.status === 201 || created.status === 200, `job of round ${round}: ${created.status} ${created.text}`)
    jobs.push(created.json.id)
    const assigned = await retried(() => request(node.url, `/v1/print-jobs/${created.json.id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printers[round]! } }), 'assign')
    t.equal(assigned.status, 200, `assigned: ${assigned.text}`)
    const taskId: string = assigned.json.task.id
    // A flush inside its transaction (a session of the node with a transaction open), then end them all at once.
    await waitFor(async () => (await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = ${applicationName} and xact_start is not null`)[0]!.n > 0, 'a transaction of the node')
    const claim = request(node.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: bridge.bridge, body: { hostId: 'host-a', assignmentEpoch: 1 } }).catch(() => undefined)
    const assignment = assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: display.bindingEpoch, expectedActivationGeneration: round }).catch(() => undefined)
    const [ended] = await admin<{ n: number }[]>`select count(*)::int as n from (select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${applicationName}) ended`
    terminations.push(ended!.n)
    // What was in flight answers (or, cut, is retried): the claim once, the assignment once.
    const inFlight = await claim
    const claimed = inFlight?.status === 200 ? inFlight : await retried(() => request(node.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: bridge.bridge, body: { hostId: 'host-a', assignmentEpoch: 1 } }), 'claim')
    t.equal(claimed.status, 200, `round ${round}: the claim is answered: ${claimed.text}`)
    const again = await retried(() => request(node.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: bridge.bridge, body: { hostId: 'host-a', assignmentEpoch: 1 } }), 'claim again')
    t.equal(again.json.claim_generation, claimed.json.claim_generation, `round ${round}: one claim, whatever was retried`)
    const first = await assignment
    if (first?.status !== 200) {
      const retry = await retried(() => assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: display.bindingEpoch, expectedActivationGeneration: round }), 'display assignment')
      // 409 when the first attempt was stored before its answer was lost: the generation tells.
      t.ok(retry.status === 200 || retry.status === 409, `round ${round}: display assignment answered ${retry.status} ${retry.text}`)
    }
    const target = await retried(() => request(node.url, `/v1/mqtt/displays/${display.id}/profile`, { headers: farm.admin }), 'display target')
    t.equal(target.json.desired?.activation_generation, round + 1, `round ${round}: the display's assignment was stored once`)
    await waitFor(async () => (await request(node.url, '/readyz').catch(() => undefined))?.status === 200, `round ${round}: /readyz answers 200 again`, 15_000)
  }
  ingesting = false
  await Promise.all(bridges)
  t.ok(terminations.every((n) => n > 0), `each round ended the node's sessions (${terminations.join(', ')})`)

  t.equal(await Promise.race([node.exited.then(() => 'exited'), new Promise((resolve) => setImmediate(() => resolve('running')))]), 'running', 'the node is the same process')
  t.notMatch(node.output(), /uncaught exception/i, 'nothing escaped to the process')
  for (const [printer, ids] of acknowledged) {
    const stored = await admin<{ event_id: string; n: number }[]>`select event_id, count(*)::int as n from printer_events where printer_id = ${printer} and event_id like 'ev-%' group by event_id`
    const counts = new Map(stored.map((row) => [row.event_id, row.n]))
    const missing = [...ids].filter((id) => !counts.has(id))
    const twice = stored.filter((row) => row.n > 1).map((row) => row.event_id)
    t.same({ missing, twice }, { missing: [], twice: [] }, `printer ${printer.slice(0, 8)}: ${ids.size} acknowledged events, each stored once`)
  }
  t.ok([...acknowledged.values()].every((ids) => ids.size > 0), 'every bridge had batches acknowledged')
})
