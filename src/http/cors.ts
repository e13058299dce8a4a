/**
 * CORS for browser dashboards served from another origin (CORS_ORIGINS).
 * Credentials travel in headers (Authorization, x-api-key), never cookies, so
 * Access-Control-Allow-Credentials is never sent and '*' is safe to offer.
 */

/** Request headers a browser client may send (the rest are CORS-safelisted already). */
const allowedRequestHeaders = 'authorization, content-type, x-api-key, x-organization-id, x-request-id, idempotency-key'
const exposedHeaders = 'x-request-id, retry-after, allow'
const preflightMaxAgeSeconds = '600'

export class CorsPolicy {
  readonly #any: boolean
  readonly #origins: ReadonlySet<string>

  constructor(origins: '*' | readonly string[]) {
    this.#any = origins === '*'
    this.#origins = new Set(origins === '*' ? [] : origins)
  }

  /**
   * With an allow-list the response differs by Origin, so every response says
   * so (Vary), or a shared cache could hand one origin's answer to another.
   */
  get variesByOrigin(): boolean {
    return !this.#any && this.#origins.size > 0
  }

  /** Headers for an ordinary response to a request carrying `origin` (may be empty). */
  responseHeaders(origin: string | undefined): [string, string][] {
    const allow = this.#allowOrigin(origin)
    const headers: [string, string][] = this.variesByOrigin ? [['vary', 'origin']] : []
    if (allow === undefined) return headers
    headers.push(['access-control-allow-origin', allow], ['access-control-expose-headers', exposedHeaders])
    return headers
  }

  /** Headers a preflight of a path that takes `methods` adds to the ordinary ones. */
  preflightHeaders(origin: string | undefined, methods: readonly string[]): [string, string][] {
    const allow = this.#allowOrigin(origin)
    if (allow === undefined) return []
    return [
      ['access-control-allow-methods', methods.join(', ')],
      ['access-control-allow-headers', allowedRequestHeaders],
      ['access-control-max-age', preflightMaxAgeSeconds],
    ]
  }

  #allowOrigin(origin: string | undefined): string | undefined {
    if (origin === undefined || origin === '') return undefined
    if (this.#any) return '*'
    return this.#origins.has(origin) ? origin : undefined
  }
}
