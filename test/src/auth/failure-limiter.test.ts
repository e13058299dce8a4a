import t from 'tap'
import { FailureLimiter } from '../../../src/auth/failure-limiter.js'

const clock = () => {
  let now = 1_000_000
  return { now: () => now, advance: (ms: number) => (now += ms) }
}

t.test('failure limiter - a key is blocked once it reaches the limit, until the window ends', async (t) => {
  const c = clock()
  const limiter = new FailureLimiter({ limit: 3, windowMs: 60_000 }, c.now)
  for (let i = 0; i < 2; i++) limiter.fail('a')
  t.equal(limiter.blockedFor('a'), undefined, 'under the limit')
  limiter.fail('a')
  t.equal(limiter.blockedFor('a'), 60, 'blocked for the rest of the window, in whole seconds')
  c.advance(59_500)
  t.equal(limiter.blockedFor('a'), 1)
  c.advance(500)
  t.equal(limiter.blockedFor('a'), undefined, 'the window ended')
  limiter.fail('a')
  t.equal(limiter.blockedFor('a'), undefined, 'a new window starts from zero')
})

t.test('failure limiter - keys are independent and reset clears one', async (t) => {
  const c = clock()
  const limiter = new FailureLimiter({ limit: 1, windowMs: 1000 }, c.now)
  limiter.fail('a')
  t.ok(limiter.blockedFor('a'))
  t.equal(limiter.blockedFor('b'), undefined)
  limiter.reset('a')
  t.equal(limiter.blockedFor('a'), undefined)
})

t.test('failure limiter - memory stays bounded, expired windows go first', async (t) => {
  const c = clock()
  const limiter = new FailureLimiter({ limit: 5, windowMs: 1000, maxKeys: 100 }, c.now)
  for (let i = 0; i < 100; i++) limiter.fail(`old-${i}`)
  c.advance(2000)
  for (let i = 0; i < 50; i++) limiter.fail(`new-${i}`)
  t.equal(limiter.size, 50, 'expired windows were swept to make room')
  for (let i = 50; i < 500; i++) limiter.fail(`new-${i}`)
  t.ok(limiter.size <= 100, `size ${limiter.size} stays within maxKeys`)
  t.ok(limiter.blockedFor('new-499') === undefined && limiter.size > 0)
})

t.test('failure limiter - acquire counts before the attempt, so parallel attempts cannot all pass; release gives one back', async (t) => {
  const limiter = new FailureLimiter({ limit: 3, windowMs: 60_000 }, () => 0)
  const results = Array.from({ length: 10 }, () => limiter.acquire('k'))
  t.equal(results.filter((r) => r === undefined).length, 3, 'only the limit goes ahead, even all at once')
  t.ok(results.slice(3).every((r) => typeof r === 'number' && r > 0))
  limiter.release('k')
  t.equal(limiter.acquire('k'), undefined, 'a released (successful) attempt frees its place')
  t.ok(limiter.acquire('k'))
})
