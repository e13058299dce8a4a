/**
 * `printfarm bridge-sim`: arguments are checked (exit 2), a key the service
 * refuses stops it at the start (exit 1), and against a service it reports
 * its printers ready and takes a dispatched job to the end as JSON lines.
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { runBridgeSim, type BridgeSimIo } from '../../../src/simulators/bridge-sim-cli.js'
import { addPrinter, openFarm } from '../../helpers/bridge.js'
import { waitFor } from '../../helpers/poll.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

function io(stop: Promise<void> = new Promise(() => undefined)) {
  const out: string[] = []
  const err: string[] = []
  const value: BridgeSimIo = { out: (s) => void out.push(s), err: (s) => void err.push(s), stopRequested: () => stop, clock: systemClock }
  return { io: value, out, err, lines: () => out.join('').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>) }
}

t.test('bridge-sim - bad arguments exit 2 and say what to fix', async (t) => {
  const run = io()
  t.equal(await runBridgeSim(['--url', 'ftp://x', '--host', 'h'], run.io), 2)
  t.match(run.err.join(''), /--url must be an http\(s\) URL[\s\S]*--key is required/)
  const unknown = io()
  t.equal(await runBridgeSim(['--nope'], unknown.io), 2)
  const range = io()
  t.equal(await runBridgeSim(['--url', 'http://x', '--key', 'k', '--host', 'h', '--poll-ms', '1'], range.io), 2)
  t.match(range.err.join(''), /--poll-ms must be an integer from 50/)
})

t.test('bridge-sim - a key the service refuses exits 1 at the start', async (t) => {
  const svc = await startTestService(t)
  const run = io()
  t.equal(await runBridgeSim(['--url', svc.url, '--key', 'pf_nope', '--host', 'host-a'], run.io), 1)
  t.match(run.err.join(''), /refused the bridge/)
})

t.test('bridge-sim - takes a dispatched job from offer to finish and logs each step', async (t) => {
  const svc = await startTestService(t)
  const farm = await openFarm(svc.url)
  const key = await request(svc.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'sim', scopes: [...bridgeScopes] } })
  const printer = await addPrinter(farm, 'host-sim', { enabled: true })
  const modelId = await createModel(svc.url, farm.admin)
  const fileId = (await upload(svc.url, farm.admin, modelId, { name: 'sim.3mf', bytes: bambuThreeMf() })).json.id
  let stop!: () => void
  const run = io(new Promise<void>((resolve) => (stop = resolve)))
  t.teardown(() => stop())
  const exited = runBridgeSim(['--url', svc.url, '--key', key.json.key, '--host', 'host-sim', '--print-ms', '100', '--poll-ms', '100'], run.io)
  await waitFor(() => run.lines().some((l) => l['event'] === 'ready'), 'the bridge to read its printers')
  const job = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'sim', model_file_id: fileId } })
  await waitFor(async () => (await request(svc.url, `/v1/print-jobs/${job.json.id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })).status === 200, 'the printer to be online')
  await waitFor(() => run.lines().some((l) => l['event'] === 'finished' && l['job'] === job.json.id), 'the print to finish')
  stop()
  t.equal(await exited, 0)
  const steps = run.lines().filter((l) => l['job'] === job.json.id).map((l) => l['event'])
  t.same(steps.filter((s) => s !== 'progress'), ['claimed', 'downloaded', 'started', 'finished'])
  t.equal((await request(svc.url, `/v1/print-jobs/${job.json.id}`, { headers: farm.admin })).json.status, 'awaiting_verification')
})
