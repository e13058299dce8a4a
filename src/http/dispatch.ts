/**
 * Request dispatch: every request goes through one function that routes,
 * reads and bounds the body, parses and validates, checks the credential,
 * calls the handler and maps whatever it throws to a coded JSON error.
 * Handlers never see uWS. Listening and draining are the server's
 * (server.ts); this module only answers.
 *
 * uWS rules (DESIGN section 7) are kept here and only here: onAborted is
 * registered before anything asynchronous, everything needed from `req` is
 * read before the first await, and every write after an await is corked.
 */
import { randomUUID } from 'node:crypto'
import { parseJsonText } from '../../protocol/json-text.js'
import { ServiceError } from '../../protocol/errors.js'
import { compileBodyValidator, compileTextValidator, type Validator } from '../../protocol/schemas/validator.js'
import type { Logger } from '../log.js'
import { latencyBuckets, type MetricsRegistry } from '../metrics.js'
import { payloadTooLarge, readBody } from './body.js'
import { RequestBodyStream } from './body-stream.js'
import { CorsPolicy } from './cors.js'
import { Exchange } from './exchange.js'
import { isBodyMethod, type Principal, type Reply, type Route, type RouteAuth, type RouteRequest, type RouteSchemas } from './route.js'
import { Router, type HttpMethod } from './router.js'
import type { HttpRequest, HttpResponse } from './uws.js'

export interface DispatchOptions<Svc> {
  bodyLimitBytes: number
  /** An async handler that has not answered by then gets a 503 request_timeout (it runs on, still counted in flight). */
  requestTimeoutMs: number
  corsOrigins: '*' | readonly string[]
  logger: Logger
  metrics: MetricsRegistry
  routes: readonly Route<RouteSchemas, Svc>[]
  services: Svc
  /** Checks the credential for a non-public route; without it only public routes can be called. */
  authenticate?: (auth: RouteAuth, headers: Readonly<Record<string, string>>, query: Readonly<Record<string, string | string[]>>) => Promise<Principal>
  /** Told of every answered request whose caller used an API key (usage logs); must not throw or block. */
  onApiKeyUse?: (use: { keyId: string; method: string; route: string; status: number; remoteAddress: string; requestId: string }) => void
}

export interface Dispatcher {
  /** The uWS request handler (mounted on `/*`). */
  handle(res: HttpResponse, req: HttpRequest): void
  /** Requests being handled right now. */
  readonly inFlight: number
  /** From now on every request is turned away (503 shutting_down); resolves when none is in flight, or after timeoutMs. */
  drain(timeoutMs: number): Promise<void>
}

interface CompiledRoute<Svc> {
  readonly route: Route<RouteSchemas, Svc>
  readonly body: Validator<unknown> | undefined
  readonly query: Validator<unknown> | undefined
  readonly params: Validator<unknown> | undefined
}

const anonymous: Principal = { kind: 'anonymous' }
const noAuthenticator = async (): Promise<Principal> => {
  throw new ServiceError('unauthorized', 'this route needs a credential')
}

const knownMethods = new Set<string>(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/

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

export function createDispatcher<Svc>(options: DispatchOptions<Svc>): Dispatcher {
  const { logger, services, bodyLimitBytes } = options
  const authenticate = options.authenticate ?? noAuthenticator
  const router = compileRoutes(options.routes)
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
  options.metrics.gauge('http_requests_in_flight', 'Requests being handled now.', [], (g) => g.set({}, inFlight))

  // Metric series cached per (route, method, status): recording is then two additions, no string building.
  const cells = new Map<string, Map<string, { count: { inc(): void }; duration: { observe(v: number): void } }>>()
  const record = (label: string, method: string, status: number, seconds: number): void => {
    let byLabel = cells.get(label)
    if (!byLabel) cells.set(label, (byLabel = new Map()))
    const key = method + status
    let cell = byLabel.get(key)
    if (!cell) {
      cell = { count: requests.cell({ route: label, method, status: String(status) }), duration: durations.cell({ route: label, method }) }
      byLabel.set(key, cell)
    }
    cell.count.inc()
    cell.duration.observe(seconds)
  }

  let inFlight = 0
  let drained: (() => void) | undefined
  let draining: Promise<void> | undefined
  const host = {
    cors: new CorsPolicy(options.corsOrigins),
    logger,
    draining: false,
    finished(exchange: Exchange, status: number | undefined): void {
      if (status === undefined) aborted.inc({ route: exchange.label })
      else record(exchange.label, exchange.method, status, (performance.now() - exchange.started) / 1000)
      if (status !== undefined && exchange.apiKeyId !== undefined && options.onApiKeyUse) {
        const { apiKeyId: keyId, method, label: route, remoteAddress, requestId } = exchange
        options.onApiKeyUse({ keyId, method, route, status, remoteAddress, requestId })
      }
    },
    released(): void {
      inFlight--
      if (host.draining && inFlight === 0) drained?.()
    },
  }

  const handle = (res: HttpResponse, req: HttpRequest): void => {
    const method = req.getMethod().toUpperCase()
    const path = req.getUrl()
    const rawQuery = req.getQuery()
    const headers: Record<string, string> = {}
    req.forEach((key, value) => {
      headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`
    })
    const incomingId = headers['x-request-id']
    const requestId = incomingId !== undefined && requestIdPattern.test(incomingId) ? incomingId : randomUUID()
    const exchange = new Exchange(res, method, requestId, headers['origin'], host)
    inFlight++
    res.onAborted(() => exchange.abort())
    // Kept-alive connections outlive the closed listen socket: whatever they send now is turned away.
    if (host.draining) return exchange.sendError(new ServiceError('shutting_down', 'this node is shutting down; retry'), true)

    const declared = headers['content-length']
    const declaredLength = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : undefined
    // A body we never read must not be parsed as the next request on this connection.
    const hasBody = (declaredLength ?? 0) > 0 || headers['transfer-encoding'] !== undefined

    if (!knownMethods.has(method) || method === 'OPTIONS') return answerOptions(exchange, router.allowed(path), path, headers, hasBody)

    const match = router.match(method as HttpMethod, path)
    if (match.kind === 'not_found') return exchange.sendError(new ServiceError('route_not_found', `no route for ${method} ${path}`), hasBody)
    if (match.kind === 'bad_path') return exchange.sendError(new ServiceError('validation_failed', match.reason), hasBody)
    if (match.kind === 'method_not_allowed') {
      exchange.label = 'method_not_allowed'
      return exchange.sendError(methodNotAllowed(method, path, match.allowed), hasBody)
    }
    const compiled = match.value
    const route = compiled.route
    exchange.label = route.path
    exchange.errorOnly = route.errorBody === 'error-only'
    exchange.errorCoded = route.errorBody === 'coded'
    exchange.errorOAuth = route.errorBody === 'oauth'
    exchange.invalidRequestCode = route.invalidRequestCode

    let bodyRead = !hasBody
    const onError = (error: unknown): void => {
      // A body still arriving (refused as too large, or its sender refused) is not read to the end: close instead.
      const closeAfter = !bodyRead || (error instanceof ServiceError && error.code === 'payload_too_large')
      try {
        exchange.sendError(error, closeAfter)
      } catch (sendFailure) {
        logger.error('could not send an error response', { requestId, error: sendFailure })
      }
    }
    const rawParsedQuery = parseQuery(rawQuery)
    // Without a body, a credential or an asynchronous handler, the whole exchange completes in this callback.
    const run = (body: unknown, principal: Principal, bodyStream?: RequestBodyStream): void => {
      if (principal.kind === 'api_key') {
        exchange.apiKeyId = principal.keyId
        // Read while `res` is valid: the usage log needs it after the response has ended.
        void exchange.remoteAddress
      }
      const params = validate(compiled.params, match.params) as Record<string, string>
      const query = validate(compiled.query, rawParsedQuery) as Record<string, string | string[]>
      let signal: AbortSignal | undefined
      if (route.abortSignal === true) {
        const controller = new AbortController()
        const previousAbort = exchange.onAbort
        exchange.onAbort = () => {
          previousAbort?.()
          controller.abort()
        }
        signal = controller.signal
      }
      const request: RouteRequest = {
        method: method as HttpMethod,
        signal,
        path,
        body: validate(compiled.body, body) as undefined,
        query,
        params,
        headers,
        requestId,
        principal,
        bodyStream,
        get remoteAddress() {
          return exchange.remoteAddress
        },
      }
      runHandler(exchange, route, request, services, onError, options.requestTimeoutMs)
    }
    try {
      const isPublic = route.auth.kind === 'public'
      if (!isBodyMethod(method as HttpMethod)) {
        if (isPublic || (route.auth.kind === 'organization' && route.auth.signedUrl === true && rawParsedQuery['signature'] !== undefined)) {
          return run(undefined, anonymous)
        }
        authenticate(route.auth, headers, rawParsedQuery).then((principal) => run(undefined, principal)).catch(onError)
        return
      }
      if (route.streamBody !== undefined) {
        const stream = openBodyStream(res, exchange, route.streamBody, route.streamBody.limitBytes(services), declaredLength)
        stream.once('end', () => (bodyRead = true))
        authenticate(route.auth, headers, rawParsedQuery)
          .then((principal) => run(undefined, principal, stream))
          .catch((error: unknown) => {
            stream.destroy()
            onError(error)
          })
        return
      }
      // The body is read from the start (uWS hands out chunks only to a reader already attached);
      // the credential is checked meanwhile, and a refusal answers without waiting for the rest.
      const body = readBody(res, bodyLimitBytes, declaredLength, exchange).then((raw) => {
        bodyRead = true
        return raw
      })
      const principal = isPublic ? Promise.resolve(anonymous) : authenticate(route.auth, headers, rawParsedQuery)
      principal.catch(onError)
      Promise.all([body, principal])
        .then(([raw, who]) => run(parseBody(raw, headers['content-type'], compiled, route), who))
        .catch(onError)
    } catch (error) {
      onError(error)
    }
  }

  return {
    handle,
    get inFlight() {
      return inFlight
    },
    drain(timeoutMs: number) {
      draining ??= new Promise<void>((done) => {
        host.draining = true
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
      return draining
    },
  }
}

/** The body stays on the socket: the handler reads it as a stream once the credential checks out. */
function openBodyStream(
  res: HttpResponse,
  exchange: Exchange,
  spec: { overheadBytes: number; limitName: string },
  limitBytes: number,
  declaredLength: number | undefined,
): RequestBodyStream {
  const tooLarge = (): ServiceError => payloadTooLarge(limitBytes, spec.limitName)
  if (declaredLength !== undefined && declaredLength > limitBytes + spec.overheadBytes) throw tooLarge()
  const stream = new RequestBodyStream(res, limitBytes + spec.overheadBytes, () => !exchange.aborted && !exchange.done, tooLarge)
  exchange.onAbort = () => stream.abort()
  return stream
}

/** OPTIONS (the allowed methods, and a CORS preflight's answer) or a method no route has. */
function answerOptions(exchange: Exchange, allowed: readonly string[], path: string, headers: Readonly<Record<string, string>>, hasBody: boolean): void {
  if (allowed.length === 0) return exchange.sendError(new ServiceError('route_not_found', `no route for ${path}`), hasBody)
  if (exchange.method !== 'OPTIONS') return exchange.sendError(methodNotAllowed(exchange.method, path, allowed), hasBody)
  exchange.label = 'preflight'
  const preflight = headers['access-control-request-method'] !== undefined ? exchange.host.cors.preflightHeaders(exchange.origin, allowed) : []
  exchange.send(204, undefined, undefined, [['allow', [...allowed, 'OPTIONS'].join(', ')], ...preflight], hasBody)
}

/**
 * Calls the handler and sends what it answers. A synchronous answer is sent at once (no promise,
 * no timer: the common fast path); an asynchronous one races the request deadline. The route and
 * request come as arguments, not as a closure: a closure per request cost 12% of GET /healthz per
 * server CPU-second in bench/http-floor (0.114 against 0.131 of bare uWS).
 */
function runHandler<Svc>(
  exchange: Exchange,
  route: Route<RouteSchemas, Svc>,
  request: RouteRequest,
  services: Svc,
  onError: (error: unknown) => void,
  timeoutMs: number,
): void {
  exchange.holdForHandler()
  let reply: Promise<Reply> | Reply
  try {
    reply = route.handler(request, services)
  } catch (error) {
    exchange.handlerSettled()
    throw error
  }
  if (!(reply instanceof Promise)) {
    try {
      exchange.sendReply(reply)
    } finally {
      exchange.handlerSettled()
    }
    return
  }
  const deadline = setTimeout(() => onError(new ServiceError('request_timeout', `no answer within ${timeoutMs} ms; retry if the request is idempotent`)), timeoutMs)
  reply
    .then((r) => exchange.sendReply(r))
    .catch(onError)
    .finally(() => {
      clearTimeout(deadline)
      exchange.handlerSettled()
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
  if (route.formBody === true && contentType !== undefined && /^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType)) return parseForm(raw)
  if (contentType !== undefined && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
    const shown = contentType.slice(0, 100)
    throw new ServiceError(
      'unsupported_media_type',
      route.formBody === true
        ? `Content-Type '${shown}' is not JSON nor a form; send application/x-www-form-urlencoded or application/json`
        : `Content-Type '${shown}' is not JSON; send application/json`,
    )
  }
  const parsed = parseJsonText(raw, 'body')
  if (!parsed.ok) throw new ServiceError(parsed.code, parsed.reason)
  return parsed.value
}

/** A form body's fields as strings; each name at most once (RFC 6749 §3.2), and UTF-8 only. */
function parseForm(raw: Buffer): Record<string, string> {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw)
  } catch {
    throw new ServiceError('invalid_unicode', 'body: the form is not UTF-8')
  }
  const out: Record<string, string> = Object.create(null) as Record<string, string>
  for (const [key, value] of new URLSearchParams(text)) {
    if (key in out) throw new ServiceError('validation_failed', `body.${key.slice(0, 60)} is sent more than once`)
    out[key] = value
  }
  return { ...out }
}

function validate(validator: Validator<unknown> | undefined, value: unknown): unknown {
  if (!validator) return value
  const result = validator(value)
  if (!result.ok) throw new ServiceError('validation_failed', result.reason)
  return result.value
}

export function parseQuery(raw: string): Record<string, string | string[]> {
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
