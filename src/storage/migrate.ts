/**
 * Applies pending migrations in one transaction under a transaction-scoped
 * advisory lock, so two nodes starting at once never race: the second waits,
 * then finds nothing to do. PostgreSQL DDL is transactional, so a failed
 * migration leaves the schema as it was.
 */
import type { Sql } from 'postgres'
import type { Logger } from '../observability/log.js'
import type { Migration } from './migrations/index.js'

/** First key of the two-key advisory lock; the second is the schema's hash. */
const MIGRATION_LOCK = 0x5046_4d47 // "PFMG"

export class MigrationError extends Error {
  override name = 'MigrationError'
}

export interface MigrationResult {
  applied: number[]
  version: number
}

export async function migrate(sql: Sql, schema: string, migrations: readonly Migration[], logger: Logger): Promise<MigrationResult> {
  const sorted = [...migrations].sort((a, b) => a.version - b.version)
  sorted.forEach((m, i) => {
    if (m.version !== i + 1) throw new MigrationError(`migrations must be numbered 1..n without gaps; found ${m.version} at position ${i + 1}`)
  })
  const latest = sorted.length
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK}, hashtext(${schema}))`
    await tx`create schema if not exists ${tx(schema)}`
    await tx`set local search_path to ${tx(schema)}`
    await tx`
      create table if not exists schema_migrations (
        version integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`
    const rows = await tx<{ version: number }[]>`select version from schema_migrations order by version`
    const done = new Set(rows.map((r) => r.version))
    const newest = rows.length ? rows[rows.length - 1]!.version : 0
    if (newest > latest) {
      throw new MigrationError(`the database is at migration ${newest}, newer than this build knows (${latest}); run a newer build`)
    }
    const applied: number[] = []
    for (const m of sorted) {
      if (done.has(m.version)) continue
      await tx.unsafe(m.up)
      await tx`insert into schema_migrations (version, name) values (${m.version}, ${m.name})`
      applied.push(m.version)
      logger.info('migration applied', { version: m.version, name: m.name, schema })
    }
    return { applied, version: latest }
  })
}
