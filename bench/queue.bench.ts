/**
 * The smart queue, on real PostgreSQL, in the service's own
 * process (the queue runs in-process; its passes are what is timed).
 *
 * 1. Placement: BENCH_QUEUE_PRINTERS (1,000) printers, each with four loaded
 *    slots drawn from a palette of types and colours, and BENCH_QUEUE_JOBS
 *    (10,000) queued jobs of mixed requirements (one or two filaments, some
 *    colours only near a loaded one, some on no printer at all), written
 *    straight to the store. Then, round after round, the printers free up
 *    (their tasks are marked done by the benchmark: not timed) and the
 *    organization's queue is woken; every pass it runs is timed (reading
 *    jobs and printers, planning, the dispatch transaction), until no job
 *    can be placed any more. Figure: jobs placed per second of pass time,
 *    and the total pass time (the goal: under 5 s for 10,000 jobs).
 *    Limit, same run: the same task rows and job updates written by
 *    postgres.js alone (one transaction per round, no reads, no plan).
 * 2. Matching: the pure function on the same data in memory (each of the
 *    first jobs against every printer): matches per second, against a loop
 *    that only walks the same pairs and their slots (the limit).
 *
 * Needs PostgreSQL: BENCH_DATABASE_URL, else DATABASE_URL, else
 * postgres://postgres@127.0.0.1:5432/test. Uses a fresh schema, dropped after.
 */
import { benchDatabaseUrl } from './support/database.js'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import postgres from 'postgres'
import { Matcher, planQueue, type QueueJob, type QueuePrinter, type RequiredFilament } from '../protocol/queue-match.js'
import { loadConfig } from '../src/node/config.js'
import { createLogger } from '../src/observability/log.js'
import { startService } from '../src/node/service.js'
import { reportDetail, reportMeasurement, reportSkipped } from './support/report.js'
import { systemClock } from '../actors/clock.js'

const databaseUrl = benchDatabaseUrl('queue')
const printerCount = Number(process.env['BENCH_QUEUE_PRINTERS'] ?? 1_000)
const jobCount = Number(process.env['BENCH_QUEUE_JOBS'] ?? 10_000)
const tolerance = 10

/** mulberry32: the same farm every run. */
function rng(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const random = rng(19)
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
const types = ['PLA', 'PLA', 'PLA', 'PETG', 'PETG', 'ABS', 'TPU']
const colours = ['#FFFFFF', '#000000', '#FF0000', '#0047AB', '#808080', '#FFD700', '#00A86B']
/** Near a palette colour (ΔE of a few units): found only through the tolerance. */
const near: Record<string, string> = { '#FFFFFF': '#F4F4F0', '#000000': '#141414', '#FF0000': '#F01010', '#0047AB': '#0A4FB5' }

const printerFacts: { id: string; slots: { position: number; materialType: string; color: string }[] }[] = []
for (let i = 0; i < printerCount; i++) {
  printerFacts.push({ id: randomUUID(), slots: [0, 1, 2, 3].map((position) => ({ position, materialType: pick(types), color: `${pick(colours).slice(1)}FF` })) })
}
const jobFacts: { required: RequiredFilament[]; priority: number }[] = []
for (let i = 0; i < jobCount; i++) {
  const count = random() < 0.7 ? 1 : 2
  const required: RequiredFilament[] = []
  for (let f = 0; f < count; f++) {
    const colour = pick(colours)
    const asked = random() < 0.15 && near[colour] !== undefined ? near[colour]! : random() < 0.02 ? '#FF00FF' : colour
    required.push({ filament_index: f, type: pick(types), color_hex: asked, used_g: Math.round(5 + random() * 60), material_id: null })
  }
  jobFacts.push({ required, priority: random() < 0.1 ? 10 : 0 })
}

const setupSql = postgres(databaseUrl, { max: 1, onnotice: () => undefined })
try {
  await setupSql`select 1`
} catch (error) {
  reportSkipped('queue', `PostgreSQL not reachable at ${databaseUrl.replace(/:[^:@/]*@/, ':***@')}: ${(error as Error).message}`)
  await setupSql.end()
  process.exit(0)
}
const schema = `bench_${randomBytes(5).toString('hex')}`
const dataDir = mkdtempSync(join(tmpdir(), 'printfarm-bench-queue-'))
const admin = { email: 'bench@printfarm.local', password: 'bench-password-123' }
const service = await startService(
  loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: process.env['BENCH_LOG_LEVEL'] ?? 'warn',
    MQTT_PORT: '0',
    DATABASE_URL: databaseUrl,
    DATABASE_SCHEMA: schema,
    PRINTFARM_ADMIN_EMAIL: admin.email,
    PRINTFARM_ADMIN_PASSWORD: admin.password,
    QUEUE_MAX_STARTS: '0',
    QUEUE_SWEEP_MS: '3600000',
    PRESENCE_TIMEOUT_MS: '3600000',
    TASK_OFFER_TTL_S: '86400',
  }),
  // Its log lines go to stderr: stdout carries only the benchmark's JSON records.
  { logger: createLogger(process.env['BENCH_LOG_LEVEL'] === 'debug' ? 'debug' : 'warn', { now: systemClock.now, sink: (line) => process.stderr.write(line + '\n') }) },
)
const sql = postgres(databaseUrl, { max: 2, onnotice: () => undefined, connection: { search_path: schema } })
try {
  const [org] = await sql<{ id: string }[]>`select id from organizations limit 1`
  const organizationId = org!.id
  // One file for every job (its slicer facts do not restrict printers: requirements are the jobs' own).
  const modelId = randomUUID()
  const fileId = randomUUID()
  await sql`insert into models (id, organization_id, name) values (${modelId}, ${organizationId}, 'bench')`
  await sql`
    insert into files (id, organization_id, model_id, filename, final_name, file_path, file_type, file_size, sha256)
    values (${fileId}, ${organizationId}, ${modelId}, 'bench.3mf', 'bench.3mf', ${`bench/${fileId}`}, '3mf', 1, ${'0'.repeat(64)})`
  await sql`
    insert into printers (id, organization_id, name, ip_address, enabled, host_id, assignment_epoch, model, capabilities, ready)
    select id, ${organizationId}, 'printer ' || n, '10.0.0.1', true, 'host-' || (n % 10), 1, 'Bambu Lab P1S', '{"nozzle_diameter": 0.4}', true
    from unnest(${printerFacts.map((p) => p.id)}::uuid[]) with ordinality as p(id, n)`
  await sql`
    insert into printer_state (printer_id, organization_id, seqn_epoch, state, online, seen_at)
    select id, ${organizationId}, 1, jsonb_build_object('ams', ams::jsonb, 'maintenance', false), true, now()
    from unnest(${printerFacts.map((p) => p.id)}::uuid[], ${printerFacts.map((p) => JSON.stringify(p.slots))}::text[]) as p(id, ams)`
  const created = Date.now()
  await sql`
    insert into print_jobs (organization_id, name, state, source, status, model_file_id, priority, print_options, required_materials, created_at)
    select ${organizationId}, 'job ' || n, 'queued', 'api', 'queued', ${fileId}, priority, '{"auto_assign": true, "enable_ams": true}', required::jsonb, ${new Date(created)}::timestamptz + n * interval '1 millisecond'
    from unnest(${jobFacts.map((j) => j.priority)}::int[], ${jobFacts.map((j) => JSON.stringify(j.required))}::text[]) with ordinality as j(priority, required, n)`

  // Every pass of the organization's queue, as the queue node reports it.
  const passes: { offered: number; ms: number }[] = []
  let passWaiter: (() => void) | undefined
  service.services.queue.onPassed((id, pass) => {
    if (id !== organizationId) return
    passes.push(pass)
    passWaiter?.()
  })
  const nextPass = (timeoutMs: number) =>
    new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs)
      passWaiter = () => {
        clearTimeout(timer)
        resolve(true)
      }
    })

  let placed = 0
  let rounds = 0
  const roundSizes: number[] = []
  for (;;) {
    const before = passes.length
    const arrived = nextPass(30_000)
    service.services.queue.wake(organizationId)
    if (!(await arrived)) throw new Error('no queue pass within 30 s of a wake')
    const offered = passes.slice(before).reduce((n, p) => n + p.offered, 0)
    if (offered === 0) break
    placed += offered
    roundSizes.push(offered)
    rounds++
    // The printers free up (not timed): their prints are done and verified.
    await sql.begin(async (tx) => {
      await tx`update printer_tasks set state = 'finished', ended_at = now(), updated_at = now() where organization_id = ${organizationId} and state = 'offered'`
      await tx`update print_jobs set status = 'succeeded', updated_at = now() where organization_id = ${organizationId} and status = 'dispatching'`
    })
  }
  const passMs = passes.reduce((n, p) => n + p.ms, 0)
  const [left] = await sql<{ n: string }[]>`select count(*) as n from print_jobs where organization_id = ${organizationId} and status = 'queued'`

  // The limit: the same rows written by postgres.js alone, one transaction per round.
  const tasks = await sql<{ id: string; job_id: string; printer_id: string; ams_mapping: number[] }[]>`select id, job_id, printer_id, ams_mapping from printer_tasks where organization_id = ${organizationId} order by offered_at, id`
  await sql`delete from printer_tasks where organization_id = ${organizationId}`
  await sql`update print_jobs set status = 'queued', printer_id = null, printer_task_id = null where organization_id = ${organizationId}`
  const limitStarted = performance.now()
  let at = 0
  for (const size of roundSizes) {
    const chunk = tasks.slice(at, at + size)
    at += size
    await sql.begin(async (tx) => {
      await tx`
        insert into printer_tasks (id, organization_id, job_id, printer_id, host_id, assignment_epoch, file_id, plate, ams_mapping, state, offered_at, offer_expires_at, updated_at)
        select r.id, ${organizationId}, r.job_id, r.printer_id, 'host-0', 1, ${fileId}, 1, r.mapping::jsonb, 'offered', now(), now() + interval '1 day', now()
        from unnest(${chunk.map((c) => c.id)}::uuid[], ${chunk.map((c) => Number(c.job_id))}::int8[], ${chunk.map((c) => c.printer_id)}::uuid[], ${chunk.map((c) => JSON.stringify(c.ams_mapping))}::text[]) as r(id, job_id, printer_id, mapping)`
      await tx`
        update print_jobs j set status = 'dispatching', printer_id = r.printer_id, printer_task_id = r.id, attempts = j.attempts + 1
        from unnest(${chunk.map((c) => Number(c.job_id))}::int8[], ${chunk.map((c) => c.printer_id)}::uuid[], ${chunk.map((c) => c.id)}::uuid[]) as r(job_id, printer_id, id)
        where j.id = r.job_id`
      await tx`update printer_tasks set state = 'finished' where id = any(${chunk.map((c) => c.id)}::uuid[])`
    })
  }
  const limitMs = performance.now() - limitStarted

  reportMeasurement({
    bench: 'queue',
    name: `placement (${printerCount.toLocaleString('en-US')} printers, ${jobCount.toLocaleString('en-US')} queued jobs, printers freed ${rounds} times)`,
    figure: placed / (passMs / 1000),
    unit: 'jobs placed/s of pass time',
    limit: placed / (limitMs / 1000),
    limitWhat: 'the same task rows and job updates by postgres.js alone, one transaction per round',
    better: 'higher',
    notes: [`${placed.toLocaleString('en-US')} jobs placed in ${(passMs / 1000).toFixed(2)} s of pass time over ${passes.length} passes; ${left!.n} could go on no printer`],
    goal: { what: `the ${jobCount.toLocaleString('en-US')}-job queue placed in under 5 s of pass time`, met: passMs < 5_000 },
  })

  // Matching, in memory, over the same data.
  const queueJobs: QueueJob[] = jobFacts.map((j, i) => ({ id: i + 1, priority: j.priority, position: null, createdAt: created + i, autoAssign: true, enableAms: true, printerModel: null, nozzleDiameter: null, projectFilaments: j.required.length, required: j.required }))
  const queuePrinters: QueuePrinter[] = printerFacts.map((p) => ({
    id: p.id,
    enabled: true,
    online: true,
    maintenance: false,
    ready: true,
    readySource: null,
    hostId: 'host-0',
    liveTaskState: null,
    runningJob: null,
    model: 'Bambu Lab P1S',
    nozzleDiameter: 0.4,
    lastUsedAt: null,
    status: 'WAITING',
    slots: p.slots.map((s) => ({ position: s.position, type: s.materialType, color: s.color, materialId: null, remainingG: null })),
  }))
  const sample = queueJobs.slice(0, Math.max(1, Math.floor(200_000 / printerCount)))
  const pairs = sample.length * queuePrinters.length
  const matcher = new Matcher({ colorTolerance: tolerance })
  let compatible = 0
  const matchStarted = performance.now()
  for (const job of sample) for (const printer of queuePrinters) if (matcher.fit(job, printer) !== undefined) compatible++
  const matchMs = performance.now() - matchStarted
  let walked = 0
  const walkStarted = performance.now()
  for (const job of sample) for (const printer of queuePrinters) for (const need of job.required) for (const slot of printer.slots) walked += need.filament_index + slot.position
  const walkMs = performance.now() - walkStarted
  reportMeasurement({
    bench: 'queue',
    name: `matching (pure function, ${sample.length} jobs × ${printerCount.toLocaleString('en-US')} printers)`,
    figure: pairs / (matchMs / 1000),
    unit: 'matches/s',
    limit: pairs / (walkMs / 1000),
    limitWhat: 'a loop that only walks the same pairs and slots',
    better: 'higher',
    notes: [`${compatible.toLocaleString('en-US')} compatible pairs (walk checksum ${walked % 10})`],
  })
  const planStarted = performance.now()
  const plan = planQueue(queueJobs, queuePrinters, { colorTolerance: tolerance, startsAvailable: Infinity })
  reportDetail('one plan in memory', { bench: 'queue', jobs: queueJobs.length, printers: queuePrinters.length, assigned: plan.assignments.length, ms: performance.now() - planStarted })
} finally {
  await sql.end()
  await service.stop()
  await setupSql.unsafe(`drop schema if exists "${schema}" cascade`)
  await setupSql.end()
  rmSync(dataDir, { recursive: true, force: true })
}
