/**
 * The service's own MQTT client: to the external broker of MQTT_URL, or to
 * the embedded broker it starts. MQTT 3.1.1 in both cases, since aedes speaks
 * no other version (DESIGN section 3). After the first connect, MQTT.js
 * reconnects on its own; readiness reports whether it is connected.
 */
import { connectAsync, type MqttClient } from 'mqtt'
import { randomBytes } from 'node:crypto'
import type { Config } from '../config.js'
import { redact } from '../config.js'
import type { Logger } from '../log.js'
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
  let url: string
  let credentials: { username?: string; password?: string } = {}
  if (config.mqttUrl !== undefined) {
    url = config.mqttUrl
  } else {
    broker = await startEmbeddedBroker(config.host, config.mqttPort, logger, brokerOptions)
    // A wildcard listens on loopback too; a specific address only on itself.
    const host = broker.host === '0.0.0.0' ? '127.0.0.1' : broker.host === '::' ? '::1' : broker.host
    url = `mqtt://${host.includes(':') ? `[${host}]` : host}:${broker.port}`
    credentials = broker.serviceCredentials
  }
  let client: MqttClient
  try {
    client = await connectAsync(url, {
      ...credentials,
      protocolVersion: 4,
      clientId: `printfarm-${randomBytes(6).toString('hex')}`,
      connectTimeout: connectTimeoutMs,
      reconnectPeriod: 1_000,
      clean: true,
    }, false)
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
