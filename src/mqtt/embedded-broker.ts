/**
 * The zero-configuration MQTT broker (DESIGN section 4): aedes on MQTT_PORT.
 *
 * Closed by default: the only identity it accepts is the service's own
 * client, with a secret made fresh at every start and compared in constant
 * time. Display credentials join when the displays work registers them
 * (SPEC part 5, MQTT access); until then no device on the farm network can
 * publish into the service's topics.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { createServer, type Server, type Socket } from 'node:net'
import { Aedes, type AuthenticateError } from 'aedes'
import type { Logger } from '../log.js'

export interface EmbeddedBroker {
  readonly host: string
  readonly port: number
  /** The service's own login on this broker. */
  readonly serviceCredentials: { username: string; password: string }
  close(): Promise<void>
}

export class MqttPortInUse extends Error {
  override name = 'MqttPortInUse'
}

/** MQTT 3.1.1 CONNACK return code 4 (section 3.2.2.3): bad user name or password. */
const BAD_USERNAME_OR_PASSWORD = 4

export async function startEmbeddedBroker(host: string, port: number, logger: Logger): Promise<EmbeddedBroker> {
  const username = 'printfarm-service'
  const password = randomBytes(24).toString('base64url')
  const expected = Buffer.from(password)
  const broker = await Aedes.createBroker({
    authenticate: (_client, user, pass, done) => {
      const ok = user === username && pass !== undefined && pass.length === expected.length && timingSafeEqual(pass, expected)
      if (ok) return done(null, true)
      const error = Object.assign(new Error('bad user name or password'), { returnCode: BAD_USERNAME_OR_PASSWORD }) as AuthenticateError
      done(error, false)
    },
  })
  // Tracked so close() can end them: one idle socket that never sends CONNECT
  // would otherwise hold server.close() until aedes' connect timeout.
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
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
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      await new Promise<void>((resolve) => broker.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}
