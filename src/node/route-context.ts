/**
 * What a node gives its route handlers (src/routes/route-context.ts): the stores and limits built
 * over its parts. Pure construction: nothing here starts or connects.
 */
import type { NodeParts } from './parts.js'
import type { Services } from '../routes/route-context.js'
import { buildOpenApiDocument } from '../http/openapi.js'
import { FailureLimiter } from '../auth/failure-limiter.js'
import { UsageLogWriter } from '../auth/api-keys.js'
import { PrinterConfigStore } from '../printers/config-store.js'
import { PrinterReads } from '../printers/printer-reads.js'
import { FleetGauges } from '../printers/fleet-gauges.js'
import { ProfileStore } from '../displays/profile-store.js'
import { MaterialStore } from '../materials/material-store.js'
import { SpoolStore } from '../inventory/spool-store.js'
import { MakeStore } from '../makes/make-store.js'
import { SkuStore } from '../makes/sku-store.js'
import { OAuthClientStore } from '../oauth/client-store.js'
import { AgentIdentities } from '../oauth/agent-identity.js'
import { Authorization } from '../oauth/authorization.js'
import { Authorizations } from '../oauth/authorizations.js'
import { Resources } from '../oauth/resources.js'
import { TokenEndpoint } from '../oauth/token-endpoint.js'
import { RedisShardDirectory } from '../cluster/redis-shard-directory.js'

/** Window of the failed sign-in limits (LOGIN_FAILURES_PER_ACCOUNT / _PER_ADDRESS count within it). */
const loginFailureWindowMs = 15 * 60 * 1000

/** The parts the route context is built over. */
export type RouteContextParts = Pick<
  NodeParts,
  'config' | 'logger' | 'clock' | 'routes' | 'store' | 'metrics' | 'state' | 'secrets' | 'shards' | 'routedPrinters' | 'mqtt' | 'displays' | 'files' | 'jobs' | 'queue' | 'hostBindings' | 'auth' | 'live'
>

/** What route handlers are given. */
export function routeContext(p: RouteContextParts): Services {
  const { config, logger, clock, live, store: db, shards: directory } = p
  const now = () => clock.now()
  let openApi: string | undefined
  const redis = directory instanceof RedisShardDirectory ? directory : undefined
  const printerReads = new PrinterReads(db, clock)
  const oauthClients = new OAuthClientStore(db.sql, logger, now)
  const resources = new Resources(config.publicBaseUrl)
  const agents = new AgentIdentities(db.sql, p.secrets.keyring, p.auth.oauthTokens, resources, { claimTtlSeconds: config.agentClaimTtlSeconds, assertionTtlSeconds: config.oauthRefreshTtlSeconds }, logger, now)
  return {
    config,
    logger,
    metrics: p.metrics,
    db,
    mqtt: p.mqtt,
    keyring: p.secrets.keyring,
    sessions: p.auth.sessions,
    oauthTokens: p.auth.oauthTokens,
    loginFailures: {
      accountAtAddress: new FailureLimiter({ limit: config.loginFailuresPerAccount, windowMs: loginFailureWindowMs }),
      address: new FailureLimiter({ limit: config.loginFailuresPerAddress, windowMs: loginFailureWindowMs }),
      account: new FailureLimiter({ limit: config.loginFailuresPerAddress, windowMs: loginFailureWindowMs }),
    },
    apiKeyCache: p.auth.apiKeyCache,
    apiKeyUsage: new UsageLogWriter(db.sql, logger, clock),
    printerConfig: new PrinterConfigStore(db, p.secrets.sealedBox, logger, now),
    printers: p.routedPrinters,
    printerReads,
    fleetGauges: new FleetGauges(printerReads, p.metrics, clock, logger),
    clock: clock,
    shards: {
      readiness: () => ({
        ok: redis?.ready ?? true,
        kind: redis === undefined ? 'local' : 'redis',
        nodeId: directory.nodeId,
        owned: redis?.ownedShards().length ?? 256,
      }),
    },
    live,
    profiles: new ProfileStore(db.sql, now),
    displays: p.displays,
    files: p.files,
    materials: new MaterialStore(db.sql, now),
    inventory: new SpoolStore(db.sql),
    makes: new MakeStore(db.sql, now),
    skus: new SkuStore(db.sql, now),
    oauthClients,
    oauthServer: {
      resources,
      authorization: new Authorization(db.sql, oauthClients, resources, config.publicBaseUrl, config.oauthCodeTtlSeconds, logger, p.secrets.sealedBox.derivedKeys('oauth-consent'), now),
      tokens: new TokenEndpoint(db.sql, { clients: oauthClients, tokens: p.auth.oauthTokens, resources, agents }, config.oauthRefreshTtlSeconds, logger, now),
      agents,
      authorizations: new Authorizations(db.sql, logger, now),
      failures: new FailureLimiter({ limit: config.oauthFailuresPerAddress, windowMs: loginFailureWindowMs }),
      agentStarts: new FailureLimiter({ limit: config.agentIdentitiesPerAddress, windowMs: loginFailureWindowMs }),
    },
    oauthRegistrations: new FailureLimiter({ limit: config.oauthRegistrationsPerAddress, windowMs: loginFailureWindowMs }),
    jobs: p.jobs,
    queue: p.queue,
    hostBindings: p.hostBindings,
    pairingLimits: {
      generation: new FailureLimiter({ limit: config.authCodesPerAddress, windowMs: loginFailureWindowMs }),
      verifyFailures: new FailureLimiter({ limit: config.authCodeFailuresPerSource, windowMs: loginFailureWindowMs }),
      exchangeFailures: new FailureLimiter({ limit: config.authCodeFailuresPerSource, windowMs: loginFailureWindowMs }),
    },
    state: p.state,
    startedAt: clock.now(),
    openApiJson: () => (openApi ??= JSON.stringify(buildOpenApiDocument(p.routes, { publicBaseUrl: config.publicBaseUrl }))),
  }
}

