import t, { type Test } from 'tap'
import {
  BatchItemSchema,
  PrinterEventBatchSchema,
  SinglePrinterEventSchema,
  checkBatch,
  describeBatchProblem,
  maxEventsPerBatch,
  printerEventTypes,
  printerOfSingleEvent,
  type PrinterEventBatch,
  type SinglePrinterEvent,
} from '../../protocol/printer-events.js'
import { compileBodyValidator } from '../../protocol/schemas/validator.js'

// The rules and limits for printer events (docs/printers-and-events.md), one test per rule and per
// place the rule applies to: the single-event body, the batch body, and a batch
// item. Every case starts from a fresh valid body and changes one thing.

type Body = Record<string, unknown>
type Result = { ok: true } | { ok: false; reason: string }

const validateSingle = compileBodyValidator(SinglePrinterEventSchema)
const validateBatch = compileBodyValidator(PrinterEventBatchSchema)
const validateItem = compileBodyValidator(BatchItemSchema)

const HOST = 'host-a'
const EPOCH = 3
const T0 = 1_700_000_000_000

/** The 26 event types, copied from docs/printers-and-events.md. */
const specEventTypes = [
  'status',
  'message',
  'rawMessage',
  'client:connect',
  'client:disconnect',
  'client:error',
  'printer:dataUpdate',
  'printer:deltaUpdate',
  'printer:statusUpdate',
  'printer:amsUpdate',
  'printer:filamentStateChanged',
  'printer:error',
  'job:update',
  'job:start',
  'job:pause',
  'job:offlineRecovery',
  'job:unpause',
  'job:finish',
  'heartbeat',
  'file:uploadStart',
  'file:uploadComplete',
  'file:uploadError',
  'detection:failure',
  'detection:warning',
  'detection:bedEmpty',
  'detection:complete',
]

function validSingle(): Body {
  return {
    eventId: 'evt-1',
    eventType: 'printer:statusUpdate',
    data: { state: 'printing', progress: 42 },
    seqn: 7,
    hostId: HOST,
    assignmentEpoch: EPOCH,
    deliveryAttempt: 1,
    timestamp: T0,
  }
}

/** Item i has eventId evt-i and seqn 10 + i. */
function validItem(i: number): Body {
  return {
    eventId: `evt-${i}`,
    type: 'printer:statusUpdate',
    timestamp: T0 + i,
    seqn: 10 + i,
    hostId: HOST,
    assignmentEpoch: EPOCH,
    deliveryAttempt: 1,
    data: { progress: i },
  }
}

/** Three items by default: seqns 10, 11, 12. */
function validBatch(count = 3): Body {
  return {
    printerId: 'printer-1',
    events: Array.from({ length: count }, (_, i) => validItem(i)),
    timestamp: T0,
    hostId: HOST,
    assignmentEpoch: EPOCH,
  }
}

function itemOf(batch: Body, index: number): Body {
  const item = (batch['events'] as Body[])[index]
  if (item === undefined) throw new Error(`the batch has no item ${index}`)
  return item
}

/** Where a field lives: the single body, the batch body, or the batch's item 2. */
interface Place {
  name: string
  validate: (value: unknown) => Result
  make: () => Body
  target: (body: Body) => Body
  path: string
}

const single: Place = { name: 'single event', validate: validateSingle, make: validSingle, target: (b) => b, path: 'body' }
const batch: Place = { name: 'batch', validate: validateBatch, make: () => validBatch(), target: (b) => b, path: 'body' }
const batchItem: Place = {
  name: 'batch item',
  validate: validateBatch,
  make: () => validBatch(),
  target: (b) => itemOf(b, 2),
  path: 'body.events[2]',
}

const MISSING = Symbol('missing')

function bodyWith(place: Place, field: string, value: unknown): Body {
  const body = place.make()
  const target = place.target(body)
  if (value === MISSING) delete target[field]
  else target[field] = value
  return body
}

function show(value: unknown): string {
  if (value === MISSING) return 'missing'
  if (typeof value === 'string' && value.length > 40) return `${value.length} characters`
  return JSON.stringify(value)
}

/** The reason, or 'accepted', so a failure shows what happened. */
function outcome(result: Result): string {
  return result.ok ? 'accepted' : result.reason
}

function refused(t: Test, place: Place, field: string, value: unknown, reason: string, todo?: string): void {
  const result = place.validate(bodyWith(place, field, value))
  t.equal(outcome(result), reason, `${field} = ${show(value)} is refused`, todo === undefined ? {} : { todo })
}

function accepted(t: Test, place: Place, field: string, value: unknown): void {
  const result = place.validate(bodyWith(place, field, value))
  t.equal(outcome(result), 'accepted', `${field} = ${show(value)} is accepted`)
}

const chars = (n: number): string => 'x'.repeat(n)

/** A string of 1-200 characters; required or optional. */
function id200Rule(t: Test, place: Place, field: string, required: boolean): void {
  const at = `${place.path}.${field}`
  if (required) refused(t, place, field, MISSING, `${place.path} is missing the required field '${field}'`)
  else accepted(t, place, field, MISSING)
  refused(t, place, field, '', `${at} must NOT have fewer than 1 characters`)
  accepted(t, place, field, 'a')
  accepted(t, place, field, chars(200))
  refused(t, place, field, chars(201), `${at} must NOT have more than 200 characters`)
  refused(t, place, field, 5, `${at} must be string`)
}

// ---------------------------------------------------------------- fixtures

t.test('printer events - the valid fixtures are accepted', async (t) => {
  t.strictSame(validateSingle(validSingle()), { ok: true, value: validSingle() })
  t.strictSame(validateBatch(validBatch()), { ok: true, value: validBatch() })
  t.strictSame(validateItem(validItem(0)), { ok: true, value: validItem(0) })
  t.equal(checkBatch(validateOrThrow(validBatch())), undefined, 'the valid batch is consistent')
})

// ---------------------------------------------------------------- event types

t.test('event types - the list is exactly the 26 documented types', async (t) => {
  t.strictSame([...printerEventTypes], specEventTypes)
  t.equal(new Set(printerEventTypes).size, 26)
})

for (const [place, field] of [
  [single, 'eventType'],
  [batchItem, 'type'],
] as const) {
  t.test(`${place.name} - ${field} is required and one of the 26 types`, async (t) => {
    const allowed = `${place.path}.${field} must be one of: ${specEventTypes.join(', ')}`
    for (const type of specEventTypes) accepted(t, place, field, type)
    refused(t, place, field, MISSING, `${place.path} is missing the required field '${field}'`)
    refused(t, place, field, 'printer:explode', allowed)
    refused(t, place, field, 'Status', allowed)
    refused(t, place, field, '', allowed)
    refused(t, place, field, 5, `${place.path}.${field} must be string`)
  })
}

t.test('single event - the type field of a batch item does not stand in for eventType', async (t) => {
  const body = validSingle()
  body['type'] = body['eventType']
  delete body['eventType']
  t.equal(outcome(validateSingle(body)), "body is missing the required field 'eventType'")
})

// ---------------------------------------------------------------- ids

for (const place of [single, batchItem]) {
  t.test(`${place.name} - eventId is required and 1-200 characters`, async (t) => {
    id200Rule(t, place, 'eventId', true)
  })
}

for (const place of [single, batch, batchItem]) {
  t.test(`${place.name} - idempotencyKey is optional and 1-200 characters`, async (t) => {
    id200Rule(t, place, 'idempotencyKey', false)
  })
}

t.test('batch - batchId is optional and 1-200 characters', async (t) => {
  id200Rule(t, batch, 'batchId', false)
})

for (const place of [single, batch, batchItem]) {
  t.test(`${place.name} - hostId is required and 1-200 characters`, async (t) => {
    id200Rule(t, place, 'hostId', true)
  })
}

t.test('batch - printerId is required and 1-200 characters', async (t) => {
  id200Rule(t, batch, 'printerId', true)
})

t.test('single event - printerId is optional at the top level and 1-200 characters', async (t) => {
  id200Rule(t, single, 'printerId', false)
})

t.test('batch item - persistedId is an optional string of at most 200 characters', async (t) => {
  accepted(t, batchItem, 'persistedId', MISSING)
  accepted(t, batchItem, 'persistedId', '')
  accepted(t, batchItem, 'persistedId', 'row-42')
  accepted(t, batchItem, 'persistedId', chars(200))
  refused(t, batchItem, 'persistedId', chars(201), 'body.events[2].persistedId must NOT have more than 200 characters')
  refused(t, batchItem, 'persistedId', 42, 'body.events[2].persistedId must be string')
  refused(t, batchItem, 'persistedId', null, 'body.events[2].persistedId must be string')
})

// ---------------------------------------------------------------- data

for (const place of [single, batchItem]) {
  t.test(`${place.name} - data is required and must be an object`, async (t) => {
    const at = `${place.path}.data`
    refused(t, place, 'data', MISSING, `${place.path} is missing the required field 'data'`)
    refused(t, place, 'data', [], `${at} must be object`)
    refused(t, place, 'data', [{ a: 1 }], `${at} must be object`)
    refused(t, place, 'data', 'text', `${at} must be object`)
    refused(t, place, 'data', null, `${at} must be object`)
    refused(t, place, 'data', 1, `${at} must be object`)
    accepted(t, place, 'data', {})
    accepted(t, place, 'data', { nested: { deep: [1, 'two', null] }, printerId: 5 })
  })
}

// ---------------------------------------------------------------- numbers

for (const place of [single, batchItem]) {
  t.test(`${place.name} - seqn is a required integer >= 0`, async (t) => {
    const at = `${place.path}.seqn`
    refused(t, place, 'seqn', MISSING, `${place.path} is missing the required field 'seqn'`)
    refused(t, place, 'seqn', -1, `${at} must be >= 0`)
    refused(t, place, 'seqn', 1.5, `${at} must be integer`)
    refused(t, place, 'seqn', '1', `${at} must be integer`)
    refused(t, place, 'seqn', Number.MAX_SAFE_INTEGER + 1, `${at} must be <= ${Number.MAX_SAFE_INTEGER}`)
    accepted(t, place, 'seqn', 0)
    accepted(t, place, 'seqn', Number.MAX_SAFE_INTEGER)
  })
}

for (const place of [single, batch, batchItem]) {
  t.test(`${place.name} - assignmentEpoch is a required integer >= 1`, async (t) => {
    const at = `${place.path}.assignmentEpoch`
    refused(t, place, 'assignmentEpoch', MISSING, `${place.path} is missing the required field 'assignmentEpoch'`)
    refused(t, place, 'assignmentEpoch', 0, `${at} must be >= 1`)
    refused(t, place, 'assignmentEpoch', -1, `${at} must be >= 1`)
    refused(t, place, 'assignmentEpoch', 1.5, `${at} must be integer`)
    refused(t, place, 'assignmentEpoch', '3', `${at} must be integer`)
    accepted(t, place, 'assignmentEpoch', 1)
  })
}

for (const place of [single, batchItem]) {
  t.test(`${place.name} - deliveryAttempt is a required integer >= 1`, async (t) => {
    const at = `${place.path}.deliveryAttempt`
    refused(t, place, 'deliveryAttempt', MISSING, `${place.path} is missing the required field 'deliveryAttempt'`)
    refused(t, place, 'deliveryAttempt', 0, `${at} must be >= 1`)
    refused(t, place, 'deliveryAttempt', 1.5, `${at} must be integer`)
    refused(t, place, 'deliveryAttempt', '1', `${at} must be integer`)
    accepted(t, place, 'deliveryAttempt', 1)
    accepted(t, place, 'deliveryAttempt', 2)
    accepted(t, place, 'deliveryAttempt', 1_000_000)
    refused(t, place, 'deliveryAttempt', 1_000_001, `${at} must be <= 1000000`)
  })
}

for (const place of [single, batch, batchItem]) {
  t.test(`${place.name} - timestamp is a required number >= 0`, async (t) => {
    const at = `${place.path}.timestamp`
    refused(t, place, 'timestamp', MISSING, `${place.path} is missing the required field 'timestamp'`)
    refused(t, place, 'timestamp', -1, `${at} must be >= 0`)
    refused(t, place, 'timestamp', '2024-01-01T00:00:00Z', `${at} must be number`)
    refused(t, place, 'timestamp', null, `${at} must be number`)
    accepted(t, place, 'timestamp', 0)
    accepted(t, place, 'timestamp', 1.5)
  })
}

// ---------------------------------------------------------------- batch shape

t.test('batch - events is required and holds 1-100 items', async (t) => {
  t.equal(maxEventsPerBatch, 100)
  const many = (n: number): Body[] => Array.from({ length: n }, (_, i) => validItem(i))
  refused(t, batch, 'events', MISSING, "body is missing the required field 'events'")
  refused(t, batch, 'events', [], 'body.events must NOT have fewer than 1 items')
  accepted(t, batch, 'events', many(1))
  accepted(t, batch, 'events', many(100))
  refused(t, batch, 'events', many(101), 'body.events must NOT have more than 100 items')
  refused(t, batch, 'events', validItem(0), 'body.events must be array')
})

t.test('batch - an extra top-level field is refused and named', async (t) => {
  refused(t, batch, 'extra', 1, "body has an unknown field 'extra'")
  refused(t, batch, 'deliveryAttempt', 1, "body has an unknown field 'deliveryAttempt'")
  refused(t, batch, 'seqn', 5, "body has an unknown field 'seqn'")
})

t.test('batch item - an extra field is refused and named with the item index', async (t) => {
  refused(t, batchItem, 'eventType', 'status', "body.events[2] has an unknown field 'eventType'")
  refused(t, batchItem, 'printerId', 'printer-1', "body.events[2] has an unknown field 'printerId'")
  refused(t, batchItem, 'extra', null, "body.events[2] has an unknown field 'extra'")
  const body = validBatch()
  itemOf(body, 0)['extra'] = 1
  t.equal(outcome(validateBatch(body)), "body.events[0] has an unknown field 'extra'", 'the first item is named as events[0]')
})

t.test('batch item - the item schema on its own refuses extra fields', async (t) => {
  const item = validItem(0)
  item['extra'] = true
  t.equal(outcome(validateItem(item)), "body has an unknown field 'extra'")
})

t.test('batch - delta is an optional object', async (t) => {
  accepted(t, batch, 'delta', MISSING)
  accepted(t, batch, 'delta', {})
  accepted(t, batch, 'delta', { temperature: { nozzle: 210 }, list: [1, 2] })
  refused(t, batch, 'delta', [], 'body.delta must be object')
  refused(t, batch, 'delta', 'x', 'body.delta must be object')
  refused(t, batch, 'delta', null, 'body.delta must be object')
})

t.test('batch - maxSeqn is an optional integer >= 0', async (t) => {
  accepted(t, batch, 'maxSeqn', MISSING)
  accepted(t, batch, 'maxSeqn', 12)
  accepted(t, batch, 'maxSeqn', 0)
  refused(t, batch, 'maxSeqn', -1, 'body.maxSeqn must be >= 0')
  refused(t, batch, 'maxSeqn', 1.5, 'body.maxSeqn must be integer')
  refused(t, batch, 'maxSeqn', '12', 'body.maxSeqn must be integer')
})

// ---------------------------------------------------------------- single shape

t.test('single event - extra top-level fields are accepted (the route is not strict)', async (t) => {
  accepted(t, single, 'extra', 1)
  accepted(t, single, 'printerName', 'Prusa 3')
  accepted(t, single, 'type', 'status')
  const body = validSingle()
  body['a'] = { b: [1] }
  body['c'] = null
  t.strictSame(validateSingle(body), { ok: true, value: body }, 'the value comes back unchanged')
})

// ---------------------------------------------------------------- checkBatch

function validateOrThrow(body: Body): PrinterEventBatch {
  const result = validateBatch(body)
  if (!result.ok) throw new Error(`fixture is not a valid batch: ${result.reason}`)
  return result.value
}

/** A schema-valid batch with one change. */
function batchWith(change: (body: Body) => void): PrinterEventBatch {
  const body = validBatch()
  change(body)
  return validateOrThrow(body)
}

t.test('checkBatch - a consistent batch has no problem', async (t) => {
  t.equal(checkBatch(batchWith(() => {})), undefined, 'no maxSeqn')
  t.equal(checkBatch(batchWith((b) => (b['maxSeqn'] = 12))), undefined, 'maxSeqn is the largest seqn')
  const reversed = batchWith((b) => {
    b['events'] = [validItem(2), validItem(0), validItem(1)]
    b['maxSeqn'] = 12
  })
  t.equal(checkBatch(reversed), undefined, 'items need not be in seqn order')
  const one = batchWith((b) => {
    b['events'] = [{ ...validItem(0), seqn: 0 }]
    b['maxSeqn'] = 0
  })
  t.equal(checkBatch(one), undefined, 'a single item with seqn 0 and maxSeqn 0')
})

t.test('checkBatch - an item with a different hostId is named by index and field', async (t) => {
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 2)['hostId'] = 'host-b'))), {
    index: 2,
    field: 'hostId',
    reason: "differs from the batch's hostId 'host-a'",
  })
  t.strictSame(
    checkBatch(batchWith((b) => (b['hostId'] = 'host-b'))),
    { index: 0, field: 'hostId', reason: "differs from the batch's hostId 'host-b'" },
    'the batch differing from all items names the first item',
  )
})

t.test('checkBatch - an item with a different assignmentEpoch is named by index and field', async (t) => {
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 1)['assignmentEpoch'] = EPOCH + 1))), {
    index: 1,
    field: 'assignmentEpoch',
    reason: "differs from the batch's assignmentEpoch 3",
  })
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 2)['assignmentEpoch'] = 1))), {
    index: 2,
    field: 'assignmentEpoch',
    reason: "differs from the batch's assignmentEpoch 3",
  }, 'an older epoch too')
})

t.test('checkBatch - a repeated eventId names the repeating item', async (t) => {
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 2)['eventId'] = 'evt-0'))), {
    index: 2,
    field: 'eventId',
    reason: 'repeats an eventId earlier in this batch',
  })
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 1)['eventId'] = 'evt-0'))), {
    index: 1,
    field: 'eventId',
    reason: 'repeats an eventId earlier in this batch',
  })
})

t.test('checkBatch - a repeated seqn names the repeating item', async (t) => {
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 2)['seqn'] = 10))), {
    index: 2,
    field: 'seqn',
    reason: 'repeats a seqn earlier in this batch',
  })
  t.strictSame(checkBatch(batchWith((b) => (itemOf(b, 2)['seqn'] = 11))), {
    index: 2,
    field: 'seqn',
    reason: 'repeats a seqn earlier in this batch',
  })
})

t.test('checkBatch - maxSeqn other than the largest seqn is a batch-level problem', async (t) => {
  t.strictSame(checkBatch(batchWith((b) => (b['maxSeqn'] = 13))), {
    index: undefined,
    field: 'maxSeqn',
    reason: 'is 13 but the largest seqn in the batch is 12',
  })
  t.strictSame(checkBatch(batchWith((b) => (b['maxSeqn'] = 11))), {
    index: undefined,
    field: 'maxSeqn',
    reason: 'is 11 but the largest seqn in the batch is 12',
  }, 'smaller than the largest')
  t.strictSame(checkBatch(batchWith((b) => (b['maxSeqn'] = 10))), {
    index: undefined,
    field: 'maxSeqn',
    reason: 'is 10 but the largest seqn in the batch is 12',
  }, 'the first seqn is not the largest')
})

t.test('checkBatch - describeBatchProblem renders the field path', async (t) => {
  const host = checkBatch(batchWith((b) => (itemOf(b, 2)['hostId'] = 'host-b')))
  if (host === undefined) t.fail('expected a hostId problem')
  else t.equal(describeBatchProblem(host), "body.events[2].hostId differs from the batch's hostId 'host-a'")
  const max = checkBatch(batchWith((b) => (b['maxSeqn'] = 13)))
  if (max === undefined) t.fail('expected a maxSeqn problem')
  else t.equal(describeBatchProblem(max), 'body.maxSeqn is 13 but the largest seqn in the batch is 12')
  t.equal(describeBatchProblem({ index: 0, field: 'seqn', reason: 'r' }), 'body.events[0].seqn r', 'index 0 is an item, not the batch')
})

// ---------------------------------------------------------------- printerOfSingleEvent

function singleWith(change: (body: Body) => void): SinglePrinterEvent {
  const body = validSingle()
  change(body)
  const result = validateSingle(body)
  if (!result.ok) throw new Error(`fixture is not a valid single event: ${result.reason}`)
  return result.value
}

function withDataPrinter(value: unknown): SinglePrinterEvent {
  return singleWith((b) => ((b['data'] as Body)['printerId'] = value))
}

t.test('printerOfSingleEvent - the top-level printerId wins', async (t) => {
  const both = singleWith((b) => {
    b['printerId'] = 'printer-top'
    ;(b['data'] as Body)['printerId'] = 'printer-data'
  })
  t.equal(printerOfSingleEvent(both), 'printer-top')
  t.equal(printerOfSingleEvent(singleWith((b) => (b['printerId'] = 'printer-top'))), 'printer-top', 'top level only')
  const badData = singleWith((b) => {
    b['printerId'] = 'printer-top'
    ;(b['data'] as Body)['printerId'] = 42
  })
  t.equal(printerOfSingleEvent(badData), 'printer-top', 'an unusable data.printerId does not matter')
})

t.test('printerOfSingleEvent - falls back to data.printerId when it is a 1-200 character string', async (t) => {
  t.equal(printerOfSingleEvent(withDataPrinter('printer-data')), 'printer-data')
  t.equal(printerOfSingleEvent(withDataPrinter('p')), 'p', '1 character')
  t.equal(printerOfSingleEvent(withDataPrinter(chars(200))), chars(200), '200 characters')
})

t.test('printerOfSingleEvent - no usable printer gives undefined', async (t) => {
  t.equal(printerOfSingleEvent(singleWith(() => {})), undefined, 'missing everywhere')
  t.equal(printerOfSingleEvent(withDataPrinter(42)), undefined, 'a number')
  t.equal(printerOfSingleEvent(withDataPrinter('')), undefined, 'an empty string')
  t.equal(printerOfSingleEvent(withDataPrinter(chars(201))), undefined, '201 characters')
  t.equal(printerOfSingleEvent(withDataPrinter(null)), undefined, 'null')
  t.equal(printerOfSingleEvent(withDataPrinter(['printer-1'])), undefined, 'an array')
  t.equal(printerOfSingleEvent(withDataPrinter({ id: 'printer-1' })), undefined, 'an object')
})

t.test('checkBatch - an idempotencyKey repeated within one batch names the later item', async (t) => {
  const { checkBatch, describeBatchProblem } = await import('../../protocol/printer-events.js')
  const item = (i: number, key?: string) => ({
    eventId: `e${i}`,
    type: 'heartbeat' as const,
    timestamp: 1,
    seqn: i,
    hostId: 'h',
    assignmentEpoch: 1,
    deliveryAttempt: 1,
    data: {},
    ...(key === undefined ? {} : { idempotencyKey: key }),
  })
  const problem = checkBatch({ printerId: 'p', timestamp: 1, hostId: 'h', assignmentEpoch: 1, events: [item(1, 'k'), item(2), item(3, 'k')] })
  t.match(problem, { index: 2, field: 'idempotencyKey' })
  t.match(describeBatchProblem(problem!), /^body\.events\[2\]\.idempotencyKey repeats/)
  t.equal(checkBatch({ printerId: 'p', timestamp: 1, hostId: 'h', assignmentEpoch: 1, events: [item(1, 'a'), item(2, 'b'), item(3)] }), undefined)
})

t.test('timestamp - bounded by the largest time a Date holds (single, batch, items)', async (t) => {
  const { SinglePrinterEventSchema, PrinterEventBatchSchema } = await import('../../protocol/printer-events.js')
  const { compileBodyValidator } = await import('../../protocol/schemas/validator.js')
  const single = compileBodyValidator(SinglePrinterEventSchema)
  const base = { eventId: 'e', eventType: 'heartbeat', data: {}, seqn: 1, hostId: 'h', assignmentEpoch: 1, deliveryAttempt: 1 }
  t.equal(single({ ...base, timestamp: 8.64e15 }).ok, true)
  const far = single({ ...base, timestamp: 1e300 })
  t.equal(far.ok, false)
  if (!far.ok) t.match(far.reason, /body\.timestamp must be <= 8640000000000000/)
  const batch = compileBodyValidator(PrinterEventBatchSchema)
  const it = { eventId: 'e', type: 'heartbeat', timestamp: 1e300, seqn: 1, hostId: 'h', assignmentEpoch: 1, deliveryAttempt: 1, data: {} }
  const bad = batch({ printerId: 'p', timestamp: 1, hostId: 'h', assignmentEpoch: 1, events: [it] })
  t.equal(bad.ok, false)
  if (!bad.ok) t.match(bad.reason, /body\.events\[0\]\.timestamp must be <=/)
})
