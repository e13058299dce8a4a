import t from 'tap'
import { idempotencyWindow, RecentWindow } from '../../machines/recent-window.js'

t.test('recent window - an id and a key with the same text are told apart', async (t) => {
  const w = RecentWindow.of(['a'], ['b'])
  t.ok(w.hasEventId('a'))
  t.notOk(w.hasKey('a'))
  t.ok(w.hasKey('b'))
  t.notOk(w.hasEventId('b'))
})

t.test('recent window - a window made from another leaves the first one as it was, asked before or after', async (t) => {
  const first = RecentWindow.of(['a', 'b'], [])
  t.ok(first.hasEventId('a'), 'asked before: its index is built and then handed on')
  const ids = Array.from({ length: idempotencyWindow }, (_, i) => `n${i}`)
  const second = first.with(ids, ['k'])
  t.notOk(second.hasEventId('a'), 'the oldest left the new window')
  t.ok(second.hasEventId(`n${idempotencyWindow - 1}`))
  t.ok(second.hasKey('k'))
  t.ok(first.hasEventId('a'), 'the first window still holds its own')
  t.ok(first.hasEventId('b'))
  t.notOk(first.hasEventId('n0'), 'and not what the second one added')
  t.notOk(first.hasKey('k'))
  const third = first.with(['c'], [])
  t.same(third.eventIds, ['a', 'b', 'c'], 'a window that handed its index on can be extended again')
  t.ok(third.hasEventId('a') && third.hasEventId('c'))
})

t.test('recent window - an id entered twice stays until its last copy leaves', async (t) => {
  let w = RecentWindow.of(['x'], [])
  t.ok(w.hasEventId('x'))
  w = w.with(['x'], [])
  w = w.with(Array.from({ length: idempotencyWindow - 2 }, (_, i) => `f${i}`), [])
  t.equal(w.eventIds.length, idempotencyWindow)
  w = w.with(['y'], [])
  t.equal(w.eventIds[0], 'x', 'the first copy left')
  t.ok(w.hasEventId('x'), 'the second is still there')
  w = w.with(['z'], [])
  t.notOk(w.hasEventId('x'), 'gone with the second copy')
})

t.test('recent window - more entries at once than the window holds keep the newest', async (t) => {
  const ids = Array.from({ length: idempotencyWindow * 2 }, (_, i) => `i${i}`)
  const w = RecentWindow.empty.with(['old'], [])
  t.notOk(w.hasEventId('i0'))
  const next = w.with(ids, [])
  t.same(next.eventIds, ids.slice(-idempotencyWindow))
  t.notOk(next.hasEventId('old'))
  t.notOk(next.hasEventId(`i${idempotencyWindow - 1}`))
  t.ok(next.hasEventId(`i${idempotencyWindow}`))
})
