/**
 * PostgreSQL ending a session (pg_terminate_backend, as a restart, a failover or
 * idle_in_transaction_session_timeout does) must reach the query that used it as an
 * error and nothing else: postgres.js 3.4.9 threw from a deferred write to the dead
 * socket and ended the process, let the rest of a dead transaction run on the
 * session its pool slot reconnected, left the array-type read of a new session
 * unhandled when that session ended (the process ended), and lost a reserve()
 * waiting for a connection when the connection it waited for closed (its caller,
 * the event log's flush, waited forever). The service carries a patch of the driver
 * (patches/postgres+3.4.9.patch, applied by `npm install`); these tests fail without it.
 * Real PostgreSQL only: the embedded store has one session that nothing ends.
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { connect, createServer, type AddressInfo } from 'node:net'
import postgres, { type Sql } from 'postgres'

const url = process.env['DATABASE_URL']
if (url === undefined) {
  t.pass('needs a real PostgreSQL (DATABASE_URL)')
} else {
  const uncaught: unknown[] = []
  const onUncaught = (error: unknown): void => void uncaught.push(error)
  process.on('uncaughtException', onUncaught)
  t.teardown(() => void process.off('uncaughtException', onUncaught))

  const admin = postgres(url, { max: 1, onnotice: () => undefined })
  t.teardown(() => admin.end())

  const pool = (t: Test, max = 2): { sql: Sql; name: string } => {
    const name = `session-end-${randomBytes(4).toString('hex')}`
    const sql = postgres(url, { max, onnotice: () => undefined, connection: { application_name: name } })
    t.teardown(() => sql.end({ timeout: 1 }))
    return { sql, name }
  }
  const terminate = (pid: number) => admin`select pg_terminate_backend(${pid})`
  const terminateAll = (name: string) => admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${name}`
  /** A turn for the driver to see the socket close and for a deferred write to run. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 50))

  t.test('a reserved connection whose session was ended rejects its next queries and the process lives on', async (t) => {
    const { sql } = pool(t)
    const reserved = await sql.reserve()
    const { pid } = (await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!
    await terminate(pid)
    await t.rejects(reserved`select 1`)
    await settle()
    await t.rejects(reserved`select 1`, { code: 'CONNECTION_CLOSED' })
    await settle()
    reserved.release()
    t.same(uncaught, [], 'nothing escaped to the process')
    const { one } = (await sql<{ one: number }[]>`select 1 as one`)[0]!
    t.equal(one, 1, 'the pool answers on a fresh session')
  })

  t.test('queries queued on a reserved connection behind a full pipeline all settle when its session ends', async (t) => {
    const { sql } = pool(t)
    const reserved = await sql.reserve()
    const pid = (await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid
    // More than the driver pipelines at once (100): the rest wait in the reserved connection's own queue.
    const queued = Array.from({ length: 250 }, () => reserved`select pg_sleep(0.01)`.then(
      () => 'answered',
      () => 'rejected',
    ))
    await settle()
    await terminate(pid)
    const outcomes = await Promise.all(queued)
    t.ok(outcomes.includes('rejected'), `every query settled: ${outcomes.filter((o) => o === 'answered').length} answered before the end, the rest rejected`)
    reserved.release()
    t.same(uncaught, [])
  })

  t.test('queries queued in a transaction behind a full pipeline all settle when its session ends', async (t) => {
    const { sql, name } = pool(t)
    let queued: Promise<string>[] = []
    let inside: () => void = () => undefined
    const begun = new Promise<void>((resolve) => (inside = resolve))
    const outcome = sql.begin(async (tx) => {
      queued = Array.from({ length: 250 }, () => tx`select pg_sleep(0.01)`.then(
        () => 'answered',
        () => 'rejected',
      ))
      inside()
      await Promise.all(queued)
    })
    // The session is ended once the transaction has begun and queued its queries (on a loaded machine BEGIN can
    // take longer than a turn: ended before it, the test saw no query at all).
    await begun
    await settle()
    await terminateAll(name)
    await t.rejects(outcome)
    const outcomes = await Promise.all(queued)
    t.ok(outcomes.includes('rejected'), 'every query of the transaction settled')
    t.same(uncaught, [])
  })

  t.test('a transaction with a query in flight when its session ends rejects, and the pool lives on', async (t) => {
    const { sql, name } = pool(t)
    const outcome = sql
      .begin(async (tx) => {
        await tx`select pg_sleep(5)`
      })
      .then(
        () => 'committed',
        (error: { code?: string }) => error.code,
      )
    // The transaction's BEGIN reached the server before its session is ended.
    for (let i = 0; i < 100; i++) {
      const { n } = (await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = ${name} and query like '%pg_sleep%'`)[0]!
      if (n > 0) break
      await settle()
    }
    await terminateAll(name)
    t.not(await outcome, 'committed')
    await settle()
    t.same(uncaught, [], 'nothing escaped to the process')
    const rows = await Promise.all([1, 2, 3, 4].map(() => sql`select 1 as one`))
    t.equal(rows.length, 4, 'every slot of the pool answers again')
  })

  t.test('the rest of a transaction whose session ended never runs on the session its slot reconnects', async (t) => {
    const { sql } = pool(t, 1)
    const table = `session_end_${randomBytes(4).toString('hex')}`
    await admin.unsafe(`create table ${table} (n int)`)
    t.teardown(() => admin.unsafe(`drop table if exists ${table}`))
    let reachedInsert: Promise<unknown> | undefined
    const outcome = sql.begin(async (tx) => {
      const { pid } = (await tx<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!
      await terminate(pid)
      await settle()
      // The pool reconnects the slot for another query meanwhile.
      await sql`select 1`
      reachedInsert = tx.unsafe(`insert into ${table} values (1)`)
      await reachedInsert
    })
    await t.rejects(outcome)
    if (reachedInsert !== undefined) await t.rejects(reachedInsert, { code: 'CONNECTION_CLOSED' })
    const { n } = (await admin.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table}`))[0]!
    t.equal(n, 0, 'nothing of the dead transaction was written')
    t.same(uncaught, [])
  })

  t.test('a pooled connection ended with a write still deferred reconnects and answers', async (t) => {
    const { sql, name } = pool(t, 1)
    await sql`select 1`
    // A small query defers its write to the next turn; the session ends before that turn.
    const pending = sql`select pg_sleep(0.2)`.then(
      () => 'answered',
      () => 'failed',
    )
    await terminateAll(name)
    await pending
    await settle()
    for (let i = 0; i < 3; i++) {
      const { one } = (await sql<{ one: number }[]>`select 1 as one`)[0]!
      t.equal(one, 1)
    }
    t.same(uncaught, [])
  })

  t.test("a session that ends while the driver reads the server's array types (a new connection's first query, for a reserve) leaves no rejection unhandled, and the reserve is answered on the next session", async (t) => {
    const unhandled: unknown[] = []
    const onUnhandled = (error: unknown): void => void unhandled.push(error)
    process.on('unhandledRejection', onUnhandled)
    t.teardown(() => void process.off('unhandledRejection', onUnhandled))
    // A proxy that ends the first connection when the driver asks for the array types (as a server
    // ending that session would), and passes everything through after that.
    const target = new URL(url)
    let cut = false
    const proxy = createServer((client) => {
      const server = connect(Number(target.port || 5432), target.hostname)
      client.on('error', () => undefined)
      server.on('error', () => undefined)
      server.pipe(client)
      client.on('data', (chunk: Buffer) => {
        if (!cut && chunk.includes('typarray')) {
          cut = true
          client.destroy()
          server.destroy()
          return
        }
        server.write(chunk)
      })
      client.on('close', () => server.destroy())
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    t.teardown(() => new Promise<void>((resolve) => proxy.close(() => resolve())))
    const proxied = new URL(url)
    proxied.hostname = '127.0.0.1'
    proxied.port = String((proxy.address() as AddressInfo).port)
    const sql = postgres(proxied.toString(), { max: 1, onnotice: () => undefined })
    t.teardown(() => sql.end({ timeout: 1 }))
    // A reserved connection first, as the event log's flush takes one: the driver then reads the types on its own.
    const first = await sql.reserve().then(
      async (reserved) => {
        try {
          return await reserved`select ${[1, 2]}::int[] as xs`
        } finally {
          reserved.release()
        }
      },
      (error: unknown) => error,
    ).catch((error: unknown) => error)
    t.ok(cut, 'the first session ended during the types query')
    await settle()
    const [row] = await sql<{ xs: number[] }[]>`select ${[3, 4]}::int[] as xs`
    t.same(row?.xs, [3, 4], 'the pool answers on a fresh session, arrays and all')
    t.ok(Array.isArray(first) || first instanceof Error, 'the first query settled')
    t.same(unhandled, [], 'no rejection was left unhandled')
    t.same(uncaught, [])
  })
}
