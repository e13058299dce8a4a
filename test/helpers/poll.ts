/**
 * Polling for tests over the real interfaces, where the service acts on its own time (the queue, the live
 * feed, the broker): `until` answers the last value read for the test to judge; `waitFor` fails the wait.
 */

/** Reads every 50 ms until `ok` holds or `timeoutMs` passed; answers the last value read either way, for the test to judge. */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const end = performance.now() + timeoutMs
  for (;;) {
    const v = await read()
    if (ok(v) || performance.now() > end) return v
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** Checks every 25 ms until `check` holds (state reached through the broker has no other signal to wait on); throws after `timeoutMs`. */
export async function waitFor(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const end = performance.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
