/**
 * Display credentials on the broker (docs/authentication.md): who may log in as a
 * display, and which topics that login may use. Three brokers, three answers:
 *
 * - the embedded broker checks every login against the store and applies
 *   the topic rules itself; granting is nothing, revoking disconnects;
 * - Mosquitto with the dynamic-security plugin (MQTT_DISPLAY_CREDENTIALS=
 *   dynamic-security): each credential is a dynsec client with a role of its
 *   own holding exactly `displayTopicAccess`;
 * - any other external broker enforces nothing the service controls, so
 *   display routes that hand out credentials answer 503
 *   MQTT_DISPLAY_NOT_CONFIGURED.
 *
 * Order on Mosquitto: the broker learns a credential before the store
 * commits it (the password exists only then; only its hash is kept), and
 * forgets it after the store revoked it. A crash between the two leaves a
 * broker client the store does not have as current; `reconcile` (at start
 * and every minute) deletes those. A client whose credential row is revoked
 * goes at once; one with no row at all only when the previous pass saw it
 * too, since a registration may be between its grant and its commit.
 */
import { displayTopicAccess, type DisplayCredential } from '../../protocol/display-mqtt.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { DynamicSecurity, DynamicSecurityError, type Acl } from '../mqtt/dynamic-security.js'
import type { EmbeddedBroker } from '../mqtt/embedded-broker.js'
import { displayUsername, type DisplayStore } from './display-store.js'
import type { Clock } from '../../actors/clock.js'

export interface BrokerCredentials {
  /** Whether the broker enforces display credentials and topic access. */
  readonly enforced: boolean
  /** Called inside the store's transaction, before it commits the credential; a failure rolls the transaction back. */
  grant(credential: DisplayCredential): Promise<void>
  /** The credential no longer logs in; its connected clients are disconnected. */
  revoke(credentialId: string): Promise<void>
  stop(): void
}

export class EmbeddedCredentials implements BrokerCredentials {
  readonly enforced = true
  readonly #broker: EmbeddedBroker
  constructor(broker: EmbeddedBroker) {
    this.#broker = broker
  }
  /** The embedded broker asks the store at every login, so a committed credential is known at once. */
  async grant(): Promise<void> {}
  async revoke(credentialId: string): Promise<void> {
    this.#broker.revoke(credentialId)
  }
  stop(): void {}
}

export class UnenforcedCredentials implements BrokerCredentials {
  readonly enforced = false
  async grant(): Promise<void> {
    throw new Error('this broker does not enforce display credentials')
  }
  async revoke(): Promise<void> {}
  stop(): void {}
}

const usernamePattern = /^display-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/

/** The per-credential role: exactly docs/authentication.md access for this binding. */
export function displayRoleAcls(credential: Pick<DisplayCredential, 'organizationId' | 'displayId' | 'bindingEpoch' | 'credentialId'>): Acl[] {
  const access = displayTopicAccess(credential, credential.credentialId)
  return [
    { acltype: 'subscribePattern', topic: access.subscribe, allow: true },
    ...access.publish.map((topic): Acl => ({ acltype: 'publishClientSend', topic, allow: true })),
  ]
}

export interface ReconcileResult {
  /** Broker clients deleted: revoked or unknown credentials. */
  removed: number
  /** Current credentials the broker does not have (its state was lost): those displays need a rebind. */
  missing: string[]
}

export const reconcileIntervalMs = 60_000

export class DynsecCredentials implements BrokerCredentials {
  readonly enforced = true
  readonly #dynsec: DynamicSecurity
  readonly #store: DisplayStore
  readonly #logger: Logger
  readonly #missing
  readonly #removed
  #orphansSeen = new Set<string>()
  #timer: unknown
  readonly #clock: Clock

  constructor(dynsec: DynamicSecurity, store: DisplayStore, logger: Logger, metrics: MetricsRegistry, clock: Clock) {
    this.#dynsec = dynsec
    this.#clock = clock
    this.#store = store
    this.#logger = logger
    this.#missing = metrics.gauge('displays_broker_credentials_missing', 'Current display credentials the broker does not know (the display needs a rebind).')
    this.#removed = metrics.counter('displays_broker_credentials_removed_total', 'Broker clients of revoked or unknown display credentials deleted by reconciliation.')
  }

  /** Reconciles now, then every `intervalMs`. */
  async start(intervalMs = reconcileIntervalMs): Promise<void> {
    await this.reconcile()
    // The clock's timers do not hold the process open.
    this.#timer = this.#clock.setInterval(() => {
      this.reconcile().catch((error: unknown) => this.#logger.warn('display credential reconciliation failed', { error }))
    }, intervalMs)
  }

  stop(): void {
    this.#clock.clearInterval(this.#timer)
  }

  async grant(credential: DisplayCredential): Promise<void> {
    const name = credential.username
    const [role, client] = await this.#dynsec.batch([
      { command: 'createRole', rolename: name, acls: displayRoleAcls(credential) },
      { command: 'createClient', username: name, password: credential.password, roles: [{ rolename: name }] },
    ])
    // A role left by an earlier attempt holds the same rights (its name is the credential's); a client never exists before its grant.
    if (role!.error !== undefined && !/already exists/i.test(role!.error)) throw new DynamicSecurityError('createRole', role!.error)
    if (client!.error !== undefined) throw new DynamicSecurityError('createClient', client!.error)
  }

  /** deleteClient also disconnects the client's connections (Mosquitto 2.0). */
  async revoke(credentialId: string): Promise<void> {
    await this.#delete(displayUsername(credentialId))
  }

  async #delete(name: string): Promise<void> {
    const results = await this.#dynsec.batch([
      { command: 'deleteClient', username: name },
      { command: 'deleteRole', rolename: name },
    ])
    const failed = results.find((r) => r.error !== undefined && !/not found/i.test(r.error))
    if (failed !== undefined) throw new DynamicSecurityError(failed.command, failed.error!)
  }

  async reconcile(): Promise<ReconcileResult> {
    // Current credentials are read before the broker's list, so one committed
    // in between shows as a first-seen orphan (kept) rather than as missing;
    // revocations are read after it, since a revoked credential stays revoked.
    const current = await this.#store.currentCredentials()
    const listed = (await this.#dynsec.run({ command: 'listClients', verbose: false, count: -1, offset: 0 })) as { clients?: unknown }
    const brokerIds = new Set<string>()
    for (const name of Array.isArray(listed?.clients) ? listed.clients : []) {
      const m = typeof name === 'string' ? usernamePattern.exec(name) : null
      if (m !== null) brokerIds.add(m[1]!)
    }
    const revoked = await this.#store.revokedCredentials([...brokerIds, ...[...current.keys()].filter((id) => !brokerIds.has(id))])
    let removed = 0
    const orphans = new Set<string>()
    for (const id of brokerIds) {
      if (current.has(id)) continue
      if (!revoked.has(id) && !this.#orphansSeen.has(id)) {
        orphans.add(id)
        continue
      }
      await this.#delete(displayUsername(id))
      removed++
    }
    this.#orphansSeen = orphans
    this.#removed.inc({}, removed)
    const missing = [...current.entries()].filter(([id]) => !brokerIds.has(id) && !revoked.has(id)).map(([, displayId]) => displayId)
    this.#missing.set({}, missing.length)
    if (missing.length > 0) this.#logger.warn('the broker lost display credentials; rebind these displays', { displays: missing.slice(0, 20), count: missing.length })
    if (removed > 0) this.#logger.info('deleted broker clients of revoked or unknown display credentials', { removed })
    return { removed, missing }
  }
}
