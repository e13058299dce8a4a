import t from 'tap'
import { LocalShardDirectory, shardCount, shardOf } from '../../actors/shard-directory.js'
import { Mailbox } from '../../actors/mailbox.js'

t.test('shards - a key always maps to the same shard, within range, and keys spread over the shards', async (t) => {
  t.equal(shardOf('9b2f6f1c-2f44-4f4e-a1b4-3a6a3c1e0d11'), shardOf('9b2f6f1c-2f44-4f4e-a1b4-3a6a3c1e0d11'))
  const counts = new Array<number>(shardCount).fill(0)
  for (let i = 0; i < shardCount * 100; i++) counts[shardOf(`printer-${i}`)]!++
  t.ok(counts.every((c) => c > 50 && c < 150), `each shard gets its share (min ${Math.min(...counts)}, max ${Math.max(...counts)})`)
  t.equal(shardOf('x', 7), shardOf('x', 7))
  t.ok(shardOf('x', 7) < 7)
})

t.test('shards - the local directory owns every shard unfenced (token 0) and nothing outside the range', async (t) => {
  const dir = new LocalShardDirectory('n1')
  t.ok(dir.ownsShard(0) && dir.ownsShard(shardCount - 1))
  t.notOk(dir.ownsShard(shardCount))
  t.equal(dir.ownerOf(5), 'n1')
  t.equal(dir.ownerOf(-1), undefined)
  t.equal(dir.tokenOf(), 0)
})

t.test('mailbox - tasks run one at a time in the order posted, and one failure rejects only its own task', async (t) => {
  const mailbox = new Mailbox()
  const log: string[] = []
  const task = (name: string, fail = false) => async () => {
    log.push(`start ${name}`)
    await new Promise((r) => setImmediate(r))
    log.push(`end ${name}`)
    if (fail) throw new Error(name)
    return name
  }
  const results = await Promise.allSettled([mailbox.post(task('a')), mailbox.post(task('b', true)), mailbox.post(task('c'))])
  t.same(log, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c'])
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled'])
  t.ok(mailbox.idle)
  await mailbox.drained()
})
