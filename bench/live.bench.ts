/**
 * Live feed: 1,000 WebSocket clients subscribed to `printers` while
 * bridges ingest at a steady rate over HTTP into the real server on real
 * PostgreSQL. Figures: frames/s delivered to the clients, and ingest-to-client
 * latency p50/p99 (from the bridge sending the batch to a client reading the
 * frame it caused, on sampling clients).
 *
 * The limit, in the same run: a bare uWS server with the same 1,000 clients
 * on one topic, publishing frames of the same size at the same rate (no
 * service logic): its delivered frames/s and publish-to-client latency.
 *
 * Needs PostgreSQL like bench/ingest (BENCH_DATABASE_URL, DATABASE_URL or the
 * local test database; a fresh schema, dropped after).
 */
import { benchDatabaseUrl } from './support/database.js'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent, request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { freePort, startProcess, stopProcess, waitForHttp, cpuSeconds, startServiceProcess } from './support/process.js'
import { reportDetail, reportJsonOnly, reportMeasurement, reportSkipped } from './support/report.js'
import { openWsClients } from './support/ws-clients.js'

const databaseUrl = benchDatabaseUrl('live')
const clientCount = Number(process.env['BENCH_CLIENTS'] ?? 1000)
const printerCount = 100
/** Batches per second the bridges post; each one changes one printer, so one frame per client. */
const rate = Number(process.env['BENCH_RATE'] ?? 100)
const durationMs = Number(process.env['BENCH_SECONDS'] ?? 10) * 1000
const warmupMs = 2000
const sampling = 20
const schema = `bench_${randomBytes(5).toString('hex')}`
const admin = { email: 'bench@printfarm.local', password: 'bench-password-123' }
const round = (n: number, d = 0): number => Math.round(n * 10 ** d) / 10 ** d
const now = () => performance.timeOrigin + performance.now()
// The printer's own status word as the live feed shows it (the read model's `raw_status`).
const markerPattern = /"raw_status":"t([0-9.]+)"/
const marker = (text: string) => {
  const m = markerPattern.exec(text)
  return m ? Number(m[1]) : undefined
}
const pct = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 })
function call(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}
const json = async (r: Promise<{ status: number; body: string }>) => {
  const reply = await r
  if (reply.status !== 200) throw new Error(`unexpected ${reply.status}: ${reply.body}`)
  return JSON.parse(reply.body)
}

interface Measured {
  delivered: number
  seconds: number
  p50: number
  p99: number
  serverCpu: number
  errors: number
}

/** Paces `fn` at `perSecond`, in 10 ms ticks, for `ms`. */
async function paced(perSecond: number, ms: number, fn: () => Promise<void>): Promise<number> {
  let errors = 0
  const pending = new Set<Promise<void>>()
  const start = performance.now()
  let sent = 0
  while (performance.now() - start < ms) {
    const due = Math.floor(((performance.now() - start) / 1000) * perSecond)
    for (; sent < due; sent++) {
      const p = fn().catch(() => void errors++)
      pending.add(p)
      void p.finally(() => pending.delete(p))
    }
    await new Promise((r) => setTimeout(r, 10))
  }
  await Promise.all(pending)
  return errors
}

async function measureService(): Promise<Measured & { frameBytes: number }> {
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), 'printfarm-bench-'))
  const child = startServiceProcess([], {
    PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'warn', MQTT_PORT: '0', MQTT_URL: undefined, REDIS_URL: undefined,
    DATABASE_URL: databaseUrl, DATABASE_SCHEMA: schema, PRINTFARM_ADMIN_EMAIL: admin.email, PRINTFARM_ADMIN_PASSWORD: admin.password,
  })
  try {
    await waitForHttp(port, '/readyz')
    const session = await json(call(port, 'POST', '/v1/auth/login', {}, JSON.stringify(admin)))
    const auth = { authorization: `Bearer ${session.access_token}` }
    const orgId: string = (await json(call(port, 'GET', '/v1/me', auth))).organizations[0].id
    const adminHeaders = { ...auth, 'x-organization-id': orgId }
    const key = (await json(call(port, 'POST', '/v1/api-keys', adminHeaders, JSON.stringify({ name: 'bench', scopes: ['printers:read', 'printers:write'] })))).key as string
    const printers = await Promise.all(
      Array.from({ length: printerCount }, async (_, n) => ({ id: (await json(call(port, 'POST', '/v1/printer-config', adminHeaders, JSON.stringify({ name: `P${n}`, ip_address: '10.0.0.1', host_id: `host-${n % 10}` })))).id as string, host: `host-${n % 10}`, seqn: 0 })),
    )
    const clients = await openWsClients({ port, path: '/v1/live', count: clientCount, sampling, headers: { 'x-api-key': key }, hello: JSON.stringify({ op: 'subscribe', topics: ['printers'] }), marker, now })
    await clients.everyoneGot(1, 30_000) // the snapshot
    let next = 0
    let frameBytes = 0
    const post = async () => {
      const p = printers[next++ % printers.length]!
      const events = Array.from({ length: 10 }, (_, i) => ({
        eventId: `${p.id}-${p.seqn}`, type: i === 9 ? 'printer:statusUpdate' : 'printer:deltaUpdate', timestamp: Date.now(), seqn: p.seqn++, hostId: p.host, assignmentEpoch: 1, deliveryAttempt: 1,
        data: i === 9 ? { status: `t${now()}` } : { nozzleTemp: 220, bedTemp: 60, fanSpeed: 80 },
      }))
      const reply = await call(port, 'POST', '/v1/printer-events/batch', { 'x-api-key': key }, JSON.stringify({ printerId: p.id, events, timestamp: Date.now(), hostId: p.host, assignmentEpoch: 1 }))
      if (reply.status !== 200) throw new Error(reply.body)
    }
    await paced(rate, warmupMs, post)
    const frames0 = clients.frames
    clients.latencies.length = 0
    const cpu0 = cpuSeconds(child.pid!)
    const t0 = performance.now()
    const errors = await paced(rate, durationMs, post)
    await new Promise((r) => setTimeout(r, 300)) // the last frames in flight
    const seconds = (performance.now() - t0) / 1000
    const delivered = clients.frames - frames0
    const serverCpu = (cpuSeconds(child.pid!) - cpu0) / seconds
    const latencies = [...clients.latencies]
    // One frame, to size the limit's frames alike.
    const sample = await new Promise<string>((resolve) => {
      const s = clients.sockets[0]!
      s.once('data', (chunk: Buffer) => resolve(chunk.toString('utf8')))
      void post()
    })
    frameBytes = Buffer.byteLength(sample)
    clients.close()
    return { delivered, seconds, p50: pct(latencies, 0.5), p99: pct(latencies, 0.99), serverCpu, errors, frameBytes }
  } finally {
    await stopProcess(child)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

async function measureBare(frameBytes: number): Promise<Measured> {
  const port = await freePort()
  const base = `{"op":"event","topic":"printers","seq":1,"data":{"printer":{"id":"00000000-0000-4000-8000-000000000001","raw_status":"tMARKER","pad":"`
  const template = base + 'x'.repeat(Math.max(0, frameBytes - base.length - 40)) + '"}}}'
  const child = startProcess([fileURLToPath(new URL('./support/uws-publish.js', import.meta.url)), String(port), template, String(rate)], {})
  try {
    await waitForHttp(port, '/healthz')
    const clients = await openWsClients({ port, path: '/v1/live', count: clientCount, sampling, marker, now })
    await call(port, 'GET', '/start', {})
    await new Promise((r) => setTimeout(r, warmupMs))
    const frames0 = clients.frames
    clients.latencies.length = 0
    const cpu0 = cpuSeconds(child.pid!)
    const t0 = performance.now()
    await new Promise((r) => setTimeout(r, durationMs))
    const seconds = (performance.now() - t0) / 1000
    const delivered = clients.frames - frames0
    const serverCpu = (cpuSeconds(child.pid!) - cpu0) / seconds
    const latencies = [...clients.latencies]
    clients.close()
    return { delivered, seconds, p50: pct(latencies, 0.5), p99: pct(latencies, 0.99), serverCpu, errors: 0 }
  } finally {
    await stopProcess(child)
  }
}

const setup = postgres(databaseUrl, { max: 1, onnotice: () => undefined })
try {
  await setup`select 1`
} catch (error) {
  reportSkipped('live', `PostgreSQL not reachable: ${(error as Error).message}`)
  await setup.end()
  process.exit(0)
}
try {
  const service = await measureService()
  const bare = await measureBare(service.frameBytes)
  for (const [server, m] of [['service', service], ['bare-uws-publish', bare]] as const) {
    reportDetail(server, {
      bench: 'live',
      server,
      clients: clientCount,
      changes_per_s: rate,
      frames_delivered_per_s: round(m.delivered / m.seconds),
      expected_per_s: rate * clientCount,
      latency_p50_ms: round(m.p50, 2),
      latency_p99_ms: round(m.p99, 2),
      server_cpu: round(m.serverCpu, 2),
      errors: m.errors,
    })
  }
  const setting = `${clientCount.toLocaleString('en-US')} clients, ${rate} changes/s`
  const limitWhat = `bare uWS publishing ${service.frameBytes}-byte frames at the same rate, same run`
  const notes = [`${(rate * clientCount).toLocaleString('en-US')} frames/s due`, `server CPU ${round(service.serverCpu, 2)} core (limit ${round(bare.serverCpu, 2)})`, ...(service.errors > 0 ? [`errors ${service.errors}`] : [])]
  reportMeasurement({
    bench: 'live',
    name: `frames delivered (${setting})`,
    figure: service.delivered / service.seconds,
    limit: bare.delivered / bare.seconds,
    unit: 'frames/s',
    limitWhat,
    better: 'higher',
    latency: { p50Ms: service.p50, p99Ms: service.p99 },
    limitLatency: { p50Ms: bare.p50, p99Ms: bare.p99 },
    notes,
  })
  // Ingest to client for the service (the HTTP request and group commit included), publish to client for the limit.
  reportMeasurement({
    bench: 'live',
    name: `p99 latency to the client (${setting})`,
    figure: service.p99,
    limit: bare.p99,
    unit: 'ms',
    limitWhat,
    better: 'lower',
    decimals: 2,
  })
  // The summary line of earlier versions, for scripts that read it ('ratios' was named 'figure').
  reportJsonOnly({ bench: 'live', ratios: 'service/bare', frame_bytes: service.frameBytes, delivered_ratio: round(service.delivered / service.seconds / (bare.delivered / bare.seconds), 3), p99_ratio: round(service.p99 / bare.p99, 2) })
} finally {
  agent.destroy()
  await setup`drop schema if exists ${setup(schema)} cascade`.catch(() => undefined)
  await setup.end()
}
