/**
 * The one clock of a node's runtime (STYLE practices 2 and 15): what time it
 * is and when to run something later. The service creates one and injects it
 * into the printer runtime (and through it the printer actors' XState
 * delays), the display runtime and the live feed; nothing there reads
 * `Date.now()` or starts a timer of its own, so a test drives them all on one
 * simulated clock (test/helpers/clock.ts) and asserts rules, not timings.
 *
 * It is also XState's clock interface (setTimeout/clearTimeout), so the
 * actors' delayed transitions run on the same time as the runtime's sweeps.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
  setInterval(fn: () => void, ms: number): unknown
  clearInterval(handle: unknown): void
}

/** What a module that only waits for something (an answer, a connection) needs of the clock. */
export type Timers = Pick<Clock, 'setTimeout' | 'clearTimeout'>

/** What this clock's own setTimeout/setInterval returned (a handle is only ever given back to the clock that made it). */
type Handle = ReturnType<typeof setTimeout>

/**
 * The wall clock and Node's timers. Timers are unref'd: a node is kept alive
 * by its servers and connections, never by a pending sweep or delay, so a
 * stop that forgot one cannot hang the process.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as Handle),
  setInterval: (fn, ms) => setInterval(fn, ms).unref(),
  clearInterval: (handle) => clearInterval(handle as Handle),
}
