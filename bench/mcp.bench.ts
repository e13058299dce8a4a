/**
 * MCP tool calls: `tools/call list_printers` (20 of 50 printers) through the
 * full stack — HTTP over loopback to a service in its own process, the
 * Origin and bearer gate (an OAuth token for the MCP resource, checked with
 * its standing on every call), the official SDK's stateless handler
 * (2025-06-18: a fresh server instance per request), the route run as a
 * tool — against the same tool run in-process on a service in this process
 * (the route's handler with the same principal: no HTTP, token, JSON-RPC or
 * SDK), in the same run. Both on embedded PGlite unless DATABASE_URL is set.
 *
 * BENCH_MCP_CALLS (2000) calls per figure, BENCH_MCP_CONCURRENCY (16) in
 * flight, BENCH_RUNS (3) runs, the median reported.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '../src/node/config.js'
import { createLogger } from '../src/observability/log.js'
import { FarmMcp } from '../src/mcp/server.js'
import { startService } from '../src/node/service.js'
import type { Principal } from '../src/http/route.js'
import { jsonClient } from './support/http.js'
import { freePort, median, startProcess, startServiceProcess, stopProcess, waitForHttp } from './support/process.js'
import { reportMeasurement } from './support/report.js'
import { systemClock } from '../actors/clock.js'

const runs = Number(process.env['BENCH_RUNS'] ?? 3)
const calls = Number(process.env['BENCH_MCP_CALLS'] ?? 2000)
const concurrency = Number(process.env['BENCH_MCP_CONCURRENCY'] ?? 16)
const printers = 50
const admin = { email: 'bench@printfarm.local', password: 'bench-password-123' }
const agent = new Agent({ keepAlive: true, maxSockets: concurrency })
const { call, json } = jsonClient(agent)

/** Runs `count` calls of `one` with `inFlight` at a time; answers calls/s and per-call latencies. */
async function load(count: number, inFlight: number, one: () => Promise<void>): Promise<{ perSecond: number; p50Ms: number; p99Ms: number }> {
  const latencies: number[] = []
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        next++
        const t0 = performance.now()
        await one()
        latencies.push(performance.now() - t0)
      }
    }),
  )
  const seconds = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  return { perSecond: count / seconds, p50Ms: latencies[Math.floor(latencies.length * 0.5)]!, p99Ms: latencies[Math.floor(latencies.length * 0.99)]! }
}

/** Signs the bench admin in and runs the authorization code flow for the MCP resource, over plain HTTP. */
async function mcpToken(port: number, base: string): Promise<string> {
  const session = await json(call(port, 'POST', '/v1/auth/login', {}, JSON.stringify(admin)))
  const auth = { authorization: `Bearer ${session.access_token}` }
  const redirectUri = 'http://127.0.0.1:45555/callback'
  const client = await json(call(port, 'POST', '/v1/oauth/register', {}, JSON.stringify({ redirect_uris: [redirectUri], client_name: 'bench' })), 201)
  const verifier = randomBytes(32).toString('base64url')
  const challenge = createHash('sha256').update(verifier).digest('base64url')
  const resource = `${base}/v1/mcp`
  const scopes = ['printers:read']
  const handoff = await json(call(port, 'POST', '/v1/oauth/session-handoff', auth, JSON.stringify({ clientId: client.client_id, redirectUri, scopes, resource, codeChallenge: challenge })))
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: redirectUri,
    scope: scopes.join(' '),
    code_challenge: challenge,
    code_challenge_method: 'S256',
    resource,
    handoff: handoff.handoff,
  })
  const answer = await fetch(`http://127.0.0.1:${port}/v1/oauth/authorize?${query}`, { redirect: 'manual' })
  const location = answer.headers.get('location')
  if (answer.status !== 302 || location === null) throw new Error(`authorize answered ${answer.status}: ${(await answer.text()).slice(0, 300)}`)
  const code = new URL(location).searchParams.get('code')
  const token = await json(
    call(port, 'POST', '/v1/oauth/token', {}, JSON.stringify({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: client.client_id, code_verifier: verifier })),
  )
  return token.access_token
}

async function seedPrinters(port: number): Promise<void> {
  const session = await json(call(port, 'POST', '/v1/auth/login', {}, JSON.stringify(admin)))
  const auth = { authorization: `Bearer ${session.access_token}` }
  for (let i = 0; i < printers; i++) {
    await json(call(port, 'POST', '/v1/printer-config', auth, JSON.stringify({ name: `P-${String(i).padStart(3, '0')}`, ip_address: '10.0.0.1', host_id: `host-${i % 5}` })))
  }
}

const databaseUrl = process.env['DATABASE_URL']
const serverDir = mkdtempSync(join(tmpdir(), 'printfarm-bench-mcp-'))
const localDir = mkdtempSync(join(tmpdir(), 'printfarm-bench-mcp-local-'))
const port = await freePort()
const base = `http://127.0.0.1:${port}`
const child = startServiceProcess([], {
  PORT: String(port),
  HOST: '127.0.0.1',
  PUBLIC_BASE_URL: base,
  DATA_DIR: serverDir,
  LOG_LEVEL: 'warn',
  MQTT_PORT: '0',
  PRINTFARM_ADMIN_EMAIL: admin.email,
  PRINTFARM_ADMIN_PASSWORD: admin.password,
  DATABASE_URL: databaseUrl,
  DATABASE_SCHEMA: databaseUrl === undefined ? undefined : `bench_${randomBytes(5).toString('hex')}`,
  REDIS_URL: undefined,
  MQTT_URL: undefined,
  OAUTH_FAILURES_PER_ADDRESS: '1000000',
})
const local = await startService(
  loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: localDir,
    LOG_LEVEL: 'warn',
    MQTT_PORT: '0',
    PRINTFARM_ADMIN_EMAIL: admin.email,
    PRINTFARM_ADMIN_PASSWORD: admin.password,
    ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl, DATABASE_SCHEMA: `bench_${randomBytes(5).toString('hex')}` }),
  }),
  // Its log lines go to stderr: stdout carries only the benchmark's JSON records.
  { logger: createLogger('warn', { now: systemClock.now, sink: (line) => process.stderr.write(line + '\n') }) },
)
try {
  await waitForHttp(port, '/readyz')
  await seedPrinters(port)
  await seedPrinters(Number(new URL(local.url).port))
  const token = await mcpToken(port, base)
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_printers', arguments: { limit: 20 } } })
  const overHttp = async (): Promise<void> => {
    const reply = await call(port, 'POST', '/v1/mcp', headers, body)
    if (reply.status !== 200 || !reply.body.includes('"isError":false')) throw new Error(`mcp call answered ${reply.status}: ${reply.body.slice(0, 300)}`)
  }

  const farm = new FarmMcp(local.services)
  const tool = farm.tools.find((t) => t.spec.name === 'list_printers')!
  const [me] = await local.services.db.sql<{ user_id: string; organization_id: string }[]>`select user_id, organization_id from memberships limit 1`
  const principal: Principal = { kind: 'oauth', userId: me!.user_id, clientId: 'bench', organizationId: me!.organization_id, role: 'admin', scopes: new Set(['printers:read']), tokenId: randomUUID(), bridgeGrant: null }
  const inProcess = async (): Promise<void> => {
    const result = await tool.call({ limit: 20 }, principal, local.services, 'bench')
    if (!result.ok) throw new Error(`in-process call failed: ${JSON.stringify(result.body)}`)
  }

  await load(200, concurrency, overHttp)
  await load(200, concurrency, inProcess)
  const stack: { perSecond: number; p50Ms: number; p99Ms: number }[] = []
  const limit: { perSecond: number; p50Ms: number; p99Ms: number }[] = []
  for (let i = 0; i < runs; i++) {
    stack.push(await load(calls, concurrency, overHttp))
    limit.push(await load(calls, concurrency, inProcess))
  }
  const pick = (list: typeof stack, key: 'perSecond' | 'p50Ms' | 'p99Ms') => median(list.map((m) => m[key]))
  reportMeasurement({
    bench: 'mcp',
    name: `tools/call list_printers (20 of ${printers} printers), ${concurrency} in flight, through HTTP, OAuth and the MCP SDK`,
    figure: pick(stack, 'perSecond'),
    unit: 'calls/s',
    limit: pick(limit, 'perSecond'),
    limitWhat: 'the same tool run in-process (its route handler, same principal), same run',
    better: 'higher',
    latency: { p50Ms: pick(stack, 'p50Ms'), p99Ms: pick(stack, 'p99Ms') },
    limitLatency: { p50Ms: pick(limit, 'p50Ms'), p99Ms: pick(limit, 'p99Ms') },
    notes: [runs === 1 ? 'one run' : `median of ${runs} runs`, `${calls} calls each`],
    details: { calls, concurrency, printers, store: databaseUrl === undefined ? 'pglite' : 'postgresql' },
  })
} finally {
  agent.destroy()
  await stopProcess(child)
  await local.stop()
  rmSync(serverDir, { recursive: true, force: true })
  rmSync(localDir, { recursive: true, force: true })
}
