/**
 * Everything a node gives its routes: its long-lived parts. Each route module
 * takes a slice of it, its `XContext` type (a Pick of these fields, such as
 * `MaterialsContext` in materials.ts), and types its handlers by that slice,
 * so a handler sees only its area and the compiler refuses a reach beyond it
 * (test/src/routes/route-context.test.ts keeps the whole object out of
 * handlers). The dispatcher passes this one object, which satisfies every slice.
 */
import type { Config } from '../node/config.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { MqttConnection } from '../mqtt/connection.js'
import type { Database } from '../storage/database.js'
import type { FailureLimiter } from '../auth/failure-limiter.js'
import type { Keyring } from '../auth/keyring.js'
import type { Sessions } from '../auth/sessions.js'
import type { ApiKeyCache, UsageLogWriter } from '../auth/api-keys.js'
import type { PrinterConfigStore } from '../printers/config-store.js'
import type { RoutedPrinters } from '../cluster/routed-printers.js'
import type { PrinterReads } from '../printers/printer-reads.js'
import type { FleetGauges } from '../printers/fleet-gauges.js'
import type { Clock } from '../../actors/clock.js'
import type { LiveFeed } from '../live/index.js'
import type { ProfileStore } from '../displays/profile-store.js'
import type { DisplayNode } from '../displays/index.js'
import type { FileNode } from '../files/index.js'
import type { MaterialStore } from '../materials/material-store.js'
import type { SpoolStore } from '../inventory/spool-store.js'
import type { MakeStore } from '../makes/make-store.js'
import type { SkuStore } from '../makes/sku-store.js'
import type { OAuthClientStore } from '../oauth/client-store.js'
import type { OAuthAccessTokens } from '../oauth/access-tokens.js'
import type { AgentIdentities } from '../oauth/agent-identity.js'
import type { Authorization } from '../oauth/authorization.js'
import type { Authorizations } from '../oauth/authorizations.js'
import type { Resources } from '../oauth/resources.js'
import type { TokenEndpoint } from '../oauth/token-endpoint.js'
import type { JobNode } from '../jobs/index.js'
import type { QueueNode } from '../queue/index.js'
import type { HostBindings } from '../auth/host-binding.js'

export interface NodeState {
  /** Migration version the store is at; 0 until migrations ran. */
  migrationsVersion: number
  /** True from the end of the start (the first admin exists) until shutdown begins: /readyz says ready only then. */
  accepting: boolean
}

export interface Services {
  readonly config: Config
  readonly logger: Logger
  readonly metrics: MetricsRegistry
  readonly db: Database
  readonly mqtt: MqttConnection
  readonly printerConfig: PrinterConfigStore
  /** The printer actors (ingestion, host moves, presence, filaments, maintenance), on this node or forwarded to their owner. */
  readonly printers: RoutedPrinters
  /** Printer state and history as committed (the read model). */
  readonly printerReads: PrinterReads
  /** The /metrics gauges of printers by status and online. */
  readonly fleetGauges: FleetGauges
  /** The node's clock (a simulated one in tests). */
  readonly clock: Clock
  /** The shard directory as readiness sees it. */
  readonly shards: { readiness(): { ok: boolean; kind: 'local' | 'redis'; nodeId: string; owned: number } }
  /** The live feed of this node (WebSocket /v1/live). */
  readonly live: LiveFeed
  /** Signal profiles and revisions (docs/displays.md). */
  readonly profiles: ProfileStore
  /** Status displays: store, actors, MQTT gateway, status feed. */
  readonly displays: DisplayNode
  /** Models and their files: storage, uploads, signed downloads. */
  readonly files: FileNode
  /** The materials catalogue. */
  readonly materials: MaterialStore
  /** The spool inventory and its ledger. */
  readonly inventory: SpoolStore
  /** Makes: a file with its materials chosen. */
  readonly makes: MakeStore
  /** SKUs, their orders and batches. */
  readonly skus: SkuStore
  /** OAuth clients: those organizations manage and those that registered themselves. */
  readonly oauthClients: OAuthClientStore
  /** OAuth access tokens (RFC 9068): issued by the token endpoint, accepted on every route with a scope. */
  readonly oauthTokens: OAuthAccessTokens
  /** Dynamic client registrations per address (public route). */
  readonly oauthRegistrations: FailureLimiter
  /** The authorization server: consent handoffs and codes, the token and revocation endpoints, agent identities, their rate limits. */
  readonly oauthServer: {
    readonly resources: Resources
    readonly authorization: Authorization
    readonly tokens: TokenEndpoint
    readonly agents: AgentIdentities
    /** The applications and agents acting in an organization, to list and end. */
    readonly authorizations: Authorizations
    /** Failed token, revocation and handoff requests per address. */
    readonly failures: FailureLimiter
    /** Agent identities and claim renewals started per address. */
    readonly agentStarts: FailureLimiter
  }
  /** Which host each paired bridge key speaks for. */
  readonly hostBindings: HostBindings
  /** Print jobs, printer tasks and their dispatch. */
  readonly jobs: JobNode
  /** The smart queue: wakes, passes, and what it says about waiting jobs. */
  readonly queue: QueueNode
  readonly state: NodeState
  readonly keyring: Keyring
  readonly sessions: Sessions
  /**
   * Failed sign-ins: per account at one address (a stranger elsewhere cannot lock
   * the user out), per address, and per account from everywhere (distributed guessing).
   */
  readonly loginFailures: { readonly accountAtAddress: FailureLimiter; readonly address: FailureLimiter; readonly account: FailureLimiter }
  readonly apiKeyCache: ApiKeyCache
  readonly apiKeyUsage: UsageLogWriter
  /** Pairing: codes generated per address; failed verifications per user/address; unknown codes exchanged per address. */
  readonly pairingLimits: { readonly generation: FailureLimiter; readonly verifyFailures: FailureLimiter; readonly exchangeFailures: FailureLimiter }
  readonly startedAt: number
  /** The serialised OpenAPI document (built once). */
  openApiJson(): string
}
