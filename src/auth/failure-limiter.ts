/**
 * Counts failures (wrong passwords, bad codes) per key in a fixed window and
 * refuses further attempts once a key reaches its limit, until the window
 * ends. Successes are not counted, so legitimate use (a farm's many bridges
 * behind one address signing in) never meets it.
 *
 * Per node: with several nodes an attacker's budget is the limit times the
 * node count, which still keeps guessing hopeless at these limits. Memory is
 * bounded: past maxKeys the oldest windows are dropped first.
 */
export interface FailureLimit {
  /** Failures allowed per window. */
  limit: number
  windowMs: number
  maxKeys?: number
}

interface Window {
  failures: number
  endsAt: number
}

export class FailureLimiter {
  readonly #windows = new Map<string, Window>()
  readonly #limit: number
  readonly #windowMs: number
  readonly #maxKeys: number
  readonly #now: () => number

  constructor(options: FailureLimit, now: () => number = Date.now) {
    this.#limit = options.limit
    this.#windowMs = options.windowMs
    this.#maxKeys = options.maxKeys ?? 100_000
    this.#now = now
  }

  /** Seconds to wait when the key is blocked, else undefined. */
  blockedFor(key: string): number | undefined {
    const window = this.#windows.get(key)
    if (window === undefined) return undefined
    const now = this.#now()
    if (now >= window.endsAt) {
      this.#windows.delete(key)
      return undefined
    }
    return window.failures >= this.#limit ? Math.max(1, Math.ceil((window.endsAt - now) / 1000)) : undefined
  }

  fail(key: string): void {
    const now = this.#now()
    let window = this.#windows.get(key)
    if (window === undefined || now >= window.endsAt) {
      this.#windows.delete(key)
      if (this.#windows.size >= this.#maxKeys) this.#evict(now)
      window = { failures: 0, endsAt: now + this.#windowMs }
      this.#windows.set(key, window)
    }
    window.failures++
  }

  reset(key: string): void {
    this.#windows.delete(key)
  }

  get size(): number {
    return this.#windows.size
  }

  #evict(now: number): void {
    for (const [key, window] of this.#windows) {
      if (now >= window.endsAt) this.#windows.delete(key)
    }
    // Still full: drop the oldest (Map iteration is insertion order).
    for (const key of this.#windows.keys()) {
      if (this.#windows.size < this.#maxKeys) break
      this.#windows.delete(key)
    }
  }
}
