/** The API key cache and usage writer against a real store (PGlite, or PostgreSQL with DATABASE_URL). */
import { systemClock } from '../../../actors/clock.js'
import t from 'tap'
import { loadConfig } from '../../../src/node/config.js'
import { ApiKeyCache, cacheTtlMs, createApiKey, UsageLogWriter } from '../../../src/auth/api-keys.js'
import { openDatabase } from '../../../src/storage/database.js'
import { migrate } from '../../../src/storage/migrate.js'
import { migrations } from '../../../src/storage/migrations/index.js'
import { captureLogger, testEnv } from '../../helpers/service.js'

const { logger } = captureLogger()
const db = await openDatabase(loadConfig(testEnv(t)), logger, systemClock)
t.teardown(() => db.close())
await migrate(db.sql, db.schema, migrations, logger)
const [org] = await db.sql<{ id: string }[]>`insert into organizations (name) values ('cache farm') returning id`
const orgId = org!.id

t.test('api key cache - a change made on another node is seen within the cache lifetime, not before', async (t) => {
  let now = 1_000_000
  const cache = new ApiKeyCache(db.sql, { now: () => now })
  const { key, record } = await createApiKey(db.sql, { organizationId: orgId, name: 'k', scopes: ['printers:read'], expiresAt: null, createdBy: null })
  t.equal((await cache.resolve(key))?.enabled, true)
  // Another node disables it: straight in the store, no invalidation reaches this cache.
  await db.sql`update api_keys set enabled = false where id = ${record.id}`
  now += cacheTtlMs - 1
  t.equal((await cache.resolve(key))?.enabled, true, 'still the cached answer inside the lifetime')
  now += 2
  t.equal((await cache.resolve(key))?.enabled, false, 'reloaded once the lifetime passed')
})

t.test('api key cache - a local invalidation takes effect at once; unknown prefixes are cached too', async (t) => {
  let queries = 0
  const counting = new Proxy(db.sql, {
    apply(target, thisArg, args) {
      queries++
      return Reflect.apply(target as never, thisArg, args)
    },
  })
  const cache = new ApiKeyCache(counting, { now: Date.now })
  const { key, record } = await createApiKey(db.sql, { organizationId: orgId, name: 'k2', scopes: ['printers:read'], expiresAt: null, createdBy: null })
  await cache.resolve(key)
  await db.sql`update api_keys set scopes = ${['jobs:read']} where id = ${record.id}`
  cache.invalidate(key.slice(4, 14))
  t.same([...(await cache.resolve(key))!.scopes], ['jobs:read'])
  const before = queries
  for (let i = 0; i < 20; i++) t.equal(await cache.resolve('pfk_ffffffffff_' + 'A'.repeat(43)), undefined)
  t.equal(queries - before, 1, 'twenty tries of one bogus prefix cost one lookup')
  t.equal(await cache.resolve(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A')), undefined, 'right prefix, wrong secret')
})

t.test('usage writer - entries survive a failed write and land once the store answers again', async (t) => {
  const { record } = await createApiKey(db.sql, { organizationId: orgId, name: 'logged', scopes: ['printers:read'], expiresAt: null, createdBy: null })
  let failing = true
  const flaky = new Proxy(db.sql, {
    get(target, prop, receiver) {
      if (prop === 'begin' && failing) return () => Promise.reject(Object.assign(new Error('connection lost'), { code: 'ECONNRESET' }))
      return Reflect.get(target, prop, receiver)
    },
  })
  const writer = new UsageLogWriter(flaky, logger, systemClock, { intervalMs: 60_000 })
  t.teardown(() => writer.close())
  const entry = (i: number) => ({ apiKeyId: record.id, usedAt: new Date(), method: 'GET', route: '/x', status: 200, remoteAddress: '10.0.0.1', requestId: `r${i}` })
  for (let i = 0; i < 5; i++) writer.record(entry(i))
  await writer.flush()
  const [none] = await db.sql`select count(*)::int as n from api_key_usage where api_key_id = ${record.id}`
  t.equal(none?.['n'], 0, 'nothing written while the store fails')
  failing = false
  await writer.flush()
  const rows = await db.sql`select request_id from api_key_usage where api_key_id = ${record.id} order by id`
  t.same(rows.map((r) => r['request_id']), ['r0', 'r1', 'r2', 'r3', 'r4'], 'all of them, once, in order')
  t.equal(writer.dropped, 0)
})

t.test('usage writer - memory is bounded while the store is down; the oldest entries go first', async (t) => {
  const failing = new Proxy(db.sql, {
    get(target, prop, receiver) {
      if (prop === 'begin') return () => Promise.reject(new Error('down'))
      return Reflect.get(target, prop, receiver)
    },
  })
  const writer = new UsageLogWriter(failing, logger, systemClock, { intervalMs: 60_000, batchSize: 1_000_000, maxBuffered: 10 })
  for (let i = 0; i < 25; i++) writer.record({ apiKeyId: orgId, usedAt: new Date(), method: 'GET', route: '/x', status: 200, remoteAddress: 'a', requestId: `r${i}` })
  t.equal(writer.dropped, 15)
  await writer.flush()
  t.equal(writer.dropped, 15, 'a failed write does not grow the buffer past its bound')
  await writer.close()
})

t.test('api key cache - an invalidation during a lookup is not undone by that lookup', async (t) => {
  let release: (() => void) | undefined
  const gate = new Promise<void>((resolve) => {
    release = resolve
  })
  const { key, record } = await createApiKey(db.sql, { organizationId: orgId, name: 'racing', scopes: ['printers:read'], expiresAt: null, createdBy: null })
  // A store whose first answer is held back until the test lets it go.
  let held = true
  const slow = new Proxy(db.sql, {
    apply(target, thisArg, args) {
      const result = Reflect.apply(target as never, thisArg, args) as Promise<unknown> & { execute?: () => unknown }
      if (!held) return result
      held = false
      // postgres.js queries start when awaited: start this one now, hold back only its answer.
      result.execute?.()
      return gate.then(() => result)
    },
  })
  const cache = new ApiKeyCache(slow, { now: Date.now })
  const inFlight = cache.resolve(key)
  // Meanwhile the key is disabled on this node, which invalidates it.
  await db.sql`update api_keys set enabled = false where id = ${record.id}`
  cache.invalidate(key.slice(4, 14))
  release?.()
  t.equal((await inFlight)?.enabled, true, 'the lookup that started earlier answers what it read')
  t.equal((await cache.resolve(key))?.enabled, false, 'but it was not cached: the next lookup sees the change')
})
