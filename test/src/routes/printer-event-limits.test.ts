/**
 * The printer-event rules (docs/printers-and-events.md), rule by rule, over real HTTP: each field rule of the single
 * event (POST /v1/printer-events) and of the batch (POST
 * /v1/printer-events/batch, at item level and at the top level) is refused
 * just outside its bounds and accepted just inside them, and a refused
 * request stores nothing. Every test uses its own printer, so the store's
 * rows for it are exactly what the test accepted.
 */
import t, { type Test } from 'tap'
import { request, type HttpResult } from '../../helpers/http.js'
import { startTestService } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch, postEvent, single } from '../../helpers/bridge.js'
import { printerEventTypes } from '../../../protocol/printer-events.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const sql = svc.services.db.sql

type Body = Record<string, unknown>

/** The event ids stored for a printer, in seqn order. */
const storedIds = async (printerId: string): Promise<string[]> =>
  (await sql<{ event_id: string }[]>`select event_id from printer_events where printer_id = ${printerId} order by assignment_epoch, seqn`).map((r) => r.event_id)

/** `patch` over a body; a key set to undefined is left out of the JSON (a missing field). */
const withFields = (body: Body, patch: Body): Body => ({ ...body, ...patch })

/** A single event for `printer` at `seqn`, with `patch` applied. */
const singleWith = (printer: string, seqn: number, patch: Body = {}): Body => withFields(single(printer, seqn, { eventId: `s-${seqn}` }), patch)

/** A one-item batch whose item has `itemPatch` and whose top level has `topPatch`. */
const batchWith = (printer: string, seqn: number, itemPatch: Body = {}, topPatch: Body = {}): Body =>
  withFields(batch(printer, [withFields(item(seqn, { eventId: `b-${seqn}` }), itemPatch)]), topPatch)

const long = (n: number): string => 'x'.repeat(n)

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** The validation message for `field` under `where` ('body' or 'body.events[0]'): missing when `rule` is undefined. */
const fieldMessage = (where: string, field: string, rule: string | undefined): RegExp =>
  rule === undefined ? new RegExp(`^${escape(where)} is missing the required field '${field}'`) : new RegExp(`^${escape(where)}\\.${field} ${escape(rule)}`)

/** 400 validation_failed (or `code`), the coded error body, and a message naming the field. */
function refused(t: Test, res: HttpResult, message: RegExp, label: string, code = 'validation_failed', status = 400): void {
  t.equal(res.status, status, `${label}: ${status}`)
  t.match(res.json, { code, error: code, message, requestId: String }, `${label}: ${code}, coded body, message ${message}`)
}

function accepted(t: Test, res: HttpResult, label: string): void {
  t.equal(res.status, 200, `${label}: 200`)
  t.equal(res.json?.success, true, `${label}: success`)
}

t.test('printer event limits - eventId is required and 1-200 characters on both routes', async (t) => {
  const printer = await addPrinter(farm)
  for (const [value, rule] of [
    [undefined, undefined],
    ['', 'must NOT have fewer than 1 characters'],
    [long(201), 'must NOT have more than 200 characters'],
    [42, 'must be string'],
  ] as [unknown, string | undefined][]) {
    const label = `eventId ${String(JSON.stringify(value)).slice(0, 20)}`
    refused(t, await postEvent(farm, singleWith(printer, 0, { eventId: value })), fieldMessage('body', 'eventId', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { eventId: value })), fieldMessage('body.events[0]', 'eventId', rule), `batch ${label}`)
  }
  t.same(await storedIds(printer), [], 'nothing stored by a refused event')

  accepted(t, await postEvent(farm, singleWith(printer, 1, { eventId: 'a' })), 'single eventId of 1 character')
  accepted(t, await postEvent(farm, singleWith(printer, 2, { eventId: long(199) + 's' })), 'single eventId of 200 characters')
  accepted(t, await postBatch(farm, batchWith(printer, 3, { eventId: 'b' })), 'batch eventId of 1 character')
  accepted(t, await postBatch(farm, batchWith(printer, 4, { eventId: long(199) + 'b' })), 'batch eventId of 200 characters')
  t.same(await storedIds(printer), ['a', long(199) + 's', 'b', long(199) + 'b'])
})

t.test('printer event limits - idempotencyKey is optional and 1-200 characters, on events and on the batch', async (t) => {
  const printer = await addPrinter(farm)
  for (const [value, rule] of [
    ['', 'must NOT have fewer than 1 characters'],
    [long(201), 'must NOT have more than 200 characters'],
    [7, 'must be string'],
  ] as [unknown, string][]) {
    const label = `idempotencyKey ${JSON.stringify(value).slice(0, 20)}`
    refused(t, await postEvent(farm, singleWith(printer, 0, { idempotencyKey: value })), fieldMessage('body', 'idempotencyKey', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { idempotencyKey: value })), fieldMessage('body.events[0]', 'idempotencyKey', rule), `batch item ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, {}, { idempotencyKey: value })), fieldMessage('body', 'idempotencyKey', rule), `batch top-level ${label}`)
  }
  t.same(await storedIds(printer), [])

  accepted(t, await postEvent(farm, singleWith(printer, 1)), 'single without idempotencyKey')
  accepted(t, await postEvent(farm, singleWith(printer, 2, { idempotencyKey: 'k' })), 'single idempotencyKey of 1 character')
  accepted(t, await postEvent(farm, singleWith(printer, 3, { idempotencyKey: long(199) + 's' })), 'single idempotencyKey of 200 characters')
  accepted(t, await postBatch(farm, batchWith(printer, 4)), 'batch without any idempotencyKey')
  accepted(t, await postBatch(farm, batchWith(printer, 5, { idempotencyKey: 'j' })), 'batch item idempotencyKey of 1 character')
  accepted(t, await postBatch(farm, batchWith(printer, 6, { idempotencyKey: long(199) + 'b' })), 'batch item idempotencyKey of 200 characters')
  accepted(t, await postBatch(farm, batchWith(printer, 7, {}, { idempotencyKey: 'q' })), 'batch idempotencyKey of 1 character')
  accepted(t, await postBatch(farm, batchWith(printer, 8, {}, { idempotencyKey: long(200) })), 'batch idempotencyKey of 200 characters')
  t.same(await storedIds(printer), ['s-1', 's-2', 's-3', 'b-4', 'b-5', 'b-6', 'b-7', 'b-8'])
  const keys = await sql<{ idempotency_key: string | null }[]>`select idempotency_key from printer_events where printer_id = ${printer} order by seqn`
  t.same(keys.map((r) => r.idempotency_key), [null, 'k', long(199) + 's', null, 'j', long(199) + 'b', null, null], "each event's own key is stored")
})

t.test('printer event limits - the event type must be one of the 26 types; every one of them is accepted', async (t) => {
  t.equal(printerEventTypes.length, 26)
  const printer = await addPrinter(farm)
  refused(t, await postEvent(farm, singleWith(printer, 0, { eventType: 'printer:explode' })), /^body\.eventType must be one of: status, message,.*detection:complete$/, 'single unknown eventType')
  refused(t, await postEvent(farm, singleWith(printer, 0, { eventType: undefined })), /^body is missing the required field 'eventType'/, 'single without eventType')
  refused(t, await postEvent(farm, singleWith(printer, 0, { eventType: 'STATUS' })), /^body\.eventType must be one of/, 'single eventType is case-sensitive')
  refused(t, await postBatch(farm, batchWith(printer, 0, { type: 'printer:explode' })), /^body\.events\[0\]\.type must be one of: status, message,.*detection:complete$/, 'batch unknown type')
  refused(t, await postBatch(farm, batchWith(printer, 0, { type: undefined })), /^body\.events\[0\] is missing the required field 'type'/, 'batch item without type')
  t.same(await storedIds(printer), [])

  const inBatch = await addPrinter(farm)
  const all = await postBatch(farm, batch(inBatch, printerEventTypes.map((type, seqn) => item(seqn, { type, eventId: `t-${seqn}` }))))
  t.equal(all.status, 200)
  t.match(all.json, { success: true, processed: 26, failed: 0, refused: [] }, 'one batch with all 26 types')
  t.ok(all.json.events.every((e: { outcome: string }) => e.outcome === 'applied'), 'each of them applied')
  const batchTypes = await sql<{ event_type: string }[]>`select event_type from printer_events where printer_id = ${inBatch} order by seqn`
  t.same(batchTypes.map((r) => r.event_type), [...printerEventTypes])

  const oneByOne = await addPrinter(farm)
  const statuses: number[] = []
  for (const [seqn, type] of printerEventTypes.entries()) statuses.push((await postEvent(farm, singleWith(oneByOne, seqn, { eventType: type }))).status)
  t.same(statuses, Array(26).fill(200), 'each of the 26 types on the single route')
  const singleTypes = await sql<{ event_type: string }[]>`select event_type from printer_events where printer_id = ${oneByOne} order by seqn`
  t.same(singleTypes.map((r) => r.event_type), [...printerEventTypes])
})

t.test('printer event limits - data is required and must be an object', async (t) => {
  const printer = await addPrinter(farm)
  for (const value of [undefined, [1, 2], 'hot', null, 42, true]) {
    const label = `data ${JSON.stringify(value)}`
    const rule = value === undefined ? undefined : 'must be object'
    refused(t, await postEvent(farm, singleWith(printer, 0, { data: value })), fieldMessage('body', 'data', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { data: value })), fieldMessage('body.events[0]', 'data', rule), `batch ${label}`)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postEvent(farm, singleWith(printer, 1, { data: {} })), 'single empty object')
  accepted(t, await postBatch(farm, batchWith(printer, 2, { data: { nested: { deep: [1, 'two', null] } } })), 'batch free-form object')
  const rows = await sql<{ data: unknown }[]>`select coalesce(payload, data::json) as data from printer_events where printer_id = ${printer} order by seqn`
  t.same(rows.map((r) => r.data), [{}, { nested: { deep: [1, 'two', null] } }], 'data is stored as sent')
})

t.test('printer event limits - seqn is a required integer >= 0', async (t) => {
  const printer = await addPrinter(farm)
  for (const [value, rule] of [
    [undefined, undefined],
    [-1, 'must be >= 0'],
    [1.5, 'must be integer'],
    ['1', 'must be integer'],
    [null, 'must be integer'],
  ] as [unknown, string | undefined][]) {
    const label = `seqn ${JSON.stringify(value)}`
    refused(t, await postEvent(farm, singleWith(printer, 0, { seqn: value })), fieldMessage('body', 'seqn', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { seqn: value })), fieldMessage('body.events[0]', 'seqn', rule), `batch ${label}`)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postEvent(farm, singleWith(printer, 0)), 'single seqn 0')
  const other = await addPrinter(farm)
  accepted(t, await postBatch(farm, batchWith(other, 0)), 'batch seqn 0')
  t.same([await storedIds(printer), await storedIds(other)], [['s-0'], ['b-0']])
})

t.test('printer event limits - hostId is required on the event, the batch item and the batch', async (t) => {
  const printer = await addPrinter(farm)
  for (const [value, rule] of [
    [undefined, undefined],
    [5, 'must be string'],
  ] as [unknown, string | undefined][]) {
    const label = `hostId ${JSON.stringify(value)}`
    refused(t, await postEvent(farm, singleWith(printer, 0, { hostId: value })), fieldMessage('body', 'hostId', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { hostId: value })), fieldMessage('body.events[0]', 'hostId', rule), `batch item ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, {}, { hostId: value })), fieldMessage('body', 'hostId', rule), `batch top level ${label}`)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postEvent(farm, singleWith(printer, 1)), 'single with hostId')
  accepted(t, await postBatch(farm, batchWith(printer, 2)), 'batch with hostId')
  t.same(await storedIds(printer), ['s-1', 'b-2'])
})

t.test('printer event limits - assignmentEpoch is a required integer >= 1 on the event, the batch item and the batch', async (t) => {
  const printer = await addPrinter(farm)
  for (const [value, rule] of [
    [undefined, undefined],
    [0, 'must be >= 1'],
    [1.5, 'must be integer'],
    ['1', 'must be integer'],
  ] as [unknown, string | undefined][]) {
    const label = `assignmentEpoch ${JSON.stringify(value)}`
    refused(t, await postEvent(farm, singleWith(printer, 0, { assignmentEpoch: value })), fieldMessage('body', 'assignmentEpoch', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { assignmentEpoch: value })), fieldMessage('body.events[0]', 'assignmentEpoch', rule), `batch item ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, {}, { assignmentEpoch: value })), fieldMessage('body', 'assignmentEpoch', rule), `batch top level ${label}`)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postEvent(farm, singleWith(printer, 1, { assignmentEpoch: 1 })), 'single epoch 1')
  accepted(t, await postBatch(farm, batchWith(printer, 2, { assignmentEpoch: 1 }, { assignmentEpoch: 1 })), 'batch epoch 1')
  t.same(await storedIds(printer), ['s-1', 'b-2'])
})

t.test('printer event limits - deliveryAttempt is a required integer >= 1', async (t) => {
  const printer = await addPrinter(farm)
  for (const [value, rule] of [
    [undefined, undefined],
    [0, 'must be >= 1'],
    [-1, 'must be >= 1'],
    [1.5, 'must be integer'],
    ['1', 'must be integer'],
  ] as [unknown, string | undefined][]) {
    const label = `deliveryAttempt ${JSON.stringify(value)}`
    refused(t, await postEvent(farm, singleWith(printer, 0, { deliveryAttempt: value })), fieldMessage('body', 'deliveryAttempt', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { deliveryAttempt: value })), fieldMessage('body.events[0]', 'deliveryAttempt', rule), `batch ${label}`)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postEvent(farm, singleWith(printer, 1, { deliveryAttempt: 1 })), 'single attempt 1')
  accepted(t, await postEvent(farm, singleWith(printer, 2, { deliveryAttempt: 3 })), 'single attempt 3')
  accepted(t, await postBatch(farm, batchWith(printer, 3, { deliveryAttempt: 1 })), 'batch attempt 1')
  const attempts = await sql<{ delivery_attempt: number }[]>`select delivery_attempt from printer_events where printer_id = ${printer} order by seqn`
  t.same(attempts.map((r) => r.delivery_attempt), [1, 3, 1])
})

t.test('printer event limits - timestamp is a required number on the event, the batch item and the batch', async (t) => {
  const printer = await addPrinter(farm)
  for (const value of [undefined, 'now', '1700000000000', null]) {
    const label = `timestamp ${JSON.stringify(value)}`
    const rule = value === undefined ? undefined : 'must be number'
    refused(t, await postEvent(farm, singleWith(printer, 0, { timestamp: value })), fieldMessage('body', 'timestamp', rule), `single ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, { timestamp: value })), fieldMessage('body.events[0]', 'timestamp', rule), `batch item ${label}`)
    refused(t, await postBatch(farm, batchWith(printer, 0, {}, { timestamp: value })), fieldMessage('body', 'timestamp', rule), `batch top level ${label}`)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postEvent(farm, singleWith(printer, 1, { timestamp: 1_700_000_000_123.5 })), 'single fractional ms')
  accepted(t, await postBatch(farm, batchWith(printer, 2, { timestamp: 1_700_000_000_000 }, { timestamp: 1_700_000_000_001 })), 'batch')
  const times = await sql<{ occurred_at_ms: number }[]>`select occurred_at_ms from printer_events where printer_id = ${printer} order by seqn`
  t.same(times.map((r) => r.occurred_at_ms), [1_700_000_000_123.5, 1_700_000_000_000], "each event's own timestamp is stored")
})

t.test('printer event limits - the batch needs printerId; the single event names its printer too', async (t) => {
  const printer = await addPrinter(farm)
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { printerId: undefined })), /^body is missing the required field 'printerId'/, 'batch without printerId')
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { printerId: '' })), /^body\.printerId must NOT have fewer than 1 characters/, 'batch empty printerId')
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { printerId: 12 })), /^body\.printerId must be string/, 'batch numeric printerId')
  refused(t, await postEvent(farm, singleWith(printer, 0, { printerId: undefined })), /printerId/, 'single naming no printer')
  t.same(await storedIds(printer), [])
})

t.test('printer event limits - a batch holds 1 to 100 events', async (t) => {
  const printer = await addPrinter(farm)
  const items = (n: number) => Array.from({ length: n }, (_, seqn) => item(seqn))
  refused(t, await postBatch(farm, { ...batch(printer, items(1)), events: [] }), /^body\.events must NOT have fewer than 1 items/, '0 events')
  refused(t, await postBatch(farm, batch(printer, items(101))), /^body\.events must NOT have more than 100 items/, '101 events')
  refused(t, await postBatch(farm, { ...batch(printer, items(1)), events: undefined }), /^body is missing the required field 'events'/, 'no events field')
  refused(t, await postBatch(farm, { ...batch(printer, items(1)), events: item(0) }), /^body\.events must be array/, 'events not an array')
  t.same(await storedIds(printer), [])
  const hundred = await postBatch(farm, batch(printer, items(100)))
  t.equal(hundred.status, 200)
  t.match(hundred.json, { success: true, processed: 100, failed: 0, refused: [] })
  t.equal(hundred.json.events.length, 100)
  t.same(await storedIds(printer), items(100).map((e) => e['eventId']), 'all 100 stored')
  const one = await addPrinter(farm)
  t.match((await postBatch(farm, batch(one, items(1)))).json, { success: true, processed: 1, failed: 0, refused: [], events: [{ outcome: 'applied' }] }, 'a batch of 1')
})

t.test('printer event limits - batchId is optional and 1-200 characters', async (t) => {
  const printer = await addPrinter(farm)
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { batchId: '' })), /^body\.batchId must NOT have fewer than 1 characters/, 'empty batchId')
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { batchId: long(201) })), /^body\.batchId must NOT have more than 200 characters/, 'batchId of 201')
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { batchId: 3 })), /^body\.batchId must be string/, 'numeric batchId')
  t.same(await storedIds(printer), [])
  accepted(t, await postBatch(farm, batchWith(printer, 1, {}, { batchId: 'b' })), 'batchId of 1')
  accepted(t, await postBatch(farm, batchWith(printer, 2, {}, { batchId: long(200) })), 'batchId of 200')
  accepted(t, await postBatch(farm, batchWith(printer, 3)), 'no batchId')
  t.same(await storedIds(printer), ['b-1', 'b-2', 'b-3'])
})

t.test('printer event limits - delta is an optional free-form object', async (t) => {
  const printer = await addPrinter(farm)
  for (const value of [[1], 'delta', null, 5]) refused(t, await postBatch(farm, batchWith(printer, 0, {}, { delta: value })), /^body\.delta must be object/, `delta ${JSON.stringify(value)}`)
  t.same(await storedIds(printer), [])
  accepted(t, await postBatch(farm, batchWith(printer, 1, {}, { delta: {} })), 'empty delta')
  accepted(t, await postBatch(farm, batchWith(printer, 2, {}, { delta: { nozzleTemp: 215, ams: [{ slot: 0 }] } })), 'free-form delta')
  t.same(await storedIds(printer), ['b-1', 'b-2'])
})

t.test('printer event limits - maxSeqn is optional and must be the largest seqn of the batch', async (t) => {
  const printer = await addPrinter(farm)
  const three = (maxSeqn: unknown) => batch(printer, [item(4), item(9), item(6)], { maxSeqn })
  refused(t, await postBatch(farm, three(6)), /^body\.maxSeqn is 6 but the largest seqn in the batch is 9/, 'maxSeqn below the largest')
  refused(t, await postBatch(farm, three(10)), /^body\.maxSeqn is 10 but the largest seqn in the batch is 9/, 'maxSeqn above the largest')
  refused(t, await postBatch(farm, three(4)), /^body\.maxSeqn is 4/, 'maxSeqn the first seqn')
  refused(t, await postBatch(farm, three(-1)), /^body\.maxSeqn must be >= 0/, 'negative maxSeqn')
  refused(t, await postBatch(farm, three(8.5)), /^body\.maxSeqn must be integer/, 'fractional maxSeqn')
  refused(t, await postBatch(farm, three('9')), /^body\.maxSeqn must be integer/, 'string maxSeqn')
  t.same(await storedIds(printer), [])
  accepted(t, await postBatch(farm, three(9)), 'maxSeqn equal to the largest seqn')
  accepted(t, await postBatch(farm, batch(printer, [item(10)])), 'no maxSeqn')
  t.same(await storedIds(printer), ['ev-4', 'ev-6', 'ev-9', 'ev-10'])
})

t.test('printer event limits - persistedId is an optional string on batch items', async (t) => {
  const printer = await addPrinter(farm)
  refused(t, await postBatch(farm, batchWith(printer, 0, { persistedId: 17 })), /^body\.events\[0\]\.persistedId must be string/, 'numeric persistedId')
  refused(t, await postBatch(farm, batchWith(printer, 0, { persistedId: null })), /^body\.events\[0\]\.persistedId must be string/, 'null persistedId')
  t.same(await storedIds(printer), [])
  accepted(t, await postBatch(farm, batchWith(printer, 1, { persistedId: 'row-1' })), 'string persistedId')
  accepted(t, await postBatch(farm, batchWith(printer, 2)), 'no persistedId')
  t.same(await storedIds(printer), ['b-1', 'b-2'])
})

t.test('printer event limits - a batch refuses fields the contract does not list, at the top and item level, naming the field', async (t) => {
  const printer = await addPrinter(farm)
  refused(t, await postBatch(farm, batchWith(printer, 0, {}, { priority: 'high' })), /^body has an unknown field 'priority'/, 'extra top-level field')
  refused(t, await postBatch(farm, batchWith(printer, 0, { printerId: printer })), /^body\.events\[0\] has an unknown field 'printerId'/, 'extra item field')
  refused(t, await postBatch(farm, batchWith(printer, 0, { type: undefined, eventType: 'status' })), /^body\.events\[0\]/, 'eventType is not an item field (type is)')
  const second = batch(printer, [item(0), { ...item(1), colour: 'red' }])
  refused(t, await postBatch(farm, second), /^body\.events\[1\] has an unknown field 'colour'/, 'the offending item is named by index')
  t.same(await storedIds(printer), [], 'no item of a refused batch is stored')
})

t.test('printer event limits - every batch item carries the batch hostId and assignmentEpoch', async (t) => {
  const printer = await addPrinter(farm)
  refused(t, await postBatch(farm, batch(printer, [item(0), item(1, { hostId: 'host-b' })])), /^body\.events\[1\]\.hostId differs from the batch's hostId 'host-a'/, 'item hostId differs')
  refused(t, await postBatch(farm, batch(printer, [item(0), item(1), item(2, { assignmentEpoch: 2 })])), /^body\.events\[2\]\.assignmentEpoch differs from the batch's assignmentEpoch 1/, 'item epoch differs')
  refused(t, await postBatch(farm, batch(printer, [item(0)], { hostId: 'host-b' })), /^body\.events\[0\]\.hostId differs/, 'the batch hostId differs from its only item')
  t.same(await storedIds(printer), [])
})

t.test('printer event limits - a repeated eventId, seqn or idempotencyKey within one batch is refused naming the item', async (t) => {
  const printer = await addPrinter(farm)
  refused(t, await postBatch(farm, batch(printer, [item(0, { eventId: 'same' }), item(1), item(2, { eventId: 'same' })])), /^body\.events\[2\]\.eventId repeats/, 'repeated eventId')
  refused(t, await postBatch(farm, batch(printer, [item(0), item(1, { eventId: 'a' }), item(1, { eventId: 'b' })])), /^body\.events\[2\]\.seqn repeats/, 'repeated seqn')
  refused(t, await postBatch(farm, batch(printer, [item(0, { idempotencyKey: 'k' }), item(1, { idempotencyKey: 'k' })])), /^body\.events\[1\]\.idempotencyKey repeats/, 'repeated idempotencyKey')
  t.same(await storedIds(printer), [])
  accepted(t, await postBatch(farm, batch(printer, [item(0, { idempotencyKey: 'k0' }), item(1, { idempotencyKey: 'k1' }), item(2)])), 'distinct ids, seqns and keys')
  t.same(await storedIds(printer), ['ev-0', 'ev-1', 'ev-2'])
})

t.test('printer event limits - a body that is not JSON is 400 invalid_json with a code', async (t) => {
  const printer = await addPrinter(farm)
  for (const path of ['/v1/printer-events', '/v1/printer-events/batch']) {
    const res = await request(farm.url, path, { method: 'POST', headers: { ...farm.bridge, 'content-type': 'application/json' }, body: `{"printerId":"${printer}","events":[` })
    refused(t, res, /not valid JSON/, path, 'invalid_json')
  }
  t.same(await storedIds(printer), [])
})

t.test('printer event limits - a content type other than JSON is 415 with a code', async (t) => {
  const printer = await addPrinter(farm)
  const bodies: [string, Body][] = [
    ['/v1/printer-events', singleWith(printer, 0)],
    ['/v1/printer-events/batch', batchWith(printer, 0)],
  ]
  for (const [path, body] of bodies) {
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded']) {
      const res = await request(farm.url, path, { method: 'POST', headers: { ...farm.bridge, 'content-type': contentType }, body: JSON.stringify(body) })
      refused(t, res, /not JSON/, `${path} as ${contentType}`, 'unsupported_media_type', 415)
    }
  }
  t.same(await storedIds(printer), [])
})

t.test('printer event limits - no credential is 401, a key without printers:write is 403; nothing stored', async (t) => {
  const printer = await addPrinter(farm)
  const key = await request(farm.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'read only', scopes: ['printers:read'] } })
  t.equal(key.status, 200)
  const readOnly = { 'x-api-key': key.json.key }
  const routes: [string, (headers: Record<string, string>) => Promise<HttpResult>][] = [
    ['single', (headers) => postEvent(farm, singleWith(printer, 0), headers)],
    ['batch', (headers) => postBatch(farm, batchWith(printer, 0), headers)],
  ]
  for (const [name, post] of routes) {
    refused(t, await post({}), /./, `${name} without a credential`, 'unauthorized', 401)
    refused(t, await post({ 'x-api-key': 'pf_not-a-real-key' }), /./, `${name} with an unknown key`, 'unauthorized', 401)
    const denied = await post(readOnly)
    refused(t, denied, /printers:write/, `${name} with printers:read only`, 'insufficient_scope', 403)
  }
  t.same(await storedIds(printer), [])
  accepted(t, await postBatch(farm, batchWith(printer, 0)), 'the bridge key may post')
})
