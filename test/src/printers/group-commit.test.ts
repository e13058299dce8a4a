import t from 'tap'
import type { EventRecord, PersistedPrinterState, PrinterCommit } from '../../../actors/printer-persistence.js'
import type { Counter } from '../../../src/observability/metrics.js'
import { PgPrinterPersistence } from '../../../src/printers/event-store.js'
import { ServiceError } from '../../../protocol/errors.js'
import { startTestService } from '../../helpers/service.js'
import { addPrinter, openFarm } from '../../helpers/bridge.js'
import { request } from '../../helpers/http.js'

// The group commit writes a flush as a plain insert (on PostgreSQL a COPY into the log, on PGlite
// a JSON statement) and falls back to the JSON statement with ON CONFLICT DO NOTHING only when a
// unique index refuses a row: these tests put rows in the log behind the writer's back (what an
// actor whose memory forgot them would send again) and check every path.
const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const sql = svc.services.db.sql

function counter(): Counter & { count: number } {
  const c = { count: 0, inc: () => void c.count++ }
  return c as unknown as Counter & { count: number }
}

function event(seqn: number, eventId: string, data: Record<string, unknown> = { nozzleTemp: 210 }): EventRecord {
  return { eventId, idempotencyKey: null, type: 'printer:deltaUpdate', seqn, timestamp: Date.now(), deliveryAttempt: 1, data, jobId: null, applied: true }
}

function unit(printerId: string, events: EventRecord[]): PrinterCommit {
  return {
    printerId,
    organizationId: farm.orgId,
    hostId: 'host-a',
    assignmentEpoch: 1,
    fencingToken: 0,
    events,
    highWaterSeqn: Math.max(-1, ...events.map((e) => e.seqn)),
    state: { temperatures: { nozzle: { actual: 210, target: null } } } as unknown as PersistedPrinterState,
    online: true,
    seen: true,
    jobs: [],
  }
}

const eventIdsOf = async (printerId: string) =>
  (await sql<{ event_id: string }[]>`select event_id from printer_events where printer_id = ${printerId} order by seqn`).map((r) => r.event_id)

t.test('group commit - a flush without duplicates is stored by the plain insert, every event reported new, nothing retried', async (t) => {
  const [a, b] = [await addPrinter(farm), await addPrinter(farm)]
  const retries = counter()
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock, { tolerantRetries: retries })
  const [outA, outB] = await Promise.all([writer.commit(unit(a, [event(0, 'a-0'), event(1, 'a-1')])), writer.commit(unit(b, [event(0, 'b-0')]))])
  t.same([...outA.inserted].sort(), ['a-0', 'a-1'])
  t.same([...outB.inserted], ['b-0'])
  t.same(await eventIdsOf(a), ['a-0', 'a-1'])
  t.same(await eventIdsOf(b), ['b-0'])
  t.equal(retries.count, 0, 'no fallback')
  t.match((await sql`select high_water_seqn, online from printer_state where printer_id = ${a}`)[0], { high_water_seqn: 1, online: true }, 'the state is written with the events')
})

t.test('group commit - an event the log already holds is skipped, the rest of the flush stored once, and the duplicate not reported new', async (t) => {
  const [a, b] = [await addPrinter(farm), await addPrinter(farm)]
  // Stored earlier by another delivery, under another seqn: the event id is what makes it a duplicate.
  await sql`insert into printer_events (printer_id, organization_id, assignment_epoch, seqn, event_id, event_type, host_id, occurred_at_ms, delivery_attempt, data)
    values (${a}, ${farm.orgId}, 1, 0, 'a-known', 'heartbeat', 'host-a', 0, 1, '{}')`
  const retries = counter()
  const refusals = counter()
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock, { tolerantRetries: retries, copyRefusals: refusals })
  const [outA, outB] = await Promise.all([
    writer.commit(unit(a, [event(5, 'a-known'), event(6, 'a-new')])),
    writer.commit(unit(b, [event(0, 'b-0'), event(1, 'b-1')])),
  ])
  t.same([...outA.inserted], ['a-new'], 'only the new event is reported stored')
  t.same([...outB.inserted].sort(), ['b-0', 'b-1'], 'the other printer of the same flush is stored as usual')
  t.same(await eventIdsOf(a), ['a-known', 'a-new'], 'the known event once, under its first seqn')
  t.same(await eventIdsOf(b), ['b-0', 'b-1'])
  t.equal(retries.count, 1, 'one flush sent again skipping duplicates')
  t.equal(refusals.count, svc.services.db.copiesEvents ? 1 : 0, 'on PostgreSQL the COPY was refused first, and nothing of it kept')
})

t.test('group commit - a flush of one large unit refused at its first row stores the rest once', async (t) => {
  const a = await addPrinter(farm)
  await sql`insert into printer_events (printer_id, organization_id, assignment_epoch, seqn, event_id, event_type, host_id, occurred_at_ms, delivery_attempt, data)
    values (${a}, ${farm.orgId}, 1, 0, 'a-known', 'heartbeat', 'host-a', 0, 1, '{}')`
  const refusals = counter()
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock, { tolerantRetries: counter(), copyRefusals: refusals })
  // About 10 MB of rows, one unit (a flush takes whole units, beyond maxEventsPerFlush): PostgreSQL
  // refuses the COPY at its first rows, while or after the rest is written; either way the flush
  // goes again by the JSON statement.
  const padding = 'x'.repeat(1_000)
  const events = [event(1, 'a-known'), ...Array.from({ length: 10_000 }, (_, i) => event(2 + i, `a-${i}`, { padding }))]
  const out = await writer.commit(unit(a, events))
  t.equal(out.inserted.size, 10_000, 'every new event reported stored')
  t.notOk(out.inserted.has('a-known'))
  const [counts] = await sql<{ n: number; known: number }[]>`
    select count(*)::int as n, count(*) filter (where event_id = 'a-known')::int as known from printer_events where printer_id = ${a}`
  t.same(counts, { n: 10_001, known: 1 }, 'the new events once each, the known one still once')
  t.equal(refusals.count, svc.services.db.copiesEvents ? 1 : 0, 'counted as a refused COPY')
})

t.test('group commit - COPYs the log refuses, more in a row than the pool has connections, leave none behind: each flush stores its new event once', async (t) => {
  const a = await addPrinter(farm)
  const refusals = counter()
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock, { tolerantRetries: counter(), copyRefusals: refusals })
  // A connection left in an aborted transaction or in COPY mode would fail or stall a later flush.
  const flushes = 15
  for (let i = 0; i < flushes; i++) {
    await sql`insert into printer_events (printer_id, organization_id, assignment_epoch, seqn, event_id, event_type, host_id, occurred_at_ms, delivery_attempt, data)
      values (${a}, ${farm.orgId}, 1, ${i}, ${`a-known-${i}`}, 'heartbeat', 'host-a', 0, 1, '{}')`
    const out = await writer.commit(unit(a, [event(100 + 2 * i, `a-known-${i}`), event(101 + 2 * i, `a-new-${i}`)]))
    t.same([...out.inserted], [`a-new-${i}`], `flush ${i}: only the new event is reported stored`)
  }
  const rows = await sql<{ event_id: string }[]>`select event_id from printer_events where printer_id = ${a} and event_id like 'a-new-%'`
  t.equal(rows.length, flushes, 'every new event stored once')
  t.equal(refusals.count, svc.services.db.copiesEvents ? flushes : 0, 'each COPY was refused and written again')
  const [open] = await sql<{ n: number }[]>`select count(*)::int as n from printer_events where printer_id = ${a}`
  t.equal(open!.n, 2 * flushes, 'nothing else reached the log')
})

t.test('group commit - a unit whose every event the log already holds is reported with nothing new, beside a unit stored as usual', async (t) => {
  const [a, b] = [await addPrinter(farm), await addPrinter(farm)]
  for (const [seqn, id] of [[0, 'a-old-0'], [1, 'a-old-1']] as const) {
    await sql`insert into printer_events (printer_id, organization_id, assignment_epoch, seqn, event_id, event_type, host_id, occurred_at_ms, delivery_attempt, data)
      values (${a}, ${farm.orgId}, 1, ${seqn}, ${id}, 'heartbeat', 'host-a', 0, 1, '{}')`
  }
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock, { tolerantRetries: counter() })
  const [outA, outB] = await Promise.all([writer.commit(unit(a, [event(7, 'a-old-0'), event(8, 'a-old-1')])), writer.commit(unit(b, [event(0, 'b-0')]))])
  t.same([...outA.inserted], [], 'nothing of it is new')
  t.same([...outB.inserted], ['b-0'])
  t.same(await eventIdsOf(a), ['a-old-0', 'a-old-1'], 'stored once, under their first seqns')
})

t.test('group commit - a duplicate and unstorable data in one flush: the bad unit alone is refused, the others stored, the duplicate skipped', async (t) => {
  const [a, b, c] = [await addPrinter(farm), await addPrinter(farm), await addPrinter(farm)]
  await sql`insert into printer_events (printer_id, organization_id, assignment_epoch, seqn, event_id, event_type, host_id, occurred_at_ms, delivery_attempt, data)
    values (${a}, ${farm.orgId}, 1, 0, 'a-known', 'heartbeat', 'host-a', 0, 1, '{}')`
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock, { tolerantRetries: counter() })
  const [outA, outB, outC] = await Promise.allSettled([
    writer.commit(unit(a, [event(3, 'a-known'), event(4, 'a-4')])),
    // jsonb holds no NUL character: PostgreSQL refuses the row (SQLSTATE 22P05).
    writer.commit(unit(b, [event(0, 'b-0', { text: 'nul \u0000 here' })])),
    writer.commit(unit(c, [event(0, 'c-0')])),
  ])
  t.equal(outA.status, 'fulfilled')
  t.same(outA.status === 'fulfilled' ? [...outA.value.inserted] : null, ['a-4'])
  t.equal(outB.status, 'rejected')
  t.equal(outB.status === 'rejected' && outB.reason instanceof ServiceError ? outB.reason.code : null, 'validation_failed', 'the bad unit is told why')
  t.same(outC.status === 'fulfilled' ? [...outC.value.inserted] : null, ['c-0'])
  t.same(await eventIdsOf(a), ['a-known', 'a-4'])
  t.same(await eventIdsOf(b), [], 'nothing of the refused unit')
  t.same(await eventIdsOf(c), ['c-0'])
  t.equal((await sql`select count(*)::int as n from printer_state where printer_id = ${b}`)[0]!['n'], 0, 'not even its state')
})

t.test('event history - rows stored before data became json (jsonb data) and after (json payload) read back alike, keys in the order sent', async (t) => {
  const printer = await addPrinter(farm)
  await sql`insert into printer_events (printer_id, organization_id, assignment_epoch, seqn, event_id, event_type, host_id, occurred_at_ms, delivery_attempt, data)
    values (${printer}, ${farm.orgId}, 1, 0, 'legacy', 'heartbeat', 'host-a', 0, 1, ${sql.json({ uptime: 7, wifi: '-50dBm' })})`
  const writer = new PgPrinterPersistence(svc.services.db, svc.services.clock)
  await writer.commit(unit(printer, [event(1, 'current', { zeta: 1, alpha: { nested: [1, 'two', null] } })]))
  const res = await request(svc.url, `/v1/printers/${printer}/events`, { headers: farm.admin })
  t.equal(res.status, 200)
  t.same(
    res.json.events.map((e: { eventId: string; data: unknown }) => [e.eventId, e.data]),
    [
      ['legacy', { uptime: 7, wifi: '-50dBm' }],
      ['current', { zeta: 1, alpha: { nested: [1, 'two', null] } }],
    ],
  )
  t.same(Object.keys(res.json.events[1].data), ['zeta', 'alpha'], 'json keeps the order the bridge sent')
})
