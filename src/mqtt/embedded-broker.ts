/**
 * The zero-configuration MQTT broker (docs/operations.md): aedes on MQTT_PORT.
 *
 * Closed by default. Two kinds of login are accepted:
 * - the service's own client, with a secret made fresh at every start and
 *   compared in constant time; it may publish and subscribe only under the
 *   display topic tree (svc/v1/{organizationId}/display/...);
 * - a display credential, checked against the store (`displays.verify`):
 *   current binding, not revoked. docs/authentication.md: it subscribes only to topics
 *   under its own display's base topic of its binding, and publishes only to
 *   its own credential-bound topics (profile/status, capabilities, health,
 *   resync), never retained.
 * A refused subscription gets a failure return code; a refused publication
 * closes the client's connection (aedes' behaviour; MQTT 3.1.1 has no
 * negative PUBACK). `revoke` disconnects the clients of a credential that a
 * rebind replaced.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { createServer, type Server, type Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { Aedes, type AuthenticateError, type Client } from 'aedes'
import { indexedMemoryPersistence } from './retained-index.js'
import { inProcessLink } from './in-process-link.js'
import { baseTopic, displayTopicAccess, topicRoot } from '../../protocol/display-mqtt.js'
import type { Logger } from '../observability/log.js'
import { StartupProblem } from '../startup/problems.js'

export interface DisplayLogin {
  organizationId: string
  displayId: string
  bindingEpoch: number
  credentialId: string
}

export interface EmbeddedBrokerOptions {
  /** Checks a display's MQTT login against the store; undefined refuses it. */
  verifyDisplay?: (username: string, password: Buffer) => Promise<DisplayLogin | undefined>
}

export interface EmbeddedBroker {
  readonly host: string
  readonly port: number
  /** The service's own login on this broker. */
  readonly serviceCredentials: { username: string; password: string }
  /**
   * A connection to this broker inside the process, for the service's own client: MQTT packets
   * over an in-memory stream pair, not a loopback socket (a system call per packet each way was
   * a large share of the service's CPU per display activation, bench/displays). The client logs
   * in with `serviceCredentials` as over TCP.
   */
  connect(): Duplex
  /** Disconnects every client logged in with this credential. */
  revoke(credentialId: string): number
  close(): Promise<void>
}

export class MqttPortInUse extends StartupProblem {
  override name = 'MqttPortInUse'
}

/** MQTT 3.1.1 CONNACK return code 4 (section 3.2.2.3): bad user name or password. */
const BAD_USERNAME_OR_PASSWORD = 4

/** Who a connected client is: the service itself, or one display credential. */
type Login = { kind: 'service' } | ({ kind: 'display' } & DisplayLogin)

const serviceTopic = new RegExp(`^${topicRoot}/[0-9a-f-]{36}/display/`)

/** A display's subscription: a filter inside its own base topic, wildcards only below it. */
function displayMaySubscribe(login: DisplayLogin, filter: string): boolean {
  const base = `${baseTopic(login)}/`
  return filter.startsWith(base) && filter.length > base.length && !filter.startsWith('$')
}

function displayMayPublish(login: DisplayLogin, topic: string): boolean {
  return displayTopicAccess(login, login.credentialId).publish.includes(topic)
}

export async function startEmbeddedBroker(host: string, port: number, logger: Logger, options: EmbeddedBrokerOptions = {}): Promise<EmbeddedBroker> {
  const username = 'printfarm-service'
  const password = randomBytes(24).toString('base64url')
  const expected = Buffer.from(password)
  const logins = new WeakMap<Client, Login>()
  const refuse = (done: (error: AuthenticateError | null, success: boolean | null) => void) =>
    done(Object.assign(new Error('bad user name or password'), { returnCode: BAD_USERNAME_OR_PASSWORD }) as AuthenticateError, false)
  const broker = await Aedes.createBroker({
    persistence: indexedMemoryPersistence() as never,
    authenticate: (client, user, pass, done) => {
      if (user === username) {
        const ok = pass !== undefined && pass.length === expected.length && timingSafeEqual(pass, expected)
        if (!ok) return refuse(done)
        logins.set(client, { kind: 'service' })
        return done(null, true)
      }
      if (user === undefined || pass === undefined || options.verifyDisplay === undefined) return refuse(done)
      options.verifyDisplay(user, pass).then(
        (display) => {
          if (display === undefined) return refuse(done)
          logins.set(client, { kind: 'display', ...display })
          done(null, true)
        },
        (error: unknown) => {
          logger.warn('display login check failed', { error })
          // MQTT 3.1.1 return code 3: server unavailable (the device retries later).
          done(Object.assign(new Error('server unavailable'), { returnCode: 3 }) as AuthenticateError, false)
        },
      )
    },
    authorizePublish: (client, packet, callback) => {
      // Messages the broker makes itself ($SYS); no client sent them.
      if (client === null) return callback(null)
      const login = logins.get(client)
      const ok =
        login !== undefined &&
        (login.kind === 'service' ? serviceTopic.test(packet.topic) : !packet.retain && displayMayPublish(login, packet.topic))
      callback(ok ? null : new Error(`publication to ${packet.topic.slice(0, 200)} refused`))
    },
    authorizeSubscribe: (client, subscription, callback) => {
      const login = logins.get(client)
      const ok =
        login !== undefined &&
        (login.kind === 'service' ? subscription.topic.startsWith(`${topicRoot}/`) : displayMaySubscribe(login, subscription.topic))
      // A null subscription answers the SUBACK with the failure code 0x80; the connection stays.
      callback(null, ok ? subscription : null)
    },
  })
  const clients = (): Client[] => Object.values((broker as unknown as { clients: Record<string, Client> }).clients)
  // Tracked so close() can end them: one idle socket that never sends CONNECT
  // would otherwise hold server.close() until aedes' connect timeout.
  const sockets = new Set<Socket | Duplex>()
  const server: Server = createServer((socket) => {
    // Small MQTT packets (a PUBACK, a receipt) must not wait for Nagle's algorithm: measured in
    // bench/displays, it held every QoS 1 round trip for ~40 ms (a delayed ACK each way).
    socket.setNoDelay(true)
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    broker.handle(socket)
  })
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => {
        server.off('error', reject)
        resolve()
      })
    })
  } catch (error) {
    await new Promise<void>((resolve) => broker.close(() => resolve()))
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new MqttPortInUse(`MQTT_PORT ${port} is in use on ${host}; set MQTT_PORT to a free port, or MQTT_URL to use that broker instead`)
    }
    throw error
  }
  server.on('error', (error) => logger.error('embedded MQTT broker error', { error }))
  const address = server.address()
  const boundPort = typeof address === 'object' && address !== null ? address.port : port
  logger.info('embedded MQTT broker started', { host, port: boundPort })
  return {
    host,
    port: boundPort,
    serviceCredentials: { username, password },
    connect() {
      const [client, served] = inProcessLink()
      sockets.add(served)
      served.once('close', () => sockets.delete(served))
      broker.handle(served)
      return client
    },
    revoke(credentialId) {
      let closed = 0
      for (const client of clients()) {
        const login = logins.get(client)
        if (login?.kind === 'display' && login.credentialId === credentialId) {
          client.close()
          closed++
        }
      }
      return closed
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      await new Promise<void>((resolve) => broker.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}
