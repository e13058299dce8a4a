/**
 * A minimal HTTP/1.1 load generator on raw sockets, so the generator costs
 * less than the servers it measures (a Node HTTP client would saturate first
 * on a 2-core machine). It parses only what it must: the header block and
 * Content-Length of each response.
 */
import { connect, type Socket } from 'node:net'

export interface LoadOptions {
  port: number
  request: Buffer
  connections: number
  /** Requests in flight per connection; 1 = closed loop (latency), >1 = pipelined (throughput). */
  depth: number
  warmupMs: number
  durationMs: number
}

export interface LoadResult {
  requests: number
  seconds: number
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  non2xx: number
  errors: number
  generatorCpuSeconds: number
}

const CRLFCRLF = Buffer.from('\r\n\r\n')

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const latencies: number[] = []
  let requests = 0
  let non2xx = 0
  let errors = 0
  let measuring = false
  let stopping = false
  const sockets: Socket[] = []

  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const socket = connect({ port: options.port, host: '127.0.0.1', noDelay: true })
      sockets.push(socket)
      const sentAt: number[] = []
      let carry = Buffer.alloc(0)
      const send = (n: number): void => {
        if (stopping || n <= 0) return
        const now = performance.now()
        for (let i = 0; i < n; i++) sentAt.push(now)
        socket.write(n === 1 ? options.request : Buffer.concat(Array(n).fill(options.request)))
      }
      socket.on('connect', () => send(options.depth))
      socket.on('data', (chunk: Buffer) => {
        let buf = carry.length ? Buffer.concat([carry, chunk]) : chunk
        let done = 0
        for (;;) {
          const end = buf.indexOf(CRLFCRLF)
          if (end < 0) break
          const head = buf.toString('latin1', 0, end)
          const m = /content-length:\s*(\d+)/i.exec(head)
          const total = end + 4 + (m ? Number(m[1]) : 0)
          if (buf.length < total) break
          const started = sentAt.shift()!
          if (measuring) {
            requests++
            latencies.push(performance.now() - started)
            if (head.charCodeAt(9) !== 50 /* '2' */) non2xx++
          }
          buf = buf.subarray(total)
          done++
        }
        carry = buf.length ? Buffer.from(buf) : Buffer.alloc(0)
        send(done)
      })
      socket.on('error', () => {
        errors++
      })
      socket.on('close', () => resolve())
    })

  const all = Array.from({ length: options.connections }, one)
  await new Promise((r) => setTimeout(r, options.warmupMs))
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  measuring = true
  await new Promise((r) => setTimeout(r, options.durationMs))
  measuring = false
  const seconds = (performance.now() - started) / 1000
  const cpu = process.cpuUsage(cpuBefore)
  stopping = true
  for (const s of sockets) s.destroy()
  await Promise.all(all)
  latencies.sort((a, b) => a - b)
  const pct = (p: number): number => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]! : NaN)
  return {
    requests,
    seconds,
    requestsPerSecond: requests / seconds,
    p50Ms: pct(50),
    p99Ms: pct(99),
    non2xx,
    errors,
    generatorCpuSeconds: (cpu.user + cpu.system) / 1e6,
  }
}
