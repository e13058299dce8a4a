/**
 * What a start has brought up so far, undone in reverse order when a later
 * step fails: the one teardown path of a failed start. (A running node stops
 * through its own ordered drain instead; see service.ts.)
 */
import type { Logger } from '../log.js'

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
        .catch((error: unknown) => this.#logger.warn('closing a part of the failed start failed', { error }))
    }
  }
}
