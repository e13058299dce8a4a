import t from 'tap'
import { Histogram, MetricsRegistry, latencyBuckets } from '../../../src/observability/metrics.js'

/** Sample lines of an exposition, as "name{labels}" → value. */
function samples(text: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const at = line.lastIndexOf(' ')
    out.set(line.slice(0, at), line.slice(at + 1))
  }
  return out
}

t.test('metrics - a counter renders HELP, TYPE and one line per label set', async (t) => {
  const registry = new MetricsRegistry()
  const requests = registry.counter('http_requests_total', 'HTTP requests answered.', ['route', 'method'])
  requests.inc({ route: '/v1/printers', method: 'GET' })
  requests.inc({ route: '/v1/printers', method: 'GET' }, 2)
  requests.inc({ method: 'POST', route: '/v1/jobs' }) // label order in the call does not matter
  t.equal(requests.get({ route: '/v1/printers', method: 'GET' }), 3)
  t.equal(requests.get({ route: '/nope', method: 'GET' }), 0)
  t.equal(
    registry.render(),
    '# HELP http_requests_total HTTP requests answered.\n' +
      '# TYPE http_requests_total counter\n' +
      'http_requests_total{route="/v1/printers",method="GET"} 3\n' +
      'http_requests_total{route="/v1/jobs",method="POST"} 1\n',
  )
})

t.test('metrics - a counter without labels has no braces, and a missing label renders empty', async (t) => {
  const registry = new MetricsRegistry()
  registry.counter('plain_total', 'No labels.').inc()
  registry.counter('partial_total', 'One label missing.', ['a', 'b']).inc({ a: 'x' })
  const lines = samples(registry.render())
  t.equal(lines.get('plain_total'), '1')
  t.equal(lines.get('partial_total{a="x",b=""}'), '1')
})

t.test('metrics - label values escape backslash, double quote and newline', async (t) => {
  const registry = new MetricsRegistry()
  const c = registry.counter('odd_total', 'Odd label values.', ['v'])
  c.inc({ v: 'a\\b"c\nd' })
  const text = registry.render()
  t.match(text, 'odd_total{v="a\\\\b\\"c\\nd"} 1\n')
  const sampleLines = text.split('\n').filter((l) => l.startsWith('odd_total'))
  t.equal(sampleLines.length, 1, 'the newline does not split the sample line')
})

t.test('metrics - HELP text escapes backslash and newline', async (t) => {
  const registry = new MetricsRegistry()
  registry.counter('help_total', 'first line\nsecond \\ line')
  t.match(registry.render(), '# HELP help_total first line\\nsecond \\\\ line\n# TYPE help_total counter\n')
})

t.test('metrics - histogram buckets are cumulative, +Inf equals count, _sum and _count present', async (t) => {
  const registry = new MetricsRegistry()
  const h = registry.histogram('job_seconds', 'Job time.', ['kind'], [1, 5, 10])
  for (const v of [0.5, 1, 3, 7, 20, 10]) h.observe({ kind: 'print' }, v)
  h.observe({ kind: 'slice' }, 2)
  t.equal(h.count({ kind: 'print' }), 6)
  const text = registry.render()
  t.match(text, '# TYPE job_seconds histogram\n')
  const lines = samples(text)
  t.equal(lines.get('job_seconds_bucket{kind="print",le="1"}'), '2', 'a value equal to a bound is in that bucket')
  t.equal(lines.get('job_seconds_bucket{kind="print",le="5"}'), '3')
  t.equal(lines.get('job_seconds_bucket{kind="print",le="10"}'), '5')
  t.equal(lines.get('job_seconds_bucket{kind="print",le="+Inf"}'), '6')
  t.equal(lines.get('job_seconds_sum{kind="print"}'), '41.5')
  t.equal(lines.get('job_seconds_count{kind="print"}'), '6')
  t.equal(lines.get('job_seconds_bucket{kind="slice",le="1"}'), '0')
  t.equal(lines.get('job_seconds_bucket{kind="slice",le="5"}'), '1')
  t.equal(lines.get('job_seconds_bucket{kind="slice",le="+Inf"}'), '1')
  t.equal(lines.get('job_seconds_count{kind="slice"}'), '1')
})

t.test('metrics - histogram buckets never decrease and +Inf equals _count for any observations', async (t) => {
  const registry = new MetricsRegistry()
  const h = registry.histogram('latency_seconds', 'Latency.', [], latencyBuckets)
  const values = Array.from({ length: 200 }, (_, i) => (i % 17) * 0.0007 + (i % 5) * 0.9)
  for (const v of values) h.observe({}, v)
  const lines = samples(registry.render())
  let previous = 0
  for (const bound of latencyBuckets) {
    const value = Number(lines.get(`latency_seconds_bucket{le="${bound}"}`))
    t.ok(value >= previous, `le=${bound} (${value}) >= ${previous}`)
    t.equal(value, values.filter((v) => v <= bound).length, `le=${bound} counts every value at or below it`)
    previous = value
  }
  t.equal(lines.get('latency_seconds_bucket{le="+Inf"}'), '200')
  t.equal(lines.get('latency_seconds_count'), '200')
  t.ok(lines.has('latency_seconds_sum'))
})

t.test('metrics - histogram buckets must increase', async (t) => {
  t.throws(() => new Histogram('h1', 'h', [], [1, 1]), TypeError, 'equal bounds')
  t.throws(() => new Histogram('h2', 'h', [], [1, 5, 2]), TypeError, 'a decreasing bound')
  const registry = new MetricsRegistry()
  t.throws(() => registry.histogram('h3', 'h', [], [0.5, 0.1]), TypeError)
  t.doesNotThrow(() => registry.histogram('h3', 'h', [], [0.1, 0.5]), 'a refused histogram is not registered')
})

t.test('metrics - registering a metric name twice throws', async (t) => {
  const registry = new MetricsRegistry()
  registry.counter('dup', 'first')
  t.throws(() => registry.counter('dup', 'again'), TypeError)
  t.throws(() => registry.gauge('dup', 'as a gauge'), TypeError)
  t.throws(() => registry.histogram('dup', 'as a histogram', [], [1]), TypeError)
  t.equal((registry.render().match(/# TYPE dup /g) ?? []).length, 1, 'rendered once, as the first kind')
  t.match(registry.render(), '# TYPE dup counter')
})

t.test('metrics - a gauge collect callback runs at render time, each time', async (t) => {
  const registry = new MetricsRegistry()
  let source = 3
  let calls = 0
  registry.gauge('queue_depth', 'Jobs waiting.', ['farm'], (g) => {
    calls++
    g.set({ farm: 'north' }, source)
  })
  t.equal(calls, 0, 'not called at registration')
  t.equal(samples(registry.render()).get('queue_depth{farm="north"}'), '3')
  source = 11
  t.equal(samples(registry.render()).get('queue_depth{farm="north"}'), '11', 'the value is read at the second render')
  t.equal(calls, 2)
})

t.test('metrics - a gauge goes up and down', async (t) => {
  const registry = new MetricsRegistry()
  const g = registry.gauge('connections', 'Open connections.')
  g.inc()
  g.inc({}, 4)
  g.dec()
  t.equal(g.get(), 4)
  g.set({}, -2.5)
  t.match(registry.render(), '# TYPE connections gauge\nconnections -2.5\n')
})

t.test('metrics - the registry renders metrics in registration order', async (t) => {
  const registry = new MetricsRegistry()
  registry.counter('b_total', 'b').inc()
  registry.gauge('a_gauge', 'a').set({}, 1)
  const text = registry.render()
  t.ok(text.indexOf('b_total') < text.indexOf('a_gauge'))
})

t.test('metrics - an explicit +Inf bound is refused, since +Inf is always rendered from the count', async (t) => {
  const registry = new MetricsRegistry()
  t.throws(() => registry.histogram('inf_seconds', 'Explicit +Inf bound.', [], [1, Infinity]), TypeError)
  t.throws(() => registry.histogram('nan_seconds', 'NaN bound.', [], [Number.NaN]), TypeError)
})

t.test('metrics - a sum of decimal amounts renders as the decimal, not the binary float (37.02 grams, not 37.019999999999996)', async (t) => {
  const registry = new MetricsRegistry()
  const grams = registry.counter('grams_total', 'Grams.')
  for (const g of [11.66, 11.66, 13.7]) grams.inc({}, g)
  t.equal(11.66 + 11.66 + 13.7, 37.019999999999996, 'the float sum is off')
  t.match(registry.render(), /^grams_total 37\.02$/m)
  const big = registry.counter('bytes_total', 'Bytes.')
  big.inc({}, 123_456_789_012_345)
  t.match(registry.render(), /^bytes_total 123456789012345$/m, 'large integers stay exact')
})
