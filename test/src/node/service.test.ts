import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { connect } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../../src/node/config.js'
import { defineRoute } from '../../../src/http/route.js'
import { PortInUse } from '../../../src/http/server.js'
import { startService } from '../../../src/node/service.js'
import { DataDirInUse } from '../../../src/storage/embedded-postgres.js'
import { StoreUnreachable } from '../../../src/storage/database.js'
import { request } from '../../helpers/http.js'
import { gatedRoute } from '../../helpers/routes.js'
import { captureLogger, startTestService, tempDir, testEnv } from '../../helpers/service.js'

t.test('shutdown - in-flight requests finish, new connections are refused, then stop resolves', async (t) => {
  const slow = gatedRoute('/test/slow')
  const svc = await startTestService(t, {}, { extraRoutes: [slow.route] })
  const pending = request(svc.url, '/test/slow')
  await slow.entered
  let stopped = false
  const stopping = svc.stop().then(() => {
    stopped = true
  })
  await new Promise((r) => setImmediate(r))
  t.equal(svc.services.state.accepting, false, 'the node says it no longer accepts work')
  await t.rejects(request(svc.url, '/healthz'), { code: 'ECONNREFUSED' }, 'the listen socket is closed')
  t.equal(stopped, false, 'stop waits for the in-flight request')
  slow.release()
  const res = await pending
  t.equal(res.status, 200, 'the in-flight request completed')
  t.same(res.json, { done: true })
  await stopping
  t.equal(stopped, true)
})

t.test('start - a taken port is a clear error naming PORT, and leaves nothing running', async (t) => {
  const first = await startTestService(t)
  const { logger } = captureLogger()
  const config = loadConfig(testEnv(t, { PORT: String(first.port) }))
  await t.rejects(startService(config, { logger }), PortInUse)
  await t.rejects(startService(config, { logger }), /in use .*set PORT/)
  t.equal((await request(first.url, '/healthz')).status, 200, 'the first node is unaffected')
})

t.test('start - an unreachable DATABASE_URL fails at start with a message naming it, without the password', async (t) => {
  const { logger } = captureLogger()
  const config = loadConfig(testEnv(t, { DATABASE_URL: 'postgres://printfarm:hunter2hunter2@127.0.0.1:1/none' }))
  const error = await startService(config, { logger }).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.type(error, StoreUnreachable)
  t.match((error as Error).message, /DATABASE_URL/)
  t.notMatch((error as Error).message, /hunter2/)
})

t.test('embedded - data in DATA_DIR survives a restart', async (t) => {
  const dataDir = tempDir(t)
  const env = { DATABASE_URL: undefined, DATABASE_SCHEMA: 'farm', DATA_DIR: dataDir }
  const { logger } = captureLogger()
  const first = await startService(loadConfig(testEnv(t, env)), { logger })
  // stop() is idempotent: the teardown only matters when an assertion below throws first.
  t.teardown(() => first.stop())
  t.equal(first.services.db.kind, 'pglite')
  const [meta] = await first.services.db.sql<{ value: string }[]>`select value from service_meta where key = 'installation_id'`
  const installationId = meta?.value
  t.type(installationId, 'string')
  await first.services.db.sql`insert into service_meta (key, value) values ('restart-probe', 'kept')`
  await first.stop()

  const second = await startService(loadConfig(testEnv(t, env)), { logger })
  t.teardown(() => second.stop())
  const rows = await second.services.db.sql<{ key: string; value: string }[]>`
    select key, value from service_meta where key in ('installation_id', 'restart-probe') order by key`
  t.same(
    rows.map((r) => [r.key, r.value]),
    [
      ['installation_id', installationId],
      ['restart-probe', 'kept'],
    ],
  )
  const ready = await request(second.url, '/readyz')
  t.equal(ready.json.checks.migrations.version, first.services.state.migrationsVersion, 'no migration re-applied')
})

t.test('embedded - a DATA_DIR held by a live process is refused; a stale lock is taken over', async (t) => {
  const dataDir = tempDir(t)
  const env = { DATABASE_URL: undefined, DATABASE_SCHEMA: 'farm', DATA_DIR: dataDir }
  const { logger } = captureLogger()
  const holder = await startService(loadConfig(testEnv(t, env)), { logger })
  t.teardown(() => holder.stop())
  const error = await startService(loadConfig(testEnv(t, env)), { logger }).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.type(error, DataDirInUse)
  t.match((error as Error).message, /DATA_DIR .* in use by process \d+/)
  await holder.stop()

  // A process that died without cleaning up (SIGKILL) leaves its pid behind.
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
  writeFileSync(join(dataDir, 'printfarm.pid'), dead.stdout)
  const next = await startService(loadConfig(testEnv(t, env)), { logger })
  t.teardown(() => next.stop())
  t.equal((await request(next.url, '/readyz')).status, 200)
})

t.test('shutdown - a kept-alive connection gets 503 shutting_down and is closed once draining began', async (t) => {
  const slow = gatedRoute('/test/slow')
  const svc = await startTestService(t, {}, { extraRoutes: [slow.route] })
  const socket = connect(svc.port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  let received = ''
  let closed = false
  socket.on('data', (chunk) => {
    received += chunk.toString('latin1')
  })
  socket.on('close', () => {
    closed = true
  })
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  while (!received.includes('"status":"ok"')) await new Promise((r) => socket.once('data', r))
  t.notMatch(received, /connection: close/i, 'kept alive before shutdown')

  const pending = request(svc.url, '/test/slow')
  await slow.entered
  const stopping = svc.stop()
  received = ''
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  while (!closed) await new Promise((r) => socket.once('close', r))
  t.match(received, /^HTTP\/1\.1 503 /)
  t.match(received, /"error":"shutting_down"/)
  t.match(received, /Connection: close/i)
  slow.release()
  t.equal((await pending).status, 200, 'the in-flight request still completed')
  await stopping
})

t.test('deadline - an async handler that never answers gets 503 request_timeout', async (t) => {
  const never = defineRoute({
    method: 'GET',
    path: '/test/never',
    operationId: 'testNever',
    summary: 'never answers',
    tags: ['test'],
    auth: { kind: 'public', reason: 'test' },
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: () => new Promise<never>(() => undefined),
  })
  const svc = await startTestService(t, { REQUEST_TIMEOUT_MS: '100', SHUTDOWN_TIMEOUT_MS: '0' }, { extraRoutes: [never] })
  const res = await request(svc.url, '/test/never')
  t.equal(res.status, 503)
  t.equal(res.json.error, 'request_timeout')
  t.equal(res.headers['retry-after'], '1')
})

t.test('embedded - a DATA_DIR whose lock names another live process is refused', async (t) => {
  const dataDir = tempDir(t)
  const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
  t.teardown(() => {
    other.kill('SIGKILL')
  })
  writeFileSync(join(dataDir, 'printfarm.pid'), String(other.pid))
  const { logger } = captureLogger()
  const error = await startService(loadConfig(testEnv(t, { DATABASE_URL: undefined, DATA_DIR: dataDir })), { logger }).then(
    (svc) => svc.stop().then(() => undefined),
    (e: unknown) => e,
  )
  t.type(error, DataDirInUse)
  t.match((error as Error).message, new RegExp(`in use by process ${other.pid}`))
})

t.test('embedded - the MQTT broker and the service meet on a specific HOST, not only on 127.0.0.1', async (t) => {
  const svc = await startTestService(t, { HOST: '127.0.0.2', MQTT_URL: undefined })
  t.equal(svc.services.mqtt.broker?.host, '127.0.0.2')
  t.equal(svc.services.mqtt.client.connected, true)
  t.equal((await request(`http://127.0.0.2:${svc.port}`, '/readyz')).json.checks.broker.ok, true)
})

t.test('start - REDIS_URL naming a Redis that does not answer is a start-up error naming the variable, and nothing is left running', async (t) => {
  const { logger } = captureLogger()
  const env = testEnv(t, { REDIS_URL: 'redis://127.0.0.1:1' })
  const error = await startService(loadConfig(env), { logger }).then(
    (svc) => svc.stop().then(() => undefined),
    (e: unknown) => e,
  )
  t.match((error as Error).message, /REDIS_URL is set but Redis did not answer/)
  // Everything the failed start opened was closed: the same store and data directory start cleanly.
  const next = await startService(loadConfig({ ...env, REDIS_URL: undefined }), { logger })
  t.teardown(() => next.stop())
  t.equal((await request(next.url, '/readyz')).status, 200)
})
