/**
 * Display changes for the live feed's `displays` topic: after a change is
 * committed (registration, rename, pixels, rebind, assignment, receipt,
 * publication error, capability report), the display's whole live view is
 * read back from the store and handed on, so a frame is never ahead of the
 * store and never a partial picture.
 *
 * Per display, one read at a time: changes arriving meanwhile are coalesced
 * into one more read (latest wins), and a view identical to the last one
 * handed on is not repeated (the 45 s republish bookkeeping changes nothing
 * a dashboard shows).
 */
import type { Logger } from '../log.js'
import type { DisplayLive, DisplayStore } from './display-store.js'

export type DisplayLiveListener = (organizationId: string, display: DisplayLive | { id: string; deleted: true }) => void

/** Views remembered to skip repeats; beyond this the oldest is forgotten (a repeat then costs one frame). */
const rememberedViews = 10_000

export class DisplayLiveChanges {
  readonly #store: DisplayStore
  readonly #logger: Logger
  readonly #listeners = new Set<DisplayLiveListener>()
  readonly #reading = new Set<string>()
  readonly #again = new Set<string>()
  readonly #last = new Map<string, string>()

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
        this.#emit(organizationId, displayId, display ?? { id: displayId, deleted: true })
        if (!this.#again.has(displayId)) return
      }
    } catch (error) {
      this.#logger.warn('reading a display for the live feed failed', { displayId, error })
    } finally {
      this.#reading.delete(displayId)
    }
  }

  #emit(organizationId: string, displayId: string, display: DisplayLive | { id: string; deleted: true }): void {
    const text = JSON.stringify(display)
    if (this.#last.get(displayId) === text) return
    // Re-inserted, so the map's order is the order of last change (the oldest is forgotten first).
    this.#last.delete(displayId)
    if (!('deleted' in display)) {
      if (this.#last.size >= rememberedViews) this.#last.delete(this.#last.keys().next().value!)
      this.#last.set(displayId, text)
    }
    for (const listener of this.#listeners) listener(organizationId, display)
  }
}
