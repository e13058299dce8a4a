import t from 'tap'
import { EventRetention } from '../../../src/printers/event-retention.js'
import { captureLogger, startTestService } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const sql = svc.services.db.sql

t.test('event retention - events older than the retention are deleted in chunks; newer ones and printer state stay', async (t) => {
  const printer = await addPrinter(farm)
  await postBatch(farm, batch(printer, Array.from({ length: 25 }, (_, i) => item(i))))
  await sql`update printer_events set received_at = now() - interval '40 days' where printer_id = ${printer} and seqn < 20`
  const retention = new EventRetention(svc.services.db, 30, captureLogger().logger, svc.services.clock)
  t.equal(await retention.sweep(7), 20, 'all old rows, over several chunks of 7')
  const left = await sql`select seqn from printer_events where printer_id = ${printer} order by seqn`
  t.same(left.map((r) => r['seqn']), [20, 21, 22, 23, 24])
  t.equal((await sql`select high_water_seqn from printer_state where printer_id = ${printer}`)[0]!['high_water_seqn'], 24)
  const retry = await postBatch(farm, batch(printer, [item(24, { deliveryAttempt: 2 })]))
  t.match(retry.json, { success: true, processed: 1, failed: 0, refused: [], events: [{ outcome: 'duplicate' }] }, 'a retry after the sweep is still a duplicate')
})

t.test('presence sweep - a printer still flagged online whose actor is gone is marked offline once its bridge is silent', async (t) => {
  const printer = await addPrinter(farm)
  await postBatch(farm, batch(printer, [item(0, { type: 'heartbeat' })]))
  t.equal((await sql`select online from printer_state where printer_id = ${printer}`)[0]!['online'], true)
  // As after a crash: the row says online, no actor in this process knows better.
  await svc.services.printers.reload(printer)
  await sql`update printer_state set seen_at = now() - interval '1 hour' where printer_id = ${printer}`
  await svc.services.printers.sweep()
  t.equal((await sql`select online from printer_state where printer_id = ${printer}`)[0]!['online'], false)
})

t.test('presence sweep - a printer whose actor is online in memory keeps its flag', async (t) => {
  const printer = await addPrinter(farm)
  await postBatch(farm, batch(printer, [item(0, { type: 'heartbeat' })]))
  await sql`update printer_state set seen_at = now() - interval '1 hour' where printer_id = ${printer}`
  await svc.services.printers.sweep()
  t.equal((await sql`select online from printer_state where printer_id = ${printer}`)[0]!['online'], true, 'its own timer decides, not the sweep')
})
