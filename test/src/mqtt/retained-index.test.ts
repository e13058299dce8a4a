/**
 * The embedded broker's retained messages, looked up by topic for exact filters and scanned for
 * wildcard ones: a subscriber gets exactly what the stock store would give it (the newest retained
 * message of each matching topic, none for a topic cleared with an empty payload), over MQTT.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { connectAsync, type MqttClient } from 'mqtt'
import { topicRoot } from '../../../protocol/display-mqtt.js'
import { startEmbeddedBroker } from '../../../src/mqtt/embedded-broker.js'
import { captureLogger } from '../../helpers/service.js'

const { logger } = captureLogger()
const broker = await startEmbeddedBroker('127.0.0.1', 0, logger)
t.teardown(() => broker.close())
const url = `mqtt://127.0.0.1:${broker.port}`
const connect = (clientId: string) => connectAsync(url, { ...broker.serviceCredentials, protocolVersion: 4, clientId, reconnectPeriod: 0 }, false)
// The service may publish only into a display tree: svc/v1/{organization}/display/…
const tree = `${topicRoot}/${randomUUID()}/display/retained-test`
const topic = (path: string) => `${tree}/${path}`

const publisher = await connect('publisher')
t.teardown(() => publisher.endAsync())
await publisher.publishAsync(topic('a/1'), 'first', { qos: 1, retain: true })
await publisher.publishAsync(topic('a/1'), 'a1', { qos: 1, retain: true })
await publisher.publishAsync(topic('a/2'), 'a2', { qos: 1, retain: true })
await publisher.publishAsync(topic('b/1'), 'b1', { qos: 1, retain: true })
await publisher.publishAsync(topic('a/2'), '', { qos: 1, retain: true })

/** What a new subscriber to `filters` receives as retained, topic → payload, once the broker has sent it. */
async function retainedFor(filters: string[]): Promise<Record<string, string>> {
  const client: MqttClient = await connect(`sub-${Math.random().toString(36).slice(2)}`)
  const got: Record<string, string> = {}
  client.on('message', (topicName, payload, packet) => {
    if (packet.retain) got[topicName.slice(topic('').length)] = payload.toString()
  })
  await client.subscribeAsync(filters, { qos: 1 })
  // A marker published after the subscription arrives after every retained message sent for it.
  const marker = topic(`marker/${Math.random().toString(36).slice(2)}`)
  await client.subscribeAsync(marker, { qos: 1 })
  const arrived = new Promise<void>((resolve) => client.on('message', (name) => name === marker && resolve()))
  await publisher.publishAsync(marker, 'x', { qos: 1 })
  await arrived
  await client.endAsync()
  return got
}

t.test('an exact filter gets its topic\'s newest retained message', async (t) => {
  t.same(await retainedFor([topic('a/1')]), { 'a/1': 'a1' })
})

t.test('a topic cleared with an empty payload gives nothing, also to an exact filter', async (t) => {
  t.same(await retainedFor([topic('a/2')]), {})
})

t.test('several exact filters at once, one of them twice, each message once', async (t) => {
  t.same(await retainedFor([topic('a/1'), topic('b/1'), topic('c/9')]), { 'a/1': 'a1', 'b/1': 'b1' })
})

t.test('wildcard filters still match by pattern', async (t) => {
  t.same(await retainedFor([topic('a/+')]), { 'a/1': 'a1' })
  t.same(await retainedFor([topic('#')]), { 'a/1': 'a1', 'b/1': 'b1' })
})
