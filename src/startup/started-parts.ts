/**
 * What a start has brought up so far, each part by name, undone in reverse order: the one
 * teardown path, for a start that failed halfway and for a running node's stop alike, so the two
 * cannot drift apart (a part started is a part stopped). Each closer must be safe to call once its
 * part is up. The log says which part stopped, how long it took, and which one failed to.
 */
import { performance } from 'node:perf_hooks'
import type { Logger } from '../observability/log.js'

export class StartedParts {
  readonly #parts: { name: string; close: (() => unknown) | undefined }[] = []
  readonly #logger: Logger

  constructor(logger: Logger) {
    this.#logger = logger
  }

  /** `name` is up (called once it is): it is stopped with `close` (nothing to do without one). */
  add(name: string, close?: () => unknown): void {
    this.#parts.push({ name, close })
    this.#logger.debug('part started', { part: name })
  }

  /** The parts up now, in the order they started. */
  get started(): readonly string[] {
    return this.#parts.map((p) => p.name)
  }

  /** Closes everything added, newest first; a closer that fails is logged and does not stop the others. */
  async undo(): Promise<void> {
    for (const { name, close } of this.#parts.splice(0).reverse()) {
      const began = performance.now()
      await Promise.resolve()
        .then(() => close?.())
        .then(
          () => this.#logger.debug('part stopped', { part: name, ms: Math.round(performance.now() - began) }),
          (error: unknown) => this.#logger.warn('stopping a part of the node failed', { part: name, error }),
        )
    }
  }
}
