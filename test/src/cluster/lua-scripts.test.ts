/**
 * The shard directory's Lua scripts live in files, one per atomic operation,
 * each with a header naming its KEYS, ARGV and result; registered once per
 * connection, they run by digest (EVALSHA) and do what their headers say
 * against a real Redis.
 */
import { createHash, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import t from 'tap'
import { luaScriptNames, luaScripts, withLuaScripts } from '../../../src/cluster/lua-scripts.js'

t.test('lua scripts - every file has its header: what KEYS and ARGV are, and what it returns', async (t) => {
  for (const name of luaScriptNames) {
    const text = luaScripts()[name]
    const header = text.split('\n').filter((line) => line.startsWith('--')).join('\n')
    t.match(header, /KEYS/, `${name}: KEYS`)
    t.match(header, /ARGV\[1\]/, `${name}: ARGV`)
    t.match(header, /Returns/, `${name}: the result`)
  }
})

t.test('lua scripts - take, renew and release keep to the holder; Redis holds each script by its digest', { skip: process.env['REDIS_URL'] ? false : 'needs REDIS_URL' }, async (t) => {
  const redis = withLuaScripts(new Redis(process.env['REDIS_URL']!, { lazyConnect: true }))
  await redis.connect()
  t.teardown(() => redis.quit())
  const key = `printfarm:test:${randomUUID()}:lease`
  t.same(await redis.take(1, key, 'node-a', 5000), [1], 'a free lease is taken')
  t.same(await redis.take(1, key, 'node-b', 5000), [0], "another node's lease is not")
  t.same(await redis.renew(1, key, 'node-b', 5000), [0], 'nor renewed by it')
  t.same(await redis.renew(1, key, 'node-a', 9000), [1], 'the holder renews')
  t.ok((await redis.pttl(key)) > 5000, 'with the new TTL')
  t.equal(await redis.release(1, key, 'node-b'), 0, 'another node releases nothing')
  t.equal(await redis.release(1, key, 'node-a'), 1, 'the holder releases')
  t.equal(await redis.exists(key), 0)
  const members = `printfarm:test:${randomUUID()}:members`
  t.same(await redis.heartbeat(1, members, 'node-a', 5000), ['node-a'], 'a heartbeat lists the live members')
  await redis.del(members)
  const digests = luaScriptNames.map((name) => createHash('sha1').update(luaScripts()[name]).digest('hex'))
  t.same(await redis.script('EXISTS', ...digests), digests.map(() => 1), 'Redis has every script by its digest')
})
