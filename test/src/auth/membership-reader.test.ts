/**
 * The memberships a session's requests check, read for every user asked
 * about in one turn of the event loop by one statement (src/auth/accounts.ts):
 * each caller gets their own, as they stand when the statement runs.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { loadConfig } from '../../../src/node/config.js'
import { membershipReader } from '../../../src/auth/accounts.js'
import { openDatabase } from '../../../src/storage/database.js'
import { migrate } from '../../../src/storage/migrate.js'
import { migrations } from '../../../src/storage/migrations/index.js'
import { captureLogger, testEnv } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

const { logger } = captureLogger()
const db = await openDatabase(loadConfig(testEnv(t)), logger, systemClock)
t.teardown(() => db.close())
await migrate(db.sql, db.schema, migrations, logger)
const sql = db.sql

async function user(): Promise<string> {
  const [row] = await sql<{ id: string }[]>`insert into users (email, email_key, password_hash) values (${`${randomUUID()}@example.com`}, ${randomUUID()}, 'x') returning id`
  return row!.id
}
async function organization(name: string, members: [string, 'admin' | 'member'][]): Promise<string> {
  const [org] = await sql<{ id: string }[]>`insert into organizations (name) values (${name}) returning id`
  for (const [userId, role] of members) await sql`insert into memberships (organization_id, user_id, role) values (${org!.id}, ${userId}, ${role})`
  return org!.id
}

t.test('users asked about in one turn each get their own memberships from one statement', async (t) => {
  const [ana, ben, cleo] = [await user(), await user(), await user()]
  const north = await organization('north', [[ana, 'admin'], [ben, 'member']])
  const south = await organization('south', [[ana, 'member']])
  let statements = 0
  const counting = new Proxy(sql, {
    apply(target, thisArg, args) {
      statements++
      return Reflect.apply(target as never, thisArg, args)
    },
  })
  const read = membershipReader(counting)
  const [forAna, forBen, forCleo, forAnaAgain, forNobody, forNonsense] = await Promise.all([read(ana), read(ben), read(cleo), read(ana.toUpperCase()), read(randomUUID()), read('not-a-user')])
  t.equal(statements, 1)
  t.same(forAna, [
    { organizationId: north, name: 'north', role: 'admin' },
    { organizationId: south, name: 'south', role: 'member' },
  ], 'in the order the organizations were made')
  t.same(forAnaAgain, forAna)
  t.same(forBen, [{ organizationId: north, name: 'north', role: 'member' }])
  t.same(forCleo, [])
  t.same(forNobody, [])
  t.same(forNonsense, [], 'an id that is no user id has none, and does not fail the others')
})

t.test('a membership removed before the next turn is gone from the next answer', async (t) => {
  const dan = await user()
  const west = await organization('west', [[dan, 'member']])
  const read = membershipReader(sql)
  t.equal((await read(dan)).length, 1)
  await sql`delete from memberships where organization_id = ${west} and user_id = ${dan}`
  t.same(await read(dan), [])
})
