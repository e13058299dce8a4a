/**
 * One clock (actors/clock.ts): the system clock used in production, the
 * simulated one tests drive, and the rule that the actors and the live feed
 * read time only through the clock they are given.
 */
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { systemClock } from '../../actors/clock.js'
import { SimulatedClock } from '../helpers/clock.js'

const root = new URL('../..', import.meta.url)

t.test('clock - actors/ and src/live/ read the time and set timers only through the injected clock', async (t) => {
  // `this.#clock.setTimeout(` is the injected clock; a bare `setTimeout(` or `Date.now()` is not.
  const direct = /Date\.now\(|performance\.now\(|new Date\(\)|(?<![.\w])(setTimeout|setInterval|clearTimeout|clearInterval)\(/
  for (const dir of ['actors', 'src/live']) {
    for (const name of readdirSync(new URL(dir, root))) {
      if (!name.endsWith('.ts') || `${dir}/${name}` === 'actors/clock.ts') continue
      t.notMatch(readFileSync(new URL(`${dir}/${name}`, root), 'utf8'), direct, `${dir}/${name}`)
    }
  }
})

t.test('clock - the system clock is the wall clock, and its timers never keep a process alive', async (t) => {
  const before = Date.now()
  t.ok(systemClock.now() >= before)
  // The clock's timers hold nothing open: this test holds the process while it waits for them.
  const keepAlive = setInterval(() => undefined, 60_000)
  t.teardown(() => clearInterval(keepAlive))
  const fired = await new Promise<boolean>((resolve) => {
    const timer = systemClock.setTimeout(() => resolve(true), 1)
    t.equal((timer as NodeJS.Timeout).hasRef(), false, 'unref\'d')
  })
  t.ok(fired)
  const ticks: number[] = []
  await new Promise<void>((resolve) => {
    const interval = systemClock.setInterval(() => {
      ticks.push(ticks.length)
      if (ticks.length === 3) {
        systemClock.clearInterval(interval)
        resolve()
      }
    }, 1)
    t.equal((interval as NodeJS.Timeout).hasRef(), false)
  })
  t.same(ticks, [0, 1, 2], 'an interval repeats until cleared')
})

t.test('clock - the simulated clock runs what falls due at its own time, in order; intervals repeat; cleared timers never run', async (t) => {
  const clock = new SimulatedClock(1_000)
  const ran: string[] = []
  clock.setTimeout(() => ran.push(`b@${clock.now()}`), 20)
  clock.setTimeout(() => ran.push(`a@${clock.now()}`), 10)
  clock.setTimeout(() => ran.push(`a2@${clock.now()}`), 10)
  const cleared = clock.setTimeout(() => ran.push('never'), 5)
  clock.clearTimeout(cleared)
  const every = clock.setInterval(() => ran.push(`i@${clock.now()}`), 15)
  clock.tick(9)
  t.same(ran, [], 'nothing is due before its time')
  clock.tick(21)
  t.same(ran, ['a@1010', 'a2@1010', 'i@1015', 'b@1020', 'i@1030'])
  t.equal(clock.now(), 1_030)
  clock.clearInterval(every)
  t.equal(clock.pending, 0)
  await clock.advance(100)
  t.equal(clock.now(), 1_130, 'time moves with nothing due')
})

t.test('clock - advance lets the promises a timer starts settle before the next timer runs', async (t) => {
  const clock = new SimulatedClock()
  const ran: string[] = []
  clock.setTimeout(() => void Promise.resolve().then(() => ran.push('first, settled')), 1)
  clock.setTimeout(() => ran.push('second'), 2)
  await clock.advance(2)
  t.same(ran, ['first, settled', 'second'])
})
