import t from 'tap'
import { initialTransition, transition } from 'xstate'
import {
  checkFence,
  classifyEvents,
  hostAssignmentMachine,
  idempotencyWindow,
  RecentWindow,
  type HostAssignmentContext,
  type HostAssignmentInput,
} from '../../machines/host-assignment.js'

const start = (input: HostAssignmentInput) => initialTransition(hostAssignmentMachine, input)[0]
const ctx = (over: Partial<HostAssignmentContext> = {}): HostAssignmentContext => ({
  printerId: 'p1',
  hostId: 'host-a',
  assignmentEpoch: 3,
  highWaterSeqn: 10,
  recent: RecentWindow.empty,
  ...over,
})

t.test('host assignment - hydrates into assigned or unassigned from the stored row', async (t) => {
  t.equal(start({ printerId: 'p1' }).value, 'unassigned')
  const hydrated = start({ printerId: 'p1', hostId: 'host-a', assignmentEpoch: 4, highWaterSeqn: 99 })
  t.equal(hydrated.value, 'assigned')
  t.match(hydrated.context, { hostId: 'host-a', assignmentEpoch: 4, highWaterSeqn: 99 })
})

t.test('host assignment - the first assignment is epoch 1 and asks the runtime to persist it', async (t) => {
  const [next, actions] = transition(hostAssignmentMachine, start({ printerId: 'p1' }), { type: 'ASSIGN', hostId: 'host-a' })
  t.equal(next.value, 'assigned')
  t.match(next.context, { hostId: 'host-a', assignmentEpoch: 1 })
  const persist = actions.find((a) => a.type === 'persistAssignment')
  t.same(persist?.params, { printerId: 'p1', hostId: 'host-a', assignmentEpoch: 1 }, 'with the new epoch, not the old one')
})

t.test('host assignment - each move raises the epoch by one, also to the same host', async (t) => {
  let snap = start({ printerId: 'p1', hostId: 'host-a', assignmentEpoch: 1 })
  ;[snap] = transition(hostAssignmentMachine, snap, { type: 'ASSIGN', hostId: 'host-b' })
  t.match(snap.context, { hostId: 'host-b', assignmentEpoch: 2 })
  const [again, actions] = transition(hostAssignmentMachine, snap, { type: 'ASSIGN', hostId: 'host-b' })
  t.match(again.context, { hostId: 'host-b', assignmentEpoch: 3 })
  t.equal(actions.filter((a) => a.type === 'persistAssignment').length, 1)
})

t.test('host assignment - a new epoch starts a new seqn sequence but keeps the eventIds it has seen', async (t) => {
  const snap = start({ printerId: 'p1', hostId: 'host-a', assignmentEpoch: 1, highWaterSeqn: 500, recent: RecentWindow.of(['x'], []) })
  const [moved] = transition(hostAssignmentMachine, snap, { type: 'ASSIGN', hostId: 'host-b' })
  t.match(moved.context, { assignmentEpoch: 2, highWaterSeqn: -1 })
  t.same(moved.context.recent.eventIds, ['x'])
  const out = classifyEvents(moved.context, [{ eventId: 'n', seqn: 0 }, { eventId: 'x', seqn: 1 }])
  t.same(out.apply.map((e) => e.eventId), ['n'], "the new host's seqn 0 applies; a known eventId is still a duplicate")
})

t.test('host assignment - applied events move the high-water mark forward only and fill a bounded window', async (t) => {
  let snap = start({ printerId: 'p1', hostId: 'host-a', assignmentEpoch: 1, highWaterSeqn: 50 })
  ;[snap] = transition(hostAssignmentMachine, snap, { type: 'EVENTS_APPLIED', highWaterSeqn: 40, eventIds: ['x'], idempotencyKeys: ['kx'] })
  t.equal(snap.context.highWaterSeqn, 50, 'never backwards')
  t.same([snap.context.recent.eventIds, snap.context.recent.keys], [['x'], ['kx']])
  const many = Array.from({ length: idempotencyWindow + 10 }, (_, i) => `id${i}`)
  ;[snap] = transition(hostAssignmentMachine, snap, { type: 'EVENTS_APPLIED', highWaterSeqn: 60, eventIds: many, idempotencyKeys: [] })
  t.equal(snap.context.highWaterSeqn, 60)
  t.equal(snap.context.recent.eventIds.length, idempotencyWindow, 'bounded')
  t.equal(snap.context.recent.eventIds.at(-1), `id${idempotencyWindow + 9}`, 'keeps the newest')
  t.same(snap.context.recent.keys, ['kx'], 'the keys are bounded on their own')
})

t.test('host assignment - events before any assignment are not recorded', async (t) => {
  const [snap] = transition(hostAssignmentMachine, start({ printerId: 'p1' }), { type: 'EVENTS_APPLIED', highWaterSeqn: 5, eventIds: ['x'], idempotencyKeys: [] })
  t.equal(snap.context.highWaterSeqn, -1)
})

t.test('fence - the current host at the current epoch passes; everything else is refused with its reason', async (t) => {
  t.equal(checkFence(ctx(), 'host-a', 3), undefined)
  t.equal(checkFence(ctx({ hostId: null, assignmentEpoch: 0 }), 'host-a', 1), 'unassigned')
  t.equal(checkFence(ctx(), 'host-a', 2), 'stale_epoch', 'an older epoch, even from the current host')
  t.equal(checkFence(ctx(), 'host-b', 2), 'stale_epoch', 'the previous host, still sending')
  t.equal(checkFence(ctx(), 'host-a', 4), 'unknown_epoch', 'an epoch never issued')
  t.equal(checkFence(ctx(), 'host-b', 3), 'other_host')
})

t.test('classify - events apply in seqn order whatever order they arrive in', async (t) => {
  const events = [5, 3, 4].map((s) => ({ eventId: `e${s}`, seqn: s }))
  const out = classifyEvents(ctx({ highWaterSeqn: 2 }), events)
  t.same(out.apply.map((e) => e.seqn), [3, 4, 5])
  t.same(out.duplicates, [])
  t.same(out.gaps, [])
  t.equal(out.highWaterSeqn, 5)
})

t.test('classify - a seqn at or below the high-water mark, a known eventId or a known key is a duplicate', async (t) => {
  const c = ctx({ highWaterSeqn: 10, recent: RecentWindow.of(['seen'], ['key-1']) })
  const out = classifyEvents(c, [
    { eventId: 'old', seqn: 10 },
    { eventId: 'older', seqn: 3 },
    { eventId: 'seen', seqn: 11 },
    { eventId: 'fresh', seqn: 12, idempotencyKey: 'key-1' },
    { eventId: 'new', seqn: 13 },
  ])
  t.same(out.apply.map((e) => e.eventId), ['new'])
  t.same(out.duplicates.map((e) => e.eventId).sort(), ['fresh', 'old', 'older', 'seen'])
  t.equal(out.highWaterSeqn, 13)
})

t.test('classify - of the duplicates, those at or below the mark that the window no longer holds are named forgotten (only the log can tell them from late events)', async (t) => {
  const c = ctx({ highWaterSeqn: 10, recent: RecentWindow.of(['kept'], ['key-1']) })
  const out = classifyEvents(c, [
    { eventId: 'kept', seqn: 9 },
    { eventId: 'by-key', seqn: 8, idempotencyKey: 'key-1' },
    { eventId: 'gone', seqn: 7 },
    { eventId: 'kept', seqn: 12 },
    { eventId: 'new', seqn: 13 },
  ])
  t.same(out.forgotten.map((e) => e.eventId), ['gone'])
  t.same(out.duplicates.map((e) => e.eventId), ['gone', 'by-key', 'kept', 'kept'], 'all four are duplicates, in seqn order')
  t.same(out.apply.map((e) => e.eventId), ['new'])
})

t.test('classify - gaps are recorded, never filled', async (t) => {
  const out = classifyEvents(ctx({ highWaterSeqn: 10 }), [
    { eventId: 'a', seqn: 12 },
    { eventId: 'b', seqn: 13 },
    { eventId: 'c', seqn: 17 },
  ])
  t.same(out.gaps, [
    { after: 10, before: 12 },
    { after: 13, before: 17 },
  ])
  t.same(out.apply.map((e) => e.seqn), [12, 13, 17], 'nothing invented')
})

t.test('classify - the first events of a printer may start at any seqn', async (t) => {
  const out = classifyEvents(ctx({ highWaterSeqn: -1 }), [{ eventId: 'a', seqn: 1000 }])
  t.same(out.gaps, [])
  t.equal(out.highWaterSeqn, 1000)
})

t.test('classify - a fully duplicate batch leaves the high-water mark where it was', async (t) => {
  const out = classifyEvents(ctx({ highWaterSeqn: 20 }), [{ eventId: 'a', seqn: 5 }])
  t.same(out.apply, [])
  t.equal(out.highWaterSeqn, 20)
})

t.test('machines - no clock, timer or I/O inside the machine module', async (t) => {
  const { readFileSync } = await import('node:fs')
  const source = readFileSync(new URL('../../machines/host-assignment.ts', import.meta.url), 'utf8')
  t.notMatch(source, /Date\.now|new Date|setTimeout|setInterval|performance\.now|Math\.random/)
})
