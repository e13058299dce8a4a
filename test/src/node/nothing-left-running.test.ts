/**
 * A node that starts and stops leaves nothing running in its process: no
 * timer, socket, server or child of its own outlives `stop()` (with the
 * stores of this run: PostgreSQL, Redis and Mosquitto when configured, the
 * embedded ones otherwise). Node's own list of active resources is compared
 * with the one before the start; the wait for it to settle is bounded.
 */
import t from 'tap'
import { loadConfig } from '../../../src/node/config.js'
import { startService } from '../../../src/node/service.js'
import { captureLogger, copyFreshCluster, testEnv } from '../../helpers/service.js'
import { request } from '../../helpers/http.js'

const counts = (list: readonly string[]): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const kind of list) out[kind] = (out[kind] ?? 0) + 1
  return out
}

/** The resources beyond `baseline`, once they have settled (at most `ms`). */
async function leftOver(baseline: Record<string, number>, ms: number): Promise<Record<string, number>> {
  const end = performance.now() + ms
  for (;;) {
    const now = counts(process.getActiveResourcesInfo())
    const extra = Object.fromEntries(Object.entries(now).filter(([kind, n]) => n > (baseline[kind] ?? 0)).map(([kind, n]) => [kind, n - (baseline[kind] ?? 0)]))
    if (Object.keys(extra).length === 0 || performance.now() > end) return extra
    await new Promise((r) => setImmediate(r))
  }
}

t.test('nothing left running - a node that served requests and stopped leaves no timer, socket or server behind', async (t) => {
  const baseline = counts(process.getActiveResourcesInfo())
  const config = loadConfig(testEnv(t))
  if (config.databaseUrl === undefined) await copyFreshCluster(config.dataDir)
  const { logger } = captureLogger()
  const service = await startService(config, { logger })
  // Some work first, so pools, the live feed's timers and the broker are in use when it stops.
  t.equal((await request(service.url, '/readyz')).status, 200)
  t.equal((await request(service.url, '/openapi.json')).status, 200)
  await service.stop()
  t.same(await leftOver(baseline, 10_000), {}, 'no resource of the node is still active')
})
