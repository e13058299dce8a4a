/**
 * Probes and descriptions that every deployment needs: liveness, readiness,
 * Prometheus metrics and the OpenAPI document. All public: they reveal no
 * farm data (readiness says only whether the store answers).
 */
import { Type } from '@sinclair/typebox'
import { HealthSchema, ReadinessSchema, type Health, type Readiness } from '../../protocol/schemas/common.js'
import { jsonContentType } from '../http/exchange.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'
import { serviceVersion } from '../node/version.js'

/** What the system routes (health, readiness, metrics, OpenAPI) use of the node. */
export type SystemContext = Pick<Services, 'clock' | 'db' | 'fleetGauges' | 'logger' | 'metrics' | 'mqtt' | 'openApiJson' | 'shards' | 'startedAt' | 'state'>

const probe = { kind: 'public', reason: 'probe for load balancers and orchestrators; reveals no farm data' } as const

/** A store that does not answer within this is "not ready" rather than a hung probe. */
const readinessPingTimeoutMs = 2_000

export const healthRoute = defineRoute({
  method: 'GET',
  path: '/healthz',
  operationId: 'getHealth',
  summary: 'Liveness: the process is up and its event loop answers.',
  tags: ['system'],
  auth: probe,
  schemas: {},
  responses: { 200: { description: 'The process is alive.', schema: HealthSchema } },
  handler: (_req, svc: SystemContext) => ({ raw: healthText(Math.round((svc.clock.now() - svc.startedAt) / 1000)), contentType: jsonContentType }),
})

/**
 * The liveness answer depends only on whole seconds of uptime, so its text is made once per second
 * and sent as it is: the probe every load balancer repeats costs the request path alone (it was
 * about a tenth of a GET /healthz's CPU in bench/http-floor). Nodes in one process share the text
 * when their uptimes agree, which is when the texts are the same.
 */
let healthSeconds = -1
let healthBody = ''
function healthText(uptimeSeconds: number): string {
  if (uptimeSeconds !== healthSeconds) {
    healthSeconds = uptimeSeconds
    healthBody = JSON.stringify({ status: 'ok', uptimeSeconds, version: serviceVersion } satisfies Health)
  }
  return healthBody
}

export const readinessRoute = defineRoute({
  method: 'GET',
  path: '/readyz',
  operationId: 'getReadiness',
  summary: 'Readiness: the store answers, migrations are applied and the node accepts work.',
  description: 'Answers 503 with the same body when any check fails, so an orchestrator can route around this node.',
  tags: ['system'],
  auth: probe,
  schemas: {},
  responses: {
    200: { description: 'Ready for traffic.', schema: ReadinessSchema },
    503: { description: 'Not ready; `checks` says which part failed.', schema: ReadinessSchema },
  },
  handler: async (_req, svc: SystemContext) => {
    const store: Readiness['checks']['store'] = { ok: false, kind: svc.db.kind }
    try {
      store.latencyMs = Math.round((await svc.db.ping(readinessPingTimeoutMs)) * 100) / 100
      store.ok = true
    } catch (error) {
      // Public route: a fixed sentence here, the driver's own words in the log.
      store.error = 'the store did not answer'
      svc.logger.warn('readiness: store check failed', { error })
    }
    const migrations = { ok: svc.state.migrationsVersion > 0, version: svc.state.migrationsVersion }
    const accepting = { ok: svc.state.accepting }
    // The broker is reported but does not gate readiness: without it displays
    // go stale, while bridges and dashboards are still served.
    const broker = { ok: svc.mqtt.client.connected, kind: svc.mqtt.kind }
    const shards = svc.shards.readiness()
    const ready = store.ok && migrations.ok && accepting.ok && shards.ok
    const body: Readiness = { ready, checks: { store, migrations, accepting, broker, shards } }
    const headers: Record<string, string> = ready ? {} : { 'retry-after': '1' }
    return { status: ready ? 200 : 503, body, headers }
  },
})

export const metricsRoute = defineRoute({
  method: 'GET',
  path: '/metrics',
  operationId: 'getMetrics',
  summary: 'Prometheus metrics in the text exposition format.',
  tags: ['system'],
  auth: { kind: 'public', reason: 'scraped by Prometheus on the farm network; counts and latencies only' },
  schemas: {},
  responses: { 200: { description: 'Metrics.', schema: Type.String(), contentType: 'text/plain; version=0.0.4' } },
  handler: async (_req, svc: SystemContext) => {
    await svc.fleetGauges.refresh()
    return { raw: svc.metrics.render(), contentType: 'text/plain; version=0.0.4; charset=utf-8' }
  },
})

export const openApiRoute = defineRoute({
  method: 'GET',
  path: '/openapi.json',
  operationId: 'getOpenApi',
  summary: 'This interface description (OpenAPI 3.1, version 1.0.0).',
  tags: ['discovery'],
  auth: { kind: 'public', reason: 'machine-readable description of this interface; reveals no farm data' },
  schemas: {},
  responses: { 200: { description: 'The OpenAPI document.', schema: Type.Object({}, { additionalProperties: true }) } },
  handler: (_req, svc: SystemContext) => ({ raw: svc.openApiJson(), contentType: 'application/json; charset=utf-8' }),
})

export const systemRoutes: readonly Route<RouteSchemas, SystemContext>[] = [healthRoute, readinessRoute, metricsRoute, openApiRoute]
