/**
 * Display changes for the live feed's `displays` topic: after a change is
 * committed (registration, rename, pixels, rebind, assignment, receipt,
 * publication error, capability report), the display's whole live view is
 * read back from the store and handed on, so a frame is never ahead of the
 * store and never a partial picture.
 *
 * Per display, one read at a time: changes arriving meanwhile are coalesced
 * into one more read (latest wins). Publication bookkeeping is filtered out
 * before it gets here (src/displays/index.ts), so no read is spent on it.
 */
import type { Logger } from '../log.js'
import type { DisplayLive, DisplayStore } from './display-store.js'

export type DisplayLiveListener = (organizationId: string, display: DisplayLive | { id: string; deleted: true }) => void

export class DisplayLiveChanges {
  readonly #store: DisplayStore
  readonly #logger: Logger
  readonly #listeners = new Set<DisplayLiveListener>()
  readonly #reading = new Set<string>()
  readonly #again = new Set<string>()

  constructor(store: DisplayStore, logger: Logger) {
    this.#store = store
    this.#logger = logger
  }

  onChange(listener: DisplayLiveListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  changed(organizationId: string, displayId: string): void {
    if (this.#listeners.size === 0) return
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
        for (const listener of this.#listeners) listener(organizationId, display ?? { id: displayId, deleted: true })
        if (!this.#again.has(displayId)) return
      }
    } catch (error) {
      this.#logger.warn('reading a display for the live feed failed', { displayId, error })
    } finally {
      this.#reading.delete(displayId)
    }
  }
}
