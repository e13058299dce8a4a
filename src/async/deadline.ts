/**
 * A bound on a wait: ioredis retries a refused connection forever and a
 * store that does not answer never rejects, so a start-up or a probe that
 * waited on them alone would never end.
 */
import type { Timers } from '../../actors/clock.js'

/** `promise`, or a rejection with `timedOut()` once `ms` pass first on the node's clock; the timer is cleared either way. */
export function withTimeout<T>(promise: Promise<T>, ms: number, timers: Timers, timedOut: () => Error = () => new Error(`no answer within ${ms} ms`)): Promise<T> {
  let timer: unknown
  const deadline = new Promise<never>((_, reject) => {
    timer = timers.setTimeout(() => reject(timedOut()), ms)
  })
  return Promise.race([promise, deadline]).finally(() => timers.clearTimeout(timer))
}
