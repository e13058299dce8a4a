/**
 * Checks made before the service creates anything (a database, an admin, a
 * broker): every address it will listen on is free and is this machine's.
 * A start that fails later cannot then have half-succeeded for a reason
 * known from the start. The real listens are exclusive too (http/server.ts),
 * so a port taken in between still fails the start rather than being shared.
 */
import { createServer } from 'node:net'
import type { Config } from '../node/config.js'
import { PortInUse } from '../http/server.js'
import { MqttPortInUse } from '../mqtt/embedded-broker.js'
import { StartupProblem } from './problems.js'

export class HostNotLocal extends StartupProblem {
  override name = 'HostNotLocal'
}

export async function checkListenAddresses(config: Config): Promise<void> {
  const embeddedBroker = config.mqttUrl === undefined
  if (embeddedBroker && config.port !== 0 && config.port === config.mqttPort) {
    throw new PortInUse(`PORT and MQTT_PORT are both ${config.port}; the HTTP server and the embedded MQTT broker need a port each`)
  }
  await probe(config.host, config.port, (port) => new PortInUse(`PORT ${port} is in use on ${config.host} by another process; set PORT to a free port (or stop the other process)`))
  if (embeddedBroker) {
    await probe(config.host, config.mqttPort, (port) => new MqttPortInUse(`MQTT_PORT ${port} is in use on ${config.host} by another process (an MQTT broker?); set MQTT_PORT to a free port, or MQTT_URL to use that broker`))
  }
}

/** Binds and releases host:port; port 0 checks the address alone. */
function probe(host: string, port: number, inUse: (port: number) => StartupProblem): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') reject(inUse(port))
      else if (error.code === 'EACCES') reject(new StartupProblem(`cannot listen on ${host}:${port}: permission denied (ports below 1024 need privileges); choose another port`))
      else reject(new HostNotLocal(`HOST '${host}' is not an address of this machine (${error.code ?? error.message}); set HOST to one of its addresses, 0.0.0.0 for all`))
    })
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()))
  })
}
