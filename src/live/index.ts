/**
 * The live feed of one node: hub, WebSocket server and (with Redis) the relay
 * to other nodes, wired to the printer actors' commit hook and the
 * dispatcher's task hook.
 */
import type { Clock } from '../../actors/clock.js'
import type { PrinterRuntime } from '../../actors/printer-runtime.js'
import type { Sessions } from '../auth/sessions.js'
import { decodeJwt } from 'jose'
import { bearerToken, oauthStanding, type Authenticate } from '../auth/authenticate.js'
import { currentApiKeyScopes } from '../auth/api-keys.js'
import type { TemplatedApp } from '../http/uws.js'
import type { Principal } from '../http/route.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { Database } from '../storage/database.js'
import { HostTaskFeed, type TaskSource, type TaskTouched } from './host-tasks.js'
import { LiveHub, liveChangeOf, type LiveChange, type LiveRemoval } from './hub.js'
import { QueueFeed } from './queue-feed.js'
import { LiveServer } from './socket-server.js'
import { Snapshots } from './snapshots.js'

export interface LiveFeed {
  readonly hub: LiveHub
  readonly server: LiveServer
  attach(app: TemplatedApp): void
  /** Changes from this node's actors also go here (the Redis relay publishes them to other nodes). */
  onLocalChange(listener: (change: LiveChange) => void): void
  /** Printers deleted through this node (the Redis relay publishes them to other nodes). */
  onLocalRemoval(listener: (removal: LiveRemoval) => void): void
  /** Printer tasks changed through this node (the Redis relay tells the other nodes). */
  onLocalTaskChange(listener: (touched: TaskTouched) => void): void
  /**
   * Told of every change this node learns of, its own or relayed from another node: a printer
   * changed or was removed, a printer task changed, an organization's queue was passed. What the
   * MCP endpoint's change notifications follow (src/mcp/change-feed.ts).
   */
  onOrganizationChange(listener: (change: OrganizationChange) => void): () => void
  /** A printer task changed through another node: read back here if this node follows its host. */
  taskChanged(touched: TaskTouched): void
  /** An organization's queue changed (a pass here or on another node): read back here if this node follows it. */
  queueChanged(organizationId: string): void
  /**
   * A printer's configuration changed through this node (created, renamed, retyped, deleted):
   * dashboards see it now, not at its next event. Reads the committed row; a printer no longer
   * there is announced as removed.
   */
  printerConfigChanged(organizationId: string, printerId: string): Promise<void>
  close(): void
}

/** What changed in an organization, as far as a follower of its printers, jobs and queue needs to know. */
export type OrganizationChange = { organizationId: string; kind: 'printer'; printerId: string } | { organizationId: string; kind: 'task' | 'queue' }

export function createLiveFeed(options: {
  db: Database
  printers: PrinterRuntime
  /** The dispatcher: host topic snapshots, and its hook says which task changed. */
  tasks: TaskSource
  /** The `queue` topic's content (src/queue/queue-view.ts, queueHead). */
  queue: (organizationId: string) => Promise<object>
  /** A paired bridge key's host binding, checked on a host topic's subscription. */
  checkHost?: (principal: Principal, hostId: string) => Promise<void>
  authenticate: Authenticate
  sessions: Sessions
  logger: Logger
  metrics: MetricsRegistry
  clock: Clock
}): LiveFeed {
  let app: TemplatedApp | undefined
  const hub = new LiveHub({
    publish: (topic, message, isBinary) => app?.publish(topic, message, isBinary),
    subscribers: (topic) => app?.numSubscribers(topic) ?? 0,
  })
  const snapshots = new Snapshots(options.db, options.clock, options.tasks, options.queue)
  const server = new LiveServer({
    hub,
    snapshots,
    logger: options.logger,
    metrics: options.metrics,
    clock: options.clock,
    currentKeys: (ids) => currentApiKeyScopes(options.db.sql, ids, new Date(options.clock.now())),
    oauthStanding: (claims) => oauthStanding(options.db.sql, claims),
    ...(options.checkHost === undefined ? {} : { checkHost: options.checkHost }),
    authenticate: async (headers, query) => {
      const principal = await options.authenticate({ kind: 'organization', scope: 'printers:read' }, headers, query)
      const token = bearerToken(headers)
      // A session token's expiry ends the connection too (4001); the page refreshes and resumes.
      // An OAuth token was verified just now by authenticate; its expiry is read from it.
      const expiresAt = token === undefined ? null : principal.kind === 'oauth' ? (decodeJwt(token).exp ?? null) : (await options.sessions.verifyAccessToken(token)).expiresAt
      return { principal, expiresAt }
    },
  })
  const local = new Set<(change: LiveChange) => void>()
  const removals = new Set<(removal: LiveRemoval) => void>()
  const localTasks = new Set<(touched: TaskTouched) => void>()
  const organizationChanges = new Set<(change: OrganizationChange) => void>()
  const organizationChanged = (change: OrganizationChange): void => {
    for (const listener of organizationChanges) listener(change)
  }
  hub.onChange((touched) => organizationChanged({ organizationId: touched.organizationId, kind: 'printer', printerId: touched.printerId }))
  const hostTasks = new HostTaskFeed(hub, options.tasks, options.logger)
  const queueFeed = new QueueFeed(hub, options.queue, options.logger)
  options.tasks.onTaskChange((organizationId, hostId, taskId) => {
    const touched = { organizationId, hostId, taskId }
    hostTasks.changed(touched)
    for (const listener of localTasks) listener(touched)
    organizationChanged({ organizationId, kind: 'task' })
  })
  const published = options.metrics.counter('live_changes_total', 'Printer changes published to the live feed, by origin (local actors or another node).', ['origin'])
  const fromHere = published.cell({ origin: 'local' })
  options.printers.onChange((change) => {
    const live = liveChangeOf(change, options.clock.now())
    fromHere.inc()
    hub.printerChanged(live)
    for (const listener of local) listener(live)
  })
  return {
    hub,
    server,
    attach(a) {
      app = a
      server.attach(a)
    },
    onLocalChange(listener) {
      local.add(listener)
    },
    onLocalRemoval(listener) {
      removals.add(listener)
    },
    onLocalTaskChange(listener) {
      localTasks.add(listener)
    },
    onOrganizationChange(listener) {
      organizationChanges.add(listener)
      return () => organizationChanges.delete(listener)
    },
    taskChanged(touched) {
      hostTasks.changed(touched)
      organizationChanged({ organizationId: touched.organizationId, kind: 'task' })
    },
    queueChanged(organizationId) {
      queueFeed.changed(organizationId)
      organizationChanged({ organizationId, kind: 'queue' })
    },
    async printerConfigChanged(organizationId, printerId) {
      const found = await snapshots.printer(organizationId, printerId)
      if (found === undefined) {
        const removal = { organizationId, printerId }
        hub.printerRemoved(removal)
        for (const listener of removals) listener(removal)
        return
      }
      const change: LiveChange = { organizationId, printer: found.printer, events: [], jobs: [] }
      fromHere.inc()
      hub.printerChanged(change)
      for (const listener of local) listener(change)
    },
    close() {
      server.close()
    },
  }
}
