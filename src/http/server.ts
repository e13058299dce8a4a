/**
 * The thin uWS adapter: every request goes through one dispatch that routes,
 * reads and bounds the body, parses and validates, calls the handler and maps
 * whatever it throws to a coded JSON error. Handlers never see uWS.
 *
 * uWS rules (DESIGN section 7) are kept here and only here: onAborted is
 * registered before anything asynchronous, everything needed from `req` is
 * read before the first await, and every write after an await is corked.
 */
import { randomUUID } from 'node:crypto'
import { errorBody, errorCodes, ServiceError, type ErrorCodeInfo } from '../../protocol/errors.js'
import { compileBodyValidator, compileTextValidator, type Validator } from '../../protocol/schemas/validator.js'
import type { Logger } from '../log.js'
import { latencyBuckets, type MetricsRegistry } from '../metrics.js'
import { translateStoreError } from '../storage/errors.js'
import { readBody, RequestAborted, type RequestLifecycle } from './body.js'
import { CorsPolicy } from './cors.js'
import { isBodyMethod, type Reply, type Route, type RouteRequest, type RouteSchemas } from './route.js'
import { Router, type HttpMethod } from './router.js'
import { statusLine } from './status.js'
import { assertNativeUws, uWS, type HttpResponse, type us_listen_socket } from './uws.js'

export interface HttpServerOptions<Svc> {
  host: string
  port: number
  bodyLimitBytes: number
  corsOrigins: '*' | readonly string[]
  logger: Logger
  metrics: MetricsRegistry
  routes: readonly Route<RouteSchemas, Svc>[]
  services: Svc
}

export interface HttpServer {
  readonly port: number
  /** Requests being handled right now. */
  readonly inFlight: number
  /** Stop accepting, let in-flight requests finish (up to timeoutMs), then resolve. */
  close(timeoutMs: number): Promise<void>
}

export class PortInUse extends Error {
  override name = 'PortInUse'
}

interface CompiledRoute<Svc> {
  readonly route: Route<RouteSchemas, Svc>
  readonly body: Validator<unknown> | undefined
  readonly query: Validator<unknown> | undefined
  readonly params: Validator<unknown> | undefined
}

const knownMethods = new Set<string>(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/
const jsonContentType = 'application/json; charset=utf-8'

export function compileRoutes<Svc>(routes: readonly Route<RouteSchemas, Svc>[]): Router<CompiledRoute<Svc>> {
  const router = new Router<CompiledRoute<Svc>>()
  for (const route of routes) {
    router.add(route.method, route.path, {
      route,
      body: route.schemas.body ? compileBodyValidator(route.schemas.body) : undefined,
      query: route.schemas.query ? compileTextValidator(route.schemas.query, 'query') : undefined,
      params: route.schemas.params ? compileTextValidator(route.schemas.params, 'path') : undefined,
    })
  }
  return router
}

export function startHttpServer<Svc>(options: HttpServerOptions<Svc>): Promise<HttpServer> {
  assertNativeUws()
  const { logger, services, bodyLimitBytes } = options
  const router = compileRoutes(options.routes)
  const cors = new CorsPolicy(options.corsOrigins)

  const requests = options.metrics.counter('http_requests_total', 'HTTP requests answered, by route template, method and status.', [
    'route',
    'method',
    'status',
  ])
  const durations = options.metrics.histogram(
    'http_request_duration_seconds',
    'Time from the request line to the last byte of the response, by route template.',
    ['route', 'method'],
    latencyBuckets,
  )
  const aborted = options.metrics.counter('http_requests_aborted_total', 'Requests whose client went away before the response.', ['route'])
  let inFlight = 0
  options.metrics.gauge('http_requests_in_flight', 'Requests being handled now.', [], (g) => g.set({}, inFlight))

  let draining = false
  let drained: (() => void) | undefined

  const app = uWS.App()
  app.any('/*', (res, req) => {
    const started = performance.now()
    const rawMethod = req.getMethod().toUpperCase()
    const path = req.getUrl()
    const rawQuery = req.getQuery()
    const headers: Record<string, string> = {}
    req.forEach((key, value) => {
      headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`
    })
    const remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString()
    const incomingId = headers['x-request-id']
    const requestId = incomingId !== undefined && requestIdPattern.test(incomingId) ? incomingId : randomUUID()
    const origin = headers['origin']
    const declared = headers['content-length']
    const declaredLength = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : undefined
    // A body we never read must not be parsed as the next request on this connection.
    const hasBody = (declaredLength ?? 0) > 0 || headers['transfer-encoding'] !== undefined

    inFlight++
    let label = 'unmatched'
    let finished = false
    const life: RequestLifecycle = { aborted: false, onAbort: undefined }
    const finish = (status: number | undefined): void => {
      if (finished) return
      finished = true
      inFlight--
      if (status === undefined) aborted.inc({ route: label })
      else {
        requests.inc({ route: label, method: rawMethod, status: String(status) })
        durations.observe({ route: label, method: rawMethod }, (performance.now() - started) / 1000)
      }
      if (draining && inFlight === 0) drained?.()
    }
    res.onAborted(() => {
      life.aborted = true
      life.onAbort?.()
      finish(undefined)
    })

    const send = (status: number, payload: string | Uint8Array | undefined, contentType: string | undefined, extra: Iterable<[string, string]>, closeAfter: boolean): void => {
      if (life.aborted || finished) return
      const close = closeAfter || draining
      res.cork(() => {
        res.writeStatus(statusLine(status))
        if (contentType !== undefined && payload !== undefined) res.writeHeader('content-type', contentType)
        res.writeHeader('x-request-id', requestId)
        for (const [name, value] of cors.responseHeaders(origin)) res.writeHeader(name, value)
        for (const [name, value] of extra) res.writeHeader(name, value)
        if (status === 204 || status === 304 || payload === undefined) res.endWithoutBody(undefined, close)
        else if (rawMethod === 'HEAD') res.endWithoutBody(typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength, close)
        else res.end(payload, close)
      })
      finish(status)
    }

    const sendError = (error: unknown, closeAfter: boolean): void => {
      if (error instanceof RequestAborted || life.aborted) return
      const coded = error instanceof ServiceError ? error : translateStoreError(error)
      if (coded === undefined) {
        logger.error('request failed', { requestId, route: label, method: rawMethod, error })
        const body = errorBody('internal_error', `an unexpected error occurred; quote request id ${requestId} when reporting it`, requestId)
        send(500, JSON.stringify(body), jsonContentType, [], closeAfter)
        return
      }
      const body = { ...errorBody(coded.code, coded.message, requestId), ...coded.extra }
      const retry: [string, string][] =
        (errorCodes[coded.code] as ErrorCodeInfo).retryable === true && coded.headers?.['retry-after'] === undefined ? [['retry-after', '1']] : []
      send(coded.status, JSON.stringify(body), jsonContentType, [...Object.entries(coded.headers ?? {}), ...retry], closeAfter)
    }

    if (!knownMethods.has(rawMethod)) {
      const allowed = router.allowed(path)
      if (allowed.length === 0) sendError(new ServiceError('route_not_found', `no route for ${path}`), hasBody)
      else sendError(methodNotAllowed(rawMethod, path, allowed), hasBody)
      return
    }
    const method = rawMethod as HttpMethod

    if (method === 'OPTIONS') {
      const allowed = router.allowed(path)
      if (allowed.length === 0) return sendError(new ServiceError('route_not_found', `no route for ${path}`), hasBody)
      label = 'preflight'
      const isPreflight = headers['access-control-request-method'] !== undefined
      const extra = isPreflight ? cors.preflightHeaders(origin, allowed) : []
      send(204, undefined, undefined, [['allow', [...allowed, 'OPTIONS'].join(', ')], ...extra], hasBody)
      return
    }

    const match = router.match(method, path)
    if (match.kind === 'not_found') return sendError(new ServiceError('route_not_found', `no route for ${method} ${path}`), hasBody)
    if (match.kind === 'bad_path') return sendError(new ServiceError('validation_failed', match.reason), hasBody)
    if (match.kind === 'method_not_allowed') {
      label = 'method_not_allowed'
      return sendError(methodNotAllowed(method, path, match.allowed), hasBody)
    }
    const compiled = match.value
    const route = compiled.route
    label = route.path

    const run = async (): Promise<void> => {
      let body: unknown = undefined
      if (isBodyMethod(method)) {
        const raw = await readBody(res, bodyLimitBytes, declaredLength, life)
        body = parseBody(raw, headers['content-type'], compiled, route)
      }
      const params = validate(compiled.params, match.params)
      const query = compiled.query ? validate(compiled.query, parseQuery(rawQuery)) : parseQuery(rawQuery)
      if (compiled.body) body = validate(compiled.body, body)
      const request: RouteRequest = { method, path, body: body as undefined, query, params: params as Record<string, string>, headers, requestId, remoteAddress }
      const reply = await route.handler(request, services)
      sendReply(reply)
    }
    const sendReply = (reply: Reply): void => {
      const status = reply.status ?? 200
      if (reply.raw !== undefined) {
        send(status, reply.raw, reply.contentType ?? 'application/octet-stream', Object.entries(reply.headers ?? {}), false)
      } else {
        const payload = reply.body === undefined ? undefined : JSON.stringify(reply.body)
        send(status, payload, reply.contentType ?? jsonContentType, Object.entries(reply.headers ?? {}), false)
      }
    }
    run().catch((error: unknown) => {
      // A refused oversized body is still arriving: close rather than read it all.
      const closeAfter = error instanceof ServiceError && error.code === 'payload_too_large'
      try {
        sendError(error, closeAfter)
      } catch (sendFailure) {
        logger.error('could not send an error response', { requestId, error: sendFailure })
      }
    })
  })

  return new Promise<HttpServer>((resolve, reject) => {
    app.listen(options.host, options.port, (listenSocket: us_listen_socket | false) => {
      if (!listenSocket) {
        reject(new PortInUse(`cannot listen on ${options.host}:${options.port}: the port is in use or the address is not local (set PORT or HOST)`))
        return
      }
      const port = uWS.us_socket_local_port(listenSocket)
      let closing: Promise<void> | undefined
      resolve({
        port,
        get inFlight() {
          return inFlight
        },
        close(timeoutMs: number) {
          closing ??= new Promise<void>((done) => {
            draining = true
            uWS.us_listen_socket_close(listenSocket)
            if (inFlight === 0) return done()
            const timer = setTimeout(() => {
              logger.warn('shutdown timeout: requests still in flight', { inFlight })
              done()
            }, timeoutMs)
            drained = () => {
              clearTimeout(timer)
              done()
            }
          })
          return closing
        },
      })
    })
  })
}

function methodNotAllowed(method: string, path: string, allowed: readonly string[]): ServiceError {
  return new ServiceError('method_not_allowed', `${method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
    headers: { allow: allowed.join(', ') },
  })
}

function parseBody<Svc>(raw: Buffer, contentType: string | undefined, compiled: CompiledRoute<Svc>, route: Route<RouteSchemas, Svc>): unknown {
  if (raw.length === 0) {
    if (!compiled.body) return undefined
    if (route.emptyBodyAllowed) return {}
    throw new ServiceError('body_required', `${route.method} ${route.path} needs a JSON body`)
  }
  if (!compiled.body) return undefined
  if (contentType !== undefined && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
    throw new ServiceError('unsupported_media_type', `Content-Type '${contentType.slice(0, 100)}' is not JSON; send application/json`)
  }
  try {
    return JSON.parse(raw.toString('utf8'))
  } catch (error) {
    throw new ServiceError('invalid_json', `the body is not valid JSON: ${(error as Error).message}`)
  }
}

function validate(validator: Validator<unknown> | undefined, value: unknown): unknown {
  if (!validator) return value
  const result = validator(value)
  if (!result.ok) throw new ServiceError('validation_failed', result.reason)
  return result.value
}

function parseQuery(raw: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  if (raw === '') return out
  for (const [key, value] of new URLSearchParams(raw)) {
    const prior = out[key]
    if (prior === undefined) out[key] = value
    else if (Array.isArray(prior)) prior.push(value)
    else out[key] = [prior, value]
  }
  return out
}
