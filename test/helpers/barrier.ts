/**
 * A real barrier for concurrency tests on PostgreSQL: hold a row lock from a
 * separate connection, start the racing requests, wait until they are all
 * queued behind it (pg_locks), then release. Without the code's own row lock
 * the racers would not queue and would all go through — so the test fails.
 */
import postgres from 'postgres'

export async function raceBehindRowLock<T>(options: {
  databaseUrl: string
  schema: string
  /** Locks the contested row, inside the holder's transaction. */
  lock: (sql: postgres.TransactionSql) => Promise<unknown>
  racers: number
  start: () => Promise<T>
}): Promise<T[]> {
  const holder = postgres(options.databaseUrl, { max: 2, onnotice: () => undefined, connection: { search_path: options.schema } })
  try {
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    let locked: () => void = () => undefined
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve
    })
    const holding = holder.begin(async (tx) => {
      await options.lock(tx)
      locked()
      await released
    })
    await isLocked
    const results = Array.from({ length: options.racers }, () => options.start())
    // Wait (no sleeping) until every racer is queued behind the held lock, or has already answered.
    for (let i = 0; i < 2000; i++) {
      const [row] = await holder`select count(*)::int as n from pg_locks where not granted`
      if ((row?.['n'] as number) >= options.racers) break
      await new Promise((r) => setImmediate(r))
    }
    release()
    await holding
    return await Promise.all(results)
  } finally {
    await holder.end()
  }
}
