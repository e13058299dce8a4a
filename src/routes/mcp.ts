/**
 * The Model Context Protocol endpoint (docs/oauth.md): POST, GET and
 * DELETE on /v1/mcp (and /v1/mcp/). In front of the SDK's handler, in this
 * order (MCP authorization):
 * 1. Origin: a browser page of another site may not drive the endpoint
 *    (DNS rebinding); requests without Origin (agents) pass.
 * 2. Bearer: an OAuth access token for the MCP resource
 *    ({PUBLIC_BASE_URL}/v1/mcp), its person still a member, its client
 *    enabled, not revoked; else 401 with `WWW-Authenticate: Bearer …
 *    resource_metadata=…` naming the protected-resource document, so the
 *    client can discover the authorization server. A tool the token has no
 *    scope for answers 403 insufficient_scope (step-up), by the SDK.
 * 3. The handler, given the parsed JSON body, the principal (AuthInfo) and
 *    an abort signal; its Response is sent back as it comes (JSON, or an
 *    event stream with backpressure).
 */
import { Readable } from 'node:stream'
import type { ReadableStream as NodeReadableStream } from 'node:stream/web'
import { Type } from '@sinclair/typebox'
import { bearerAuthChallengeResponse, isLegacyRequest, OAuthError, validateOriginHeader, verifyBearerToken, type AuthInfo } from '@modelcontextprotocol/server'
import { oauthStanding } from '../auth/authenticate.js'
import { tokenUse } from '../oauth/access-tokens.js'
import { defineRoute, type Principal, type Reply, type Route, type RouteRequest, type RouteSchemas } from '../http/route.js'
import type { ListenScope } from '../mcp/change-bus.js'
import { checkListen, listenLimitReached, listenRequestOf, maxListenStreamsPerOrganization, maxListenStreamsPerPerson, type ListenRefusal, type ListenRequest } from '../mcp/listen.js'
import { FarmMcp, principalOf, type FarmMcpContext } from '../mcp/server.js'
import type { Services } from './route-context.js'
import { ServiceError } from '../../protocol/errors.js'

/** What the MCP endpoint uses of the node: its token checks and stream watch, and the MCP server's needs. */
export type McpContext = Pick<Services, 'clock' | 'config' | 'db' | 'oauthServer' | 'oauthTokens'> & FarmMcpContext

/** One MCP server per running service (tests start several in one process, and look at its streams). */
const farms = new WeakMap<McpContext, FarmMcp>()
export function farmOf(svc: McpContext): FarmMcp {
  let farm = farms.get(svc)
  if (farm === undefined) farms.set(svc, (farm = new FarmMcp(svc)))
  return farm
}

const forwardedHeaders = ['accept', 'content-type', 'mcp-protocol-version', 'mcp-session-id', 'last-event-id', 'origin', 'mcp-method', 'mcp-name']

/** The hostnames a browser page may call from: the service's own, and those CORS_ORIGINS lists. */
function allowedHostnames(svc: Pick<McpContext, 'config' | 'oauthServer'>): string[] {
  const names = new Set<string>([new URL(svc.oauthServer.resources.api).hostname])
  if (svc.config.corsOrigins !== '*') for (const origin of svc.config.corsOrigins) names.add(new URL(origin).hostname)
  return [...names].map((name) => (name.includes(':') && !name.startsWith('[') ? `[${name}]` : name))
}

/**
 * The SDK's bearer challenge (`{error, error_description}`, RFC 6750) with what every other error of
 * the service carries too: a `message` saying what to fix and the `requestId` to quote.
 */
async function withMessage(response: Response, requestId: string): Promise<Response> {
  const body = (await response.json().catch(() => ({}))) as { error?: string; error_description?: string }
  const message = body.error_description ?? (body.error === 'invalid_token' ? 'the access token is not valid for this resource' : 'an OAuth access token for this resource is needed')
  return new Response(JSON.stringify({ ...body, message, requestId }), { status: response.status, headers: response.headers })
}

async function replyOf(response: Response): Promise<Reply> {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    if (name !== 'content-length' && name !== 'transfer-encoding' && name !== 'connection') headers[name] = value
  })
  const contentType = response.headers.get('content-type') ?? 'application/json'
  delete headers['content-type']
  if (response.body === null) return { status: response.status, headers }
  if (contentType.startsWith('text/event-stream')) {
    return { status: response.status, headers, contentType, stream: { body: Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>) } }
  }
  return { status: response.status, headers, contentType, raw: new Uint8Array(await response.arrayBuffer()) }
}

/** The OAuth principal of an MCP token, as the SDK's bearer helper expects it (AuthInfo with our principal in `extra`). */
async function verify(svc: Pick<McpContext, 'db' | 'oauthServer' | 'oauthTokens'>, token: string, requestId: string): Promise<AuthInfo> {
  const { resources } = svc.oauthServer
  if (tokenUse(token) !== 'oauth') throw new OAuthError('invalid_token', 'not an OAuth access token of this service (sign-in session tokens and API keys are not accepted here)')
  let claims
  try {
    claims = await svc.oauthTokens.verify(token, resources.mcp)
  } catch (error) {
    throw new OAuthError('invalid_token', error instanceof ServiceError ? error.message : 'the access token is not valid')
  }
  let standing
  try {
    standing = await oauthStanding(svc.db.sql, claims)
  } catch (error) {
    throw new OAuthError('invalid_token', error instanceof ServiceError ? error.message : 'the access token no longer stands')
  }
  const scopes = [...claims.scopes].filter((s) => standing.allowedScopes.includes(s))
  const principal: Principal = {
    kind: 'oauth',
    userId: claims.userId,
    clientId: claims.clientId,
    organizationId: claims.organizationId,
    role: standing.role,
    scopes: new Set(scopes),
    tokenId: claims.tokenId,
    bridgeGrant: claims.bridgeGrant,
  }
  return { token, clientId: claims.clientId, scopes, expiresAt: claims.expiresAt, resource: new URL(resources.mcp), extra: { principal, requestId } }
}

async function serve(req: RouteRequest, svc: McpContext): Promise<Reply> {
  const { resources } = svc.oauthServer
  const resourceMetadataUrl = `${resources.api}/.well-known/oauth-protected-resource/v1/mcp`
  const origin = validateOriginHeader(req.headers['origin'], allowedHostnames(svc))
  if (!origin.ok) throw new ServiceError('mcp_origin_forbidden', `${origin.message}; a page of another site may not call the MCP endpoint`)
  let authInfo: AuthInfo
  try {
    authInfo = await verifyBearerToken(req.headers['authorization'], {
      verifier: { verifyAccessToken: (token) => verify(svc, token, req.requestId) },
      expectedResource: new URL(resources.mcp),
      resourceMetadataUrl,
    })
  } catch (error) {
    return replyOf(await withMessage(bearerAuthChallengeResponse(error, { resourceMetadataUrl }), req.requestId))
  }
  const headers = new Headers()
  for (const name of forwardedHeaders) {
    const value = req.headers[name]
    if (value !== undefined) headers.set(name, value)
  }
  const farm = farmOf(svc)
  // A listen that opens a stream: 2026-07-28 (the 2025 protocol has none: the SDK answers it) and some resource to follow.
  const listen = req.method === 'POST' ? listenRequestOf(req.body) : undefined
  if (listen !== undefined && listen.uris.length > 0 && !(await isLegacyRequest(new Request(new URL(req.path, resources.api), { method: 'POST', headers }), { parsedBody: req.body }))) {
    return serveListen(req, svc, farm, authInfo, headers, listen, resourceMetadataUrl)
  }
  const request = new Request(new URL(req.path, resources.api), { method: req.method, headers, ...(req.signal === undefined ? {} : { signal: req.signal }) })
  const response = await farm.handler.fetch(request, { authInfo, ...(req.method === 'POST' ? { parsedBody: req.body } : {}) })
  return replyOf(response)
}

/** How often an open stream checks that its token still stands (person, client, revocation, scopes). */
const standingCheckMs = 60_000
/** Standing checks that may fail on the store in a row before the stream is ended (fail closed). */
const standingCheckFailures = 3

/**
 * A `subscriptions/listen` stream (2026-07-28): a place is reserved under the limits at once, the
 * request checked (src/mcp/listen.ts), then the SDK opens the stream inside the organization's
 * scope of the bus. A listen the SDK serves otherwise (a 2025-era request, no resource to follow)
 * goes to it unchecked: it opens no stream. An open stream ends when the client goes, when its
 * access token expires, or when a periodic check finds the token no longer stands or no longer
 * has the scopes the stream needs; the client listens again with a fresh token.
 */
async function serveListen(req: RouteRequest, svc: McpContext, farm: FarmMcp, authInfo: AuthInfo, headers: Headers, listen: ListenRequest, resourceMetadataUrl: string): Promise<Reply> {
  const principal = principalOf(authInfo)
  if (principal?.kind !== 'oauth') throw new ServiceError('unauthorized', 'an MCP stream needs an OAuth access token')
  const org = principal.organizationId
  const release = farm.bus.reserve([
    { key: `o ${org}`, limit: maxListenStreamsPerOrganization, open: farm.bus.streams(org) },
    { key: `p ${org} ${principal.userId}`, limit: maxListenStreamsPerPerson, open: farm.bus.streamsOf(org, principal.userId) },
  ])
  if (release === undefined) return listenRefusal(listen, listenLimitReached())
  try {
    const check = await checkListen(svc.db.sql, principal, listen, farm.bus.followedJobs(org))
    if (!check.ok && check.kind === 'scope') {
      const error = new OAuthError('insufficient_scope', `following this resource needs the scope ${check.scope}`)
      return replyOf(bearerAuthChallengeResponse(error, { requiredScopes: [check.scope, ...authInfo.scopes], resourceMetadataUrl }))
    }
    if (!check.ok) return listenRefusal(listen, check)
    const { scope } = check
    await farm.changes.started(org, await farm.changes.jobVersions(org, [...scope.jobs]), scope.queue)
    const ending = new AbortController()
    const signal = req.signal === undefined ? ending.signal : AbortSignal.any([req.signal, ending.signal])
    const request = new Request(new URL(req.path, svc.oauthServer.resources.api), { method: req.method, headers, signal })
    const response = await farm.bus.listening(scope, () => farm.handler.fetch(request, { authInfo, parsedBody: req.body }), release)
    const reply = await replyOf(response)
    if (reply.stream !== undefined) watchStream(svc, reply.stream.body, ending, signal, principal, scope, authInfo.expiresAt)
    // Refused by the SDK after all: what it would have followed is forgotten again.
    else farm.changes.closed(scope)
    return reply
  } finally {
    // A stream that opened gave its place back when it registered (it counts as open from then); any other outcome here.
    release()
  }
}

/** Ends an open stream at its token's expiry, or when the token no longer stands; everything stops when the stream closes. */
function watchStream(svc: Pick<McpContext, 'clock' | 'db'>, body: Readable, ending: AbortController, signal: AbortSignal, principal: Principal & { kind: 'oauth' }, scope: ListenScope, expiresAt: number | undefined): void {
  // On the node's clock (its timers are unref'd: an open stream never keeps a stopping node up).
  const { clock } = svc
  let expiry: unknown
  let standingCheck: unknown
  const end = (): void => {
    clock.clearTimeout(expiry)
    clock.clearInterval(standingCheck)
    ending.abort()
  }
  body.once('close', end)
  if (signal.aborted || body.destroyed) return end()
  if (expiresAt !== undefined) expiry = clock.setTimeout(end, Math.max(0, expiresAt * 1000 - clock.now()))
  const needs = [...(scope.printers.size > 0 ? ['printers:read'] : []), ...(scope.jobs.size > 0 || scope.queue ? ['print-jobs:read'] : [])]
  const claims = { userId: principal.userId, clientId: principal.clientId, organizationId: principal.organizationId, tokenId: principal.tokenId }
  let failures = 0
  standingCheck = clock.setInterval(() => {
    oauthStanding(svc.db.sql, claims).then(
      (standing) => {
        failures = 0
        if (needs.some((s) => !standing.allowedScopes.includes(s))) end()
      },
      (error: unknown) => {
        if (error instanceof ServiceError || ++failures >= standingCheckFailures) end()
      },
    )
  }, standingCheckMs)
}

function listenRefusal(listen: ListenRequest, check: ListenRefusal): Reply {
  return { status: 200, body: { jsonrpc: '2.0', id: listen.id, error: { code: check.code, message: check.message, data: check.data } } }
}

const description =
  'Streamable HTTP, stateless: the 2025 protocol versions (each request answered on its own; GET and DELETE answer 405) and 2026-07-28. ' +
  'Needs an OAuth access token for the resource {PUBLIC_BASE_URL}/v1/mcp (401 with WWW-Authenticate naming the protected-resource metadata ' +
  'otherwise); a tool outside the token\'s scopes answers 403 insufficient_scope. Requests from a browser page of another origin are refused (403).'
const auth = { kind: 'public', reason: 'the endpoint checks its OAuth bearer token itself, as MCP authorization prescribes (WWW-Authenticate with resource_metadata)' } as const
const JsonRpcBody = Type.Unknown({ description: 'A JSON-RPC message (or batch) of the Model Context Protocol.' })

function mcpRoutes(path: string, suffix: string): Route<RouteSchemas, McpContext>[] {
  return [
    defineRoute({
      method: 'POST',
      path,
      operationId: `mcpPost${suffix}`,
      summary: 'Model Context Protocol: a JSON-RPC request or notification (tools/list, tools/call…).',
      description,
      tags: ['mcp'],
      auth,
      abortSignal: true,
      schemas: { body: JsonRpcBody },
      responses: { 200: { description: 'A JSON-RPC answer, as JSON or an event stream.' }, 202: { description: 'A notification, accepted.' } },
      errors: ['mcp_origin_forbidden'],
      handler: serve,
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: `mcpGet${suffix}`,
      summary: 'Model Context Protocol: the server-to-client stream of the 2025 protocol (405: this endpoint is stateless).',
      description,
      tags: ['mcp'],
      auth,
      abortSignal: true,
      schemas: {},
      responses: { 405: { description: 'Stateless endpoint: no standalone stream.' } },
      errors: ['mcp_origin_forbidden'],
      handler: serve,
    }),
    defineRoute({
      method: 'DELETE',
      path,
      operationId: `mcpDelete${suffix}`,
      summary: 'Model Context Protocol: ends a 2025 session (405: this endpoint is stateless, there is none).',
      description,
      tags: ['mcp'],
      auth,
      schemas: {},
      responses: { 405: { description: 'Stateless endpoint: no session to end.' } },
      errors: ['mcp_origin_forbidden'],
      handler: serve,
    }),
  ] as Route<RouteSchemas, McpContext>[]
}

export const mcpRouteList: readonly Route<RouteSchemas, McpContext>[] = [...mcpRoutes('/v1/mcp', ''), ...mcpRoutes('/v1/mcp/', 'Slash')]
