/**
 * What a start has brought up so far, undone in reverse order: the one
 * teardown path, for a start that failed halfway and for a running node's
 * stop alike, so the two cannot drift apart (a part started is a part
 * stopped). Each closer must be safe to call once its part is up.
 */
import type { Logger } from '../observability/log.js'

export class StartedParts {
  readonly #closers: (() => unknown)[] = []
  readonly #logger: Logger

  constructor(logger: Logger) {
    this.#logger = logger
  }

  add(close: () => unknown): void {
    this.#closers.push(close)
  }

  /** Closes everything added, newest first; a closer that fails is logged and does not stop the others. */
  async undo(): Promise<void> {
    for (const close of this.#closers.splice(0).reverse()) {
      await Promise.resolve()
        .then(close)
        .catch((error: unknown) => this.#logger.warn('stopping a part of the node failed', { error }))
    }
  }
}
