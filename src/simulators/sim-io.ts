/**
 * Where a long-running simulator command (`printfarm display-sim`,
 * `printfarm bridge-sim`) writes, what stops it and what time it is: the
 * process's own streams, signals and the system clock, unless a test passes
 * others.
 */
import { systemClock, type Clock } from '../../actors/clock.js'

export interface SimIo {
  out(text: string): void
  err(text: string): void
  /** Resolves when the user asks it to stop. */
  stopRequested(): Promise<void>
  /** The time the simulator reads and its timers. */
  clock: Clock
}

export const processIo: SimIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  stopRequested: () =>
    new Promise((resolve) => {
      process.once('SIGINT', () => resolve())
      process.once('SIGTERM', () => resolve())
    }),
  clock: systemClock,
}
