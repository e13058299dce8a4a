import t from 'tap'
import { createActor, initialTransition, SimulatedClock, transition } from 'xstate'
import { placeholderJobIds, printerMachine, type PrinterInput, type PrinterMachineEvent } from '../../machines/printer.js'

const presenceMs = 1_000

/** A live actor on a simulated clock: time moves only when the test says so. */
function live(input: PrinterInput = { printerId: 'p1' }) {
  const clock = new SimulatedClock()
  const actor = createActor(printerMachine.provide({ delays: { presenceTimeout: presenceMs } }), { input, clock })
  actor.start()
  return { actor, clock }
}

const ev = (type: PrinterMachineEvent['type'], data: Record<string, unknown> = {}, extra: Partial<{ timestamp: number; jobId: number }> = {}) =>
  ({ type, data, timestamp: extra.timestamp ?? 1_000, ...(extra.jobId === undefined ? {} : { jobId: extra.jobId }) }) as PrinterMachineEvent

const apply = (events: PrinterMachineEvent[], input: PrinterInput = { printerId: 'p1' }) => {
  let [snap] = initialTransition(printerMachine, input)
  for (const e of events) [snap] = transition(printerMachine, snap, e)
  return snap
}

t.test('presence - a printer starts offline, even when hydrated with a last-seen time', async (t) => {
  t.same(apply([], { printerId: 'p1', lastSeenAt: 123 }).value, { presence: 'offline', activity: 'idle' })
})

t.test('presence - any event marks it online; silence past the timeout marks it offline by itself', async (t) => {
  const { actor, clock } = live()
  actor.send(ev('heartbeat'))
  t.equal(actor.getSnapshot().value.presence, 'online')
  clock.increment(presenceMs - 1)
  t.equal(actor.getSnapshot().value.presence, 'online', 'not yet')
  actor.send(ev('printer:deltaUpdate'))
  clock.increment(presenceMs - 1)
  t.equal(actor.getSnapshot().value.presence, 'online', 'each event restarts the timer')
  clock.increment(1)
  t.equal(actor.getSnapshot().value.presence, 'offline', 'nothing heard for the whole timeout')
  actor.stop()
})

t.test('presence - client:disconnect goes offline at once', async (t) => {
  const { actor, clock } = live()
  actor.send(ev('heartbeat'))
  actor.send(ev('client:disconnect'))
  t.equal(actor.getSnapshot().value.presence, 'offline')
  clock.increment(presenceMs * 2)
  t.equal(actor.getSnapshot().value.presence, 'offline')
  actor.send(ev('client:connect'))
  t.equal(actor.getSnapshot().value.presence, 'online')
  actor.stop()
})

t.test('presence - the maintenance flag is not a sign of life', async (t) => {
  const { actor } = live()
  actor.send({ type: 'maintenance', on: true })
  t.equal(actor.getSnapshot().value.presence, 'offline')
  t.equal(actor.getSnapshot().context.maintenance, true)
  actor.stop()
})

t.test('jobs - start, progress, pause, unpause, finish', async (t) => {
  let snap = apply([ev('job:start', { name: 'benchy.3mf' }, { jobId: 41, timestamp: 10 })])
  t.equal(snap.value.activity, 'printing')
  t.match(snap.context.job, { jobId: 41, name: 'benchy.3mf', state: 'printing', progress: 0, startedAt: 10, endedAt: null })
  snap = transition(printerMachine, snap, ev('job:update', { progress: 37.5 }))[0]
  t.equal(snap.context.job?.progress, 37.5)
  snap = transition(printerMachine, snap, ev('job:pause'))[0]
  t.equal(snap.value.activity, 'paused')
  snap = transition(printerMachine, snap, ev('job:unpause'))[0]
  t.equal(snap.value.activity, 'printing')
  snap = transition(printerMachine, snap, ev('job:finish', {}, { timestamp: 99 }))[0]
  t.equal(snap.value.activity, 'idle')
  t.match(snap.context.job, { state: 'finished', progress: 100, endedAt: 99 })
})

t.test('jobs - a failed finish keeps its progress; a second finish changes nothing', async (t) => {
  let snap = apply([ev('job:start', {}, { jobId: 1 }), ev('job:update', { progress: 60 }), ev('job:finish', { success: false }, { timestamp: 50 })])
  t.match(snap.context.job, { state: 'failed', progress: 60, endedAt: 50 })
  snap = transition(printerMachine, snap, ev('job:finish', {}, { timestamp: 70 }))[0]
  t.match(snap.context.job, { state: 'failed', endedAt: 50 })
})

t.test('jobs - offline recovery resumes a paused job; progress is clamped; a job without an id waits for the store to give it one', async (t) => {
  let snap = apply([ev('job:start', {}, { jobId: 2 }), ev('job:pause'), ev('job:offlineRecovery')])
  t.equal(snap.value.activity, 'printing')
  snap = transition(printerMachine, snap, ev('job:update', { progress: 140 }))[0]
  t.equal(snap.context.job?.progress, 100)
  const pending = apply([ev('job:start', { name: 'x' })])
  t.equal(pending.context.job?.jobId, -1, 'a placeholder, never a made-up id')
  t.same(placeholderJobIds(pending.context), [-1])
  const [resolved] = transition(printerMachine, pending, { type: 'jobIds', ids: new Map([[-1, 77]]) })
  t.match(resolved.context.job, { jobId: 77, name: 'x', state: 'printing' })
  t.same(resolved.context.changedJobs.map((j) => j.jobId), [77], 'the changed jobs carry the real id')
  t.same(resolved.context.eventJobs, [77], 'and so does the event that opened it')
  t.same(placeholderJobIds(resolved.context), [])
})

t.test('status, errors, AMS, filament - raw values kept for the classifier, the newest error stands', async (t) => {
  const errors = Array.from({ length: 25 }, (_, i) => ev('printer:error', { code: `E${i}`, message: 'm' }, { timestamp: i }))
  const snap = apply([
    ev('printer:statusUpdate', { status: 'RUNNING' }),
    ...errors,
    ev('printer:amsUpdate', { slots: [{ position: 0, materialType: 'PLA', color: 'FF0000FF', remaining: 80 }, 'junk', { type: 'PETG' }] }),
    ev('printer:filamentStateChanged', { runout: true }),
  ])
  t.equal(snap.context.rawStatus, 'RUNNING')
  t.match(snap.context.error, { code: 'E24', message: 'm', at: 24 }, 'the newest error stands')
  t.same(snap.context.ams, [
    { position: 0, materialType: 'PLA', color: 'FF0000FF', remaining: 80 },
    { position: 2, materialType: 'PETG', color: null, remaining: null },
  ])
  t.equal(snap.context.filamentRunout, true)
  const fresh = transition(printerMachine, snap, ev('job:start', {}, { jobId: 9 }))[0]
  t.equal(fresh.context.error, null, 'a new job starts with no error')
})

t.test('time - last seen only moves forward, whatever order timestamps come in', async (t) => {
  const snap = apply([ev('heartbeat', {}, { timestamp: 500 }), ev('heartbeat', {}, { timestamp: 300 })])
  t.equal(snap.context.lastSeenAt, 500)
})

t.test('machines - no clock, timer or I/O inside the printer machine module', async (t) => {
  const { readFileSync } = await import('node:fs')
  const source = readFileSync(new URL('../../machines/printer.ts', import.meta.url), 'utf8')
  t.notMatch(source, /Date\.now|new Date|setTimeout|setInterval|performance\.now|Math\.random/)
})

t.test('jobs - a late progress update does not change a job that has ended', async (t) => {
  const snap = apply([ev('job:start', {}, { jobId: 3 }), ev('job:finish', { success: false }), ev('job:update', { progress: 99 })])
  t.match(snap.context.job, { state: 'failed', progress: 0 })
})

t.test('jobs - a new job:start while a job runs closes the old one as failed, never leaving a ghost', async (t) => {
  const running = apply([ev('job:start', {}, { jobId: 10, timestamp: 5 }), ev('job:update', { progress: 40 })])
  const [closed] = transition(printerMachine, running, ev('job:start', {}, { jobId: 11, timestamp: 9 }))
  t.match(closed.context.job, { jobId: 11, state: 'printing' })
  t.match(closed.context.changedJobs, [
    { jobId: 10, state: 'failed', endedAt: 9, progress: 40 },
    { jobId: 11, state: 'printing' },
  ])
  const repeated = apply([ev('job:start', {}, { jobId: 12 })])
  const [again] = transition(printerMachine, repeated, ev('job:start', {}, { jobId: 12 }))
  t.same(again.context.changedJobs.map((j) => j.jobId), [12], 'the same job starting again supersedes nothing')
})

t.test('ams - slot positions are whole numbers 0-63, each once', async (t) => {
  const snap = apply([ev('printer:amsUpdate', { slots: [{ position: -5.5 }, { position: 1e300 }, { position: 2, type: 'PLA' }, { position: 2, type: 'ABS' }, { position: 63 }, { position: 64 }] })])
  t.same(snap.context.ams.map((s) => [s.position, s.materialType]), [
    [2, 'PLA'],
    [63, null],
  ])
})

t.test('batches - a batch applies its events in one transition, with every job it touched listed once in its final state', async (t) => {
  const [start] = initialTransition(printerMachine, { printerId: 'p1' })
  const [snap] = transition(printerMachine, start, {
    type: 'events',
    events: [
      { type: 'job:start', data: { name: 'a' }, timestamp: 1, jobId: 1 },
      { type: 'job:update', data: { progress: 50 }, timestamp: 2 },
      { type: 'job:finish', data: {}, timestamp: 3 },
      { type: 'job:start', data: { name: 'b' }, timestamp: 4, jobId: 2 },
    ],
  })
  t.same(
    snap.context.changedJobs.map((j) => [j.jobId, j.state, j.progress]),
    [
      [1, 'finished', 100],
      [2, 'printing', 0],
    ],
  )
  t.equal(snap.value.presence, 'online')
  t.equal(snap.context.lastSeenAt, 4)
})

/** A mixed run of events touching every part of the state: jobs opened by report and by job:start, errors, AMS, temperatures. */
const mixedRun = (): PrinterMachineEvent[] => [
  ev('printer:statusUpdate', { status: 'RUNNING', file_name: 'a.3mf' }, { timestamp: 1 }),
  ev('printer:deltaUpdate', { temperatures: { nozzle: { actual: 210, target: 220 } }, progress: 10 }, { timestamp: 2 }),
  ev('job:start', { name: 'a.3mf' }, { timestamp: 3, jobId: 7 }),
  ev('printer:amsUpdate', { slots: [{ position: 0, type: 'PLA', color: '#FF0000', remaining: 90 }] }, { timestamp: 4 }),
  ev('printer:error', { code: 'E1', message: 'jam' }, { timestamp: 5 }),
  ev('printer:statusUpdate', { status: 'FAILED' }, { timestamp: 6 }),
  ev('printer:statusUpdate', { status: 'RUNNING' }, { timestamp: 7 }),
  ev('job:update', { progress: 60, layer: 30 }, { timestamp: 8 }),
  ev('job:finish', { success: false, message: 'spaghetti' }, { timestamp: 9 }),
  ev('job:start', { name: 'b.3mf' }, { timestamp: 10, jobId: 8 }),
  ev('job:pause', {}, { timestamp: 11 }),
  ev('printer:filamentStateChanged', { runout: true }, { timestamp: 12 }),
]

t.test('batches - a batch leaves the same state as its events sent one by one, and lists each event\'s job', async (t) => {
  const events = mixedRun() as Extract<PrinterMachineEvent, { data: unknown }>[]
  const oneByOne = apply(events)
  const [start] = initialTransition(printerMachine, { printerId: 'p1' })
  const [batched] = transition(printerMachine, start, { type: 'events', events })
  const { changedJobs: _a, eventJobs: _b, ...state } = batched.context
  const { changedJobs: _c, eventJobs: _d, ...expected } = oneByOne.context
  t.same(state, expected)
  t.same(batched.value, oneByOne.value)
  // The report opens job -1, job:start of job 7 takes it over (the report's event is 7's), FAILED
  // ends it; RUNNING again opens -1 (free again: the first placeholder was never listed), which
  // fails; job:start opens 8, paused.
  t.same(batched.context.eventJobs, [7, null, 7, null, null, null, -1, -1, -1, 8, 8, null])
  t.same(
    batched.context.changedJobs.map((j) => [j.jobId, j.state]),
    [
      [7, 'failed'],
      [-1, 'failed'],
      [8, 'paused'],
    ],
  )
})

t.test('batches - applying a batch never changes the snapshot it was applied to', async (t) => {
  const deepFreeze = <T>(value: T): T => {
    if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
      Object.freeze(value)
      for (const child of Object.values(value)) deepFreeze(child)
    }
    return value
  }
  // A state holding a job, an error, slots and temperatures, frozen: any write into it throws.
  const before = apply(mixedRun().slice(0, 5))
  const context = deepFreeze(structuredClone(before.context))
  const copy = structuredClone(context)
  const [start] = initialTransition(printerMachine, { ...context, printerId: 'p1' })
  const events = mixedRun().slice(5) as Extract<PrinterMachineEvent, { data: unknown }>[]
  const [after] = transition(printerMachine, start, { type: 'events', events })
  t.same(context, copy, 'the input state is as it was')
  t.not(after.context.job, context.job)
  t.equal(after.context.job?.state, 'paused')
})

t.test('batches - a batch whose last event is client:disconnect leaves the printer offline; an empty batch is no sign of life', async (t) => {
  const [start] = initialTransition(printerMachine, { printerId: 'p1' })
  const [off] = transition(printerMachine, start, {
    type: 'events',
    events: [
      { type: 'heartbeat', data: {}, timestamp: 1 },
      { type: 'client:disconnect', data: {}, timestamp: 2 },
    ],
  })
  t.equal(off.value.presence, 'offline')
  const [empty] = transition(printerMachine, start, { type: 'events', events: [] })
  t.equal(empty.value.presence, 'offline')
})

t.test('filaments - an assignment sets slot material and vendor; a later AMS report of the same material keeps it', async (t) => {
  const [start] = initialTransition(printerMachine, { printerId: 'p1' })
  let [snap] = transition(printerMachine, start, { type: 'filaments', jobId: 7, slots: [{ position: 1, materialId: 'm-1', materialType: 'PLA', color: '#ff0000', vendor: 'Acme' }] })
  t.same(snap.context.ams, [{ position: 1, materialType: 'PLA', color: '#ff0000', remaining: null, materialId: 'm-1', vendor: 'Acme' }])
  t.equal(snap.context.filamentJobId, 7)
  t.equal(snap.value.presence, 'offline', 'an assignment is not a sign of life')
  ;[snap] = transition(printerMachine, snap, ev('printer:amsUpdate', { slots: [{ position: 1, type: 'PLA', color: '#ff0000', remaining: 80 }] }))
  t.match(snap.context.ams[0], { materialId: 'm-1', vendor: 'Acme', remaining: 80 })
  ;[snap] = transition(printerMachine, snap, ev('printer:amsUpdate', { slots: [{ position: 1, type: 'PETG' }] }))
  t.equal(snap.context.ams[0]?.materialId, undefined, 'another material was loaded: the assignment no longer holds')
})

t.test("jobs - a task's job:start after a printing report makes the task's job the printer's; the report's placeholder is never listed", async (t) => {
  const [start] = initialTransition(printerMachine, { printerId: 'p1' })
  const events = [
    ev('status', { status: 'RUNNING', progress: 4 }, { timestamp: 10 }),
    ev('job:start', { printerTaskId: 'task', jobId: 42, name: 'plate.3mf' }, { timestamp: 11, jobId: 42 }),
    ev('status', { status: 'RUNNING', progress: 9 }, { timestamp: 12 }),
  ] as Extract<PrinterMachineEvent, { data: unknown }>[]
  const [after] = transition(printerMachine, start, { type: 'events', events })
  t.match(after.context.job, { jobId: 42, name: 'plate.3mf', state: 'printing', startedAt: 10, progress: 9, openedByReport: false })
  t.same(after.context.eventJobs, [42, 42, null], "the report that saw the print is the task's job's")
  t.same(after.context.changedJobs.map((j) => j.jobId), [42], 'only the task\'s job is stored')
  t.same(placeholderJobIds(after.context), [], 'no id to reserve')
})

t.test("jobs - a stored job a report opened is taken over by the task's job:start, with its progress and start time", async (t) => {
  const opened = apply([ev('status', { status: 'RUNNING', progress: 4 }, { timestamp: 10 })])
  const stored = { ...opened.context, job: { ...opened.context.job!, jobId: 7 } }
  const [start] = initialTransition(printerMachine, { ...stored, printerId: 'p1' })
  const [after] = transition(printerMachine, start, ev('job:start', { printerTaskId: 'task', jobId: 42 }, { timestamp: 11, jobId: 42 }))
  t.match(after.context.job, { jobId: 42, state: 'printing', startedAt: 10, progress: 4 })
  t.same(after.context.changedJobs.map((j) => [j.jobId, j.state]), [[42, 'printing']], 'the report\'s job 7 is not closed as failed: it became job 42')
  const [plain] = transition(printerMachine, start, ev('job:start', { name: 'by hand' }, { timestamp: 11 }))
  t.match(plain.context.job, { jobId: 7, name: 'by hand' }, 'a start without a task adopts the report\'s job under its own id')
})

t.test('jobs - the progress a job:finish carries is the last word on it (a failed run is charged by it)', async (t) => {
  const failed = apply([ev('job:start', { name: 'a' }, { timestamp: 1, jobId: 5 }), ev('job:finish', { result: 'failed', progress: 50 }, { timestamp: 2 })])
  t.match(failed.context.job, { jobId: 5, state: 'failed', progress: 50 })
  const finished = apply([ev('job:start', { name: 'a' }, { timestamp: 1, jobId: 5 }), ev('job:finish', { result: 'success', progress: 80 }, { timestamp: 2 })])
  t.match(finished.context.job, { state: 'finished', progress: 100 }, 'a successful end is 100 % whatever it says')
  const silent = apply([ev('job:start', { name: 'a' }, { timestamp: 1, jobId: 5 }), ev('job:update', { progress: 30 }, { timestamp: 2 }), ev('job:finish', { result: 'cancelled' }, { timestamp: 3 })])
  t.match(silent.context.job, { state: 'cancelled', progress: 30 }, 'without progress, the last one reported stands')
})
