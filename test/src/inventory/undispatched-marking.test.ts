/**
 * Marking the ended jobs no task dispatched (src/inventory/deduction.ts) runs
 * after nearly every commit that ends a job. It must find those jobs by key
 * however large print_jobs has grown since the statement first ran: a
 * prepared statement settles on a generic plan after five runs and keeps it,
 * and the one made while the table held a few rows read the whole table per
 * call (bench/ingest: ~12,000 rows per ended job, a tenth of the database's
 * CPU). Counted with the table's own scan counters of the transaction.
 */
import t from 'tap'
import postgres from 'postgres'
import { markUndispatched } from '../../../src/inventory/deduction.js'
import { startTestService } from '../../helpers/service.js'

t.test(
  'undispatched jobs - marked by key, without a sequential scan of print_jobs, also after the table grew under a statement run many times',
  { skip: !process.env['DATABASE_URL'] && 'needs DATABASE_URL (scan counters of a real PostgreSQL)' },
  async (t) => {
    const svc = await startTestService(t)
    // One connection: whatever the statement's plan, it is the one each run here uses.
    const sql = postgres(process.env['DATABASE_URL']!, { max: 1, onnotice: () => undefined, connection: { search_path: svc.config.databaseSchema } })
    t.teardown(() => sql.end())
    const [org] = await sql<{ id: string }[]>`select id from organizations limit 1`
    const organizationId = org!.id
    const endedJobs = async (count: number) =>
      (await sql<{ id: string }[]>`
        insert into print_jobs (organization_id, state, status, ended_at_ms)
        select ${organizationId}, 'finished', 'succeeded', 1 from generate_series(1, ${count}) returning id`).map((r) => Number(r.id))
    const mark = (db: postgres.Sql, jobId: number) => markUndispatched(db, [{ organizationId, jobId }], new Date())

    // Runs while print_jobs holds a handful of rows: where a prepared statement settles its plan.
    for (let i = 0; i < 8; i++) {
      const [jobId] = await endedJobs(1)
      t.same([...(await mark(sql, jobId!))], [jobId], `job ${jobId} marked`)
    }
    await endedJobs(20_000)
    const fresh = await endedJobs(3)

    const scans = await sql.begin(async (tx) => {
      for (const jobId of fresh) t.same([...(await mark(tx as unknown as postgres.Sql, jobId))], [jobId], `job ${jobId} marked after the table grew`)
      const [row] = await tx<{ seq_scan: string }[]>`select seq_scan from pg_stat_xact_user_tables where relid = 'print_jobs'::regclass`
      return Number(row!.seq_scan)
    })
    t.equal(scans, 0, 'no sequential scan of print_jobs')
    const [again] = await sql<{ marked: string }[]>`select count(*) as marked from print_jobs where id = any(${fresh}::int8[]) and inventory_deducted_at is not null`
    t.equal(Number(again!.marked), 3, 'each marked once, durably')
  },
)
