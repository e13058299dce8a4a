/**
 * The parts of a node (src/startup/parts.ts): started in the order their needs give, stopped in
 * reverse with what they needed still up, reactions connected once the parts they join are up,
 * and a list that cannot start (a duplicate, a missing need, a circle) refused before anything
 * starts.
 */
import t from 'tap'
import { defineReactions, definePart, PartsError, startOrder, startParts, type AnyPart } from '../../../src/startup/parts.js'
import { StartedParts } from '../../../src/startup/started-parts.js'
import { createLogger } from '../../../src/observability/log.js'
import { systemClock } from '../../../actors/clock.js'

const quiet = () => new StartedParts(createLogger('silent', { now: systemClock.now }))

interface Parts {
  config: { name: string }
  store: string
  cache: string
  feed: string
  relay: string | undefined
  http: string
}

const part = definePart<Parts>()
const joining = defineReactions<Parts>()

/** Parts listed out of order on purpose; each records its start and stop. */
function farm(events: string[], fail?: keyof Parts): AnyPart<Parts>[] {
  const made = (name: keyof Parts) => () => {
    events.push(`start ${name}`)
    if (name === fail) throw new Error(`${name} failed`)
    return name
  }
  return [
    part({ name: 'http', needs: ['feed', 'cache'], start: made('http'), stop: (value, got) => void events.push(`stop ${value} (feed ${got.feed} still up)`) }),
    part({ name: 'feed', needs: ['store'], start: made('feed'), stop: (value) => void events.push(`stop ${value}`) }),
    part({ name: 'relay', needs: ['feed'], start: () => (events.push('start relay'), undefined) }),
    part({ name: 'store', needs: ['config'], start: made('store'), stop: (value) => void events.push(`stop ${value}`) }),
    part({ name: 'cache', needs: ['store'], start: made('cache') }),
  ]
}

t.test('parts - each starts after what it needs, in the listed order where the needs leave it open', async (t) => {
  const order = startOrder(farm([]), ['config']).map((p) => p.name)
  t.same(order, ['store', 'feed', 'relay', 'cache', 'http'])
})

t.test('parts - a stop runs newest first, given its value and the parts it needed, still up', async (t) => {
  const events: string[] = []
  const started = quiet()
  const values = await startParts({ config: { name: 'farm' } }, farm(events), [], started)
  t.equal(values.http, 'http')
  t.equal(values.relay, undefined, 'a part may be absent')
  t.same(started.started, ['store', 'feed', 'relay', 'cache', 'http'])
  events.length = 0
  await started.undo()
  t.same(events, ['stop http (feed feed still up)', 'stop feed', 'stop store'])
})

t.test('parts - a start that fails halfway leaves the parts before it to stop, and none after it started', async (t) => {
  const events: string[] = []
  const started = quiet()
  await t.rejects(startParts({ config: { name: 'farm' } }, farm(events, 'cache'), [], started), /cache failed/)
  t.same(events, ['start store', 'start feed', 'start relay', 'start cache'], 'http never started')
  t.same(started.started, ['store', 'feed', 'relay'])
  events.length = 0
  await started.undo()
  t.same(events, ['stop feed', 'stop store'])
})

t.test('parts - a reaction is connected as soon as the parts it joins are up, and never when one of them is absent', async (t) => {
  const events: string[] = []
  const reactions = [
    joining({ joins: ['store', 'feed'], connect: ({ store, feed }) => void events.push(`react ${store}+${feed}`) }),
    joining({ joins: ['relay', 'feed'], connect: () => void events.push('react relay') }),
    joining({ joins: ['config'], connect: ({ config }) => void events.push(`react ${config.name}`) }),
  ]
  await startParts({ config: { name: 'farm' } }, farm(events), reactions, quiet())
  t.same(events, ['react farm', 'start store', 'start feed', 'react store+feed', 'start relay', 'start cache', 'start http'])
})

t.test('parts - a list that cannot start says why before anything starts', async (t) => {
  const events: string[] = []
  const parts = farm(events)
  t.throws(() => startOrder([...parts, part({ name: 'store', needs: [], start: () => 'again' })], ['config']), new PartsError('two parts are named store'))
  t.throws(() => startOrder(parts, []), { name: 'PartsError', message: 'part store needs config, which is neither a part nor given' })
  const circle = [part({ name: 'store', needs: ['cache'], start: () => 'store' }), part({ name: 'cache', needs: ['store'], start: () => 'cache' })]
  t.throws(() => startOrder(circle, ['config']), { message: 'the needs of these parts go round in a circle: store, cache' })
  await t.rejects(startParts({}, parts, [], quiet()), PartsError)
  t.same(events, [], 'nothing started')
})
