/**
 * The simulated Clock (actors/clock.ts) for tests: time moves only when the
 * test says so, and every timer due on the way runs at its own time, in time
 * order (then in the order it was set), so a test reads like the rule it
 * checks ("the 20th failure stops publishing") and never sleeps.
 */
import { systemClock, type Clock } from '../../actors/clock.js'

interface Timer {
  at: number
  fn: () => void
  /** Set for an interval: it runs again this many ms later. */
  every: number | undefined
}

export class SimulatedClock implements Clock {
  time: number
  #next = 0
  readonly #timers = new Map<number, Timer>()

  constructor(start = 0) {
    this.time = start
  }

  now = (): number => this.time
  setTimeout = (fn: () => void, ms: number): number => this.#add(fn, ms, undefined)
  clearTimeout = (handle: unknown): void => this.#remove(handle)
  // An interval of 0 would never let time move on.
  setInterval = (fn: () => void, ms: number): number => this.#add(fn, ms, Math.max(1, ms))
  clearInterval = (handle: unknown): void => this.#remove(handle)

  /** Timers and intervals still set. */
  get pending(): number {
    return this.#timers.size
  }

  /** Moves time forward by `ms`, running what falls due on the way; what the timers start runs after. */
  tick(ms: number): void {
    const end = this.time + ms
    for (let due = this.#due(end); due !== undefined; due = this.#due(end)) this.#fire(due)
    this.time = end
  }

  /** Like tick, letting the promises each timer starts settle before the next timer runs, and at the end. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms
    for (;;) {
      await settle()
      const due = this.#due(end)
      if (due === undefined) break
      this.#fire(due)
    }
    this.time = end
    await settle()
  }

  #add(fn: () => void, ms: number, every: number | undefined): number {
    const id = ++this.#next
    this.#timers.set(id, { at: this.time + Math.max(0, ms), fn, every })
    return id
  }

  #remove(handle: unknown): void {
    if (typeof handle === 'number') this.#timers.delete(handle)
  }

  #due(end: number): [number, Timer] | undefined {
    let first: [number, Timer] | undefined
    for (const entry of this.#timers) if (entry[1].at <= end && (first === undefined || entry[1].at < first[1].at)) first = entry
    return first
  }

  #fire([id, timer]: [number, Timer]): void {
    this.time = Math.max(this.time, timer.at)
    if (timer.every === undefined) this.#timers.delete(id)
    else timer.at += timer.every
    timer.fn()
  }
}

/** Lets pending promise chains (a store write, a publication) run to their next wait. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
}

/**
 * The system clock, set ahead when the test says so: for tests over HTTP of what expires (codes,
 * claims, tokens), where the rest of the node (its timers, its sockets) keeps running on real time.
 */
export class ForwardClock implements Clock {
  #ahead = 0
  now = (): number => Date.now() + this.#ahead
  setTimeout = systemClock.setTimeout
  clearTimeout = systemClock.clearTimeout
  setInterval = systemClock.setInterval
  clearInterval = systemClock.clearInterval

  /** From now on the node's time is `ms` later than it was. */
  forward(ms: number): void {
    this.#ahead += ms
  }
}
