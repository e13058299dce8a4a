/**
 * The migration runner against each store the service supports: embedded
 * PGlite always, and the real PostgreSQL when DATABASE_URL is set (CI).
 */
import t, { type Test } from 'tap'
import postgres from 'postgres'
import { loadConfig } from '../../../src/node/config.js'
import { openDatabase, type Database } from '../../../src/storage/database.js'
import { migrate, MigrationError } from '../../../src/storage/migrate.js'
import { migrations, type Migration } from '../../../src/storage/migrations/index.js'
import { captureLogger, tempSchema, testEnv } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

const { logger } = captureLogger()

async function open(t: Test, backend: 'pglite' | 'postgres'): Promise<Database> {
  const env = backend === 'pglite' ? testEnv(t, { DATABASE_URL: undefined, DATABASE_SCHEMA: 'farm' }) : testEnv(t)
  const db = await openDatabase(loadConfig(env), logger, systemClock)
  t.teardown(() => db.close())
  return db
}

const extra = (version: number, up: string): Migration => ({ version, name: `extra-${version}`, up })

const backends: ('pglite' | 'postgres')[] = ['pglite']
if (process.env['DATABASE_URL']) backends.push('postgres')

for (const backend of backends) {
  t.test(`${backend} - migrations apply once, in order, and a second run applies nothing`, async (t) => {
    const db = await open(t, backend)
    t.equal(db.kind, backend)
    const first = await migrate(db.sql, db.schema, migrations, logger)
    t.same(first.applied, migrations.map((m) => m.version))
    t.equal(first.version, migrations.length)
    const second = await migrate(db.sql, db.schema, migrations, logger)
    t.same(second.applied, [])
    const rows = await db.sql<{ version: number }[]>`select version from schema_migrations order by version`
    t.same(rows.map((r) => r.version), migrations.map((m) => m.version))
    // Other test files share this PostgreSQL, each in a schema of its own: ask about ours.
    const [where] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from information_schema.tables where table_name = 'service_meta' and table_schema = ${db.schema}`
    t.equal(where?.n, 1, 'tables land in the configured schema')
    const [unqualified] = await db.sql<{ schema: string }[]>`select current_schema() as schema`
    t.equal(unqualified?.schema, db.schema, 'unqualified names resolve to it')
  })

  t.test(`${backend} - a failing migration leaves the schema exactly as it was`, async (t) => {
    const db = await open(t, backend)
    await migrate(db.sql, db.schema, migrations, logger)
    const broken = [...migrations, extra(migrations.length + 1, 'create table half_done (id int); select * from no_such_table;')]
    await t.rejects(migrate(db.sql, db.schema, broken, logger), /no_such_table/)
    const [table] = await db.sql`select to_regclass('half_done') as t`
    t.equal(table?.['t'], null, 'the first statement of the failed migration was rolled back')
    const rows = await db.sql`select version from schema_migrations`
    t.equal(rows.length, migrations.length, 'not recorded as applied')
  })

  t.test(`${backend} - a database newer than this build is refused`, async (t) => {
    const db = await open(t, backend)
    await migrate(db.sql, db.schema, [...migrations, extra(migrations.length + 1, 'create table future (id int)')], logger)
    await t.rejects(migrate(db.sql, db.schema, migrations, logger), MigrationError)
    await t.rejects(migrate(db.sql, db.schema, migrations, logger), /newer than this build/)
  })

  t.test(`${backend} - numbering gaps in the migration list are a programming error`, async (t) => {
    const db = await open(t, backend)
    await t.rejects(migrate(db.sql, db.schema, [...migrations, extra(migrations.length + 2, 'select 1')], logger), /without gaps/)
  })
}

t.test('postgres - two nodes migrating at once: one applies, the other waits and finds nothing to do', { skip: !process.env['DATABASE_URL'] && 'DATABASE_URL not set' }, async (t) => {
  const schema = tempSchema(t)
  const nodes = [0, 1].map(() =>
    postgres(process.env['DATABASE_URL']!, { max: 2, onnotice: () => undefined, connection: { search_path: schema } }),
  )
  t.teardown(() => Promise.all(nodes.map((sql) => sql.end())))
  // The extra migration is slow, so the second node certainly arrives while the first holds the lock.
  const list = [...migrations, extra(migrations.length + 1, 'select pg_sleep(0.3); create table raced (id int primary key)')]
  const results = await Promise.all(nodes.map((sql) => migrate(sql, schema, list, logger)))
  const appliedCounts = results.map((r) => r.applied.length).sort()
  t.same(appliedCounts, [0, list.length], 'exactly one node applied the migrations')
  const [row] = await nodes[0]!`select count(*)::int as n from schema_migrations`
  t.equal(row?.['n'], list.length)
})
