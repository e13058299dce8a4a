/**
 * The service's own MQTT client: to the external broker of MQTT_URL, or to
 * the embedded broker it starts. MQTT 3.1.1 in both cases, since aedes speaks
 * no other version (docs/development.md). After the first connect, MQTT.js
 * reconnects on its own; readiness reports whether it is connected.
 */
import { connectAsync, MqttClient } from 'mqtt'
import { randomBytes } from 'node:crypto'
import type { Config } from '../node/config.js'
import { redact } from '../node/config.js'
import type { Logger } from '../observability/log.js'
import { startEmbeddedBroker, type EmbeddedBroker, type EmbeddedBrokerOptions } from './embedded-broker.js'

export interface MqttConnection {
  readonly client: MqttClient
  readonly kind: 'embedded' | 'external'
  /** The embedded broker, when this node runs one. */
  readonly broker: EmbeddedBroker | undefined
  close(): Promise<void>
}

export class BrokerUnreachable extends Error {
  override name = 'BrokerUnreachable'
}

const connectTimeoutMs = 10_000

export async function connectMqtt(config: Config, logger: Logger, brokerOptions: EmbeddedBrokerOptions = {}): Promise<MqttConnection> {
  let broker: EmbeddedBroker | undefined
  const options = {
    protocolVersion: 4 as const,
    clientId: `printfarm-${randomBytes(6).toString('hex')}`,
    connectTimeout: connectTimeoutMs,
    reconnectPeriod: 1_000,
    clean: true,
  }
  let client: MqttClient
  try {
    if (config.mqttUrl !== undefined) {
      client = await connectAsync(config.mqttUrl, options, false)
    } else {
      broker = await startEmbeddedBroker(config.host, config.mqttPort, logger, brokerOptions)
      // The broker runs in this process: its link is a stream pair, not a loopback socket (embedded-broker.ts).
      const embedded = broker
      client = await connected(new MqttClient(() => embedded.connect(), { ...options, ...embedded.serviceCredentials }))
    }
  } catch (error) {
    await broker?.close().catch(() => undefined)
    const where = config.mqttUrl !== undefined ? `MQTT_URL ${redact(config.mqttUrl)}` : 'the embedded broker'
    throw new BrokerUnreachable(`cannot connect to ${where}: ${(error as Error).message}`, { cause: error })
  }
  client.on('error', (error) => logger.warn('MQTT client error', { error }))
  client.on('offline', () => logger.warn('MQTT broker connection lost; reconnecting'))
  client.on('reconnect', () => logger.debug('MQTT reconnecting'))
  logger.info('MQTT connected', { kind: broker ? 'embedded' : 'external' })
  return {
    client,
    kind: broker ? 'embedded' : 'external',
    broker,
    async close() {
      await client.endAsync().catch(() => undefined)
      await broker?.close()
    },
  }
}

/** Resolves once the client's first connection is accepted; rejects (and ends it) if that connection fails. */
function connected(client: MqttClient): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const fail = (error: Error) => {
      client.off('connect', succeed)
      client.off('close', closed)
      client.end(true)
      reject(error)
    }
    const closed = () => fail(new Error('the broker closed the connection'))
    const succeed = () => {
      client.off('error', fail)
      client.off('close', closed)
      resolve(client)
    }
    client.once('connect', succeed)
    client.once('error', fail)
    client.once('close', closed)
  })
}
