/**
 * A start cannot half-succeed, and a lost admin password is never lost for
 * good: the operator's first hour, over the real CLI.
 */
import t from 'tap'
import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import postgres from 'postgres'
import { loadConfig } from '../../src/node/config.js'
import { startService } from '../../src/node/service.js'
import { PortInUse, startHttpServer } from '../../src/http/server.js'
import { MetricsRegistry } from '../../src/observability/metrics.js'
import { request, signIn } from '../helpers/http.js'
import { childServiceEnv, freePort, runCli, startChildService } from '../helpers/child-service.js'
import { captureLogger, startTestService, tempDir, tempSchema, testAdmin, testEnv, usingRealPostgres } from '../helpers/service.js'
import { waitFor } from '../helpers/poll.js'
import { systemClock } from '../../actors/clock.js'

/** A plain TCP listener standing in for another program on a port (Mosquitto on 1883, say). */
async function holdPort(t: { teardown(fn: () => unknown): void }): Promise<number> {
  const server: Server = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const address = server.address()
  if (typeof address !== 'object' || address === null) throw new Error('no address')
  return address.port
}

/** Whether the start touched the store at all: the embedded data directory, or the schema on PostgreSQL. */
async function storeCreated(env: Record<string, string | undefined>): Promise<boolean> {
  if (env['DATABASE_URL'] === undefined) return existsSync(join(env['DATA_DIR']!, 'pglite'))
  const sql = postgres(env['DATABASE_URL'], { max: 1, onnotice: () => undefined })
  try {
    const rows = await sql`select 1 from information_schema.schemata where schema_name = ${env['DATABASE_SCHEMA']!}`
    return rows.length > 0
  } finally {
    await sql.end()
  }
}

t.test('start - a second server on a taken HTTP port exits 2 naming PORT, before creating anything', async (t) => {
  const first = await startTestService(t)
  const env = testEnv(t, { PORT: String(first.port), PRINTFARM_ADMIN_PASSWORD: undefined })
  const run = await runCli(['serve'], env)
  t.equal(run.code, 2, 'exit code 2: fix the environment')
  t.match(run.stderr, /PORT \d+ is in use/)
  t.notOk(await storeCreated(env), 'no store, no schema, no admin were created')
  t.notMatch(run.stdout, /admin account created/)
  t.equal((await request(first.url, '/healthz')).status, 200, 'the first server still answers')
})

t.test('start - the HTTP port is taken exclusively: an in-process second start is refused too', async (t) => {
  const first = await startTestService(t)
  const { logger } = captureLogger()
  await t.rejects(startService(loadConfig(testEnv(t, { PORT: String(first.port) })), { logger }), /PORT \d+ is in use/)
})

t.test('http - the listen socket is exclusive: a second uWS server on the same port is refused, not shared', async (t) => {
  const { logger } = captureLogger()
  const options = { host: '127.0.0.1', bodyLimitBytes: 1024, requestTimeoutMs: 1000, timers: systemClock, corsOrigins: [], logger, routes: [], services: {} }
  const first = await startHttpServer({ ...options, port: 0, metrics: new MetricsRegistry() })
  t.teardown(() => first.close(0))
  await t.rejects(startHttpServer({ ...options, port: first.port, metrics: new MetricsRegistry() }), PortInUse)
})

t.test('start - a taken MQTT port fails the start before any account exists; the next start prints a password that signs in', async (t) => {
  const taken = await holdPort(t)
  const env = testEnv(t, { MQTT_URL: undefined, MQTT_PORT: String(taken), PORT: String(await freePort()), PRINTFARM_ADMIN_PASSWORD: undefined })
  const run = await runCli(['serve'], env)
  t.equal(run.code, 2)
  t.match(run.stderr, new RegExp(`MQTT_PORT ${taken} is in use`))
  t.notMatch(run.stdout, /admin account created/, 'no admin was created, so no password was printed and lost')
  t.notOk(await storeCreated(env))

  const { logger, logs } = captureLogger()
  const next = await startService(loadConfig({ ...env, MQTT_PORT: '0', PORT: '0' }), { logger })
  t.teardown(() => next.stop())
  const created = logs.find((line) => line['msg'] === 'admin account created; sign in at POST /v1/auth/login')
  t.ok(created, 'the admin password is printed by the start that created the account')
  const password = String(created?.['password'])
  t.equal(password, next.bootstrap?.generatedPassword)
  const { auth } = await signIn(next.url, String(created?.['email']), password)
  t.equal((await request(next.url, '/v1/me', { headers: auth })).status, 200)
})

t.test('start - a HOST that is not an address of this machine exits 2 naming HOST', async (t) => {
  // 192.0.2.1 (TEST-NET-1) is never a local address; binding to it sends nothing anywhere.
  const env = testEnv(t, { HOST: '192.0.2.1', PORT: String(await freePort()) })
  const run = await runCli(['serve'], env)
  t.equal(run.code, 2)
  t.match(run.stderr, /HOST '192\.0\.2\.1' is not an address of this machine/)
  t.notOk(await storeCreated(env))
})

t.test('start - PORT and MQTT_PORT set to the same port is refused', async (t) => {
  const port = String(await freePort())
  const env = testEnv(t, { MQTT_URL: undefined, PORT: port, MQTT_PORT: port })
  const run = await runCli(['serve'], env)
  t.equal(run.code, 2)
  t.match(run.stderr, /PORT and MQTT_PORT are both/)
})

t.test('admin reset-password - prints a new password that signs in, and ends every sign-in of the account', async (t) => {
  const env = testEnv(t)
  const { logger } = captureLogger()
  const svc = await startService(loadConfig(env), { logger })
  t.teardown(() => svc.stop())
  const before = await signIn(svc.url, testAdmin.email, testAdmin.password)
  if (!usingRealPostgres()) {
    // The embedded store belongs to the running service.
    const busy = await runCli(['admin', 'reset-password', testAdmin.email], env)
    t.equal(busy.code, 2, 'refused while the service holds the embedded store')
    t.match(busy.stderr, /DATA_DIR .* is in use by process \d+/)
    await svc.stop()
  }

  const run = await runCli(['admin', 'reset-password', testAdmin.email.toUpperCase()], env)
  t.equal(run.code, 0, run.stderr)
  const password = run.stdout.trim()
  t.match(password, /^[A-Za-z0-9_-]{20}$/, 'stdout carries the new password alone')
  t.match(run.stderr, /every sign-in of the account has ended/)

  const { logger: again } = captureLogger()
  const live = usingRealPostgres() ? svc : await startService(loadConfig(env), { logger: again })
  t.teardown(() => live.stop())
  const refreshed = await request(live.url, '/v1/auth/refresh', { method: 'POST', body: { refresh_token: before.refresh } })
  t.equal(refreshed.status, 401)
  t.equal(refreshed.json.error, 'refresh_token_invalid', 'the old sign-in has ended')
  const old = await request(live.url, '/v1/auth/login', { method: 'POST', body: { email: testAdmin.email, password: testAdmin.password } })
  t.equal(old.json.error, 'invalid_credentials', 'the old password no longer works')
  await signIn(live.url, testAdmin.email, password)
})

t.test('admin reset-password - an unknown email exits 1; bad usage exits 2', async (t) => {
  const env = testEnv(t)
  const unknown = await runCli(['admin', 'reset-password', 'nobody@example.com'], env)
  t.equal(unknown.code, 1)
  t.match(unknown.stderr, /no account has the email nobody@example\.com/)
  const usage = await runCli(['admin', 'reset-password'], env)
  t.equal(usage.code, 2)
  t.match(usage.stderr, /usage: printfarm admin reset-password EMAIL/)
})

t.test('start - an external broker without display credential management is said at warn level', { skip: process.env['MQTT_URL'] === undefined && 'needs MQTT_URL (the real-services run)' }, async (t) => {
  const { logger, logs } = captureLogger()
  const svc = await startService(loadConfig(testEnv(t, { MQTT_URL: process.env['MQTT_URL'], MQTT_DISPLAY_CREDENTIALS: undefined })), { logger })
  t.teardown(() => svc.stop())
  const warning = logs.find((line) => line['level'] === 'warn' && /status displays are off/.test(String(line['msg'])))
  t.ok(warning, 'the operator reads why display registration will answer 503')
  t.match(String(warning?.['msg']), /MQTT_DISPLAY_CREDENTIALS/)
})

t.test('start - SIGTERM while the node is still starting stops it gracefully once it is up: every part started is stopped, exit 0', async (t) => {
  const env = { ...childServiceEnv(tempDir(t), usingRealPostgres() ? tempSchema(t) : undefined), LOG_LEVEL: 'debug' }
  const child = await startChildService(t, { env, waitReady: false })
  // The store is up and the rest still to come: the start is under way.
  await waitFor(() => /"msg":"part started","part":"store"/.test(child.output()), 'the store part to start', 60_000)
  child.child.kill('SIGTERM')
  const exit = await child.exited
  t.same(exit, { code: 0, signal: null }, `exited by itself, not by the signal; its output:\n${child.output().slice(-2_000)}`)
  const lines = child.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
  const started = lines.filter((l) => l['msg'] === 'part started').map((l) => l['part'])
  const stopped = lines.filter((l) => l['msg'] === 'part stopped').map((l) => l['part'])
  t.same(stopped, [...started].reverse(), 'every part it started was stopped, newest first')
  t.ok(lines.some((l) => l['msg'] === 'stopped'), 'the stop said it finished')
  // The next start on the same store finds it whole.
  const again = await startChildService(t, { env: { ...env, LOG_LEVEL: 'warn' } })
  t.equal((await request(again.url, '/readyz')).status, 200)
  t.same(await again.stop(), { code: 0, signal: null })
})
