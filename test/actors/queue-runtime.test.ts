/**
 * The queue actors of a node (actors/queue-runtime.ts over machines/queue.ts)
 * on a simulated clock: when a pass runs, with a pass that records its calls
 * and answers as each test says (at once, later, a failure, a fence refusal),
 * and a shard directory the test owns and disowns shards of. The same
 * runtime over PostgreSQL and Redis, with two nodes, is
 * test/src/queue/queue-two-nodes.test.ts.
 */
import t, { type Test } from 'tap'
import { QueueRuntime, queueKey } from '../../actors/queue-runtime.js'
import { ShardUnavailable, shardOf, type Fence, type ShardDirectory } from '../../actors/shard-directory.js'
import type { PassOutcome } from '../../machines/queue.js'
import { SimulatedClock } from '../helpers/clock.js'

const settleMs = 25
const sweepMs = 30_000

/** Organizations whose queues fall on different shards. */
const [orgA, orgB] = (() => {
  const picked: string[] = []
  for (let i = 0; picked.length < 2; i++) {
    const id = `org-${i}`
    if (!picked.some((p) => shardOf(queueKey(p)) === shardOf(queueKey(id)))) picked.push(id)
  }
  return picked as [string, string]
})()
const shardOfOrg = (organizationId: string): number => shardOf(queueKey(organizationId))

/** A directory the test drives: which shards this node owns (with their tokens), and the losses it announces. */
class FakeDirectory implements ShardDirectory {
  readonly nodeId = 'node-test'
  readonly owned = new Map<number, number>()
  /** Shards the runtime reported fenced, in order. */
  readonly fencedCalls: number[] = []
  readonly #lost = new Set<(shard: number) => void>()

  own(shard: number, token: number): void {
    this.owned.set(shard, token)
  }
  /** The shard is gone; `announce` false: gone without the loss announced yet (a renewal not yet looked at). */
  disown(shard: number, announce = true): void {
    this.owned.delete(shard)
    if (announce) for (const listener of [...this.#lost]) listener(shard)
  }
  get listeners(): number {
    return this.#lost.size
  }
  ownerOf(shard: number): string | undefined {
    return this.owned.has(shard) ? this.nodeId : 'node-other'
  }
  ownsShard(shard: number): boolean {
    return this.owned.has(shard)
  }
  tokenOf(shard: number): number {
    const token = this.owned.get(shard)
    if (token === undefined) throw new ShardUnavailable(shard, 'not_owned')
    return token
  }
  onShardLost(listener: (shard: number) => void): () => void {
    this.#lost.add(listener)
    return () => this.#lost.delete(listener)
  }
  onShardGained(): () => void {
    return () => undefined
  }
  /** Only recorded: whether the runtime itself ends the actor is what is tested. */
  fenced(shard: number): void {
    this.fencedCalls.push(shard)
  }
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}

interface PassCall {
  organizationId: string
  fence: Fence
  /** Simulated time the pass started. */
  at: number
  /** Simulated time it answered (undefined while it runs). */
  endedAt: number | undefined
  resolve(outcome: PassOutcome): void
  reject(error: unknown): void
}

/** What a pass answers: an outcome at once, a failure at once, or nothing until the test settles it. */
type Answer = PassOutcome | Error | 'later'

const waiting: PassOutcome = { empty: false, wakeInMs: null }
const empty: PassOutcome = { empty: true, wakeInMs: null }

function setup(options: { own?: readonly string[] } = {}) {
  const clock = new SimulatedClock()
  const directory = new FakeDirectory()
  for (const organizationId of options.own ?? [orgA, orgB]) directory.own(shardOfOrg(organizationId), 7)
  const calls: PassCall[] = []
  const errors: { organizationId: string; error: unknown }[] = []
  /** The answer of the nth pass (1-based) of an organization; by default jobs keep waiting. */
  let answer: (organizationId: string, nth: number) => Answer = () => waiting
  const pass = (organizationId: string, fence: Fence) =>
    new Promise<PassOutcome>((resolve, reject) => {
      const call: PassCall = {
        organizationId,
        fence,
        at: clock.now(),
        endedAt: undefined,
        resolve: (outcome) => {
          call.endedAt = clock.now()
          resolve(outcome)
        },
        reject: (error) => {
          call.endedAt = clock.now()
          reject(error)
        },
      }
      calls.push(call)
      const a = answer(organizationId, calls.filter((c) => c.organizationId === organizationId).length)
      if (a === 'later') return
      if (a instanceof Error) call.reject(a)
      else call.resolve(a)
    })
  const runtime = new QueueRuntime({ directory, clock, pass, settleMs, sweepMs, onError: (organizationId, error) => errors.push({ organizationId, error }) })
  return {
    clock,
    directory,
    runtime,
    calls,
    errors,
    answers: (fn: typeof answer) => void (answer = fn),
    passesOf: (organizationId: string) => calls.filter((c) => c.organizationId === organizationId),
  }
}

/** Lets the promise chains of an answer given outside a timer run (the machine takes the pass's outcome). */
const flush = async (clock: SimulatedClock) => await clock.advance(0)

t.test('queue runtime - a burst of wakes within the settle time makes one pass, after the settle time', async (t) => {
  const { clock, runtime, calls } = setup()
  t.equal(runtime.wake(orgA), true, 'the owner takes the wake')
  for (let i = 0; i < 10; i++) {
    await clock.advance(2)
    t.equal(runtime.wake(orgA), true)
  }
  t.equal(calls.length, 0, 'no pass while the burst settles')
  await clock.advance(settleMs)
  t.equal(calls.length, 1, 'one pass for the burst')
  t.equal(calls[0]!.at, settleMs, 'it ran the settle time after the first wake: the wakes that followed joined it')
  await clock.advance(sweepMs - settleMs - 1)
  t.equal(calls.length, 1, 'and no other until the sweep')
})

t.test('queue runtime - wakes during a pass make exactly one more pass, after that pass', async (t) => {
  const { clock, runtime, calls, answers } = setup()
  answers((_, nth) => (nth === 1 ? 'later' : waiting))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  t.equal(calls.length, 1)
  for (let i = 0; i < 5; i++) {
    await clock.advance(100)
    runtime.wake(orgA)
  }
  await clock.advance(5_000)
  t.equal(calls.length, 1, 'never two passes of one organization at once')
  calls[0]!.resolve(waiting)
  await flush(clock)
  await clock.advance(settleMs)
  t.equal(calls.length, 2, 'the wakes during the pass made one more pass')
  t.ok(calls[1]!.at >= calls[0]!.endedAt!, 'the second pass started after the first ended')
  await clock.advance(sweepMs - settleMs - 1)
  t.equal(calls.length, 2, 'exactly one more: nothing else until the sweep')
})

t.test('queue runtime - an empty queue ends its actor (no timer left), and the next wake starts a new one', async (t) => {
  const { clock, runtime, calls, answers } = setup({ own: [orgA] })
  answers(() => empty)
  runtime.wake(orgA)
  t.same(runtime.running(), [orgA])
  await clock.advance(settleMs)
  t.equal(calls.length, 1)
  t.same(runtime.running(), [], 'nothing waits: the actor ended')
  t.equal(clock.pending, 0, 'and left no timer behind (no sweep of an empty queue)')
  await clock.advance(10 * sweepMs)
  t.equal(calls.length, 1, 'no pass without a wake')
  t.equal(runtime.wake(orgA), true)
  t.same(runtime.running(), [orgA], 'the wake started a new actor')
  await clock.advance(settleMs)
  t.equal(calls.length, 2, 'which ran a pass')
})

t.test('queue runtime - a wake while the queue is empty-and-dirty runs one more pass before the actor ends', async (t) => {
  const { clock, runtime, calls, answers } = setup({ own: [orgA] })
  answers((_, nth) => (nth === 1 ? 'later' : empty))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  runtime.wake(orgA)
  calls[0]!.resolve(empty)
  await flush(clock)
  t.same(runtime.running(), [orgA], 'the wake during the pass (a job created as it read an empty queue) keeps the actor')
  await clock.advance(settleMs)
  t.equal(calls.length, 2, 'one more pass sees the new job')
  t.same(runtime.running(), [], 'then it ends')
})

t.test('queue runtime - without wakes, a pass runs again every sweepMs while jobs wait', async (t) => {
  const { clock, runtime, calls } = setup({ own: [orgA] })
  runtime.wake(orgA)
  await clock.advance(settleMs)
  t.equal(calls.length, 1)
  await clock.advance(sweepMs - 1)
  t.equal(calls.length, 1, 'not before the sweep')
  await clock.advance(1)
  t.equal(calls.length, 2, 'the sweep ran a pass')
  await clock.advance(2 * sweepMs)
  t.equal(calls.length, 4, 'and again at every sweep')
  t.same(calls.map((c) => c.at), [settleMs, settleMs + sweepMs, settleMs + 2 * sweepMs, settleMs + 3 * sweepMs])
})

t.test('queue runtime - a pass that reports wakeInMs (the stagger frees a start) runs the next pass then, not before', async (t) => {
  const { clock, runtime, calls, answers } = setup({ own: [orgA] })
  answers((_, nth) => (nth === 1 ? { empty: false, wakeInMs: 5_000 } : waiting))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  t.equal(calls.length, 1)
  await clock.advance(4_999)
  t.equal(calls.length, 1, 'not before the stagger frees a start')
  await clock.advance(1)
  t.equal(calls.length, 2, 'the pass ran when the start was freed')
  t.equal(calls[1]!.at, settleMs + 5_000)
  await clock.advance(sweepMs - 1)
  t.equal(calls.length, 2, 'that pass reported no stagger: back to the sweep')
  await clock.advance(1)
  t.equal(calls.length, 3)
})

t.test('queue runtime - a failing pass is retried after 1, 2, 4, 8, 16 s, then every 30 s; each failure reaches onError; a success starts the count again', async (t) => {
  const { clock, runtime, calls, answers, errors } = setup({ own: [orgA] })
  const failures = 8
  answers((_, nth) => (nth <= failures || nth === failures + 2 ? new Error(`store down ${nth}`) : waiting))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  await clock.advance(1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 3 * 30_000)
  const gaps = calls.slice(1, failures + 1).map((c, i) => c.at - calls[i]!.at)
  t.same(gaps, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000], 'the retries wait 1, 2, 4 … s, at most 30 s')
  t.equal(errors.length, failures, 'each failure was reported')
  t.ok(
    errors.every((e, i) => e.organizationId === orgA && e.error instanceof Error && e.error.message === `store down ${i + 1}`),
    'with the organization and the error',
  )
  t.equal(calls.length, failures + 1, 'the retry after the last failure succeeded')
  // After a success the failures count from zero again: the next failure waits 1 s.
  await clock.advance(sweepMs)
  t.equal(calls.length, failures + 2, 'the sweep ran a pass, which failed')
  await clock.advance(1_000)
  t.equal(calls.length, failures + 3, 'retried after 1 s again, not 30 s')
  t.same(runtime.running(), [orgA], 'the actor lives on')
})

t.test('queue runtime - a pass refused by the fence (ShardUnavailable fenced) gives the shard up and ends the actor without a retry', async (t) => {
  const { clock, runtime, calls, answers, directory, errors } = setup({ own: [orgA] })
  const shard = shardOfOrg(orgA)
  answers(() => new ShardUnavailable(shard, 'fenced'))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  t.equal(calls.length, 1)
  t.same(directory.fencedCalls, [shard], 'the directory was told the shard is fenced')
  t.same(runtime.running(), [], 'the actor ended')
  await clock.advance(10 * sweepMs)
  t.equal(calls.length, 1, 'no retry, no sweep')
  t.same(errors, [], 'another node running the queue is not an error')
  t.equal(clock.pending, 0, 'no timer left')
})

t.test('queue runtime - a pass answering ShardUnavailable not_owned ends the actor without a retry and without calling it fenced', async (t) => {
  const { clock, runtime, calls, answers, directory, errors } = setup({ own: [orgA] })
  answers(() => new ShardUnavailable(shardOfOrg(orgA), 'not_owned'))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  await clock.advance(10 * sweepMs)
  t.equal(calls.length, 1, 'no retry')
  t.same(directory.fencedCalls, [], 'not reported as fenced')
  t.same(errors, [])
  t.same(runtime.running(), [])
})

t.test('queue runtime - a shard gone between the wake and the pass (its loss not announced yet): no pass, no error, and the actor does not keep retrying', async (t) => {
  const { clock, runtime, calls, directory, errors } = setup({ own: [orgA] })
  runtime.wake(orgA)
  directory.disown(shardOfOrg(orgA), false)
  await clock.advance(settleMs)
  t.equal(calls.length, 0, 'no pass without a token')
  t.same(errors, [], 'a shard not owned is not a failing pass')
  await clock.advance(2 * sweepMs)
  t.same(
    runtime.running(),
    [],
    'BUG actors/queue-runtime.ts: tokenOf() is called outside the try, so its ShardUnavailable(not_owned) fails the pass and the actor retries (1, 2, 4 … 30 s) against a shard it does not own, instead of ending as a pass answering ShardUnavailable does',
  )
})

t.test('queue runtime - a lost shard drops its actors: no further pass, even when a pass in flight answers later', async (t) => {
  const { clock, runtime, answers, directory, passesOf } = setup()
  answers((organizationId, nth) => (organizationId === orgA && nth === 2 ? 'later' : waiting))
  runtime.wake(orgA)
  runtime.wake(orgB)
  await clock.advance(settleMs + sweepMs)
  t.equal(passesOf(orgA).length, 2, 'the second pass of A is in flight')
  directory.disown(shardOfOrg(orgA))
  t.same(runtime.running(), [orgB], "A's actor was dropped with its shard; B's shard stays")
  passesOf(orgA)[1]!.resolve(waiting)
  await clock.advance(3 * sweepMs)
  t.equal(passesOf(orgA).length, 2, 'no pass of A after the loss')
  t.equal(passesOf(orgB).length, 5, 'B goes on sweeping')
  t.equal(runtime.wake(orgA), false, 'and a wake of A is refused now')
})

t.test('queue runtime - a pass still in flight when the shard was lost and then regained changes nothing when it is refused by the fence', async (t) => {
  const { clock, runtime, answers, directory, passesOf } = setup({ own: [orgA] })
  const shard = shardOfOrg(orgA)
  answers((_, nth) => (nth === 1 ? 'later' : waiting))
  runtime.wake(orgA)
  await clock.advance(settleMs)
  const stale = passesOf(orgA)[0]!
  // The lease ran out and this node took the shard again: a higher token, a new actor.
  directory.disown(shard)
  directory.own(shard, 8)
  t.equal(runtime.wake(orgA), true)
  await clock.advance(settleMs)
  t.equal(passesOf(orgA).length, 2)
  t.equal(passesOf(orgA)[1]!.fence.token, 8, 'the new actor passes with the new token')
  // The old pass's dispatch sees token 8 > 7 and is refused: that refusal is about the old actor only.
  stale.reject(new ShardUnavailable(shard, 'fenced'))
  await clock.advance(settleMs)
  t.same(
    directory.fencedCalls,
    [],
    'BUG actors/queue-runtime.ts: the dropped actor\'s late fence refusal calls directory.fenced(shard), giving up the shard this node now holds with the newer token',
  )
  t.same(runtime.running(), [orgA], "BUG actors/queue-runtime.ts: the dropped actor's late refusal schedules #drop(organizationId), which ends the new actor")
  await clock.advance(sweepMs)
  t.equal(passesOf(orgA).length, 3, 'the new actor goes on sweeping')
})

t.test('queue runtime - a wake on a node that does not own the shard answers false and runs nothing', async (t) => {
  const { clock, runtime, calls, directory } = setup({ own: [orgB] })
  t.equal(runtime.owns(orgA), false)
  t.equal(runtime.wake(orgA), false, 'the caller hands the wake to the other nodes')
  t.same(runtime.running(), [])
  await clock.advance(10 * sweepMs)
  t.equal(calls.length, 0)
  t.equal(clock.pending, 0, 'nothing scheduled')
  directory.own(shardOfOrg(orgA), 1)
  t.equal(runtime.wake(orgA), true, 'once the shard is here, the wake is taken')
})

t.test("queue runtime - every pass is handed the fence: the queue's shard and the directory's token for it", async (t) => {
  const { clock, runtime, calls, directory } = setup({ own: [] })
  const shard = shardOfOrg(orgA)
  directory.own(shard, 41)
  runtime.wake(orgA)
  await clock.advance(settleMs + sweepMs)
  t.same(calls.map((c) => c.fence), [{ shard, token: 41 }, { shard, token: 41 }], "each pass carries the shard's token")
  directory.disown(shard)
  directory.own(shard, 42)
  runtime.wake(orgA)
  await clock.advance(settleMs)
  t.same(calls.at(-1)?.fence, { shard, token: 42 }, 'taken again: the new token')
})

t.test('queue runtime - two organizations run independently: one held in a long pass neither delays nor ends the other', async (t) => {
  const { clock, runtime, answers, passesOf } = setup()
  answers((organizationId, nth) => (organizationId === orgA && nth === 1 ? 'later' : organizationId === orgB && nth === 2 ? empty : waiting))
  runtime.wake(orgA)
  await clock.advance(10)
  runtime.wake(orgB)
  await clock.advance(settleMs)
  t.equal(passesOf(orgA).length, 1, 'A is in its pass')
  t.equal(passesOf(orgB).length, 1, "B's pass ran while A's runs")
  runtime.wake(orgA)
  runtime.wake(orgB)
  await clock.advance(settleMs)
  t.equal(passesOf(orgB).length, 2, "B's wake made B's next pass")
  t.equal(passesOf(orgA).length, 1, "A's wake waits for A's pass")
  t.same(runtime.running(), [orgA], "B's queue emptied and its actor ended; A's lives")
  passesOf(orgA)[0]!.resolve(waiting)
  await flush(clock)
  await clock.advance(settleMs)
  t.equal(passesOf(orgA).length, 2, "A's one more pass")
  t.equal(passesOf(orgB).length, 2, 'B untouched')
})

t.test('queue runtime - stop() ends every actor and timer; later wakes, answers and shard losses do nothing', async (t: Test) => {
  const { clock, runtime, calls, answers, directory } = setup()
  answers((organizationId) => (organizationId === orgA ? 'later' : waiting))
  runtime.wake(orgA)
  runtime.wake(orgB)
  await clock.advance(settleMs)
  t.equal(calls.length, 2)
  runtime.stop()
  t.same(runtime.running(), [])
  t.equal(clock.pending, 0, 'no timer left')
  t.equal(directory.listeners, 0, 'no longer listening for shard losses')
  t.equal(runtime.wake(orgA), false, 'a wake after stop is refused')
  calls[0]!.resolve(waiting)
  await clock.advance(10 * sweepMs)
  t.equal(calls.length, 2, 'no pass after stop')
  directory.disown(shardOfOrg(orgB))
  t.same(runtime.running(), [])
})
