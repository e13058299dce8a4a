/**
 * Runs the real `printfarm serve` (src/cli.ts) as a child process, for tests
 * that need a process boundary: SIGKILL, restart on the same DATA_DIR or
 * schema. No build step: the child runs the TypeScript sources through the
 * same loader the test runs under (tap's --import of its TypeScript hook).
 *
 * Only the child started here is ever signalled, by its own pid, and every
 * child is SIGKILLed at teardown if it is still running, whatever the test's
 * outcome. Every wait is bounded.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { request } from './http.js'
import { testAdmin, type TestContext } from './service.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const cliPath = fileURLToPath(new URL('../../src/cli.ts', import.meta.url))

/** A free loopback port (released before the child binds it; the child reports a clash by exiting). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}

/**
 * The node flags that let a child run .ts sources: this process's own flags,
 * without tap's per-process instrumentation (processinfo, mock), which a
 * killed child would only leave half-written.
 */
export function typeScriptExecArgv(): string[] {
  const dropped = /@tapjs[\\/](processinfo|mock)[\\/]/
  const argv = process.execArgv.filter((arg) => !dropped.test(arg))
  if (!argv.some((arg) => /@tapjs[\\/]typescript|ts-node|tsx|tsimp/.test(arg))) {
    throw new Error(`cannot run src/cli.ts in a child: this process was started without a TypeScript loader (execArgv ${JSON.stringify(process.execArgv)})`)
  }
  return argv
}

function childEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const merged: NodeJS.ProcessEnv = { ...process.env }
  const nodeOptions = (merged['NODE_OPTIONS'] ?? '')
    .split(/\s+/)
    .filter((opt) => opt !== '' && !/@tapjs[\\/](processinfo|mock)[\\/]/.test(opt.replace(/^"|"$/g, '')))
    .join(' ')
  if (nodeOptions === '') delete merged['NODE_OPTIONS']
  else merged['NODE_OPTIONS'] = nodeOptions
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete merged[key]
    else merged[key] = value
  }
  return merged
}

export interface ChildService {
  readonly child: ChildProcess
  readonly pid: number
  readonly port: number
  readonly url: string
  /** Resolves with the exit code or signal once the process is gone (and reaped). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** The last 64 KiB the child wrote to stdout and stderr (its log lines). */
  output(): string
  /** SIGKILL: no draining, no cleanup; resolves once the process is gone. */
  kill(): Promise<void>
  /** SIGTERM (a graceful drain), SIGKILL if it has not exited within timeoutMs. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** The environment of a child service on this test's stores: PostgreSQL (in `schema`) or PGlite in `dataDir`, Redis if configured, its own embedded broker. */
export function childServiceEnv(dataDir: string, schema: string | undefined): Record<string, string | undefined> {
  return {
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: schema === undefined ? undefined : process.env['DATABASE_URL'],
    DATABASE_SCHEMA: schema,
    REDIS_URL: process.env['REDIS_URL'],
    MQTT_URL: undefined,
    MQTT_PORT: '0',
    PRINTFARM_ADMIN_EMAIL: testAdmin.email,
    PRINTFARM_ADMIN_PASSWORD: testAdmin.password,
    // The lowest cost the service accepts: hundreds of sign-ins per run (the default, 17, is tested in passwords.test.ts).
    PASSWORD_HASH_COST: '15',
    LOG_LEVEL: 'warn',
  }
}

export interface StartChildOptions {
  /** Environment on top of this process's (undefined removes a variable). PORT is chosen here. */
  env: Record<string, string | undefined>
  /** How long to wait for GET /readyz = 200. */
  readyTimeoutMs?: number
  /** Listen on this port (a restarted service at the same address); a free one otherwise. */
  port?: number
  /** false: answer as soon as the process is spawned, for a test of what happens during the start. */
  waitReady?: boolean
}

export async function startChildService(t: TestContext, options: StartChildOptions): Promise<ChildService> {
  const port = options.port ?? (await freePort())
  const child = spawn(process.execPath, [...typeScriptExecArgv(), cliPath, 'serve'], {
    cwd: repoRoot,
    env: childEnv({ ...options.env, PORT: String(port) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  if (child.pid === undefined) throw new Error('the child did not start')
  const pid = child.pid
  let out = ''
  const keep = (chunk: Buffer): void => {
    out += chunk.toString('utf8')
    if (out.length > 65_536) out = out.slice(-65_536)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  let gone = false
  // Should this process end without its teardown (a crash, process.exit), the child goes with it.
  const orphanGuard = (): void => {
    if (!gone) child.kill('SIGKILL')
  }
  process.once('exit', orphanGuard)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      gone = true
      process.removeListener('exit', orphanGuard)
      resolve({ code, signal })
    })
  })
  const waitExit = async (timeoutMs: number): Promise<boolean> => {
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs)
    })
    const done = await Promise.race([exited.then(() => true as const), timedOut])
    clearTimeout(timer)
    return done
  }
  const kill = async (): Promise<void> => {
    if (!gone) child.kill('SIGKILL')
    if (!(await waitExit(10_000))) throw new Error(`child ${pid} did not exit within 10 s of SIGKILL`)
  }
  t.teardown(async () => {
    if (!gone) await kill().catch(() => undefined)
  })

  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + (options.readyTimeoutMs ?? 90_000)
  while (options.waitReady !== false) {
    if (gone) throw new Error(`the service exited before it was ready (${JSON.stringify(await exited)}); its output:\n${out}`)
    const status = await request(url, '/readyz').then(
      (res) => res.status,
      () => 0,
    )
    if (status === 200) break
    if (Date.now() > deadline) {
      await kill().catch(() => undefined)
      throw new Error(`the service on ${url} was not ready within ${options.readyTimeoutMs ?? 90_000} ms (last status ${status}); its output:\n${out}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }

  return {
    child,
    pid,
    port,
    url,
    exited,
    output: () => out,
    kill,
    async stop(timeoutMs = 30_000) {
      if (!gone) child.kill('SIGTERM')
      if (!(await waitExit(timeoutMs))) await kill()
      return exited
    },
  }
}

export interface CliRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `printfarm <args>` (src/cli.ts) to its end, as an operator would from a shell, and returns
 * what it printed. A command still running after timeoutMs is SIGKILLed (and the run rejects).
 */
export function runCli(args: readonly string[], env: Record<string, string | undefined>, timeoutMs = 60_000): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...typeScriptExecArgv(), cliPath, ...args], { cwd: repoRoot, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`printfarm ${args.join(' ')} did not finish within ${timeoutMs} ms; stderr:\n${stderr}`))
    }, timeoutMs)
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

export interface SpawnedCli {
  stdout(): string
  stderr(): string
  /** null while it runs. */
  exitCode(): number | null
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Starts `printfarm <args>` and answers at once, for a test that talks to the command while it runs; SIGKILLed at teardown if still running. */
export function spawnCli(t: TestContext, args: readonly string[], env: Record<string, string | undefined>): SpawnedCli {
  const child = spawn(process.execPath, [...typeScriptExecArgv(), cliPath, ...args], { cwd: repoRoot, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return { stdout: () => stdout, stderr: () => stderr, exitCode: () => child.exitCode, exited }
}
