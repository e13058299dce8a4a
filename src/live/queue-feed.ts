/**
 * The `queue` topic's events: the first waiting jobs of an organization's
 * queue, whole, each time a pass of its queue is done (on whichever node owns
 * the queue; the Redis relay tells the others). Like the host topics, the
 * notice crosses nodes and each node reads the queue itself, only if one of
 * its sockets follows it; reads of one organization run one at a time, with
 * notices arriving meanwhile coalesced into one more read, and a frame goes
 * out only when the queue looks different from the last one sent.
 */
import type { Logger } from '../observability/log.js'
import type { LiveHub } from './hub.js'

export class QueueFeed {
  readonly #hub: LiveHub
  readonly #read: (organizationId: string) => Promise<object>
  readonly #logger: Logger
  readonly #reading = new Set<string>()
  readonly #again = new Set<string>()
  readonly #last = new Map<string, string>()

  constructor(hub: LiveHub, read: (organizationId: string) => Promise<object>, logger: Logger) {
    this.#hub = hub
    this.#read = read
    this.#logger = logger
  }

  changed(organizationId: string): void {
    if (!this.#hub.follows(organizationId, 'queue')) {
      this.#last.delete(organizationId)
      return
    }
    if (this.#reading.has(organizationId)) {
      this.#again.add(organizationId)
      return
    }
    this.#reading.add(organizationId)
    void this.#readLoop(organizationId)
  }

  async #readLoop(organizationId: string): Promise<void> {
    try {
      do {
        this.#again.delete(organizationId)
        try {
          const queue = await this.#read(organizationId)
          const text = JSON.stringify(queue)
          if (this.#last.get(organizationId) === text) continue
          this.#last.set(organizationId, text)
          this.#hub.queueChanged(organizationId, queue)
        } catch (error) {
          this.#logger.warn('reading the queue for the live feed failed', { organizationId, error: String(error) })
        }
      } while (this.#again.has(organizationId))
    } finally {
      this.#reading.delete(organizationId)
    }
  }
}
