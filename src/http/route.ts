/**
 * A route is data: method, path, schemas, documentation and a plain async
 * handler of (typed request, services) → reply. The uWS adapter, the
 * validators and the OpenAPI document are all derived from it.
 */
import type { Static, TSchema } from '@sinclair/typebox'
import type { Readable } from 'node:stream'
import type { ErrorBody, ErrorCode } from '../../protocol/errors.js'
import type { HttpMethod } from './router.js'

export interface RouteSchemas {
  body?: TSchema
  query?: TSchema
  params?: TSchema
}

type StaticOr<T, Fallback> = T extends TSchema ? Static<T> : Fallback

export interface RouteRequest<S extends RouteSchemas = RouteSchemas> {
  readonly method: HttpMethod
  readonly path: string
  readonly body: StaticOr<S['body'], undefined>
  readonly query: StaticOr<S['query'], Record<string, string | string[]>>
  readonly params: StaticOr<S['params'], Record<string, string>>
  /** Lower-cased header names. */
  readonly headers: Readonly<Record<string, string>>
  readonly requestId: string
  readonly remoteAddress: string
  /** Resolved from the credential before the handler runs; its kind follows the route's `auth`. */
  readonly principal: Principal
  /** The unread body, for a route with `streamBody` (undefined for every other route). */
  readonly bodyStream?: Readable
  /** Aborted when the client goes away before the answer ended; for a route with `abortSignal` (undefined for every other route). */
  readonly signal?: AbortSignal
}

export interface Reply {
  status?: number
  /** Serialised as JSON unless `raw` is given. */
  body?: unknown
  /** A pre-serialised payload sent as is, with `contentType`. */
  raw?: string | Uint8Array
  contentType?: string
  headers?: Record<string, string>
  /**
   * A body streamed with backpressure: exactly `size` bytes (file downloads), or, with no size, chunked
   * until the source ends (event streams, e.g. MCP's text/event-stream answers).
   */
  stream?: { body: Readable; size?: number }
}

export interface ResponseDoc {
  description: string
  schema?: TSchema
  contentType?: string
}

/** A route's documented answers by status. */
export type Responses = Readonly<Record<number, ResponseDoc>>

type BodyOf<D> = D extends { schema: infer S extends TSchema } ? Static<S> : unknown

/**
 * What a handler may answer: a body of one of its documented schemas (a status without a schema, or a
 * raw or streamed answer, carries any). The status itself is not tied to its schema in the type:
 * TypeScript widens a returned literal (`201`) before the route's own responses are known, so each
 * status would need `as const`; the test run's response check (src/http/response-check.ts) ties them.
 * An error may be answered rather than thrown (an OAuth refusal with its own headers): its body is an
 * ErrorBody. A route whose responses are not known in its type (a list of routes) answers any Reply.
 */
export type ReplyOf<R extends Responses> = number extends keyof R
  ? Reply
  : [keyof R & number] extends [never]
    ? Reply
    : Omit<Reply, 'body'> & { body?: BodyOf<R[keyof R & number]> | ErrorBody }

/**
 * Who may call a route (docs/authentication.md).
 * - `public`: no credential (the reason is documented in the OpenAPI description).
 * - `user`: a signed-in person (bearer session token); no organization involved.
 * - `organization`: acts inside one organization, chosen by x-organization-id
 *   (or an `organizationId` query parameter) or, when the caller has only one,
 *   that one; `admin` routes need the admin role of a signed-in person.
 *   `scope` is what an API key must carry for it (an API key stands in for
 *   the admin role where it holds the scope); a list means any one of them;
 *   `null` means people only.
 */
export type RouteAuth =
  | { kind: 'public'; reason: string }
  | { kind: 'user' }
  | {
      kind: 'organization'
      scope: string | readonly string[] | null
      admin?: boolean
      /** A request carrying a `signature` query parameter comes in as anonymous: the handler checks the signature instead (signed download URLs). */
      signedUrl?: boolean
    }

/** Who is calling, once the credential was checked. */
export type Principal =
  | { kind: 'anonymous' }
  | { kind: 'user'; userId: string }
  | { kind: 'member'; userId: string; organizationId: string; role: 'admin' | 'member' }
  | { kind: 'api_key'; keyId: string; organizationId: string; scopes: ReadonlySet<string> }
  /**
   * A person acting through an OAuth client: the token's scopes, within what their role allows;
   * `bridgeGrant` names the grant when it is a bridge's (it speaks for one host).
   */
  | { kind: 'oauth'; userId: string; clientId: string; organizationId: string; role: 'admin' | 'member'; scopes: ReadonlySet<string>; tokenId: string; bridgeGrant: string | null }

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a list of routes holds every answer type: `any` keeps a typed route assignable to it (TypeScript measures R as invariant through ReplyOf)
export interface Route<S extends RouteSchemas = RouteSchemas, Svc = unknown, R extends Responses = any> {
  readonly method: Exclude<HttpMethod, 'HEAD' | 'OPTIONS'>
  readonly path: string
  readonly operationId: string
  readonly summary: string
  readonly description?: string
  readonly tags: readonly string[]
  readonly auth: RouteAuth
  /** Who may call it, in words, where the auth kind alone does not say (a role checked against the path). */
  readonly access?: string
  readonly schemas: S
  /**
   * The dispatcher does not read the body: the handler gets it as `bodyStream`,
   * bounded by `limitBytes` (uploads). `contentType` and `schema` document it.
   */
  readonly streamBody?: {
    /** The largest content allowed; the body may carry `overheadBytes` more (multipart framing). */
    limitBytes(services: Svc): number
    overheadBytes: number
    /** The setting that sets the limit, named in the 413 message. */
    limitName: string
    contentType: string
    schema: TSchema
  }
  /**
   * The body may also come as application/x-www-form-urlencoded (the OAuth
   * token and revocation endpoints, RFC 6749 §4.1.3): its fields become a
   * flat object of strings, validated by the same schema. A field sent twice
   * is refused (RFC 6749 §3.2).
   */
  readonly formBody?: boolean
  /** The handler gets `signal`, aborted when the client goes away (long-lived answers such as event streams). */
  readonly abortSignal?: boolean
  /** An empty body is read as `{}` (routes whose body is "empty object"). */
  readonly emptyBodyAllowed?: boolean
  /**
   * docs/errors.md: a few routes answer 400/404/500 with `{error}` alone (the
   * auth-code routes). Other statuses keep the full body. `coded`: the
   * printer-event routes (docs/printers-and-events.md) add `code` (= `error`).
   * `oauth`: the OAuth endpoints answer RFC 6749 / RFC 7591 bodies, with
   * `error_description` (= `message`) beside our own fields.
   */
  readonly errorBody?: 'error-only' | 'coded' | 'oauth'
  /**
   * The code of a 400 for a body, query or path the route cannot use (unknown
   * or invalid fields, unreadable JSON, no body). docs/displays.md answers all of
   * them with MQTT_DISPLAY_REQUEST_INVALID; other routes use validation_failed,
   * invalid_json and body_required.
   */
  readonly invalidRequestCode?: ErrorCode
  readonly responses: R
  /** Coded errors the handler itself may throw; framing errors are added for every route. */
  readonly errors?: readonly ErrorCode[]
  handler(request: RouteRequest<S>, services: Svc): Promise<ReplyOf<R>> | ReplyOf<R>
}

/** A route, typed: its handler must answer each status with that status's schema. */
export function defineRoute<S extends RouteSchemas, Svc, const R extends Responses>(route: Route<S, Svc, R>): Route<S, Svc, R> {
  return route
}

export function isBodyMethod(method: HttpMethod): boolean {
  return method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE'
}
