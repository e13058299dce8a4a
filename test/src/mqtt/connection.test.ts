/**
 * The service's MQTT side: the embedded broker (closed to everyone but the
 * service) and the external broker of MQTT_URL (Mosquitto in CI).
 */
import t from 'tap'
import { createServer, Socket } from 'node:net'
import { connectAsync } from 'mqtt'
import { loadConfig } from '../../../src/node/config.js'
import { startService } from '../../../src/node/service.js'
import { MqttPortInUse } from '../../../src/mqtt/embedded-broker.js'
import { BrokerUnreachable } from '../../../src/mqtt/connection.js'
import { request } from '../../helpers/http.js'
import { waitFor } from '../../helpers/poll.js'
import { captureLogger, startTestService, testEnv } from '../../helpers/service.js'

const { logger } = captureLogger()

t.test('embedded broker - only the service itself may connect', async (t) => {
  const svc = await startTestService(t, { MQTT_URL: undefined })
  const broker = svc.services.mqtt.broker
  t.ok(broker, 'an embedded broker runs when MQTT_URL is unset')
  if (!broker) return
  t.equal(svc.services.mqtt.kind, 'embedded')
  const url = `mqtt://127.0.0.1:${broker.port}`
  const attempt = (options: { username?: string; password?: string }) =>
    connectAsync(url, { ...options, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 5_000 }, false)
  await t.rejects(attempt({}), /Bad username or password|Not authorized/i, 'anonymous is refused')
  await t.rejects(attempt({ username: broker.serviceCredentials.username, password: 'guess' }), /Bad username or password/i, 'a wrong password is refused')
  await t.rejects(attempt({ username: 'someone', password: broker.serviceCredentials.password }), /Bad username or password/i, 'another user name is refused')
  const own = await attempt(broker.serviceCredentials)
  t.teardown(() => own.endAsync())
  t.ok(own.connected, 'the service credentials are accepted')

  const ready = await request(svc.url, '/readyz')
  t.same(ready.json.checks.broker, { ok: true, kind: 'embedded' })
})

t.test('embedded broker - messages the service publishes under the display tree arrive through it', async (t) => {
  const svc = await startTestService(t, { MQTT_URL: undefined })
  const broker = svc.services.mqtt.broker!
  const listener = await connectAsync(`mqtt://127.0.0.1:${broker.port}`, { ...broker.serviceCredentials, protocolVersion: 4, clientId: 'listener' }, false)
  t.teardown(() => listener.endAsync())
  // The service's own login may publish only under svc/v1/{organizationId}/display/ (docs/authentication.md).
  const topic = 'svc/v1/00000000-0000-4000-8000-000000000000/display/probe'
  await listener.subscribeAsync(topic, { qos: 1 })
  const received = new Promise<string>((resolve) => listener.once('message', (_topic, payload) => resolve(payload.toString())))
  await svc.services.mqtt.client.publishAsync(topic, 'hello', { qos: 1 })
  t.equal(await received, 'hello')
})

t.test("embedded broker - the service's own client is linked in process, and comes back when that link is cut", async (t) => {
  const svc = await startTestService(t, { MQTT_URL: undefined })
  const broker = svc.services.mqtt.broker!
  const client = svc.services.mqtt.client
  t.notOk(client.stream instanceof Socket, 'not a socket: an in-memory stream pair')
  const listener = await connectAsync(`mqtt://127.0.0.1:${broker.port}`, { ...broker.serviceCredentials, protocolVersion: 4, clientId: 'cut-listener' }, false)
  t.teardown(() => listener.endAsync())
  const topic = 'svc/v1/00000000-0000-4000-8000-000000000000/display/cut'
  await listener.subscribeAsync(topic, { qos: 1 })
  const heard: string[] = []
  listener.on('message', (_topic, payload) => heard.push(payload.toString()))
  await client.publishAsync(topic, 'before', { qos: 1 })
  // The broker's end of the link goes away, as a dropped connection would.
  const reconnected = new Promise<void>((resolve) => client.once('connect', () => resolve()))
  client.stream.destroy()
  await reconnected
  t.ok(client.connected, 'connected again over a new link')
  await client.publishAsync(topic, 'after', { qos: 1 })
  await waitFor(() => heard.length === 2, 'both publications heard')
  t.same(heard, ['before', 'after'])
  const ready = await request(svc.url, '/readyz')
  t.same(ready.json.checks.broker, { ok: true, kind: 'embedded' })
})

t.test('embedded broker - a taken MQTT_PORT is a clear start-up error naming MQTT_PORT', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())))
  const address = blocker.address()
  const port = typeof address === 'object' && address ? address.port : 0
  const config = loadConfig(testEnv(t, { MQTT_URL: undefined, MQTT_PORT: String(port) }))
  const error = await startService(config, { logger }).then(
    (svc) => svc.stop().then(() => undefined),
    (e: unknown) => e,
  )
  t.type(error, MqttPortInUse)
  t.match((error as Error).message, /MQTT_PORT \d+ is in use/)
})

t.test('external broker - an unreachable MQTT_URL fails the start, naming MQTT_URL', async (t) => {
  const config = loadConfig(testEnv(t, { MQTT_URL: 'mqtt://127.0.0.1:1' }))
  const error = await startService(config, { logger }).then(
    (svc) => svc.stop().then(() => undefined),
    (e: unknown) => e,
  )
  t.type(error, BrokerUnreachable)
  t.match((error as Error).message, /MQTT_URL mqtt:\/\/127\.0\.0\.1:1/)
})

t.test('external broker - with MQTT_URL the service talks to that broker', { skip: !process.env['MQTT_URL'] && 'MQTT_URL not set' }, async (t) => {
  const svc = await startTestService(t, { MQTT_URL: process.env['MQTT_URL'] })
  t.equal(svc.services.mqtt.kind, 'external')
  t.equal(svc.services.mqtt.broker, undefined, 'no embedded broker alongside an external one')
  const ready = await request(svc.url, '/readyz')
  t.same(ready.json.checks.broker, { ok: true, kind: 'external' })
  const topic = `printfarm-test/${Math.random().toString(36).slice(2)}`
  const listener = await connectAsync(process.env['MQTT_URL']!, { protocolVersion: 4 }, false)
  t.teardown(() => listener.endAsync())
  await listener.subscribeAsync(topic, { qos: 1 })
  const received = new Promise<string>((resolve) => listener.once('message', (_t, payload) => resolve(payload.toString())))
  await svc.services.mqtt.client.publishAsync(topic, 'through mosquitto', { qos: 1 })
  t.equal(await received, 'through mosquitto')
})
