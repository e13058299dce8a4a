/**
 * The ingestion crash test: the server is killed with SIGKILL while bridges are
 * posting, restarted, and every event that got a 200 is in the store exactly
 * once; the batches that got no answer (committed or not before the kill)
 * are retried and stored exactly once too.
 *
 * The service runs as a child process (`src/cli.ts serve`, TypeScript through
 * tap's loader), so the kill is a real SIGKILL of a real process: no drain,
 * no flush, sockets reset mid-request. With DATABASE_URL it runs on a fresh
 * PostgreSQL schema, read directly; without it, on embedded PGlite in a
 * temporary DATA_DIR (the restart takes over the dead process's pid lock),
 * read by opening that directory in this process while the child is stopped.
 */
import t from 'tap'
import { join } from 'node:path'
import postgres from 'postgres'
import { childServiceEnv, startChildService, type ChildService } from '../../helpers/child-service.js'
import { metricValue, request, type HttpResult } from '../../helpers/http.js'
import { addPrinter, batch, item, openFarm, postBatch, type Farm } from '../../helpers/bridge.js'
import { tempDir, tempSchema, usingRealPostgres } from '../../helpers/service.js'

const realPostgres = usingRealPostgres()
/** PGlite runs one query at a time: a smaller farm keeps the embedded run in tens of seconds. */
const plan = realPostgres
  ? { printers: 20, bridges: 5, killAfterAcked: 200, maxBatchesPerPrinter: 80 }
  : { printers: 8, bridges: 4, killAfterAcked: 60, maxBatchesPerPrinter: 80 }
const eventsPerBatch = 100
const requestTimeoutMs = 30_000

type Row = Record<string, unknown>
type Query = (text: string) => Promise<Row[]>

interface SentEvent {
  eventId: string
  seqn: number
  type: string
}

interface SentBatch {
  printer: Printer
  index: number
  events: SentEvent[]
  body: Record<string, unknown>
  /** acked: 200 with every event processed; lost: no answer (connection reset, refused, timeout); unexpected: any other answer. */
  outcome: 'pending' | 'acked' | 'lost' | 'unexpected'
  detail?: string
}

interface Printer {
  n: number
  id: string
  bridge: number
  batches: SentBatch[]
}

/** A realistic stream per printer: deltas, a heartbeat every 10th seqn, a job (start, updates, finish) in every 250 seqns. */
function eventAt(seqn: number): { type: string; data: Record<string, unknown> } {
  const phase = seqn % 250
  if (phase === 20) return { type: 'job:start', data: { name: `part-${Math.floor(seqn / 250)}.3mf` } }
  if (phase > 20 && phase < 200 && phase % 30 === 0) return { type: 'job:update', data: { progress: Math.round(((phase - 20) / 180) * 100) } }
  if (phase === 200) return { type: 'job:finish', data: {} }
  if (seqn % 10 === 0) return { type: 'heartbeat', data: {} }
  return { type: 'printer:deltaUpdate', data: { nozzleTemp: 200 + (seqn % 20), bedTemp: 60, fan: seqn % 100 } }
}

function newBatch(printer: Printer): SentBatch {
  const index = printer.batches.length
  const first = index * eventsPerBatch
  const events: SentEvent[] = []
  const items: Record<string, unknown>[] = []
  for (let seqn = first; seqn < first + eventsPerBatch; seqn++) {
    const { type, data } = eventAt(seqn)
    const eventId = `p${printer.n}-s${seqn}`
    events.push({ eventId, seqn, type })
    items.push(item(seqn, { eventId, type, data, timestamp: 1_700_000_000_000 + seqn * 100 }))
  }
  const sent: SentBatch = { printer, index, events, body: batch(printer.id, items, { batchId: `p${printer.n}-b${index}`, maxSeqn: first + eventsPerBatch - 1 }), outcome: 'pending' }
  printer.batches.push(sent)
  return sent
}

/** The same batch as a bridge's retry sends it: deliveryAttempt + 1 on every item. */
function retryBody(sent: SentBatch, attempt: number): Record<string, unknown> {
  return { ...sent.body, events: (sent.body['events'] as Row[]).map((e) => ({ ...e, deliveryAttempt: attempt })) }
}

function post(farm: Farm, body: unknown): Promise<HttpResult> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    postBatch(farm, body).finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${requestTimeoutMs} ms`)), requestTimeoutMs)
    }),
  ])
}

const fullyProcessed = { success: true, processed: eventsPerBatch, failed: 0, refused: [] }
/** The whole batch is held by the log: every event applied now or a duplicate of an earlier delivery, none refused. */
const isFullyProcessed = (json: unknown): boolean => {
  const body = json as { success?: unknown; processed?: unknown; failed?: unknown; refused?: unknown; events?: { outcome: string }[] } | undefined
  return (
    JSON.stringify({ success: body?.success, processed: body?.processed, failed: body?.failed, refused: body?.refused }) === JSON.stringify(fullyProcessed) &&
    Array.isArray(body?.events) &&
    body.events.length === eventsPerBatch &&
    body.events.every((e) => e.outcome === 'applied' || e.outcome === 'duplicate')
  )
}

/** Runs `fn` for every printer at once; each printer's own batches stay in order inside its task. */
async function eachPrinter(printers: readonly Printer[], fn: (p: Printer) => Promise<void>): Promise<void> {
  await Promise.all(printers.map(fn))
}

// At file level, so they are removed after the subtest's teardown has killed every child.
const dataDir = tempDir(t, 'printfarm-crash-')
const schema = realPostgres ? tempSchema(t) : 'public'

t.test('crash - SIGKILL while bridges post: every acknowledged event is stored exactly once, and retries store the rest exactly once', async (t) => {
  const started = performance.now()
  const env = childServiceEnv(dataDir, realPostgres ? schema : undefined)

  let service: ChildService = await startChildService(t, { env })
  t.comment(`child ${service.pid} ready on ${service.url} after ${Math.round(performance.now() - started)} ms (${realPostgres ? `PostgreSQL schema ${schema}` : `PGlite in ${dataDir}`})`)

  // The store, read from outside the service: PostgreSQL directly; PGlite by opening
  // DATA_DIR here while the child is stopped (PGlite is single-process), then restarting it.
  let pg: postgres.Sql | undefined
  if (realPostgres) {
    pg = postgres(process.env['DATABASE_URL']!, { max: 2, onnotice: () => undefined, connection: { search_path: schema } })
    t.teardown(() => pg!.end({ timeout: 5 }))
  }
  const inspect = async <T>(fn: (query: Query) => Promise<T>, { restartAfter }: { restartAfter: boolean }): Promise<T> => {
    if (pg !== undefined) return fn((text) => pg!.unsafe(text) as Promise<Row[]>)
    const stopped = await service.stop()
    t.same(stopped, { code: 0, signal: null }, 'the child drains and exits 0 on SIGTERM before its data directory is read')
    const { PGlite } = await import('@electric-sql/pglite')
    const db = await PGlite.create(join(dataDir, 'pglite'))
    try {
      return await fn(async (text) => (await db.query<Row>(text)).rows)
    } finally {
      await db.close()
      if (restartAfter) service = await startChildService(t, { env })
    }
  }
  const urlOf = () => service.url

  const setup = await openFarm(service.url)
  // Each bridge has its own API key and owns some of the printers, all on host-a at epoch 1.
  const bridgeKeys: Record<string, string>[] = []
  for (let b = 0; b < plan.bridges; b++) {
    const key = await request(setup.url, '/v1/api-keys', { method: 'POST', headers: setup.admin, body: { name: `bridge ${b}`, scopes: ['printers:read', 'printers:write'] } })
    if (key.status !== 200) throw new Error(`api key: ${key.status} ${key.text}`)
    bridgeKeys.push({ 'x-api-key': key.json.key })
  }
  const printers: Printer[] = []
  for (let n = 0; n < plan.printers; n++) printers.push({ n, id: await addPrinter(setup, 'host-a'), bridge: n % plan.bridges, batches: [] })
  /** What a printer's bridge talks to: the current child, with that bridge's key. */
  const farm = (p: Printer): Farm => ({ ...setup, url: urlOf(), bridge: bridgeKeys[p.bridge]! })

  // Phase 1: bridges post; SIGKILL once killAfterAcked batches got their 200.
  let acked = 0
  let inFlight = 0
  let killedAt: { inFlight: number; acked: number } | undefined
  let killing: Promise<void> | undefined
  const phase1Started = performance.now()
  const pump = async (printer: Printer): Promise<void> => {
    const f = farm(printer)
    while (killedAt === undefined && printer.batches.length < plan.maxBatchesPerPrinter) {
      const sent = newBatch(printer)
      inFlight++
      let res: HttpResult
      try {
        const answer = post(f, sent.body)
        if (acked >= plan.killAfterAcked && killedAt === undefined) {
          // The first batch sent past the mark goes out with the kill, the other bridges' batches are
          // somewhere between the socket and the commit: at least one is certain to get no answer.
          killedAt = { inFlight, acked }
          killing = service.kill()
        }
        res = await answer
      } catch (error) {
        sent.outcome = 'lost'
        sent.detail = (error as NodeJS.ErrnoException).code ?? (error as Error).message
        return // the bridge spools this printer's events until the service is back
      } finally {
        inFlight--
      }
      if (res.status === 200 && res.json?.processed === eventsPerBatch && res.json?.failed === 0) {
        // A 200 read after the kill is still an answer the service sent after its commit.
        sent.outcome = 'acked'
        acked++
      } else {
        sent.outcome = 'unexpected'
        sent.detail = `${res.status} ${res.text}`
        return
      }
    }
  }
  // Several bridges, each owning some printers; each printer is one sequential loop (seqn order), all in parallel.
  await Promise.all(printers.map(pump))
  await killing
  const all = () => printers.flatMap((p) => p.batches)
  const ackedBatches = all().filter((b) => b.outcome === 'acked')
  const lostBatches = all().filter((b) => b.outcome === 'lost')
  const unexpected = all().filter((b) => b.outcome === 'unexpected')
  t.comment(
    `phase 1: ${Math.round(performance.now() - phase1Started)} ms, ${all().length} batches sent by ${plan.bridges} bridges for ${plan.printers} printers, ` +
      `${ackedBatches.length} acknowledged, ${lostBatches.length} without an answer (${[...new Set(lostBatches.map((b) => b.detail))].join(', ')}), ` +
      `SIGKILL after ${killedAt?.acked} acks with ${killedAt?.inFlight} requests in flight`,
  )
  t.ok(killedAt, `the child was killed once ${plan.killAfterAcked} batches were acknowledged`)
  t.same(await service.exited, { code: null, signal: 'SIGKILL' }, 'the child died of SIGKILL')
  t.ok((killedAt?.inFlight ?? 0) > 1, 'other bridges had requests in flight when the child was killed')
  t.ok(lostBatches.length > 0, 'some batches got no answer')
  t.same(
    unexpected.map((b) => `${b.printer.n}/${b.index}: ${b.detail}`),
    [],
    'before the kill every answer was a 200 with the whole batch processed',
  )
  t.same(
    printers.filter((p) => p.batches.some((b, i) => b.outcome !== 'acked' && i !== p.batches.length - 1)).map((p) => p.n),
    [],
    "only a printer's last batch can be unanswered (each bridge loop stops at its first failure)",
  )

  // Phase 2: restart on the same store.
  const restartStarted = performance.now()
  service = await startChildService(t, { env })
  t.comment(`restarted as ${service.pid}, ready after ${Math.round(performance.now() - restartStarted)} ms`)

  /** Every event sent so far, by `printerId/eventId`. */
  const sentEvents = (): Map<string, SentEvent> => new Map(all().flatMap((sent) => sent.events.map((event) => [`${sent.printer.id}/${event.eventId}`, event] as const)))
  const sentById = sentEvents()

  const storedEvents = (query: Query) =>
    query(`select printer_id::text as p, event_id as e, count(*)::int as n, min(seqn)::int as s, min(event_type) as t, min(job_id)::int as j
           from printer_events group by printer_id, event_id`)
  const stateRows = (query: Query) =>
    query(`select s.printer_id::text as p, s.high_water_seqn::int as hw, s.seqn_epoch::int as epoch,
             (select max(seqn)::int from printer_events e where e.printer_id = s.printer_id) as top
           from printer_state s`)

  // (1) Every acknowledged event is stored exactly once, with its seqn and type; an unanswered batch
  // is stored whole or not at all; nothing is stored that was not sent; state agrees with the log.
  const afterCrash = await inspect(async (query) => ({ events: await storedEvents(query), states: await stateRows(query) }), { restartAfter: true })
  const stored = new Map(afterCrash.events.map((r) => [`${r['p']}/${r['e']}`, r]))
  const ackedProblems: string[] = []
  for (const sent of ackedBatches) {
    for (const event of sent.events) {
      const row = stored.get(`${sent.printer.id}/${event.eventId}`)
      if (row === undefined) ackedProblems.push(`${event.eventId} (batch ${sent.printer.n}/${sent.index}) acknowledged but missing`)
      else if (row['n'] !== 1) ackedProblems.push(`${event.eventId} stored ${String(row['n'])} times`)
      else if (row['s'] !== event.seqn || row['t'] !== event.type) ackedProblems.push(`${event.eventId} stored as seqn ${String(row['s'])} ${String(row['t'])}, sent as ${event.seqn} ${event.type}`)
    }
  }
  t.same(ackedProblems.slice(0, 20), [], `all ${ackedBatches.length * eventsPerBatch} acknowledged events are stored exactly once (${ackedProblems.length} problems)`)
  t.same(
    [...stored.keys()].filter((key) => !sentById.has(key)),
    [],
    'nothing is stored that no bridge sent',
  )
  const lostStoredCounts = lostBatches.map((sent) => sent.events.filter((e) => stored.has(`${sent.printer.id}/${e.eventId}`)).length)
  t.same(
    lostStoredCounts.filter((n) => n !== 0 && n !== eventsPerBatch),
    [],
    'a batch that got no answer is stored whole or not at all (one statement commits its unit)',
  )
  t.comment(`unanswered batches found committed before the kill: ${lostStoredCounts.filter((n) => n === eventsPerBatch).length} of ${lostBatches.length}`)
  t.same(
    afterCrash.states.filter((s) => s['hw'] !== s['top'] || s['epoch'] !== 1),
    [],
    "every printer's stored high-water mark is the highest stored seqn (state and log agree after the crash)",
  )

  t.comment(`store checked after the crash at ${Math.round(performance.now() - started)} ms`)

  // (2) Each bridge retries its unanswered batch (deliveryAttempt + 1): 200, the whole batch processed.
  const retryResults: string[] = []
  await eachPrinter(printers, async (p) => {
    for (const sent of p.batches.filter((b) => b.outcome === 'lost')) {
      const res = await post(farm(p), retryBody(sent, 2)).catch((error: Error) => ({ status: 0, text: error.message, json: undefined }) as HttpResult)
      if (res.status !== 200) retryResults.push(`${p.n}/${sent.index}: ${res.status} ${res.text}`)
      else if (!isFullyProcessed(res.json)) retryResults.push(`${p.n}/${sent.index}: ${res.text}`)
      else sent.outcome = 'acked'
    }
  })
  t.same(retryResults, [], `every unanswered batch (${lostBatches.length}) is answered 200 with all ${eventsPerBatch} events processed when retried`)

  // The bridges carry on where they were: one new batch per printer.
  const nextResults: string[] = []
  await eachPrinter(printers, async (p) => {
    const sent = newBatch(p)
    const res = await post(farm(p), sent.body).catch((error: Error) => ({ status: 0, text: error.message, json: undefined }) as HttpResult)
    if (res.status === 200 && isFullyProcessed(res.json)) sent.outcome = 'acked'
    else nextResults.push(`${p.n}/${sent.index}: ${res.status} ${res.text}`)
  })
  t.same(nextResults, [], 'after the retries every printer takes its next batch')

  // (3) Re-posting every acknowledged batch stores nothing new and answers like the first delivery.
  const metricsBefore = (await request(urlOf(), '/metrics')).text
  const repostResults: string[] = []
  let reposted = 0
  await eachPrinter(printers, async (p) => {
    for (const sent of p.batches) {
      const res = await post(farm(p), retryBody(sent, 3)).catch((error: Error) => ({ status: 0, text: error.message, json: undefined }) as HttpResult)
      reposted++
      if (res.status !== 200 || !isFullyProcessed(res.json)) repostResults.push(`${p.n}/${sent.index}: ${res.status} ${res.text}`)
    }
  })
  t.same(repostResults.slice(0, 20), [], `re-posting all ${reposted} batches answers 200 {processed: ${eventsPerBatch}, failed: 0} every time`)
  const metricsAfter = (await request(urlOf(), '/metrics')).text
  const storedSeries = 'printer_events_total{outcome="stored"}'
  const duplicateSeries = 'printer_events_total{outcome="duplicate"}'
  t.equal(metricValue(metricsAfter, storedSeries) - metricValue(metricsBefore, storedSeries), 0, 'the re-posts stored nothing (metrics)')
  t.equal(metricValue(metricsAfter, duplicateSeries) - metricValue(metricsBefore, duplicateSeries), reposted * eventsPerBatch, 'every re-posted event was a duplicate (metrics)')

  const totalSent = all().length * eventsPerBatch
  const final = await inspect(async (query) => ({
    totals: (await query(`select count(*)::int as n, count(distinct (printer_id, event_id))::int as d from printer_events`))[0]!,
    events: await storedEvents(query),
    states: await stateRows(query),
    perPrinter: await query(`select printer_id::text as p, count(*)::int as n, min(seqn)::int as lo, max(seqn)::int as hi from printer_events group by printer_id`),
    jobs: await query(`select printer_id::text as p, id::int as id, state from print_jobs`),
  }), { restartAfter: false })
  t.same(final.totals, { n: totalSent, d: totalSent }, `after the retries every one of the ${totalSent} events sent is stored exactly once`)
  const finalProblems: string[] = []
  const finalStored = new Map(final.events.map((r) => [`${r['p']}/${r['e']}`, r]))
  for (const [key, event] of sentEvents()) {
    const row = finalStored.get(key)
    if (row === undefined || row['n'] !== 1 || row['s'] !== event.seqn || row['t'] !== event.type) finalProblems.push(`${key}: ${JSON.stringify(row)}`)
  }
  t.same(finalProblems.slice(0, 20), [], `each sent event is stored once with its seqn and type (${finalProblems.length} problems)`)
  t.same(
    final.perPrinter.map((r) => ({ ...r })).sort((a, b) => String(a['p']).localeCompare(String(b['p']))),
    printers
      .map((p) => ({ p: p.id, n: p.batches.length * eventsPerBatch, lo: 0, hi: p.batches.length * eventsPerBatch - 1 }))
      .sort((a, b) => a.p.localeCompare(b.p)),
    "each printer's log holds seqns 0..n-1 without a gap or a repeat",
  )
  t.same(
    final.states.filter((s) => s['hw'] !== s['top']),
    [],
    "each printer's high-water mark is its highest stored seqn",
  )
  // Jobs: one per job:start sent, whichever delivery stored it; every job event linked to one of its printer's jobs.
  const jobsByPrinter = new Map<string, Set<number>>()
  for (const job of final.jobs) {
    const set = jobsByPrinter.get(String(job['p'])) ?? new Set<number>()
    set.add(Number(job['id']))
    jobsByPrinter.set(String(job['p']), set)
  }
  const jobProblems: string[] = []
  for (const p of printers) {
    const starts = p.batches.flatMap((b) => b.events).filter((e) => e.type === 'job:start').length
    const jobs = jobsByPrinter.get(p.id) ?? new Set<number>()
    if (jobs.size !== starts) jobProblems.push(`printer ${p.n}: ${jobs.size} jobs for ${starts} job:start events`)
    for (const event of p.batches.flatMap((b) => b.events).filter((e) => e.type.startsWith('job:'))) {
      const j = finalStored.get(`${p.id}/${event.eventId}`)?.['j']
      if (typeof j !== 'number' || !jobs.has(j)) jobProblems.push(`${event.eventId} (${event.type}) linked to job ${String(j)}`)
    }
  }
  t.same(jobProblems.slice(0, 20), [], 'one job per job:start, none created twice by a retry, every job event linked to its job')

  if (realPostgres) t.same(await service.stop(), { code: 0, signal: null }, 'the restarted child drains and exits 0 on SIGTERM')
  t.comment(`total ${Math.round(performance.now() - started)} ms`)
})
