/**
 * A small Prometheus registry: counters, gauges and histograms with labels,
 * rendered in the text exposition format (version 0.0.4). Recording is a Map
 * lookup and an add, so it can sit on the hot path.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'

type Labels = Readonly<Record<string, string>>

interface Metric {
  readonly name: string
  render(): string
}

function labelKey(names: readonly string[], labels: Labels): string {
  return names.map((n) => labels[n] ?? '').join('\u0000')
}

function renderLabels(names: readonly string[], key: string, extra?: string): string {
  const values = key === '' && names.length === 0 ? [] : key.split('\u0000')
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i] ?? '')}"`)
  if (extra) parts.push(extra)
  return parts.length ? `{${parts.join(',')}}` : ''
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

function header(name: string, help: string, type: string): string {
  return `# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${name} ${type}\n`
}

function formatNumber(value: number): string {
  if (value === Infinity) return '+Inf'
  if (value === -Infinity) return '-Inf'
  // Fifteen significant digits: a sum of decimal amounts (grams to the centigram) reads 37.02, not the
  // binary float's 37.019999999999996; integers up to 10^15 are exact either way.
  return Number.isNaN(value) ? 'NaN' : String(Number(value.toPrecision(15)))
}

export class Counter implements Metric {
  readonly #values = new Map<string, number>()
  readonly name: string
  readonly help: string
  readonly labelNames: readonly string[]
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    this.name = name
    this.help = help
    this.labelNames = labelNames
  }
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(this.labelNames, labels)
    this.#values.set(key, (this.#values.get(key) ?? 0) + by)
  }
  get(labels: Labels = {}): number {
    return this.#values.get(labelKey(this.labelNames, labels)) ?? 0
  }
  /** A handle on one series, for hot paths that record the same labels over and over. */
  cell(labels: Labels): { inc(by?: number): void } {
    const key = labelKey(this.labelNames, labels)
    const values = this.#values
    return {
      inc(by = 1) {
        values.set(key, (values.get(key) ?? 0) + by)
      },
    }
  }
  render(): string {
    let out = header(this.name, this.help, 'counter')
    for (const [key, value] of this.#values) out += `${this.name}${renderLabels(this.labelNames, key)} ${formatNumber(value)}\n`
    return out
  }
}

export class Gauge implements Metric {
  readonly #values = new Map<string, number>()
  readonly name: string
  readonly help: string
  readonly labelNames: readonly string[]
  /** Read at scrape time, for values owned elsewhere (memory, loop delay). */
  readonly collect: ((gauge: Gauge) => void) | undefined
  constructor(name: string, help: string, labelNames: readonly string[] = [], collect?: (gauge: Gauge) => void) {
    this.name = name
    this.help = help
    this.labelNames = labelNames
    this.collect = collect
  }
  set(labels: Labels, value: number): void {
    this.#values.set(labelKey(this.labelNames, labels), value)
  }
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(this.labelNames, labels)
    this.#values.set(key, (this.#values.get(key) ?? 0) + by)
  }
  dec(labels: Labels = {}, by = 1): void {
    this.inc(labels, -by)
  }
  get(labels: Labels = {}): number {
    return this.#values.get(labelKey(this.labelNames, labels)) ?? 0
  }
  render(): string {
    this.collect?.(this)
    let out = header(this.name, this.help, 'gauge')
    for (const [key, value] of this.#values) out += `${this.name}${renderLabels(this.labelNames, key)} ${formatNumber(value)}\n`
    return out
  }
}

interface HistogramSeries {
  counts: number[]
  sum: number
  count: number
}

export class Histogram implements Metric {
  readonly #series = new Map<string, HistogramSeries>()
  readonly name: string
  readonly help: string
  readonly labelNames: readonly string[]
  readonly buckets: readonly number[]
  constructor(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]) {
    this.name = name
    this.help = help
    this.labelNames = labelNames
    this.buckets = buckets
    for (let i = 0; i < buckets.length; i++) {
      // +Inf is always rendered from the count; an explicit one would be a duplicate series.
      if (!Number.isFinite(buckets[i]!)) throw new TypeError(`histogram ${name}: bucket bounds must be finite (+Inf is implied)`)
      if (i > 0 && buckets[i]! <= buckets[i - 1]!) throw new TypeError(`histogram ${name}: buckets must increase`)
    }
  }
  observe(labels: Labels, value: number): void {
    this.#record(this.#seriesFor(labelKey(this.labelNames, labels)), value)
  }
  /** A handle on one series, for hot paths that record the same labels over and over. */
  cell(labels: Labels): { observe(value: number): void } {
    const series = this.#seriesFor(labelKey(this.labelNames, labels))
    return { observe: (value: number) => this.#record(series, value) }
  }
  #seriesFor(key: string): HistogramSeries {
    let series = this.#series.get(key)
    if (!series) this.#series.set(key, (series = { counts: new Array<number>(this.buckets.length).fill(0), sum: 0, count: 0 }))
    return series
  }
  #record(series: HistogramSeries, value: number): void {
    // Stored per bucket, made cumulative when rendered: one increment per observation.
    let i = 0
    while (i < this.buckets.length && value > this.buckets[i]!) i++
    if (i < this.buckets.length) series.counts[i]!++
    series.sum += value
    series.count++
  }
  count(labels: Labels = {}): number {
    return this.#series.get(labelKey(this.labelNames, labels))?.count ?? 0
  }
  render(): string {
    let out = header(this.name, this.help, 'histogram')
    for (const [key, series] of this.#series) {
      let cumulative = 0
      for (let i = 0; i < this.buckets.length; i++) {
        cumulative += series.counts[i]!
        out += `${this.name}_bucket${renderLabels(this.labelNames, key, `le="${formatNumber(this.buckets[i]!)}"`)} ${cumulative}\n`
      }
      out += `${this.name}_bucket${renderLabels(this.labelNames, key, 'le="+Inf"')} ${series.count}\n`
      out += `${this.name}_sum${renderLabels(this.labelNames, key)} ${formatNumber(series.sum)}\n`
      out += `${this.name}_count${renderLabels(this.labelNames, key)} ${series.count}\n`
    }
    return out
  }
}

export class MetricsRegistry {
  readonly #metrics = new Map<string, Metric>()

  #add<M extends Metric>(metric: M): M {
    if (this.#metrics.has(metric.name)) throw new TypeError(`metric ${metric.name} registered twice`)
    this.#metrics.set(metric.name, metric)
    return metric
  }
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.#add(new Counter(name, help, labelNames))
  }
  gauge(name: string, help: string, labelNames: readonly string[] = [], collect?: (gauge: Gauge) => void): Gauge {
    return this.#add(new Gauge(name, help, labelNames, collect))
  }
  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Histogram {
    return this.#add(new Histogram(name, help, labelNames, buckets))
  }
  render(): string {
    let out = ''
    for (const metric of this.#metrics.values()) out += metric.render()
    return out
  }
}

/** Seconds; from 0.25 ms (a cached read) to 10 s (a request stuck behind a store outage). */
export const latencyBuckets = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const

/** Process-level gauges every node exposes. */
export function registerProcessMetrics(registry: MetricsRegistry, now: () => number): () => void {
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const started = now() / 1000
  registry.gauge('process_start_time_seconds', 'Start time of the process since the Unix epoch, in seconds.', [], (g) => g.set({}, started))
  registry.gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', [], (g) => g.set({}, process.memoryUsage.rss()))
  registry.gauge('nodejs_heap_used_bytes', 'V8 heap in use, in bytes.', [], (g) => g.set({}, process.memoryUsage().heapUsed))
  registry.gauge('nodejs_eventloop_delay_p99_seconds', 'p99 event-loop delay since the previous scrape, in seconds.', [], (g) => {
    g.set({}, Number.isFinite(loopDelay.percentile(99)) ? loopDelay.percentile(99) / 1e9 : 0)
    loopDelay.reset()
  })
  return () => loopDelay.disable()
}
