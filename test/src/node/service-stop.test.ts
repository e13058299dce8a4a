/**
 * A node's stop leaves nothing of its own running: no timer, no socket, no
 * sweep that would query the closed store later. A file of its own: the
 * process's resources are counted, and no other test may come and go meanwhile.
 */
import t from 'tap'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { SimulatedClock } from '../../helpers/clock.js'
import { waitFor } from '../../helpers/poll.js'
import { request } from '../../helpers/http.js'
import { captureLogger, startTestService } from '../../helpers/service.js'

/** The process's timers, sockets and servers, by kind. */
function activeResources(): Map<string, number> {
  const counts = new Map<string, number>()
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1)
  return counts
}

t.test('shutdown - a node that ingested, served and swept leaves no timer, socket or server of its own after stop, and queries nothing later', async (t) => {
  // A first node started and stopped: what the runtime and the modules keep once loaded is in the baseline.
  await (await startTestService(t)).stop()
  const before = activeResources()
  const clock = new SimulatedClock(Date.now())
  const svc = await startTestService(t, {}, { clock })
  const farm = await openFarm(svc.url)
  const printerId = await addPrinter(farm)
  const res = await postBatch(farm, batch(printerId, [item(1), item(2, { type: 'printer:statusUpdate', data: { status: 'IDLE' } })]))
  t.equal(res.status, 200, res.text)
  t.equal((await request(svc.url, '/v1/queue', { headers: farm.admin })).status, 200)
  t.ok(clock.pending > 0, 'the node runs sweeps on its clock')
  clock.tick(60_000)
  await svc.stop()
  t.equal(clock.pending, 0, 'no sweep or delay is left on the clock')
  // An hour later nothing of the node runs: a sweep left behind would query the closed store and log the failure.
  clock.tick(3_600_000)
  // A client's quit is answered before its socket's close callback has run: that follows within moments.
  const left = (): Record<string, number> => {
    const grown: Record<string, number> = {}
    for (const [kind, n] of activeResources()) if (n > (before.get(kind) ?? 0)) grown[kind] = n - (before.get(kind) ?? 0)
    return grown
  }
  await waitFor(() => Object.keys(left()).length === 0, 'the sockets of the stopped node to close', 5_000).catch(() => undefined)
  t.same(left(), {}, `active after stop: ${process.getActiveResourcesInfo().join(', ')}`)
  const stopLogs = svc.logs.slice(svc.logs.findIndex((line) => line['msg'] === 'shutting down'))
  t.same(stopLogs.filter((line) => line['level'] === 'error' || line['level'] === 'warn'), [], 'nothing failed or warned during or after the stop')
})

t.test('shutdown - the parts of a node stop in the reverse order of their start, the HTTP server first and the store last, each named in the log', async (t) => {
  const { logger, logs } = captureLogger('debug')
  const svc = await startTestService(t, {}, { logger })
  await svc.stop()
  const named = (msg: string) => logs.filter((l) => l['msg'] === msg).map((l) => String(l['part']))
  const started = named('part started')
  t.ok(started.length >= 10, `the parts started: ${started.join(', ')}`)
  t.same(named('part stopped'), [...started].reverse(), 'stopped newest first, each once')
  t.equal(started[0], 'store', 'the store came up first')
  t.equal(started.at(-1), 'http', 'the HTTP server came up last')
  t.same(logs.filter((l) => l['msg'] === 'stopping a part of the node failed'), [], 'none failed to stop')
})
