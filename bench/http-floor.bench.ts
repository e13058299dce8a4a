/**
 * HTTP floor: GET /healthz through the full service stack (router, request
 * ids, metrics, CORS check, JSON reply) against a bare uWS hello-world
 * answering the same body, both in their own processes, driven by the same
 * raw-socket load generator in this process.
 *
 * Figures: requests/s pipelined (throughput) and p50/p99 closed-loop
 * (latency), plus requests per server CPU-second — on a 2-core machine the
 * generator competes with the server for CPU, so that per-CPU figure is the
 * fairest comparison. The ratio full/bare is the figure that travels between
 * machines.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ChildProcess } from 'node:child_process'
import { runLoad, type LoadResult } from './support/load.js'
import { cpuSeconds, freePort, median, startProcess, stopProcess, waitForHttp, startServiceProcess } from './support/process.js'
import { reportDetail, reportJsonOnly, reportMeasurement } from './support/report.js'

const runs = Number(process.env['BENCH_RUNS'] ?? 3)
const durationMs = Number(process.env['BENCH_SECONDS'] ?? 5) * 1000
const warmupMs = 1500
const request = Buffer.from('GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n')

interface Measured {
  throughput: LoadResult
  latency: LoadResult
  rpsPerServerCpu: number
}

async function measure(child: ChildProcess, port: number): Promise<Measured> {
  const pid = child.pid!
  const cpu0 = cpuSeconds(pid)
  const throughput = await runLoad({ port, request, connections: 32, depth: 16, warmupMs, durationMs })
  const cpu1 = cpuSeconds(pid)
  const latency = await runLoad({ port, request, connections: 32, depth: 1, warmupMs, durationMs })
  // /proc gives CPU for the whole call, warm-up included; scale to the measured window (same for both servers).
  const serverCpu = cpu1 - cpu0
  return { throughput, latency, rpsPerServerCpu: throughput.requests / Math.max(serverCpu * (durationMs / (durationMs + warmupMs)), 1e-9) }
}

async function withServer(kind: 'full' | 'bare', fn: (child: ChildProcess, port: number) => Promise<Measured>): Promise<Measured> {
  const port = await freePort()
  let child: ChildProcess
  let dataDir: string | undefined
  if (kind === 'full') {
    dataDir = mkdtempSync(join(tmpdir(), 'printfarm-bench-'))
    const cli = fileURLToPath(new URL('../src/cli.js', import.meta.url))
    child = startServiceProcess([], {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      MQTT_PORT: '0',
      DATABASE_URL: undefined,
      REDIS_URL: undefined,
      MQTT_URL: undefined,
    })
  } else {
    child = startProcess([fileURLToPath(new URL('./support/uws-hello.js', import.meta.url)), String(port)], {})
  }
  try {
    await waitForHttp(port, '/healthz')
    return await fn(child, port)
  } finally {
    await stopProcess(child)
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  }
}

const full: Measured[] = []
const bare: Measured[] = []
for (let i = 0; i < runs; i++) {
  bare.push(await withServer('bare', measure))
  full.push(await withServer('full', measure))
}

const pick = (list: Measured[], f: (m: Measured) => number): number => median(list.map(f))
const round = (n: number, d = 0): number => Math.round(n * 10 ** d) / 10 ** d
const medianOf = runs === 1 ? 'one run' : `median of ${runs} runs`
for (const [name, list] of [
  ['service', full],
  ['bare-uws', bare],
] as const) {
  reportDetail(`${name}, ${medianOf}`, {
    bench: 'http-floor',
    server: name,
    runs,
    rps_pipelined: round(pick(list, (m) => m.throughput.requestsPerSecond)),
    rps_per_server_cpu_s: round(pick(list, (m) => m.rpsPerServerCpu)),
    rps_closed_loop: round(pick(list, (m) => m.latency.requestsPerSecond)),
    p50_ms: round(pick(list, (m) => m.latency.p50Ms), 3),
    p99_ms: round(pick(list, (m) => m.latency.p99Ms), 3),
    generator_cpu_share: round(pick(list, (m) => m.throughput.generatorCpuSeconds / m.throughput.seconds), 2),
    non2xx: list.reduce((n, m) => n + m.throughput.non2xx + m.latency.non2xx, 0),
    errors: list.reduce((n, m) => n + m.throughput.errors + m.latency.errors, 0),
  })
}
const limitWhat = `bare uWS hello-world, same run, ${medianOf}`
const failures = (list: Measured[]) => list.reduce((n, m) => n + m.throughput.non2xx + m.latency.non2xx + m.throughput.errors + m.latency.errors, 0)
const notes = failures(full) + failures(bare) > 0 ? [`non-2xx or errors ${failures(full) + failures(bare)}`] : []
const latencyOf = (list: Measured[]) => ({ p50Ms: pick(list, (m) => m.latency.p50Ms), p99Ms: pick(list, (m) => m.latency.p99Ms) })
reportMeasurement({
  bench: 'http-floor',
  name: 'GET /healthz pipelined (32 connections x 16)',
  figure: pick(full, (m) => m.throughput.requestsPerSecond),
  limit: pick(bare, (m) => m.throughput.requestsPerSecond),
  unit: 'req/s',
  limitWhat,
  better: 'higher',
  notes,
})
// On two cores the generator takes CPU from the server: per server CPU-second is the fairest of the three.
reportMeasurement({
  bench: 'http-floor',
  name: 'GET /healthz per server CPU-second',
  figure: pick(full, (m) => m.rpsPerServerCpu),
  limit: pick(bare, (m) => m.rpsPerServerCpu),
  unit: 'req/CPU-s',
  limitWhat,
  better: 'higher',
  notes,
})
reportMeasurement({
  bench: 'http-floor',
  name: 'GET /healthz closed loop (32 connections)',
  figure: pick(full, (m) => m.latency.requestsPerSecond),
  limit: pick(bare, (m) => m.latency.requestsPerSecond),
  unit: 'req/s',
  limitWhat,
  better: 'higher',
  latency: latencyOf(full),
  limitLatency: latencyOf(bare),
  notes,
})
reportMeasurement({
  bench: 'http-floor',
  name: 'GET /healthz p99 latency, closed loop',
  figure: pick(full, (m) => m.latency.p99Ms),
  limit: pick(bare, (m) => m.latency.p99Ms),
  unit: 'ms',
  limitWhat,
  better: 'lower',
  decimals: 3,
  notes,
})
// The summary line of earlier versions, for scripts that read it ('ratios' was named 'figure').
reportJsonOnly({
  bench: 'http-floor',
  ratios: 'service/bare-uws',
  rps_pipelined_ratio: round(pick(full, (m) => m.throughput.requestsPerSecond) / pick(bare, (m) => m.throughput.requestsPerSecond), 3),
  rps_closed_loop_ratio: round(pick(full, (m) => m.latency.requestsPerSecond) / pick(bare, (m) => m.latency.requestsPerSecond), 3),
  rps_per_cpu_ratio: round(pick(full, (m) => m.rpsPerServerCpu) / pick(bare, (m) => m.rpsPerServerCpu), 3),
  p99_ratio: round(pick(full, (m) => m.latency.p99Ms) / pick(bare, (m) => m.latency.p99Ms), 3),
})
