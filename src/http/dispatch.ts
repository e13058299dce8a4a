/**
 * Request dispatch: every request goes through one function that routes,
 * reads and bounds the body, parses and validates, checks the credential,
 * calls the handler and maps whatever it throws to a coded JSON error.
 * Handlers never see uWS. Listening and draining are the server's
 * (server.ts); this module only answers.
 *
 * uWS rules (docs/development.md) are kept here and only here: onAborted is
 * registered before uWS's request callback returns unless the answer was
 * already sent in it, everything needed from `req` is read before the first
 * await, and every write after an await is corked.
 *
 * The path of a request answered at once (a public GET with a synchronous
 * handler) allocates the exchange, the call and the request and nothing
 * else: no closure per request, headers written without copying constant
 * strings (bench/http-floor went from 0.20 to about 0.5 of a bare uWS
 * server per CPU-second with this).
 */
import { TrustedProxies } from './client-address.js'
import { performance } from 'node:perf_hooks'
import { parseJsonText } from '../../protocol/json-text.js'
import { ServiceError } from '../../protocol/errors.js'
import { createResponseCheck, type ResponseCheck } from './response-check.js'
import { compileBodyValidator, compileTextValidator, type Validator } from '../../protocol/schemas/validator.js'
import type { Logger } from '../observability/log.js'
import { latencyBuckets, type MetricsRegistry } from '../observability/metrics.js'
import { payloadTooLarge, readBody } from './body.js'
import { RequestBodyStream } from './body-stream.js'
import { CorsPolicy } from './cors.js'
import { Exchange, requestCallbackOf, type ExchangeHost } from './exchange.js'
import { isBodyMethod, type Principal, type Reply, type Route, type RouteAuth, type RouteRequest, type RouteSchemas } from './route.js'
import { Router, type HttpMethod } from './router.js'
import type { HttpRequest, HttpResponse } from './uws.js'
import type { Timers } from '../../actors/clock.js'

export interface DispatchOptions<Svc> {
  bodyLimitBytes: number
  /** An async handler that has not answered by then gets a 503 request_timeout (it runs on, still counted in flight). */
  requestTimeoutMs: number
  /** The node's clock: the request deadline and the drain's. */
  timers: Timers
  corsOrigins: '*' | readonly string[]
  /** Reverse proxies whose X-Forwarded-For names the client (none: the connection's address is the client's). */
  trustedProxies?: readonly string[] | undefined
  logger: Logger
  metrics: MetricsRegistry
  routes: readonly Route<RouteSchemas, Svc>[]
  services: Svc
  /** Checks the credential for a non-public route; without it only public routes can be called. */
  authenticate?: (auth: RouteAuth, headers: Readonly<Record<string, string>>, query: Readonly<Record<string, string | string[]>>) => Promise<Principal>
  /** Every JSON answer checked against its route's response schema (CHECK_RESPONSES; src/http/response-check.ts). */
  checkResponses?: boolean
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
/** Metric cells are keyed by status × 8 + this (a switch: no hashing of the method string per request). */
function methodIndex(method: string): number {
  switch (method) {
    case 'GET':
      return 0
    case 'HEAD':
      return 1
    case 'POST':
      return 2
    case 'PUT':
      return 3
    case 'PATCH':
      return 4
    case 'DELETE':
      return 5
    case 'OPTIONS':
      return 6
    default:
      return 7
  }
}
const noAuthenticator = async (): Promise<Principal> => {
  throw new ServiceError('unauthorized', 'this route needs a credential')
}

/** The methods a route can have (comparisons, not a Set: no hashing of the string uWS hands over afresh each time). */
const isKnownMethod = (method: string): boolean => methodIndex(method) < 7
const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/

// The headers of the request being read: req.forEach calls one function for every request, not a closure each.
let collecting: Record<string, string> = {}
function collectHeader(key: string, value: string): void {
  const previous = collecting[key]
  collecting[key] = previous === undefined ? value : `${previous}, ${value}`
}

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
  return new HttpDispatcher(options)
}

/** The request metrics, with their series cached per (route, method, status): recording is then two additions, no string building. */
class RequestMetrics {
  readonly #requests
  readonly #durations
  readonly #aborted
  readonly #cells = new Map<string, Map<number, { count: { inc(): void }; duration: { observe(v: number): void } }>>()

  constructor(metrics: MetricsRegistry, inFlight: () => number) {
    this.#requests = metrics.counter('http_requests_total', 'HTTP requests answered, by route template, method and status.', ['route', 'method', 'status'])
    this.#durations = metrics.histogram('http_request_duration_seconds', 'Time from the request line to the last byte of the response, by route template.', ['route', 'method'], latencyBuckets)
    this.#aborted = metrics.counter('http_requests_aborted_total', 'Requests whose client went away before the response.', ['route'])
    metrics.gauge('http_requests_in_flight', 'Requests being handled now.', [], (g) => g.set({}, inFlight()))
  }

  answered(label: string, method: string, status: number, seconds: number): void {
    let byLabel = this.#cells.get(label)
    if (!byLabel) this.#cells.set(label, (byLabel = new Map()))
    const key = status * 8 + methodIndex(method)
    let cell = byLabel.get(key)
    if (!cell) {
      cell = { count: this.#requests.cell({ route: label, method, status: String(status) }), duration: this.#durations.cell({ route: label, method }) }
      byLabel.set(key, cell)
    }
    cell.count.inc()
    cell.duration.observe(seconds)
  }

  aborted(label: string): void {
    this.#aborted.inc({ route: label })
  }
}

/** What a Call needs of its dispatcher (given, not closed over: a Call is made per request). */
interface CallContext<Svc> {
  readonly logger: Logger
  readonly services: Svc
  readonly requestTimeoutMs: number
  readonly checkResponse: ResponseCheck | undefined
  readonly timers: Timers
}

/**
 * The dispatcher of one server, and what its exchanges share (ExchangeHost): the CORS policy, the
 * trusted proxies, the metrics of every answer, the count of requests in flight and the drain.
 */
class HttpDispatcher<Svc> implements Dispatcher, ExchangeHost {
  readonly cors: CorsPolicy
  readonly proxies: TrustedProxies
  readonly logger: Logger
  draining = false
  readonly #options: DispatchOptions<Svc>
  readonly #router: Router<CompiledRoute<Svc>>
  readonly #authenticate: NonNullable<DispatchOptions<Svc>['authenticate']>
  readonly #metrics: RequestMetrics
  readonly #context: CallContext<Svc>
  #inFlight = 0
  #drained: (() => void) | undefined
  #drainDone: Promise<void> | undefined
  /** The exchange #begin opened (read by handle once it returns). */
  #opened: Exchange | undefined

  constructor(options: DispatchOptions<Svc>) {
    this.#options = options
    this.logger = options.logger
    this.cors = new CorsPolicy(options.corsOrigins)
    this.proxies = new TrustedProxies(options.trustedProxies ?? [])
    this.#router = compileRoutes(options.routes)
    this.#authenticate = options.authenticate ?? noAuthenticator
    this.#metrics = new RequestMetrics(options.metrics, () => this.#inFlight)
    this.#context = {
      logger: options.logger,
      services: options.services,
      requestTimeoutMs: options.requestTimeoutMs,
      checkResponse: options.checkResponses === true ? createResponseCheck() : undefined,
      timers: options.timers,
    }
  }

  get inFlight(): number {
    return this.#inFlight
  }

  finished(exchange: Exchange, status: number | undefined): void {
    if (status === undefined) return this.#metrics.aborted(exchange.label)
    this.#metrics.answered(exchange.label, exchange.method, status, (performance.now() - exchange.started) / 1000)
    const onApiKeyUse = this.#options.onApiKeyUse
    if (exchange.apiKeyId !== undefined && onApiKeyUse) {
      const { apiKeyId: keyId, method, label: route, remoteAddress, requestId } = exchange
      onApiKeyUse({ keyId, method, route, status, remoteAddress, requestId })
    }
  }

  released(): void {
    this.#inFlight--
    if (this.draining && this.#inFlight === 0) this.#drained?.()
  }

  readonly handle = (res: HttpResponse, req: HttpRequest): void => {
    requestCallbackOf(res)
    this.#opened = undefined
    try {
      this.#begin(res, req)
    } finally {
      requestCallbackOf(undefined)
      const exchange = this.#opened as Exchange | undefined
      this.#opened = undefined
      // Watched for an abort only if the answer is still to come: a response sent within this
      // callback needs no abort handler (one closure and native call less per request). uWS wants
      // it registered before the callback returns, which this still is.
      if (exchange !== undefined && !exchange.endedInCallback && exchange.method !== 'HEAD') {
        const pending = exchange
        try {
          res.onAborted(() => pending.abort())
        } catch (error) {
          // Answered by a path that did not say so: uWS refuses the handler, and none is needed.
          if (!pending.done) throw error
        }
      }
    }
  }

  drain(timeoutMs: number): Promise<void> {
    this.#drainDone ??= new Promise<void>((done) => {
      this.draining = true
      if (this.#inFlight === 0) return done()
      const timer = this.#options.timers.setTimeout(() => {
        this.logger.warn('shutdown timeout: requests still in flight', { inFlight: this.#inFlight })
        done()
      }, timeoutMs)
      this.#drained = () => {
        this.#options.timers.clearTimeout(timer)
        done()
      }
    })
    return this.#drainDone
  }

  /** Reads what is needed of `req` (before any await, as uWS requires), routes it and starts its Call. */
  #begin(res: HttpResponse, req: HttpRequest): void {
    const sent = req.getCaseSensitiveMethod()
    const method = isKnownMethod(sent) ? sent : sent.toUpperCase()
    const path = req.getUrl()
    const rawQuery = req.getQuery()
    const headers: Record<string, string> = {}
    collecting = headers
    req.forEach(collectHeader)
    const incomingId = headers['x-request-id']
    const exchange = new Exchange(res, method, incomingId !== undefined && requestIdPattern.test(incomingId) ? incomingId : undefined, headers['origin'], this, headers['x-forwarded-for'])
    this.#opened = exchange
    this.#inFlight++
    // A HEAD answer (endWithoutBody with the length of a body not sent) leaves uWS wanting an abort
    // handler even once answered, and refusing one after: it gets one from the start.
    if (method === 'HEAD') res.onAborted(() => exchange.abort())
    // Kept-alive connections outlive the closed listen socket: whatever they send now is turned away.
    if (this.draining) return exchange.sendError(new ServiceError('shutting_down', 'this node is shutting down; retry'), true)

    const declared = headers['content-length']
    const declaredLength = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : undefined
    // A body we never read must not be parsed as the next request on this connection.
    const hasBody = (declaredLength ?? 0) > 0 || headers['transfer-encoding'] !== undefined

    if (method === 'OPTIONS' || !isKnownMethod(method)) return answerOptions(exchange, this.#router.allowed(path), path, headers, hasBody)

    const match = this.#router.match(method as HttpMethod, path)
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

    const call = new Call(this.#context, exchange, compiled, match.params, parseQuery(rawQuery), path, headers, !hasBody)
    try {
      this.#start(call, res, declaredLength)
    } catch (error) {
      call.fail(error)
    }
  }

  /**
   * Checks the credential and reads the body, then runs the handler: at once without a body, a
   * credential or an asynchronous handler; a streamed body after the credential; a JSON body read
   * from the start (uWS hands out chunks only to a reader already attached) while the credential is
   * checked, a refusal answering without waiting for the rest.
   */
  #start(call: Call<Svc>, res: HttpResponse, declaredLength: number | undefined): void {
    const { exchange, compiled, headers, rawQuery } = call
    const route = compiled.route
    const isPublic = route.auth.kind === 'public'
    if (!isBodyMethod(exchange.method as HttpMethod)) {
      if (isPublic || (route.auth.kind === 'organization' && route.auth.signedUrl === true && rawQuery['signature'] !== undefined)) {
        return call.run(undefined, anonymous)
      }
      this.#authenticate(route.auth, headers, rawQuery).then(
        (principal) => call.run(undefined, principal),
        (error: unknown) => call.fail(error),
      )
      return
    }
    if (route.streamBody !== undefined) {
      const stream = openBodyStream(res, exchange, route.streamBody, route.streamBody.limitBytes(this.#context.services), declaredLength)
      stream.once('end', () => (call.bodyRead = true))
      this.#authenticate(route.auth, headers, rawQuery)
        .then((principal) => call.run(undefined, principal, stream))
        .catch((error: unknown) => {
          stream.destroy()
          call.fail(error)
        })
      return
    }
    const body = readBody(res, this.#options.bodyLimitBytes, declaredLength, exchange).then((raw) => {
      call.bodyRead = true
      return raw
    })
    const principal = isPublic ? Promise.resolve(anonymous) : this.#authenticate(route.auth, headers, rawQuery)
    const fail = (error: unknown): void => call.fail(error)
    principal.catch(fail)
    Promise.all([body, principal])
      .then(([raw, who]) => call.run(parseBody(raw, headers['content-type'], compiled, route), who))
      .catch(fail)
  }
}

/** One routed request from its credential to its handler: an object per request, not closures (bench/http-floor). */
class Call<Svc> {
  readonly context: CallContext<Svc>
  readonly exchange: Exchange
  readonly compiled: CompiledRoute<Svc>
  readonly rawParams: Record<string, string>
  readonly rawQuery: Record<string, string | string[]>
  readonly path: string
  readonly headers: Record<string, string>
  /** The request body was read to its end (else an error answer closes the connection). */
  bodyRead: boolean

  constructor(
    context: CallContext<Svc>,
    exchange: Exchange,
    compiled: CompiledRoute<Svc>,
    rawParams: Record<string, string>,
    rawQuery: Record<string, string | string[]>,
    path: string,
    headers: Record<string, string>,
    bodyRead: boolean,
  ) {
    this.context = context
    this.exchange = exchange
    this.compiled = compiled
    this.rawParams = rawParams
    this.rawQuery = rawQuery
    this.path = path
    this.headers = headers
    this.bodyRead = bodyRead
  }

  /** Answers an error; a body still arriving (refused as too large, or its sender refused) is not read to the end: close instead. */
  fail(error: unknown): void {
    const closeAfter = !this.bodyRead || (error instanceof ServiceError && error.code === 'payload_too_large')
    try {
      this.exchange.sendError(error, closeAfter)
    } catch (sendFailure) {
      this.context.logger.error('could not send an error response', { requestId: this.exchange.requestId, error: sendFailure })
    }
  }

  run(body: unknown, principal: Principal, bodyStream?: RequestBodyStream): void {
    const { exchange, compiled, context } = this
    const route = compiled.route
    try {
      if (principal.kind === 'api_key') {
        exchange.apiKeyId = principal.keyId
        // Read while `res` is valid: the usage log needs it after the response has ended.
        void exchange.remoteAddress
      }
      const params = validate(compiled.params, this.rawParams) as Record<string, string>
      const query = validate(compiled.query, this.rawQuery) as Record<string, string | string[]>
      const signal = route.abortSignal === true ? abortSignalOf(exchange) : undefined
      const request = new IncomingRequest(exchange, exchange.method as HttpMethod, this.path, validate(compiled.body, body), query, params, this.headers, principal, bodyStream, signal)
      runHandler(exchange, route, request, context, this)
    } catch (error) {
      this.fail(error)
    }
  }
}

/** A signal aborted when the client goes away (for the handlers that ask for one). */
function abortSignalOf(exchange: Exchange): AbortSignal {
  const controller = new AbortController()
  const previousAbort = exchange.onAbort
  exchange.onAbort = () => {
    previousAbort?.()
    controller.abort()
  }
  return controller.signal
}

/** What a handler is given: a class, so every request has one shape and the address is read only on demand. */
class IncomingRequest implements RouteRequest {
  readonly method: HttpMethod
  readonly path: string
  readonly body: undefined
  readonly query: Record<string, string | string[]>
  readonly params: Record<string, string>
  readonly headers: Readonly<Record<string, string>>
  readonly principal: Principal
  readonly bodyStream: RequestBodyStream | undefined
  readonly signal: AbortSignal | undefined
  readonly #exchange: Exchange

  constructor(
    exchange: Exchange,
    method: HttpMethod,
    path: string,
    body: unknown,
    query: Record<string, string | string[]>,
    params: Record<string, string>,
    headers: Readonly<Record<string, string>>,
    principal: Principal,
    bodyStream: RequestBodyStream | undefined,
    signal: AbortSignal | undefined,
  ) {
    this.#exchange = exchange
    this.method = method
    this.path = path
    // Validated against the route's body schema: its static type is the route's, not this class's.
    this.body = body as undefined
    this.query = query
    this.params = params
    this.headers = headers
    this.principal = principal
    this.bodyStream = bodyStream
    this.signal = signal
  }

  get requestId(): string {
    return this.#exchange.requestId
  }

  /** Read on demand (most handlers never need it). */
  get remoteAddress(): string {
    return this.#exchange.remoteAddress
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
  context: CallContext<Svc>,
  call: { fail(error: unknown): void },
): void {
  const { services, checkResponse, timers, requestTimeoutMs: timeoutMs } = context
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
      checkResponse?.(route, reply)
      exchange.sendReply(reply)
    } finally {
      exchange.handlerSettled()
    }
    return
  }
  const onError = (error: unknown): void => call.fail(error)
  const deadline = timers.setTimeout(() => onError(new ServiceError('request_timeout', `no answer within ${timeoutMs} ms; retry if the request is idempotent`)), timeoutMs)
  reply
    .then((r) => {
      checkResponse?.(route, r)
      exchange.sendReply(r)
    })
    .catch(onError)
    .finally(() => {
      timers.clearTimeout(deadline)
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

/** `raw` is what uWS's getQuery gives: undefined when the URL has no '?' at all. */
export function parseQuery(raw: string | undefined): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  if (raw === undefined || raw === '') return out
  for (const [key, value] of new URLSearchParams(raw)) {
    const prior = out[key]
    if (prior === undefined) out[key] = value
    else if (Array.isArray(prior)) prior.push(value)
    else out[key] = [prior, value]
  }
  return out
}
