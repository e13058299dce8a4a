/**
 * The runtime over a recording persistence: the unit's view of what the
 * store is asked to do. The same runtime over PostgreSQL is tested through
 * HTTP in test/src/routes/printer-events.test.ts.
 */
import t from 'tap'
import { PrinterRuntime } from '../../actors/printer-runtime.js'
import { LocalShardDirectory, type ShardDirectory } from '../../actors/shard-directory.js'
import { SimulatedClock } from '../helpers/clock.js'
import type { CommitOutcome, HydratedPrinter, PrinterCommit, PrinterPersistence } from '../../actors/printer-persistence.js'

const org = 'org-1'
const ids = Array.from({ length: 10 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`)

class RecordingPersistence implements PrinterPersistence {
  readonly commits: PrinterCommit[] = []
  readonly stored = new Map<string, HydratedPrinter>()
  readonly log = new Map<string, Map<number, string>>()
  hydrations = 0
  sweeps = 0
  failNext = false

  constructor(printers: string[]) {
    for (const id of printers) this.stored.set(id, { printerId: id, organizationId: org, name: `printer ${id.slice(0, 4)}`, printerType: 'bambu', model: null, readyGate: 'open', hostId: 'h', assignmentEpoch: 1, highWaterSeqn: -1, recentEventIds: [], recentKeys: [], state: null })
  }
  async hydrate(id: string) {
    this.hydrations++
    const p = this.stored.get(id)
    return p === undefined ? undefined : structuredClone(p)
  }
  async commit(unit: PrinterCommit): Promise<CommitOutcome> {
    if (this.failNext) {
      this.failNext = false
      throw new Error('store down')
    }
    this.commits.push(unit)
    const p = this.stored.get(unit.printerId)!
    p.highWaterSeqn = unit.highWaterSeqn
    p.state = unit.state
    const log = this.log.get(unit.printerId) ?? new Map<number, string>()
    for (const e of unit.events) log.set(e.seqn, e.eventId)
    this.log.set(unit.printerId, log)
    return { inserted: new Set(unit.events.map((e) => e.eventId)) }
  }
  /** No printer tasks here: every printerTaskId names an unknown task. */
  async linkTaskStarts() {
    return new Map()
  }
  async reserveJobIds(n: number) {
    return Array.from({ length: n }, (_, i) => 100 + i)
  }
  async storedEventIds(printerId: string, _epoch: number, seqns: readonly number[]) {
    const log = this.log.get(printerId)
    return new Map(seqns.flatMap((s) => (log?.has(s) ? [[s, log.get(s)!] as const] : [])))
  }
  async lookupEvents() {
    return []
  }
  async assignHost() {
    return true
  }
  async markSilentOffline() {
    this.sweeps++
    return []
  }
}

function setup(options: { maxResident?: number; directory?: ShardDirectory } = {}) {
  const clock = new SimulatedClock()
  const persistence = new RecordingPersistence(ids)
  const errors: string[] = []
  const runtime = new PrinterRuntime({
    directory: options.directory ?? new LocalShardDirectory(),
    persistence,
    presenceTimeoutMs: 1_000,
    idleMs: 5_000,
    maxResident: options.maxResident ?? 100,
    clock,
    onBackgroundError: (what) => errors.push(what),
  })
  return { runtime, persistence, clock, errors, advance: (ms: number) => clock.tick(ms) }
}

const ev = (seqn: number, type = 'heartbeat') => ({ eventId: `e${seqn}`, type: type as never, seqn, timestamp: seqn, deliveryAttempt: 1, data: {} })
const ingest = (runtime: PrinterRuntime, id: string, seqns: number[], type?: string) =>
  runtime.ingest(id, { organizationId: org, hostId: 'h', assignmentEpoch: 1, events: seqns.map((s) => ev(s, type)) })

t.test('printer runtime - silence past the presence timeout marks a printer offline by its own timer, and the store is told', async (t) => {
  const { runtime, persistence, advance } = setup()
  await ingest(runtime, ids[0]!, [0])
  t.equal(persistence.commits.at(-1)?.online, true)
  advance(999)
  t.equal(persistence.commits.length, 1, 'not before the timeout')
  advance(1)
  await new Promise((r) => setImmediate(r))
  t.equal(persistence.commits.length, 2)
  t.match(persistence.commits.at(-1), { online: false, seen: false, events: [] })
  t.equal((await runtime.view(ids[0]!, org)).online, false)
})

t.test('printer runtime - a failed commit leaves no trace in memory: the actor is rebuilt from the store', async (t) => {
  const { runtime, persistence } = setup()
  await ingest(runtime, ids[1]!, [0, 1])
  persistence.failNext = true
  await t.rejects(ingest(runtime, ids[1]!, [2, 3, 4], 'job:start'), /store down/)
  const before = persistence.hydrations
  const view = await runtime.view(ids[1]!, org)
  t.equal(persistence.hydrations, before + 1, 'rehydrated')
  t.equal(view.job, null, 'the job:start that was never stored is not in memory')
  const retry = await ingest(runtime, ids[1]!, [2, 3, 4])
  t.match(retry, { processed: 3, stored: 3, duplicates: 0 }, 'the retry applies: the high-water mark did not run ahead of the store')
})

t.test('printer runtime - idle offline actors are passivated and come back hydrated; online ones stay', async (t) => {
  const { runtime, persistence, advance } = setup()
  await ingest(runtime, ids[2]!, [0])
  await ingest(runtime, ids[3]!, [0, 1], 'client:disconnect')
  advance(6_000)
  await ingest(runtime, ids[2]!, [1]) // keeps 2 online and recently used
  await runtime.sweep()
  t.equal(runtime.resident, 1, 'the silent, offline printer was passivated')
  const result = await ingest(runtime, ids[3]!, [1, 2])
  t.match(result, { processed: 2, stored: 1, duplicates: 1 }, 'hydrated with its high-water mark')
  t.ok(persistence.hydrations >= 3)
})

t.test('printer runtime - resident actors are bounded: past the bound the least recently used idle ones go', async (t) => {
  const { runtime, persistence } = setup({ maxResident: 3 })
  for (const id of ids.slice(0, 6)) await ingest(runtime, id, [0])
  t.equal(runtime.resident, 3, 'bounded at spawn time, between sweeps too')
  const before = persistence.hydrations
  await ingest(runtime, ids[5]!, [1])
  t.equal(persistence.hydrations, before, 'the most recently used stayed')
  await ingest(runtime, ids[0]!, [1])
  t.equal(persistence.hydrations, before + 1, 'the least recently used was passivated and comes back hydrated')
  t.equal(runtime.resident, 3)
})

t.test('printer runtime - ids that name no printer are refused and never kept in memory', async (t) => {
  const { runtime } = setup()
  for (const id of ['nope', '11111111-1111-4111-8111-111111111111']) {
    await t.rejects(ingest(runtime, id, [0]), { code: 'printer_not_found' })
  }
  t.equal(runtime.resident, 0)
  await t.rejects(runtime.view(ids[4]!, 'another-org'), { code: 'printer_not_found' }, "another organization's printer is not found")
})

t.test('printer runtime - a shard this node does not own is refused as retryable, not served', async (t) => {
  const directory = Object.assign(new LocalShardDirectory(), { ownsShard: () => false })
  const { runtime } = setup({ directory })
  await t.rejects(ingest(runtime, ids[5]!, [0]), { code: 'printer_owner_unavailable', status: 503 })
})

t.test('printer runtime - the live-feed hook runs after the commit, off the request path, with the stored events', async (t) => {
  const { runtime } = setup()
  const seen: { events: number; online: boolean }[] = []
  runtime.onChange((change) => seen.push({ events: change.events.length, online: change.view.online }))
  runtime.onChange(() => {
    throw new Error('a broken listener')
  })
  await ingest(runtime, ids[6]!, [0, 1, 2])
  t.same(seen, [], 'not yet: the reply comes first')
  await new Promise((r) => setImmediate(r))
  t.same(seen, [{ events: 3, online: true }])
})

t.test('printer runtime - the sweeps run on the runtime\'s clock, every half of the shorter of idle and presence time (at least 1 s)', async (t) => {
  const { runtime, persistence, clock } = setup()
  runtime.start()
  clock.tick(999)
  t.equal(persistence.sweeps, 0)
  clock.tick(1)
  await new Promise((r) => setImmediate(r))
  t.equal(persistence.sweeps, 1, 'presence 1 s, idle 5 s: every second')
  clock.tick(2_000)
  await new Promise((r) => setImmediate(r))
  t.equal(persistence.sweeps, 3)
  await runtime.stop()
  t.equal(clock.pending, 0, 'stop clears the sweep')
})

t.test('printer runtime - stop lets queued messages finish, then refuses new ones', async (t) => {
  const { runtime } = setup()
  const pending = ingest(runtime, ids[7]!, [0])
  await runtime.stop()
  t.match(await pending, { stored: 1 })
  await t.rejects(ingest(runtime, ids[7]!, [1]), { code: 'shutting_down' })
})
