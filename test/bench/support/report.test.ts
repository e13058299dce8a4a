/**
 * The benchmark lines a load tester reads: figure, the limit from the same
 * run, and the ratio with the direction that is better.
 */
import t from 'tap'
import { formatNumber, measurementLine, ratioOf } from '../../../bench/support/report.js'

t.test('bench report - a throughput line names the figure, the limit and what the ratio means', async (t) => {
  const line = measurementLine({
    bench: 'ingest',
    name: 'new batches, 32 in flight',
    figure: 19_046.4,
    limit: 61_900,
    unit: 'events/s',
    limitWhat: 'COPY of the same rows by postgres.js alone, same run',
    better: 'higher',
    latency: { p50Ms: 102.3, p99Ms: 197 },
  })
  t.equal(line, 'ingest new batches, 32 in flight: 19,046 events/s | limit (COPY of the same rows by postgres.js alone, same run): 61,900 events/s | ratio 0.31 (higher is better; 1.0 = the limit) | p50 102 ms, p99 197 ms')
})

t.test('bench report - a latency line says lower is better, and small ratios keep two significant digits', async (t) => {
  t.match(measurementLine({ bench: 'live', name: 'p99', figure: 30.15, limit: 4.69, unit: 'ms', limitWhat: 'bare uWS', better: 'lower' }), /: 30.2 ms \| limit \(bare uWS\): 4.69 ms \| ratio 6.43 \(lower is better; 1.0 = the limit\)$/)
  t.match(measurementLine({ bench: 'displays', name: 'x', figure: 25, limit: 1937, unit: 'activations/s', limitWhat: 'bare aedes', better: 'higher' }), /ratio 0.013 /)
  t.ok(Number.isNaN(ratioOf(1, 0)), 'no limit, no ratio')
  t.strictSame([formatNumber(148_123.4), formatNumber(12.44), formatNumber(0.4321)], ['148,123', '12.4', '0.432'])
})

t.test('bench report - a goal is said next to its figure, met or NOT MET, and in the JSON line', async (t) => {
  const base = { bench: 'upload', name: '50 MB upload', figure: 60, limit: 100, unit: 'MB/s', limitWhat: 'fs alone', better: 'higher' } as const
  t.match(measurementLine({ ...base, goal: { what: 'ratio >= 0.7', met: false } }), /\| goal ratio >= 0\.7: NOT MET$/)
  t.match(measurementLine({ ...base, figure: 80, goal: { what: 'ratio >= 0.7', met: true } }), /\| goal ratio >= 0\.7: met$/)
  t.notMatch(measurementLine(base), /goal/, 'no goal, nothing said')
})
