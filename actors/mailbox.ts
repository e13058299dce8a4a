/**
 * One message at a time per entity (docs/operations.md): tasks posted to a
 * mailbox run strictly one after another, in the order posted, whatever
 * each awaits. A failing task rejects its own promise only.
 */
export class Mailbox {
  readonly #queue: (() => Promise<void>)[] = []
  #running = false

  /** Queued plus running. */
  get size(): number {
    return this.#queue.length + (this.#running ? 1 : 0)
  }

  get idle(): boolean {
    return !this.#running && this.#queue.length === 0
  }

  post<T>(task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(() => {
        // A task that throws before its first await rejects its own promise too, and the mailbox goes on.
        try {
          return task().then(resolve, reject)
        } catch (error) {
          reject(error)
          return Promise.resolve()
        }
      })
      if (!this.#running) void this.#drain()
    })
  }

  /** Resolves once everything posted so far has run. */
  drained(): Promise<void> {
    return this.idle ? Promise.resolve() : this.post(async () => undefined)
  }

  async #drain(): Promise<void> {
    this.#running = true
    try {
      for (let task = this.#queue.shift(); task !== undefined; task = this.#queue.shift()) await task()
    } finally {
      this.#running = false
    }
  }
}
