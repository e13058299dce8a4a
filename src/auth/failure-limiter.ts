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
import { ServiceError } from '../../protocol/errors.js'

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

  /**
   * Counts an attempt before it is made and says whether it may go ahead:
   * the check and the count are one step, so parallel requests cannot all
   * pass the check before any of them is counted. Returns the seconds to wait
   * when blocked (nothing counted), else undefined. A caller whose attempt
   * succeeds gives it back with `release`.
   */
  acquire(key: string): number | undefined {
    const wait = this.blockedFor(key)
    if (wait !== undefined) return wait
    this.fail(key)
    return undefined
  }

  /** Gives back one counted attempt (it succeeded). */
  release(key: string): void {
    const window = this.#windows.get(key)
    if (window !== undefined && window.failures > 0) window.failures--
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

/**
 * The unit an address limit counts: an IPv4 address, or an IPv6 /64 (one
 * household or host usually holds a whole /64, and rotating through it must
 * not multiply the budget). IPv4-mapped IPv6 counts as its IPv4 address.
 */
/** 429 rate_limited with Retry-After: "too many {what}; try again in {seconds} s". */
export function rateLimited(what: string, seconds: number): ServiceError {
  return new ServiceError('rate_limited', `too many ${what}; try again in ${seconds} s`, { headers: { 'retry-after': String(seconds) } })
}

export function addressGroup(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return mapped[1]!
  if (!address.includes(':')) return address
  const [head = '', tail = ''] = address.split('::')
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const groups = address.includes('::') ? [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right] : left
  return groups.slice(0, 4).map((g) => g.toLowerCase().replace(/^0+(?=.)/, '')).join(':') + '::/64'
}

/** Acquires an attempt on every limiter, or none: returns the wait when one of them is blocked. */
export function acquireAll(entries: readonly (readonly [FailureLimiter, string])[]): number | undefined {
  const taken: (readonly [FailureLimiter, string])[] = []
  for (const entry of entries) {
    const wait = entry[0].acquire(entry[1])
    if (wait !== undefined) {
      for (const [limiter, key] of taken) limiter.release(key)
      return wait
    }
    taken.push(entry)
  }
  return undefined
}

export function releaseAll(entries: readonly (readonly [FailureLimiter, string])[]): void {
  for (const [limiter, key] of entries) limiter.release(key)
}
