/**
 * What a start has brought up so far, undone in reverse order when a later
 * step fails: the one teardown path of a failed start. (A running node stops
 * through its own ordered drain instead; see service.ts.)
 */
export class StartedParts {
  readonly #closers: (() => unknown)[] = []

  add(close: () => unknown): void {
    this.#closers.push(close)
  }

  /** Closes everything added, newest first; a closer that fails does not stop the others. */
  async undo(): Promise<void> {
    for (const close of this.#closers.splice(0).reverse()) await Promise.resolve().then(close).catch(() => undefined)
  }
}
