/**
 * A Mosquitto of the test's own, with the dynamic-security plugin, on an
 * ephemeral loopback port (the machine's Mosquitto on 1883 has no plugin and
 * is shared). Its state lives in a temporary directory removed at teardown.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { connectAsync } from 'mqtt'
import type { TestContext } from './service.js'

const pluginCandidates = ['/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so', '/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so', '/usr/lib/mosquitto_dynamic_security.so']
export const dynsecPlugin = process.env['MOSQUITTO_DYNSEC_PLUGIN'] ?? pluginCandidates.find((p) => existsSync(p))
export const mosquittoBinary = ['/usr/sbin/mosquitto', '/usr/bin/mosquitto'].find((p) => existsSync(p))

/** Why these tests cannot run here, or false. They run with the real-service suite (MQTT_URL set), where a missing Mosquitto is a failure. */
export const mosquittoSkip: string | false = process.env['MQTT_URL'] ? false : 'runs with the real-service suite (MQTT_URL set)'

export interface TestMosquitto {
  port: number
  admin: { username: string; password: string }
  /** mqtt://user:password@127.0.0.1:port, percent-encoded. */
  url(username: string, password: string): string
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

export async function startMosquitto(t: TestContext): Promise<TestMosquitto> {
  if (mosquittoBinary === undefined || dynsecPlugin === undefined || !existsSync('/usr/bin/mosquitto_ctrl')) {
    throw new Error('Mosquitto 2 with its dynamic-security plugin is needed (Debian package mosquitto: /usr/sbin/mosquitto, mosquitto_ctrl, mosquitto_dynamic_security.so)')
  }
  const dir = await mkdtemp(join(tmpdir(), 'printfarm-mosquitto-'))
  const admin = { username: 'admin', password: randomBytes(12).toString('hex') }
  const dynsecFile = join(dir, 'dynamic-security.json')
  await promisify(execFile)('mosquitto_ctrl', ['dynsec', 'init', dynsecFile, admin.username, admin.password])
  const port = await freePort()
  const lines = [
    `listener ${port} 127.0.0.1`,
    'allow_anonymous false',
    'persistence false',
    `plugin ${dynsecPlugin}`,
    `plugin_opt_config_file ${dynsecFile}`,
    // As root Mosquitto drops to user mosquitto, which cannot write this private directory.
    ...(process.getuid?.() === 0 ? ['user root'] : []),
  ]
  await writeFile(join(dir, 'mosquitto.conf'), lines.join('\n') + '\n')
  const child: ChildProcess = spawn(mosquittoBinary, ['-c', join(dir, 'mosquitto.conf')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  child.stderr!.on('data', (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4000)
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = (username: string, password: string) => `mqtt://${encodeURIComponent(username)}:${encodeURIComponent(password)}@127.0.0.1:${port}`
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    if (child.exitCode === null) child.kill('SIGTERM')
    await exited
    await rm(dir, { recursive: true, force: true })
  }
  t.teardown(stop)
  // Ready when the admin can log in.
  const deadline = Date.now() + 10_000
  for (;;) {
    try {
      const probe = await connectAsync(url(admin.username, admin.password), { protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 1_000 })
      await probe.endAsync()
      break
    } catch (error) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`Mosquitto did not start on port ${port}: ${(error as Error).message}\n${log}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return { port, admin, url, stop }
}
