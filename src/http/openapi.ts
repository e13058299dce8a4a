/**
 * The OpenAPI 3.1 document, generated from the route table and its schemas,
 * so a route cannot exist without being described (GET
 * /openapi.json, version 1.0.0).
 */
import type { TSchema } from '@sinclair/typebox'
import { errorCodes, type ErrorCode } from '../../protocol/errors.js'
import { ErrorBodySchema } from '../../protocol/schemas/common.js'
import { ErrorOnlySchema } from '../../protocol/schemas/api-keys.js'
import type { Responses, Route, RouteSchemas } from './route.js'
import { renderRouteTable } from './route-table.js'
import { apiVersion } from '../node/version.js'

type Json = Record<string, unknown>

/** TypeBox keeps metadata under symbol keys; the document gets the plain JSON Schema. */
function plain(schema: TSchema): Json {
  return JSON.parse(JSON.stringify(schema)) as Json
}

/** Errors the adapter itself may answer with, whatever the handler does. */
function framingErrors(route: Route<RouteSchemas, unknown>): ErrorCode[] {
  const codes: ErrorCode[] = []
  const takesBody = route.method !== 'GET'
  if (route.schemas.body || route.schemas.query || route.schemas.params) codes.push('validation_failed')
  if (takesBody) codes.push('payload_too_large')
  if (route.schemas.body) {
    codes.push('invalid_json', 'invalid_unicode', 'unsupported_media_type')
    if (!route.emptyBodyAllowed) codes.push('body_required')
  }
  if (route.auth.kind !== 'public') codes.push('unauthorized', 'token_expired')
  if (route.auth.kind === 'organization') {
    codes.push('organization_required', 'organization_not_found', 'insufficient_scope')
    if (route.auth.admin === true) codes.push('ORG_ADMIN_REQUIRED')
  }
  codes.push('internal_error')
  const own = route.invalidRequestCode
  if (own === undefined) return codes
  const faults: readonly ErrorCode[] = ['validation_failed', 'invalid_json', 'invalid_unicode', 'body_required']
  return [...new Set(codes.map((code) => (faults.includes(code) ? own : code)))]
}

/** docs/authentication.md: sessions carry a bearer JWT; organization routes also take an API key with the route's scope. */
function security(route: Route<RouteSchemas, unknown>): Json[] {
  switch (route.auth.kind) {
    case 'public':
      return []
    case 'user':
      return [{ bearerAuth: [] }]
    case 'organization': {
      if (route.auth.scope === null) return [{ bearerAuth: [] }]
      const scopes = typeof route.auth.scope === 'string' ? [route.auth.scope] : route.auth.scope
      const keyed = [{ bearerAuth: [] }, ...scopes.map((scope) => ({ apiKey: [scope] }))]
      // A signed URL needs no credential: the empty requirement says so.
      return route.auth.signedUrl === true ? [...keyed, {}] : keyed
    }
  }
}

function parameters(schema: TSchema | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return []
  const json = plain(schema)
  const properties = (json['properties'] ?? {}) as Record<string, Json>
  const required = new Set((json['required'] ?? []) as string[])
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property
    return {
      name,
      in: where,
      // A parameter with a default is optional to the caller, whatever the typed value says.
      required: where === 'path' ? true : required.has(name) && !('default' in property),
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    }
  })
}

function errorTable(): string {
  const rows = Object.entries(errorCodes).map(([code, info]) => `| ${code} | ${info.status} | ${info.description} |`)
  return ['| error | HTTP | meaning |', '|---|---|---|', ...rows].join('\n')
}

export interface OpenApiOptions {
  publicBaseUrl: string
}

export function buildOpenApiDocument(routes: readonly Route<RouteSchemas, unknown>[], options: OpenApiOptions): Json {
  const paths: Record<string, Record<string, Json>> = {}
  for (const route of routes) {
    const responses: Record<string, Json> = {}
    for (const [status, doc] of Object.entries(route.responses as Responses)) {
      responses[status] = {
        description: doc.description,
        ...(doc.schema ? { content: { [doc.contentType ?? 'application/json']: { schema: plain(doc.schema) } } } : {}),
      }
    }
    const byStatus = new Map<number, ErrorCode[]>()
    for (const code of [...(route.errors ?? []), ...framingErrors(route)]) {
      const status = errorCodes[code].status
      const list = byStatus.get(status) ?? []
      if (!list.includes(code)) list.push(code)
      byStatus.set(status, list)
    }
    for (const [status, codes] of byStatus) {
      if (responses[String(status)]) continue
      responses[String(status)] = {
        description: codes.map((c) => `\`${c}\`: ${errorCodes[c].description}`).join(' '),
        'x-error-codes': codes,
        content: {
          'application/json': {
            schema: plain(route.errorBody === 'error-only' && (status === 400 || status === 404 || status === 500) ? ErrorOnlySchema : ErrorBodySchema),
          },
        },
      }
    }
    const operation: Json = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [...route.tags],
      security: security(route),
      'x-auth': route.access === undefined ? route.auth : { ...route.auth, access: route.access },
      parameters: [...parameters(route.schemas.params, 'path'), ...parameters(route.schemas.query, 'query')],
      ...(route.schemas.body
        ? {
            requestBody: {
              required: !route.emptyBodyAllowed,
              content: {
                'application/json': { schema: plain(route.schemas.body) },
                ...(route.formBody === true ? { 'application/x-www-form-urlencoded': { schema: plain(route.schemas.body) } } : {}),
              },
            },
          }
        : route.streamBody !== undefined
          ? { requestBody: { required: true, content: { [route.streamBody.contentType]: { schema: plain(route.streamBody.schema) } } } }
          : {}),
      responses,
    }
    ;(paths[route.path] ??= {})[route.method.toLowerCase()] = operation
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'printfarm',
      version: apiVersion,
      summary: 'Backend for 3D print farms.',
      description: [
        'REST API of a 3D print farm service: accounts and organizations, API keys and bridge pairing, printer configuration and host ' +
          'assignment, printer events from bridges, a live WebSocket feed, and status displays with light-signal profiles. ' +
          'This document lists exactly the routes this build serves; any other path answers 404 `route_not_found`.',
        '## Versions',
        '`info.version` is the version of this interface (the routes, bodies and error codes described here); it changes only when they do. ' +
          'The version of the running build is another number: `version` in `GET /healthz`, or `printfarm version`.',
        '## Accounts',
        'Every resource belongs to one organization; people belong to organizations as `admin` (may change it) or `member` (may use it). ' +
          'Sign in with `POST /v1/auth/login` for an ES256 access token (15 minutes, keys at `/.well-known/jwks.json`) and a single-use refresh token (30 days; ' +
          'reuse of a spent one revokes the whole sign-in). Routes acting in an organization take it from `x-organization-id` (or `organizationId`), ' +
          'else the caller\'s only one. API keys (`x-api-key`) act for their own organization, on routes that accept their scope.',
        '## Pairing a bridge',
        '`POST /v1/auth-codes` (no credential) gives a 10-character code valid 10 minutes; an organization admin confirms it with ' +
          '`POST /v1/auth-codes/verify`; the bridge polls `GET /v1/auth-codes/verify/{code}` until it gets, exactly once, an API key with the bridge scopes.',
        '## Live feed (WebSocket)',
        '`GET /v1/live` upgrades to a WebSocket on the same port (not listed below: it is not a request/response route). Credentials on the upgrade: ' +
          '`Authorization: Bearer`, `x-api-key` (scope `printers:read`) or `?access_token=`; subprotocols `printfarm.v1.json` (default) and `printfarm.v1.msgpack`. ' +
          'Client frames `{op: subscribe|unsubscribe|ping, topics, since?, stream?}`; server frames `{op: snapshot|event|error|pong, topic, seq, data}` on topics ' +
          '`printers`, `printer:<id>`, `jobs`, `displays`. Close codes: 1001 shutting down, 4001 token expired, 4002 invalid frames, 4008 too slow. ' +
          'Ordering, resume and the slow-client policy are described in docs/live-feed.md of the printfarm repository.',
        '## Who may call what',
        renderRouteTable(routes),
        '## Errors',
        'Every error body is `{error, message}` (plus `requestId`); the auth-code routes answer 400/404/500 with `{error}` only. `error` is one of:',
        errorTable(),
      ].join('\n\n'),
    },
    servers: [{ url: options.publicBaseUrl }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'User session or OAuth access token.' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'API key (bridges, scripts).' },
      },
      schemas: { ErrorBody: plain(ErrorBodySchema) },
    },
  }
}
