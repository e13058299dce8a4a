/**
 * The status feed to displays (docs/displays.md; message format in
 * protocol/display-mqtt.ts): for every display, the display status of the
 * printer on each pixel, from the one classifier (protocol/display-status.ts)
 * over the committed printer state.
 *
 * - Published retained at QoS 1 on {base}/status/feed, so a display that
 *   (re)connects gets the latest at once.
 * - On change, coalesced: a printer change marks its displays dirty; a
 *   one-second tick publishes each dirty display once, whatever number of
 *   changes came in between.
 * - Refreshed every 30 s even without change, each message valid for 90 s:
 *   a display that sees expires_at pass without a newer message knows the
 *   feed is stale and applies its stale mode (the service, the broker or
 *   the link is gone). The refresh also moves COMPLETE to WAITING when its
 *   window ends.
 * - `sequence` rises with every message of a display; it starts from the
 *   clock (ms), so it keeps rising across restarts.
 * A pixel whose printer no longer exists shows UNKNOWN.
 */
import type { Clock } from '../../actors/clock.js'
import { feedLifetimeMs, feedRefreshMs, feedTopic, feedVersion, type DisplayAddress, type Feed } from '../../protocol/display-mqtt.js'
import type { Logger } from '../observability/log.js'
import type { Snapshots } from '../live/snapshots.js'
import type { DisplayStore } from './display-store.js'

interface FeedEntry {
  address: DisplayAddress
  pixels: string[]
  dirty: boolean
  lastAt: number
  sequence: number
  busy: boolean
}

export interface StatusFeedOptions {
  store: DisplayStore
  snapshots: Snapshots
  publish: (topic: string, payload: string) => Promise<void>
  logger: Logger
  /** The node's clock: the feed's ticks and the time of each publication. */
  clock: Clock
  /** Whether this node publishes the display's feed (the owner of its shard); all by default. */
  owns?: (displayId: string) => boolean
  /** Publications in flight at once (a farm of thousands of displays refreshes in waves, not all at once). */
  concurrency?: number
  tickMs?: number
}

export class StatusFeed {
  readonly #options: StatusFeedOptions
  readonly #displays = new Map<string, FeedEntry>()
  readonly #byPrinter = new Map<string, Set<string>>()
  #timer: unknown
  #inFlight = 0
  #stopped = false

  constructor(options: StatusFeedOptions) {
    this.#options = options
  }

  async start(): Promise<void> {
    await this.resume(() => true)
    this.#timer = this.#options.clock.setInterval(() => this.tick(), this.#options.tickMs ?? 1_000)
  }

  /** Loads the feeds of the owned displays `filter` selects (start, a shard taken). */
  async resume(filter: (displayId: string) => boolean): Promise<void> {
    for (const { displayId } of await this.#options.store.allPixels()) if (filter(displayId)) await this.reload(displayId)
  }

  /** Forgets the feeds of displays another node now publishes (a shard lost). */
  drop(filter: (displayId: string) => boolean): void {
    for (const [displayId, entry] of this.#displays) {
      if (!filter(displayId)) continue
      for (const printerId of entry.pixels) this.#byPrinter.get(printerId)?.delete(displayId)
      this.#displays.delete(displayId)
    }
  }

  stop(): void {
    this.#stopped = true
    this.#options.clock.clearInterval(this.#timer)
  }

  /** A printer's state changed (after its commit). */
  printerChanged(printerId: string): void {
    for (const displayId of this.#byPrinter.get(printerId) ?? []) {
      const entry = this.#displays.get(displayId)
      if (entry !== undefined) entry.dirty = true
    }
  }

  /** Reads a display's pixels and binding again (registered, changed, rebound, resynced); undefined address = deleted. */
  async reload(displayId: string): Promise<void> {
    if (this.#options.owns?.(displayId) === false) return this.drop((id) => id === displayId)
    const current = await this.#options.store.pixelsOf(displayId)
    const previous = this.#displays.get(displayId)
    if (previous !== undefined) {
      for (const printerId of previous.pixels) this.#byPrinter.get(printerId)?.delete(displayId)
      if (current === undefined || current.address.bindingEpoch !== previous.address.bindingEpoch) {
        // The old binding's retained feed must not greet a device that reconnects with an old credential.
        await this.#options.publish(feedTopic(previous.address), '').catch((error: unknown) => this.#options.logger.warn('clearing a feed failed', { error }))
      }
    }
    if (current === undefined) {
      this.#displays.delete(displayId)
      return
    }
    for (const printerId of current.pixels) {
      let set = this.#byPrinter.get(printerId)
      if (set === undefined) this.#byPrinter.set(printerId, (set = new Set()))
      set.add(displayId)
    }
    this.#displays.set(displayId, { address: current.address, pixels: current.pixels, dirty: true, lastAt: 0, sequence: previous?.sequence ?? 0, busy: false })
    this.tick()
  }

  /** Publishes what is dirty or due for refresh, within the concurrency bound. */
  tick(): void {
    if (this.#stopped) return
    const now = this.#options.clock.now()
    const limit = this.#options.concurrency ?? 64
    for (const [displayId, entry] of this.#displays) {
      if (this.#inFlight >= limit) return
      if (entry.busy || !(entry.dirty || now - entry.lastAt >= feedRefreshMs)) continue
      void this.#publish(displayId, entry)
    }
  }

  /** The feed message a display would get now (tests read it too). */
  async message(entry: { address: DisplayAddress; pixels: readonly string[] }, sequence: number, now: number): Promise<Feed> {
    const statuses = await this.#options.snapshots.statuses(entry.address.organizationId, entry.pixels)
    return {
      feed_version: feedVersion,
      organization_id: entry.address.organizationId,
      display_id: entry.address.displayId,
      binding_epoch: entry.address.bindingEpoch,
      sequence,
      published_at: new Date(now).toISOString(),
      expires_at: new Date(now + feedLifetimeMs).toISOString(),
      pixels: entry.pixels.map((id) => statuses.get(id) ?? 'UNKNOWN'),
    }
  }

  async #publish(displayId: string, entry: FeedEntry): Promise<void> {
    entry.busy = true
    entry.dirty = false
    this.#inFlight++
    const now = this.#options.clock.now()
    try {
      entry.sequence = Math.max(entry.sequence + 1, now)
      const feed = await this.message(entry, entry.sequence, now)
      // The display may have been rebound or removed while the statuses were read.
      if (this.#displays.get(displayId) !== entry) return
      await this.#options.publish(feedTopic(entry.address), JSON.stringify(feed))
      entry.lastAt = now
    } catch (error) {
      entry.dirty = true
      this.#options.logger.warn('status feed publication failed', { displayId, error })
    } finally {
      entry.busy = false
      this.#inFlight--
    }
  }
}
