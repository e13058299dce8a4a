/** Polling for tests over the real interfaces, where the service acts on its own time (the queue, the live feed). */

/** Reads every 50 ms until `ok` holds or `timeoutMs` passed; answers the last value read either way, for the test to judge. */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const end = performance.now() + timeoutMs
  for (;;) {
    const v = await read()
    if (ok(v) || performance.now() > end) return v
    await new Promise((r) => setTimeout(r, 50))
  }
}
