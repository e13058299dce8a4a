/**
 * The bridge's side of the service's HTTP API: one JSON request at a time, bounded by a deadline on
 * the bridge's clock, each answer read through the response schema the service publishes for it
 * (protocol/schemas), so a service that answers something else is a clear error, not a crash later.
 */
import type { TSchema, Static } from '@sinclair/typebox'
import { compileResponseValidator, type Validator } from '../../protocol/schemas/validator.js'
import type { Timers } from '../../actors/clock.js'

/** The service answered 4xx: understood and refused; sending it again changes nothing. */
export class ServiceRefused extends Error {
  override name = 'ServiceRefused'
  readonly status: number
  /** The error code of the body (`{error}`), when it has one. */
  readonly code: string | undefined
  /** Seconds the service asked to wait (429). */
  readonly retryAfterSeconds: number | undefined

  constructor(status: number, code: string | undefined, message: string, retryAfterSeconds: number | undefined) {
    super(message)
    this.status = status
    this.code = code
    this.retryAfterSeconds = retryAfterSeconds
  }
}

/** No usable answer: the service could not be reached, did not answer in time, or answered 5xx. Safe to try again for idempotent requests. */
export class ServiceUnavailable extends Error {
  override name = 'ServiceUnavailable'
  /** Seconds the service asked to wait (503). */
  readonly retryAfterSeconds: number | undefined

  constructor(message: string, retryAfterSeconds: number | undefined) {
    super(message)
    this.retryAfterSeconds = retryAfterSeconds
  }
}

export interface ServiceClientOptions {
  /** The service's base URL (http or https), without a trailing path. */
  url: string
  /** The paired key, once there is one. */
  apiKey?: string
  /** A request's deadline, answer included. */
  timeoutMs?: number
  timers: Timers
}

const validators = new WeakMap<TSchema, Validator<unknown>>()

function validatorOf<S extends TSchema>(schema: S): Validator<Static<S>> {
  let validator = validators.get(schema)
  if (validator === undefined) validators.set(schema, (validator = compileResponseValidator(schema)))
  return validator as Validator<Static<S>>
}

export class ServiceClient {
  readonly url: string
  readonly #o: ServiceClientOptions

  constructor(options: ServiceClientOptions) {
    this.#o = options
    this.url = options.url.replace(/\/+$/, '')
  }

  /** A client that sends `apiKey` with every request. */
  withKey(apiKey: string): ServiceClient {
    return new ServiceClient({ ...this.#o, apiKey })
  }

  /**
   * `method path` with a JSON body; the answer's body read as `schema`. Rejects with ServiceRefused
   * (4xx), ServiceUnavailable (no answer, 5xx) or an Error naming the field a 2xx body gets wrong.
   */
  async json<S extends TSchema>(method: string, path: string, schema: S, body?: unknown): Promise<Static<S>> {
    const { status, text, retryAfter } = await this.#send(method, path, body)
    const parsed = parseJson(text)
    if (status >= 500) throw new ServiceUnavailable(`${method} ${path}: the service answered ${status}${describeError(parsed)}`, retryAfter)
    if (status >= 400) {
      const code = typeof (parsed as { error?: unknown })?.error === 'string' ? (parsed as { error: string }).error : undefined
      throw new ServiceRefused(status, code, `${method} ${path}: the service answered ${status}${describeError(parsed)}`, retryAfter)
    }
    const read = validatorOf(schema)(parsed)
    if (!read.ok) throw new Error(`${method} ${path}: the service's answer is not what this bridge reads (${read.reason}); are the bridge and the service the same version?`)
    return read.value
  }

  async #send(method: string, path: string, body: unknown): Promise<{ status: number; text: string; retryAfter: number | undefined }> {
    const timeoutMs = this.#o.timeoutMs ?? 30_000
    const abort = new AbortController()
    const timer = this.#o.timers.setTimeout(() => abort.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
    try {
      const res = await fetch(`${this.url}${path}`, {
        method,
        headers: {
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.#o.apiKey === undefined ? {} : { 'x-api-key': this.#o.apiKey }),
        },
        body: body === undefined ? null : JSON.stringify(body),
        signal: abort.signal,
      })
      const text = await res.text()
      return { status: res.status, text, retryAfter: retryAfterSeconds(res.headers.get('retry-after')) }
    } catch (error) {
      throw new ServiceUnavailable(`${method} ${this.url}${path}: ${reasonOf(error)}`, undefined)
    } finally {
      this.#o.timers.clearTimeout(timer)
    }
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

function describeError(body: unknown): string {
  if (typeof body !== 'object' || body === null) return ''
  const { error, message } = body as { error?: unknown; message?: unknown }
  const parts = [typeof error === 'string' ? error : undefined, typeof message === 'string' ? message : undefined].filter((p) => p !== undefined)
  return parts.length === 0 ? '' : ` (${parts.join(': ')})`
}

function retryAfterSeconds(header: string | null): number | undefined {
  if (header === null) return undefined
  const seconds = Number(header)
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined
}

/** fetch's "fetch failed" hides the reason in `cause` (refused, not resolved, reset). */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause
  if (typeof cause?.code === 'string') return cause.code === 'ECONNREFUSED' ? 'connection refused (is the service running at this address?)' : cause.code
  if (error instanceof Error && error.name === 'AbortError') return String((error as { cause?: unknown }).cause ?? error.message)
  return error instanceof Error ? error.message : String(error)
}
