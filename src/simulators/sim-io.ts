/**
 * Where a long-running simulator command (`printfarm display-sim`,
 * `printfarm bridge-sim`) writes and what stops it: the process's own
 * streams and signals, unless a test passes others.
 */
export interface SimIo {
  out(text: string): void
  err(text: string): void
  /** Resolves when the user asks it to stop. */
  stopRequested(): Promise<void>
}

export const processIo: SimIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  stopRequested: () =>
    new Promise((resolve) => {
      process.once('SIGINT', () => resolve())
      process.once('SIGTERM', () => resolve())
    }),
}
