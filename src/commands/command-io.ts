/**
 * Where a long-running command (`printfarm bridge`, `printfarm display-sim`,
 * `printfarm bridge-sim`) writes, what stops it and what time it is: the
 * process's own streams, signals and the system clock, unless a test passes
 * others.
 */
import { systemClock, type Clock } from '../../actors/clock.js'

export interface CommandIo {
  out(text: string): void
  err(text: string): void
  /** Resolves when the user asks it to stop. While it is awaited the process keeps running: the clock's timers do not hold it open. */
  stopRequested(): Promise<void>
  /** The time the command reads, and its timers. */
  clock: Clock
}

export const processIo: CommandIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  stopRequested: () =>
    new Promise((resolve) => {
      // The system clock's timers are unref'd (actors/clock.ts): a command whose only work is a wait
      // (a poll, a retry) would otherwise end the moment it waits. This handle holds the process
      // until the signal; the command's end exits the process anyway (src/cli.ts).
      const running = systemClock.setInterval(() => undefined, 3_600_000) as { ref(): void }
      running.ref()
      const stop = () => {
        systemClock.clearInterval(running)
        resolve()
      }
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    }),
  clock: systemClock,
}
