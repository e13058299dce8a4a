/**
 * Progress writes (receipts, publication outcomes) asked for in the same turn
 * of the event loop go out as one statement (src/displays/display-store.ts):
 * each row keeps its own binding and generation condition, and one row the
 * database refuses does not take the others down with it.
 */
import t from 'tap'
import { DisplayStore } from '../../../src/displays/display-store.js'
import { openDisplayFarm, registerDisplay } from '../../helpers/displays.js'

const farm = await openDisplayFarm(t)
const sql = farm.service.services.db.sql
const progress = (sessionId: string, attempts = 0) => ({ applied: null, errorCode: null, publishError: null, publishAttempts: attempts, session: { id: sessionId, generation: 0, sequence: 1 } })
const sessionOf = async (id: string) => (await sql`select receipt_session, publish_attempts from displays where id = ${id}`)[0]!

t.test('writes of one turn are each conditioned on their own binding and generation', async (t) => {
  const [a, b, c] = [await registerDisplay(farm), await registerDisplay(farm), await registerDisplay(farm)]
  const store = new DisplayStore(sql, Date.now)
  const written = await Promise.all([
    store.saveProgress(a.id, 1, 0, progress('a', 1)),
    store.saveProgress(b.id, 1, 5, progress('b', 2)),
    store.saveProgress(c.id.toUpperCase(), 2, 0, progress('c', 3)),
  ])
  t.type(written[0], Date, 'the current binding and generation is written')
  t.equal(written[1], undefined, 'another generation writes nothing')
  t.equal(written[2], undefined, 'another binding writes nothing')
  t.match(await sessionOf(a.id), { receipt_session: { id: 'a' }, publish_attempts: 1 })
  t.match(await sessionOf(b.id), { receipt_session: null, publish_attempts: 0 })
  t.match(await sessionOf(c.id), { receipt_session: null, publish_attempts: 0 })
})

t.test('a row the database refuses fails alone; the others of its turn are written', async (t) => {
  const [a, b] = [await registerDisplay(farm), await registerDisplay(farm)]
  const store = new DisplayStore(sql, Date.now)
  const [good, bad] = await Promise.allSettled([store.saveProgress(a.id, 1, 0, progress('fine', 4)), store.saveProgress(b.id, 1, 0, progress('nul \u0000 here', 5))])
  t.equal(good.status, 'fulfilled')
  t.type((good as PromiseFulfilledResult<unknown>).value, Date)
  t.equal(bad.status, 'rejected', 'jsonb holds no NUL character')
  t.match(await sessionOf(a.id), { receipt_session: { id: 'fine' }, publish_attempts: 4 })
  t.match(await sessionOf(b.id), { receipt_session: null, publish_attempts: 0 })
})
