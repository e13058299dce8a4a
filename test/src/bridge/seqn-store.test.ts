/**
 * The bridge's seqns (src/bridge/seqn-store.ts): they only grow, across a crash too, never start
 * at or below the service's last_seqn, and start over in a new epoch; the state file is flushed
 * once per block, not per event.
 */
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SeqnStore } from '../../../src/bridge/seqn-store.js'
import { BridgeStateDir } from '../../../src/bridge/state-dir.js'
import { tempDir } from '../../helpers/service.js'

const folder = (t: Parameters<typeof tempDir>[0]) => {
  const state = new BridgeStateDir(tempDir(t))
  state.ensure()
  return state
}

t.test('seqns - a restart without a clean stop never hands out a number it may have used', async (t) => {
  const state = folder(t)
  const first = new SeqnStore(state, 10)
  first.open('p1', 1, null)
  const before = Array.from({ length: 13 }, () => first.next('p1'))
  t.same(before, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 'counted from 1 before the service has applied any')
  // The process dies here: no close, no save beyond what next() flushed.
  const second = new SeqnStore(state, 10)
  second.open('p1', 1, null)
  t.ok(second.next('p1') > 13, 'past every number the first may have used (a gap is allowed)')
})

t.test('seqns - never at or below the service\'s last_seqn, and a new epoch starts over', async (t) => {
  const state = folder(t)
  const store = new SeqnStore(state, 10)
  store.open('p1', 1, 500)
  t.equal(store.next('p1'), 501)
  store.open('p2', 3, null)
  t.equal(store.next('p2'), 1)
  store.open('p1', 2, null)
  t.equal(store.next('p1'), 1, 'the printer moved: its new epoch has its own count')
  const again = new SeqnStore(state, 10)
  again.open('p2', 3, 4)
  t.ok(again.next('p2') > 10, 'what was reserved in the same epoch still counts after a restart')
})

t.test('seqns - the state file is written once per block', async (t) => {
  const state = folder(t)
  const writes: string[] = []
  const write = state.write.bind(state)
  state.write = (name, text, mode) => {
    writes.push(name)
    write(name, text, mode)
  }
  const store = new SeqnStore(state, 100)
  store.open('p1', 1, null)
  for (let i = 0; i < 250; i++) store.next('p1')
  t.same(writes, ['seqns.json', 'seqns.json', 'seqns.json'], '250 numbers, blocks of 100')
})

t.test('seqns - a damaged state file is named with what to do', async (t) => {
  const state = folder(t)
  writeFileSync(join(state.path, 'seqns.json'), '{"p1": {"epoch": 0')
  t.throws(() => new SeqnStore(state), { message: /seqns\.json is not JSON; remove it, and each printer's count starts after the service's last_seqn/ })
  writeFileSync(join(state.path, 'seqns.json'), '{"p1": {"epoch": 0, "reserved": 5}}')
  t.throws(() => new SeqnStore(state), { message: /is not a seqn reservation .*epoch/ })
  const store = new SeqnStore(folder(t))
  t.throws(() => store.next('p9'), { message: 'no seqn count is open for printer p9' })
})
