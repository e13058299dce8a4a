/**
 * Display changes for the live feed's `displays` topic: after a change is
 * committed (registration, rename, pixels, rebind, assignment, receipt,
 * publication error, capability report), the display's whole live view is
 * read back from the store and handed on, so a frame is never ahead of the
 * store and never a partial picture.
 *
 * Per display, one read at a time: changes arriving meanwhile are coalesced
 * into one more read (latest wins). Publication bookkeeping is filtered out
 * before it gets here (src/displays/index.ts), and a change nobody wants
 * (no dashboard on this node follows the organization's displays, no other
 * node to tell) is not read at all: a subscription that starts later reads
 * its snapshot from the store.
 */
import { storedStatus, type StoredActivation } from '../../actors/display-persistence.js'
import type { Logger } from '../observability/log.js'
import type { DisplayLive, DisplayStore } from './display-store.js'

export type DisplayLiveListener = (organizationId: string, display: DisplayLive | { id: string; deleted: true }) => void

export class DisplayLiveChanges {
  readonly #store: DisplayStore
  readonly #logger: Logger
  /** Each listener, with whether it wants an organization's changes now (a read is spent only if one does). */
  readonly #listeners = new Map<DisplayLiveListener, (organizationId: string) => boolean>()
  readonly #reading = new Set<string>()
  readonly #again = new Set<string>()
  /** Per display, what a listener was last told of (`storedChanged`). */
  readonly #shown = new Map<string, string>()

  constructor(store: DisplayStore, logger: Logger) {
    this.#store = store
    this.#logger = logger
  }

  /**
   * `wants`: whether the listener needs this organization's changes now (the local live feed only
   * while someone follows its `displays` topic; the Redis relay always, for the other nodes).
   */
  onChange(listener: DisplayLiveListener, wants: (organizationId: string) => boolean = () => true): () => void {
    this.#listeners.set(listener, wants)
    return () => this.#listeners.delete(listener)
  }

  /**
   * The display runtime's change: publication bookkeeping (attempt counts, the 45 s republish)
   * changes nothing a dashboard shows, so only a change of binding, generation, status, applied
   * identity or error is read back. With nobody to tell, nothing is compared or read, and the
   * next change is read whatever it is: what a later subscriber saw is its snapshot, not what was
   * last shown here.
   */
  storedChanged(stored: StoredActivation): void {
    if (!this.wanted(stored.organizationId)) {
      this.#shown.delete(stored.displayId)
      return
    }
    const shown = JSON.stringify([stored.bindingEpoch, stored.generation, storedStatus(stored), stored.applied, stored.errorCode, stored.publishError])
    if (this.#shown.get(stored.displayId) === shown) return
    this.#shown.set(stored.displayId, shown)
    this.changed(stored.organizationId, stored.displayId)
  }

  /** The display is gone. */
  forget(displayId: string): void {
    this.#shown.delete(displayId)
  }

  /** Whether a listener wants this organization's changes now. */
  wanted(organizationId: string): boolean {
    for (const wants of this.#listeners.values()) if (wants(organizationId)) return true
    return false
  }

  changed(organizationId: string, displayId: string): void {
    if (!this.wanted(organizationId)) return
    if (this.#reading.has(displayId)) {
      this.#again.add(displayId)
      return
    }
    this.#reading.add(displayId)
    void this.#read(organizationId, displayId)
  }

  async #read(organizationId: string, displayId: string): Promise<void> {
    try {
      for (;;) {
        this.#again.delete(displayId)
        const [display] = await this.#store.live(organizationId, displayId)
        for (const listener of this.#listeners.keys()) listener(organizationId, display ?? { id: displayId, deleted: true })
        if (!this.#again.has(displayId)) return
      }
    } catch (error) {
      this.#logger.warn('reading a display for the live feed failed', { displayId, error })
    } finally {
      this.#reading.delete(displayId)
    }
  }
}
