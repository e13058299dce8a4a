/**
 * What every benchmark prints. Each measurement is a figure of this service
 * next to its limit: the same work done by the simplest thing that can do it
 * (a bare uWS server, postgres.js alone, a bare aedes broker), measured in
 * the same run on the same machine. Absolute numbers move between machines
 * and between runs on a busy one; the ratio figure / limit is what holds.
 *
 * Two outputs with the same numbers:
 * - stdout: one JSON line per record, so `npm run --silent bench > out.jsonl` stays
 *   machine-readable. A measurement's line carries `measurement`, `figure`,
 *   `unit`, `limit`, `limit_what`, `ratio` and `better`;
 * - stderr: one labelled line per record, for a person at the terminal:
 *   `ingest 32 in flight: 19,046 events/s | limit (COPY of the same rows, same run): 61,900 events/s | ratio 0.31 (higher is better; 1.0 = the limit)`.
 */

export interface Latency {
  p50Ms: number
  p99Ms: number
}

export interface Measurement {
  bench: string
  /** What was measured, as a person would say it: '32 in flight', 'GET /healthz pipelined'. */
  name: string
  figure: number
  /** Of figure and limit alike: 'events/s', 'ms'. */
  unit: string
  /** The same work without the service, measured in the same run; same unit as figure. */
  limit: number
  /** What the limit is, short: 'bare uWS hello-world, same run'. */
  limitWhat: string
  /** Throughput: higher is better. Latency: lower is better. */
  better: 'higher' | 'lower'
  /** Decimals for the JSON figure and limit (the human line picks its own). */
  decimals?: number
  /** Latency measured alongside the figure, and the limit's where it has one. */
  latency?: Latency
  limitLatency?: Latency
  /** Short remarks for the human line: 'errors 3'. */
  notes?: string[]
  /** The project's goal for this figure and whether this run met it: said next to the figure, and in the JSON (goal, goal_met). */
  goal?: { what: string; met: boolean }
  /** Further fields for the JSON line only (CPU shares, counts, parameters). */
  details?: Record<string, unknown>
}

export const legend = `How to read the benchmark lines (stderr; the same numbers as JSON lines on stdout):
  figure  what the service achieved in this run, e.g. "19,046 events/s" or "p99 12.4 ms"
  limit   the same work done without the service by the simplest thing that can do it
          (bare uWS, postgres.js alone, bare aedes), measured in the same run on the same machine
  ratio   figure / limit; 1.0 = as good as the limit. Throughput: higher is better. Latency: lower is better.
Absolute numbers vary between machines and between runs on a busy machine; the ratios hold.
`

const round = (n: number, d: number): number => Math.round(n * 10 ** d) / 10 ** d

/** 19,046 / 148 / 12.4 / 0.43: three significant digits below 1,000, thousands separated above. */
export function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n)
  const abs = Math.abs(n)
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 })
}

function formatLatency(l: Latency): string {
  return `p50 ${formatNumber(l.p50Ms)} ms, p99 ${formatNumber(l.p99Ms)} ms`
}

function writeJson(record: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(record) + '\n')
}

function writeLine(text: string): void {
  process.stderr.write(text + '\n')
}

/** The ratio as reported: figure / limit, three decimals (NaN when the limit is 0 or missing). */
export function ratioOf(figure: number, limit: number): number {
  return limit > 0 ? round(figure / limit, 3) : NaN
}

/** 0.31, 2.50; two significant digits below 0.1 (0.014), so a small ratio does not print as 0.01. */
function formatRatio(ratio: number): string {
  if (!Number.isFinite(ratio)) return 'n/a'
  return ratio >= 0.1 ? ratio.toFixed(2) : ratio.toPrecision(2)
}

/** The human line of a measurement (exported for its own check). */
export function measurementLine(m: Measurement): string {
  const ratio = ratioOf(m.figure, m.limit)
  const parts = [
    `${m.bench} ${m.name}: ${formatNumber(m.figure)} ${m.unit}`,
    `limit (${m.limitWhat}): ${formatNumber(m.limit)} ${m.unit}`,
    `ratio ${formatRatio(ratio)} (${m.better} is better; 1.0 = the limit)`,
  ]
  if (m.goal) parts.push(`goal ${m.goal.what}: ${m.goal.met ? 'met' : 'NOT MET'}`)
  if (m.latency) parts.push(m.limitLatency ? `${formatLatency(m.latency)} (limit ${formatLatency(m.limitLatency)})` : formatLatency(m.latency))
  for (const note of m.notes ?? []) parts.push(note)
  return parts.join(' | ')
}

/** One measurement: its labelled line on stderr, its JSON line on stdout. */
export function reportMeasurement(m: Measurement): void {
  const d = m.decimals ?? 0
  writeLine(measurementLine(m))
  writeJson({
    bench: m.bench,
    measurement: m.name,
    figure: round(m.figure, d),
    unit: m.unit,
    limit: round(m.limit, d),
    limit_what: m.limitWhat,
    ratio: ratioOf(m.figure, m.limit),
    better: m.better,
    ...(m.latency ? { p50_ms: round(m.latency.p50Ms, 3), p99_ms: round(m.latency.p99Ms, 3) } : {}),
    ...(m.limitLatency ? { limit_p50_ms: round(m.limitLatency.p50Ms, 3), limit_p99_ms: round(m.limitLatency.p99Ms, 3) } : {}),
    ...(m.goal ? { goal: m.goal.what, goal_met: m.goal.met } : {}),
    ...m.details,
  })
}

/**
 * A record that is not a figure against a limit (the raw numbers of one
 * server, the group commit's statistics, one method of the limit): its JSON
 * line as before, and a labelled line with its numbers. Its text fields
 * (server, variant, method) are for the label to say.
 */
export function reportDetail(label: string, record: Record<string, unknown> & { bench: string }): void {
  const shown = Object.entries(record)
    .filter(([, value]) => typeof value === 'number')
    .map(([key, value]) => `${key} ${formatNumber(value as number)}`)
  writeLine(`${record.bench} ${label}: ${shown.join(', ')}`)
  writeJson(record)
}

/** A JSON line only, for a record whose numbers measurement lines already show (the summaries of earlier versions). */
export function reportJsonOnly(record: Record<string, unknown> & { bench: string }): void {
  writeJson(record)
}

/** The bench could not run here (no PostgreSQL): says so on both outputs. */
export function reportSkipped(bench: string, reason: string): void {
  writeLine(`${bench}: skipped (${reason})`)
  writeJson({ bench, skipped: reason })
}
