/** Child processes for system-tier benchmarks: start, wait until they answer, read their CPU time, stop. */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { request } from 'node:http'
import { fileURLToPath } from 'node:url'

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/**
 * The Node.js flags `npm start` gives the service (package.json's start script), so that the
 * benchmarks measure the service as it is started.
 */
export function serviceNodeFlags(): string[] {
  const packageJson = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }
  const flags = /\bnode((?: --\S+)*) dist\/src\/cli\.js serve\b/.exec(packageJson.scripts.start)
  if (flags === null) throw new Error(`package.json's start script does not run "node [flags] dist/src/cli.js serve": ${packageJson.scripts.start}`)
  return flags[1]!.split(' ').filter(Boolean)
}

/** The service (`printfarm serve`) with npm start's Node.js flags, after `nodeArgs` (a profiler's, say). */
export function startServiceProcess(nodeArgs: string[], env: Record<string, string | undefined>): ChildProcess {
  return startProcess([...serviceNodeFlags(), ...nodeArgs, fileURLToPath(new URL('../../src/cli.js', import.meta.url)), 'serve'], env)
}

export function startProcess(args: string[], env: Record<string, string | undefined>): ChildProcess {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  return child
}

export async function waitForHttp(port: number, path: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        res.resume()
        resolve(res.statusCode === 200)
      })
      req.on('error', () => resolve(false))
      req.end()
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`nothing answered on port ${port}${path} within ${timeoutMs} ms`)
}

/** utime + stime of a process in seconds (Linux /proc; clock ticks are 100 Hz there). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
  await exited
  clearTimeout(timer)
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
