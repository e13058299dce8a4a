/**
 * The HTTP server: one uWS app, the live feed's WebSocket route, the request
 * dispatcher (dispatch.ts) on every other path, an exclusive listen socket,
 * and a drain on close. Routing and answering are the dispatcher's.
 */
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { StartupProblem } from '../startup/problems.js'
import { createDispatcher, type DispatchOptions } from './dispatch.js'
import { assertNativeUws, listenExclusivePort, uWS, type TemplatedApp, type us_listen_socket } from './uws.js'

export { compileRoutes, parseQuery } from './dispatch.js'

export interface HttpServerOptions<Svc> extends DispatchOptions<Svc> {
  host: string
  port: number
  logger: Logger
  metrics: MetricsRegistry
  /** Adds handlers to the uWS app before the HTTP catch-all (the live feed's WebSocket route). */
  attach?: (app: TemplatedApp) => void
}

export interface HttpServer {
  readonly port: number
  /** Requests being handled right now. */
  readonly inFlight: number
  /** Stop accepting, let in-flight requests finish (up to timeoutMs), then resolve. */
  close(timeoutMs: number): Promise<void>
}

export class PortInUse extends StartupProblem {
  override name = 'PortInUse'
}

export async function startHttpServer<Svc>(options: HttpServerOptions<Svc>): Promise<HttpServer> {
  assertNativeUws()
  const dispatcher = createDispatcher(options)
  const app = uWS.App()
  options.attach?.(app)
  app.any('/*', dispatcher.handle)
  const listenSocket = await listenExclusively(app, options.host, options.port)
  const port = uWS.us_socket_local_port(listenSocket)
  let closing: Promise<void> | undefined
  return {
    port,
    get inFlight() {
      return dispatcher.inFlight
    },
    close(timeoutMs: number) {
      closing ??= (async () => {
        const drained = dispatcher.drain(timeoutMs)
        uWS.us_listen_socket_close(listenSocket)
        await drained
      })()
      return closing
    },
  }
}

/**
 * uWS shares a port with any other socket that asks for it (SO_REUSEPORT)
 * unless told not to: two services on one port would each get half the
 * requests, and a bridge half its batches stored in the wrong farm. So the
 * port is taken exclusively, and a taken port is a start-up error.
 */
function listenExclusively(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, listenExclusivePort, (listenSocket) => {
      if (listenSocket) resolve(listenSocket)
      else reject(new PortInUse(`cannot listen on ${host}:${port}: the port is in use by another process or the address is not one of this machine's (set PORT to a free port, or HOST)`))
    })
  })
}
