/**
 * One request/response on uWS: its lifecycle (abort, finish) and the only code
 * that writes to the response. A class rather than closures, so the hot path
 * allocates one object per request, not five functions.
 *
 * After an abort, or once the response ended, `res` is never touched again
 * (docs/development.md): every write goes through `send`, which checks both.
 */
import type { TrustedProxies } from './client-address.js'
import { performance } from 'node:perf_hooks'
import type { Readable } from 'node:stream'
import { errorBody, errorCodes, ServiceError, type ErrorBody, type ErrorCode, type ErrorCodeInfo } from '../../protocol/errors.js'
import type { Logger } from '../observability/log.js'
import { translateStoreError } from '../storage/errors.js'
import { RequestAborted, type RequestLifecycle } from './body.js'
import type { CorsPolicy } from './cors.js'
import type { Reply } from './route.js'
import { nextRequestNumber, requestIdBytes, requestIdText } from './request-id.js'
import { statusLine } from './status.js'
import type { HttpResponse } from './uws.js'

export const jsonContentType = 'application/json; charset=utf-8'

/** What every exchange of one server shares. */
export interface ExchangeHost {
  readonly cors: CorsPolicy
  /** Whose X-Forwarded-For is believed (src/http/client-address.ts). */
  readonly proxies?: TrustedProxies
  readonly logger: Logger
  /** True once shutdown began: responses then close their connection. */
  readonly draining: boolean
  /** Called exactly once per exchange: with the status sent, or undefined when the client aborted. */
  finished(exchange: Exchange, status: number | undefined): void
  /**
   * Called exactly once, when the response is over (sent or aborted) and the
   * handler, if one ran, has settled: only then may a drain consider it gone.
   */
  released(exchange: Exchange): void
}

export class Exchange implements RequestLifecycle {
  readonly started = performance.now()
  readonly res: HttpResponse
  readonly method: string
  readonly origin: string | undefined
  readonly host: ExchangeHost
  /** Metrics label: the route template, or a fixed word for requests no route took. */
  label = 'unmatched'
  /** The matched route answers 400/404/500 with {error} alone (docs/errors.md). */
  errorOnly = false
  /** Error bodies carry `code` too (printer-event routes). */
  errorCoded = false
  /** RFC 6749 error bodies: `error_description` beside `message` (Route.errorBody 'oauth'). */
  errorOAuth = false
  /** The route's own code for request faults (Route.invalidRequestCode). */
  invalidRequestCode: ErrorCode | undefined
  /** Set when the caller authenticated with an API key (for its usage log). */
  apiKeyId: string | undefined = undefined
  aborted = false
  done = false
  /** Answered inside uWS's request callback: no abort handler is needed (nor may one be added then). */
  endedInCallback = false
  onAbort: (() => void) | undefined = undefined
  #remoteAddress: string | undefined
  /** The id the client sent (x-request-id), else undefined and the id is #requestNumber's. */
  #requestId: string | undefined
  readonly #requestNumber: number
  /** The response, plus one for a handler while it runs. */
  #holds = 1

  /** `requestId`: the id the client sent, when it is a usable one; otherwise the service numbers the request. */
  /** The request's X-Forwarded-For, read while uWS's request was valid; believed only from a trusted proxy. */
  readonly #forwardedFor: string | undefined

  constructor(res: HttpResponse, method: string, requestId: string | undefined, origin: string | undefined, host: ExchangeHost, forwardedFor?: string) {
    this.#forwardedFor = forwardedFor
    this.res = res
    this.method = method
    this.#requestId = requestId
    this.#requestNumber = requestId === undefined ? nextRequestNumber() : 0
    this.origin = origin
    this.host = host
  }

  /** Text only when read: most requests need it only as the bytes of their response header. */
  get requestId(): string {
    return (this.#requestId ??= requestIdText(this.#requestNumber))
  }

  /** The x-request-id header's value: the client's text, or bytes valid until the next call. */
  requestIdHeader(): string | Buffer {
    return this.#requestId ?? requestIdBytes(this.#requestNumber)
  }

  /**
   * The client's address (behind a trusted proxy, the one its X-Forwarded-For names). Read on
   * demand: most requests never need it, and `res` stays valid until the response ends.
   */
  get remoteAddress(): string {
    if (this.#remoteAddress === undefined) {
      const peer = this.aborted || this.done ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString()
      this.#remoteAddress = this.host.proxies === undefined ? peer : this.host.proxies.clientOf(peer, this.#forwardedFor)
    }
    return this.#remoteAddress
  }

  abort(): void {
    this.aborted = true
    this.onAbort?.()
    this.#finish(undefined)
  }

  /** A handler starts: the exchange stays in flight until it settles, even if the client goes away. */
  holdForHandler(): void {
    this.#holds++
  }

  handlerSettled(): void {
    this.#release()
  }

  send(status: number, payload: string | Uint8Array | undefined, contentType: string | undefined, extra: readonly (readonly [string, string])[], closeAfter: boolean): void {
    if (this.aborted || this.done) return
    // Everything is checked before the first write: a bad header must not leave half a response on the wire.
    for (const [name, value] of extra) checkHeader(name, value)
    // Written by one module-level function rather than a closure per response (bench/http-floor).
    writing = this
    outStatus = status
    outPayload = payload
    outContentType = contentType
    outExtra = extra
    outClose = closeAfter || this.host.draining
    try {
      // Inside uWS's own request callback the response is corked already; later (after an await) it is not.
      if (this.res === corkedByUws) writeResponse()
      else this.res.cork(writeResponse)
    } finally {
      writing = undefined
      outPayload = undefined
      outExtra = noHeaders
    }
    this.#finish(status)
  }

  sendReply(reply: Reply | undefined): void {
    if (reply === null || typeof reply !== 'object') throw new TypeError('a route handler returned no reply object')
    const status = reply.status ?? 200
    const headers = reply.headers === undefined ? noHeaders : Object.entries(reply.headers)
    if (reply.stream !== undefined) {
      const contentType = reply.contentType ?? 'application/octet-stream'
      if (reply.stream.size === undefined) return this.#sendChunked(status, contentType, headers, reply.stream.body)
      return this.#sendStream(status, contentType, headers, reply.stream.body, reply.stream.size)
    }
    if (reply.raw !== undefined) this.send(status, reply.raw, reply.contentType ?? 'application/octet-stream', headers, false)
    else this.send(status, reply.body === undefined ? undefined : JSON.stringify(reply.body), reply.contentType ?? jsonContentType, headers, false)
  }

  /**
   * Streams `body` (exactly `size` bytes) with uWS backpressure: a chunk the
   * socket cannot take now pauses the source until onWritable says it drained,
   * so a slow client never makes the server hold a file in memory. A source
   * failing after the headers went out can only cut the connection.
   */
  #sendStream(status: number, contentType: string, extra: readonly [string, string][], body: Readable, size: number): void {
    if (this.aborted || this.done) {
      body.destroy()
      return
    }
    const headers = this.#headers(contentType, extra)
    const res = this.res
    const close = this.host.draining
    if (this.method === 'HEAD' || size === 0) {
      body.destroy()
      res.cork(() => {
        res.writeStatus(statusLine(status))
        for (const [name, value] of headers) res.writeHeader(name, value)
        if (this.method === 'HEAD') res.endWithoutBody(size, close)
        else res.end('', close)
      })
      this.endedInCallback = res === corkedByUws && this.method !== 'HEAD'
      return this.#finish(status)
    }
    this.#openStream(status, headers, body)
    let pending: { chunk: Buffer; offset: number } | undefined
    const write = (chunk: Buffer, offset: number): boolean => {
      let result: [boolean, boolean] = [false, false]
      res.cork(() => {
        result = res.tryEnd(chunk, size)
      })
      const [ok, done] = result
      if (done) {
        body.destroy()
        this.#finish(status)
        return true
      }
      if (!ok) pending = { chunk, offset }
      return ok
    }
    res.onWritable((offset) => {
      if (pending === undefined || this.done || this.aborted) return true
      const { chunk, offset: start } = pending
      pending = undefined
      const ok = write(chunk.subarray(offset - start), offset)
      if (ok && !this.done) body.resume()
      return ok
    })
    body.on('data', (chunk: Buffer) => {
      if (this.done || this.aborted) return
      if (!write(chunk, res.getWriteOffset())) body.pause()
    })
    body.on('error', (error) => {
      if (this.done || this.aborted) return
      this.host.logger.warn('a streamed response failed after its headers were sent; closing the connection', { requestId: this.requestId, error })
      res.close()
    })
    body.on('end', () => {
      if (this.done || this.aborted || pending !== undefined) return
      // The source ended short of `size`: the response can never complete.
      this.host.logger.warn('a streamed response ended short of its length; closing the connection', { requestId: this.requestId })
      res.close()
    })
  }

  /**
   * Streams `body` until it ends, chunked (no length known: an event stream). Each chunk is written
   * corked; when uWS reports backpressure the source pauses until onWritable, so a slow client holds at
   * most one chunk beyond the socket's buffer. The source is destroyed when the client goes away.
   */
  #sendChunked(status: number, contentType: string, extra: readonly [string, string][], body: Readable): void {
    if (this.aborted || this.done) {
      body.destroy()
      return
    }
    const res = this.res
    this.#openStream(status, this.#headers(contentType, extra), body)
    res.onWritable(() => {
      if (!this.done && !this.aborted) body.resume()
      return true
    })
    body.on('data', (chunk: Buffer | string) => {
      if (this.done || this.aborted) return
      let ok = true
      res.cork(() => {
        ok = res.write(chunk)
      })
      if (!ok) body.pause()
    })
    body.on('error', (error) => {
      if (this.done || this.aborted) return
      this.host.logger.warn('a streamed response failed after its headers were sent; closing the connection', { requestId: this.requestId, error })
      res.close()
    })
    body.on('end', () => {
      if (this.done || this.aborted) return
      res.cork(() => res.end('', this.host.draining))
      this.#finish(status)
    })
  }

  /** Writes the status line and headers of a streamed answer, and ties the source's life to the exchange's. */
  #openStream(status: number, headers: readonly [string, string][], body: Readable): void {
    const res = this.res
    res.cork(() => {
      res.writeStatus(statusLine(status))
      for (const [name, value] of headers) res.writeHeader(name, value)
    })
    const previousAbort = this.onAbort
    this.onAbort = () => {
      previousAbort?.()
      body.destroy()
    }
  }

  #headers(contentType: string, extra: Iterable<[string, string]>): [string, string][] {
    const headers: [string, string][] = [['content-type', contentType], ['x-request-id', this.requestId]]
    if (this.origin !== undefined || this.host.cors.variesByOrigin) headers.push(...this.host.cors.responseHeaders(this.origin))
    for (const [name, value] of extra) {
      const text = String(value)
      if (/[\r\n]/.test(name) || /[\r\n]/.test(text)) throw new TypeError(`header ${JSON.stringify(name)} has a line break in its name or value`)
      headers.push([name, text])
    }
    return headers
  }

  /** Maps anything thrown to a coded JSON error; never lets a cause leak to the client. */
  sendError(error: unknown, closeAfter: boolean): void {
    if (error instanceof RequestAborted || this.aborted || this.done) return
    let coded = error instanceof ServiceError ? error : translateStoreError(error)
    if (coded !== undefined && this.invalidRequestCode !== undefined && requestFaults.has(coded.code)) {
      coded = new ServiceError(this.invalidRequestCode, coded.message, { extra: coded.extra ?? {}, headers: coded.headers ?? {} })
    }
    if (coded === undefined) {
      this.host.logger.error('request failed', { requestId: this.requestId, route: this.label, method: this.method, error })
      const body = this.errorOnly
        ? { error: 'internal_error' }
        : this.#coded(errorBody('internal_error', `an unexpected error occurred; quote request id ${this.requestId} when reporting it`, this.requestId))
      this.send(500, JSON.stringify(body), jsonContentType, noHeaders, closeAfter)
      return
    }
    const body =
      this.errorOnly && errorOnlyStatuses.has(coded.status)
        ? { error: coded.code }
        : { ...this.#coded(errorBody(coded.code, coded.message, this.requestId)), ...coded.extra }
    const headers = Object.entries(coded.headers ?? {})
    if ((errorCodes[coded.code] as ErrorCodeInfo).retryable === true && coded.headers?.['retry-after'] === undefined) headers.push(['retry-after', '1'])
    this.send(coded.status, JSON.stringify(body), jsonContentType, headers, closeAfter)
  }

  #coded(body: ErrorBody): ErrorBody {
    if (this.errorOAuth) return { ...body, error_description: body.message }
    return this.errorCoded ? { code: body.error, ...body } : body
  }

  #finish(status: number | undefined): void {
    if (this.done) return
    this.done = true
    this.host.finished(this, status)
    this.#release()
  }

  #release(): void {
    if (--this.#holds === 0) this.host.released(this)
  }
}

const noHeaders: readonly [string, string][] = []

/** RFC 9110 §5.5: CR and LF never appear in a field value; letting one through would let a value forge headers. */
function checkHeader(name: string, value: unknown): void {
  const text = String(value)
  if (/[\r\n]/.test(name) || /[\r\n]/.test(text)) throw new TypeError(`header ${JSON.stringify(name)} has a line break in its name or value`)
}

// Header names and the usual values as bytes: uWS copies a JS string into UTF-8 on every call, bytes it takes as they are.
const contentTypeName = Buffer.from('content-type')
const requestIdName = Buffer.from('x-request-id')
const valueBytes = new Map<string, Buffer>()
function bytesOf(value: string): Buffer | string {
  const known = valueBytes.get(value)
  if (known !== undefined) return known
  // Content types are few (the routes'); anything beyond that is written as the string it is.
  if (valueBytes.size >= 64) return value
  const bytes = Buffer.from(value)
  valueBytes.set(value, bytes)
  return bytes
}

/** The response whose uWS request callback is running (synchronously): uWS has corked it already. */
let corkedByUws: HttpResponse | undefined
export function requestCallbackOf(res: HttpResponse | undefined): void {
  corkedByUws = res
}

// The response being written by writeResponse (inside res.cork, which calls it at once).
let writing: Exchange | undefined
let outStatus = 200
let outPayload: string | Uint8Array | undefined
let outContentType: string | undefined
let outExtra: readonly (readonly [string, string])[] = noHeaders
let outClose = false

function writeResponse(): void {
  const exchange = writing!
  const res = exchange.res
  const status = outStatus
  const payload = outPayload
  const close = outClose
  // uWS sends 200 OK unless told otherwise: one native call less on most responses.
  if (status !== 200) res.writeStatus(statusLine(status))
  if (outContentType !== undefined && payload !== undefined) res.writeHeader(contentTypeName, bytesOf(outContentType))
  res.writeHeader(requestIdName, exchange.requestIdHeader())
  if (exchange.origin !== undefined || exchange.host.cors.variesByOrigin) for (const [name, value] of exchange.host.cors.responseHeaders(exchange.origin)) res.writeHeader(name, value)
  for (const [name, value] of outExtra) res.writeHeader(name, String(value))
  // This uWS build: endWithoutBody() sends no length, (0, true) a zero length with close; a bodiless
  // reply of another status is an empty body.
  if (status === 204 || status === 304) close ? res.endWithoutBody(0, true) : res.endWithoutBody()
  else if (payload === undefined) res.end('', close)
  else if (exchange.method === 'HEAD') res.endWithoutBody(typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength, close)
  else res.end(payload, close)
  exchange.endedInCallback = res === corkedByUws
}
/** Refusals of what the request says (not of who sends it) that a route may answer with its own code. */
const requestFaults: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['validation_failed', 'invalid_json', 'invalid_unicode', 'body_required'])
const errorOnlyStatuses = new Set([400, 404, 500])
