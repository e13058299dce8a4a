/**
 * The chaos test of dispatch (DESIGN section 14): 200 jobs through 50
 * printers on 5 hosts, each host run by the reference bridge
 * (src/bridge/bridge-sim.ts), while the server is SIGKILLed and restarted
 * three times at random moments. An operator loop assigns queued jobs to
 * free printers and verifies finished plates. At the end every job was
 * printed exactly once, counted from the bridges' own logs: none started
 * twice, none lost.
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { BridgeSimulator, type BridgeLogEntry } from '../../../src/bridge/bridge-sim.js'
import { childServiceEnv, freePort, startChildService, type ChildService } from '../../helpers/child-service.js'
import { addPrinter, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { tempDir, tempSchema, usingRealPostgres } from '../../helpers/service.js'

const plan = { jobs: 200, hosts: 5, printersPerHost: 10, kills: 3, deadlineMs: 240_000 }

// Four starts of a child service and a few hundred prints: on PGlite minutes of what the real-services run
// proves the same way. PRINTFARM_TEST_ALL=1 runs it in the embedded run too.
const skip = !usingRealPostgres() && !process.env['PRINTFARM_TEST_ALL'] ? 'runs in the real-services run' : false

// Longer than the suite's default per-file limit: four service starts and 200 prints.
t.setTimeout(plan.deadlineMs + 120_000)

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('dispatch chaos - 200 jobs, 50 printers, 3 SIGKILLs: every job printed exactly once, by the bridges\' logs', { skip, timeout: plan.deadlineMs + 60_000 }, async (t) => {
  const dataDir = tempDir(t)
  const env = { ...childServiceEnv(dataDir, usingRealPostgres() ? tempSchema(t) : undefined), LOG_LEVEL: 'error' }
  // One address for every start: the bridges keep their URL across restarts, as behind a load balancer.
  const port = await freePort()
  let service: ChildService = await startChildService(t, { env, port })
  const url = service.url
  let farm = await openFarm(url)
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridges', scopes: [...bridgeScopes] } })
  const modelId = await createModel(url, farm.admin)
  const fileId: string = (await upload(url, farm.admin, modelId, { name: 'chaos.3mf', bytes: bambuThreeMf() })).json.id
  const printers: string[] = []
  for (let h = 0; h < plan.hosts; h++) for (let p = 0; p < plan.printersPerHost; p++) printers.push(await addPrinter(farm, `host-${h}`, { enabled: true }))
  const jobIds: number[] = []
  for (let i = 0; i < plan.jobs; i++) {
    const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: `chaos-${i}`, model_file_id: fileId } })
    jobIds.push(res.json.id)
  }

  const log: BridgeLogEntry[] = []
  const sims = Array.from({ length: plan.hosts }, (_, h) => new BridgeSimulator({ url, apiKey: key.json.key, hostId: `host-${h}`, printMs: 300, progressSteps: 1, pollMs: 150, retryMs: 50, onLog: (e) => log.push(e) }))
  await Promise.all(sims.map((s) => s.start()))
  t.same(sims.map((s) => s.printerIds.length), Array(plan.hosts).fill(plan.printersPerHost), 'each bridge found its printers')
  t.teardown(() => Promise.all(sims.map((s) => s.stop())))

  const started = () => log.filter((e) => e.event === 'started').length
  // Kill points spread over the run, each at a random moment after its mark.
  const killAt = Array.from({ length: plan.kills }, (_, i) => Math.floor(((i + 1) * plan.jobs) / (plan.kills + 1)) + Math.floor(Math.random() * 10))
  const kills: { afterStarted: number }[] = []
  const deadline = Date.now() + plan.deadlineMs
  let succeeded = 0
  while (Date.now() < deadline) {
    if (kills.length < killAt.length && started() >= killAt[kills.length]!) {
      await delay(Math.random() * 300)
      kills.push({ afterStarted: started() })
      await service.kill()
      service = await startChildService(t, { env, port })
      farm = await openFarm(url)
    }
    try {
      succeeded = await operate(url, farm.admin, printers)
    } catch {
      // The service is down or restarting: the operator tries again, like the bridges.
    }
    if (succeeded === plan.jobs) break
    await delay(100)
  }
  t.equal(kills.length, plan.kills, `the server was killed ${plan.kills} times (after ${kills.map((k) => k.afterStarted).join(', ')} starts)`)
  t.equal(succeeded, plan.jobs, 'every job succeeded')

  const prints = new Map<number, number>()
  for (const e of log) if (e.event === 'started') prints.set(e.job!, (prints.get(e.job!) ?? 0) + 1)
  const twice = [...prints].filter(([, n]) => n > 1)
  t.same(twice, [], 'no job was started twice')
  t.same(jobIds.filter((id) => !prints.has(id)), [], 'no job was lost')
  t.equal(prints.size, plan.jobs, 'the bridges printed exactly the jobs created')
  const finished = log.filter((e) => e.event === 'finished')
  t.equal(new Set(finished.map((e) => e.job)).size, plan.jobs, 'each print was reported finished')
  const bridgeJobs = await request(url, '/v1/print-jobs', { method: 'POST', headers: farm.admin, body: { limit: 1 } })
  t.equal(bridgeJobs.json.total, plan.jobs, 'no job was opened beside the dispatched ones')
  t.comment(`claims refused ${log.filter((e) => e.event === 'claim_refused').length}, starts refused ${log.filter((e) => e.event === 'start_refused').length}`)
  await Promise.all(sims.map((s) => s.stop()))
  await service.stop()
})

/** One round of the operator: verify finished plates, assign queued jobs to free printers; answers how many succeeded. */
async function operate(url: string, admin: Record<string, string>, printers: readonly string[]): Promise<number> {
  const list = async (status: string[]) => {
    const res = await request(url, '/v1/print-jobs', { method: 'POST', headers: admin, body: { status, limit: 200 } })
    if (res.status !== 200) throw new Error(`list: ${res.status}`)
    return res.json as { jobs: { id: number; printer_id: string | null }[]; total: number }
  }
  for (const job of (await list(['awaiting_verification'])).jobs) {
    await request(url, `/v1/printers/${job.printer_id}/ready`, { method: 'PATCH', headers: admin, body: { ready: true, job_id: job.id, event_type: 'operator:manual_verification:success' } })
  }
  const holding = new Set((await list(['dispatching', 'printing', 'paused', 'awaiting_verification'])).jobs.map((j) => j.printer_id))
  const free = printers.filter((p) => !holding.has(p))
  const queued = (await list(['queued'])).jobs
  await Promise.all(queued.slice(0, free.length).map((job, i) => request(url, `/v1/print-jobs/${job.id}/assign`, { method: 'POST', headers: admin, body: { printer_id: free[i] } })))
  return (await list(['succeeded'])).total
}
