/**
 * When an MCP resource changed (the 2026-07-28 protocol's
 * `notifications/resources/updated` on `subscriptions/listen` streams),
 * from what the live feed tells this node: its own changes and, through the
 * Redis relay, every other node's (src/live/index.ts, onOrganizationChange).
 *
 * - A printer: each change of it (events, presence, configuration, removal).
 * - A print job: its row is what the job resource shows, so on any change in
 *   its organization (a printer's events, a task, a queue pass) the rows of
 *   the jobs followed there are fingerprinted, in one query, and a job whose
 *   fingerprint moved is announced. Only jobs someone follows are read, only
 *   in organizations where a stream is open.
 * - The queue: on a task change or a queue pass, the head of the queue (what
 *   the live `queue` topic shows) is read and announced when it differs.
 *
 * Decision: at most one notification per resource per second (the first at
 * once, the changes within the second after it as one more at its end). An
 * update says "read me again", and an agent reading a printer on each of
 * its event batches would only spend tokens; the last change of a burst is
 * always announced.
 */
import type { Clock } from '../../actors/clock.js'
import type { Sql } from 'postgres'
import type { OrganizationChange } from '../live/index.js'
import type { Logger } from '../observability/log.js'
import type { ListenScope, OrganizationBus } from './change-bus.js'
import { jobUri, printerUri, queueUri } from './resources.js'

export interface ChangeFeedOptions {
  bus: OrganizationBus
  sql: Sql
  /** The head of an organization's queue (its JSON is compared). */
  queueHead: (organizationId: string) => Promise<object>
  logger: Logger
  /** The node's clock (the throttle's timers). */
  clock: Pick<Clock, 'setTimeout'>
  /** The least time between two notifications of one resource. */
  intervalMs?: number
}

/** Runs a task at most once per interval per key: now, and once more at the interval's end if asked meanwhile. */
class Throttle {
  readonly #intervalMs: number
  readonly #clock: Pick<Clock, 'setTimeout'>
  readonly #cooling = new Map<string, { again: boolean }>()

  constructor(intervalMs: number, clock: Pick<Clock, 'setTimeout'>) {
    this.#intervalMs = intervalMs
    this.#clock = clock
  }

  run(key: string, task: () => void): void {
    const cooling = this.#cooling.get(key)
    if (cooling !== undefined) {
      cooling.again = true
      return
    }
    const state = { again: false }
    this.#cooling.set(key, state)
    task()
    this.#clock.setTimeout(() => {
      this.#cooling.delete(key)
      if (state.again) this.run(key, task)
    }, this.#intervalMs)
  }
}

export class McpChangeFeed {
  readonly #o: ChangeFeedOptions
  readonly #throttle: Throttle
  /** Per organization, the fingerprint of each followed job as last seen ('' once gone). */
  readonly #jobVersions = new Map<string, Map<number, string>>()
  /** Per organization, the queue head as last seen. */
  readonly #queueVersions = new Map<string, string>()
  readonly #checking = new Set<string>()
  readonly #checkAgain = new Set<string>()

  constructor(options: ChangeFeedOptions) {
    this.#o = options
    this.#throttle = new Throttle(options.intervalMs ?? 1_000, options.clock)
  }

  /** Fingerprints of jobs of the organization (missing ones left out): what a stream that starts following them starts from. */
  async jobVersions(organizationId: string, jobIds: readonly number[]): Promise<Map<number, string>> {
    if (jobIds.length === 0) return new Map()
    const rows = await this.#o.sql<{ id: string; version: string }[]>`
      select j.id::text as id, md5(j::text) as version from print_jobs j where j.organization_id = ${organizationId} and j.id = any(${jobIds.map(String)}::bigint[])`
    return new Map(rows.map((row) => [Number(row.id), row.version]))
  }

  /**
   * A stream starts following (called before it opens): its jobs' and queue's current versions
   * become the ones a change is measured against. Where another open stream follows the same
   * resource, its version stays: a change that stream has not been told of yet must still be.
   */
  async started(organizationId: string, jobs: ReadonlyMap<number, string>, queue: boolean): Promise<void> {
    const { bus } = this.#o
    let versions = this.#jobVersions.get(organizationId)
    if (versions === undefined) this.#jobVersions.set(organizationId, (versions = new Map()))
    const followed = bus.followedJobs(organizationId)
    for (const [id, version] of jobs) if (!followed.has(id) || !versions.has(id)) versions.set(id, version)
    if (queue && (!bus.followsQueue(organizationId) || !this.#queueVersions.has(organizationId))) {
      this.#queueVersions.set(organizationId, JSON.stringify(await this.#o.queueHead(organizationId)))
    }
  }

  changed(change: OrganizationChange): void {
    const { bus } = this.#o
    const org = change.organizationId
    // Versions are forgotten when streams end (closed()), not here: a stream about to open has
    // recorded its own already.
    if (bus.streams(org) === 0) return
    if (change.kind === 'printer' && bus.followsPrinter(org, change.printerId)) {
      const uri = printerUri(change.printerId)
      this.#throttle.run(`${org} ${uri}`, () => bus.deliver(org, uri))
    }
    if (bus.followedJobs(org).size > 0) this.#throttle.run(`${org} jobs`, () => this.#checkJobsSoon(org))
    if (change.kind !== 'printer' && bus.followsQueue(org)) this.#throttle.run(`${org} queue`, () => void this.#checkQueue(org))
  }

  /** One check of an organization's jobs at a time; a change arriving meanwhile makes one more after it. */
  #checkJobsSoon(organizationId: string): void {
    if (this.#checking.has(organizationId)) {
      this.#checkAgain.add(organizationId)
      return
    }
    this.#checking.add(organizationId)
    void (async () => {
      try {
        do {
          this.#checkAgain.delete(organizationId)
          await this.#checkJobs(organizationId)
        } while (this.#checkAgain.has(organizationId))
      } finally {
        this.#checking.delete(organizationId)
      }
    })()
  }

  async #checkJobs(organizationId: string): Promise<void> {
    const ids = [...this.#o.bus.followedJobs(organizationId).keys()]
    if (ids.length === 0) return
    try {
      const now = await this.jobVersions(organizationId, ids)
      let versions = this.#jobVersions.get(organizationId)
      if (versions === undefined) this.#jobVersions.set(organizationId, (versions = new Map()))
      // Followed now, after the read: a stream opened meanwhile keeps the version it started from.
      const followed = this.#o.bus.followedJobs(organizationId)
      for (const id of ids) {
        if (!followed.has(id)) continue
        const version = now.get(id) ?? ''
        const before = versions.get(id)
        versions.set(id, version)
        if (before !== undefined && before !== version) this.#o.bus.deliver(organizationId, jobUri(id))
      }
    } catch (error) {
      this.#o.logger.warn('mcp: reading followed print jobs failed', { organizationId, error: String(error) })
    }
  }

  /** A stream ended: the versions of what nobody follows any more are forgotten. */
  closed(scope: ListenScope): void {
    const org = scope.organizationId
    const { bus } = this.#o
    if (bus.streams(org) === 0) return this.#forget(org)
    const versions = this.#jobVersions.get(org)
    const followed = bus.followedJobs(org)
    if (versions !== undefined) for (const id of scope.jobs) if (!followed.has(id)) versions.delete(id)
    if (scope.queue && !bus.followsQueue(org)) this.#queueVersions.delete(org)
  }

  async #checkQueue(organizationId: string): Promise<void> {
    try {
      const text = JSON.stringify(await this.#o.queueHead(organizationId))
      const before = this.#queueVersions.get(organizationId)
      this.#queueVersions.set(organizationId, text)
      if (before !== undefined && before !== text) this.#o.bus.deliver(organizationId, queueUri)
    } catch (error) {
      this.#o.logger.warn('mcp: reading the queue failed', { organizationId, error: String(error) })
    }
  }

  #forget(organizationId: string): void {
    this.#jobVersions.delete(organizationId)
    this.#queueVersions.delete(organizationId)
  }
}
