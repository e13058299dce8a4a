/**
 * The live feed's topics on this node. Every organization topic has
 * its own sequence and a ring of its recent frames (for `since` resumes).
 * A frame is serialized once per encoding and handed to uWS topic publish,
 * never once per subscriber (docs/development.md), and only for an encoding
 * that has subscribers.
 *
 * Changes arrive from this node's printer actors after their commit and,
 * with Redis, from other nodes (src/live/redis-relay.ts); both go through
 * `printerChanged`, so a dashboard sees the whole farm whichever node owns a
 * printer. Printer tasks reach `host:<hostId>` through `taskChanged`, each
 * read back on this node (src/live/host-tasks.ts). Sequences are this
 * node's: a client that moves to another node gets a snapshot, as the
 * `stream` of its seqs does not match.
 */
import { encode } from '@msgpack/msgpack'
import { randomBytes } from 'node:crypto'
import type { PrinterChange } from '../../actors/printer-actor.js'
import type { EventRecord } from '../../actors/printer-persistence.js'
import type { ServerFrame } from '../../protocol/live.js'
import type { PrinterTask } from '../../protocol/schemas/print-jobs.js'
import type { PrinterState } from '../../protocol/schemas/printer-state.js'
import { printerStateOfView } from '../printers/read-model.js'
import type { LiveJob } from './snapshots.js'

/** uWS topic names: encoding, organization, topic. */
export const uwsTopic = (encoding: 'j' | 'm', organizationId: string, topic: string): string => `${encoding}/${organizationId}/${topic}`

export interface HubOptions {
  /** uWS app.publish. */
  publish: (topic: string, message: string | Uint8Array, isBinary: boolean) => void
  /** uWS app.numSubscribers. */
  subscribers: (topic: string) => number
  /** Frames kept per organization-wide topic (printers, jobs) for resumes. */
  ringSize?: number
  /** Frames kept per `printer:<id>` topic (they carry whole event batches, so fewer). */
  printerRingSize?: number
  /** Frames kept per `host:<hostId>` topic (one task each). */
  hostRingSize?: number
  /** Topics (with their rings) kept at most; the least recently published go first. */
  maxStreams?: number
}

interface Stream {
  seq: number
  ring: ServerFrame[]
}

/** A change as it crosses nodes: what the feed needs, nothing more. */
export interface LiveChange {
  organizationId: string
  /** The printer's whole read model now (the same object GET /v1/printers/{id} answers). */
  printer: PrinterState
  events: readonly Pick<EventRecord, 'eventId' | 'type' | 'seqn' | 'timestamp' | 'data' | 'jobId' | 'applied'>[]
  jobs: readonly LiveJob[]
}

/** A printer left the organization (deleted): the `printers` topic says `{printer: {id, removed: true}}`. */
export interface LiveRemoval {
  organizationId: string
  printerId: string
}

/** What a listener hears: this printer changed or was removed. */
export interface PrinterTouched {
  organizationId: string
  printerId: string
}

/** A deleted printer as the `printers` topic shows it. */
export interface PrinterRemoved {
  id: string
  removed: true
}

export function liveChangeOf(change: PrinterChange, now: number): LiveChange {
  return {
    organizationId: change.view.organizationId,
    printer: printerStateOfView(change.view, now),
    events: change.events.map((e) => ({ eventId: e.eventId, type: e.type, seqn: e.seqn, timestamp: e.timestamp, data: e.data, jobId: e.jobId, applied: e.applied })),
    jobs: change.jobs.map((j) => ({ jobId: j.jobId, name: j.name, progress: j.progress, state: j.state, startedAt: j.startedAt, endedAt: j.endedAt, printerId: change.view.printerId })),
  }
}

export class LiveHub {
  /** Names this node's sequences; a `since` from another stream is not honoured. */
  readonly stream = randomBytes(6).toString('hex')
  readonly #options: HubOptions
  readonly #ringSize: number
  readonly #printerRingSize: number
  readonly #hostRingSize: number
  readonly #maxStreams: number
  readonly #streams = new Map<string, Stream>()
  /** Latest state of every printer heard of, per organization (what a lagging client gets, coalesced). */
  readonly #latest = new Map<string, Map<string, PrinterState>>()
  /** Printers deleted since the node started, per organization (a lagging client's coalesced frame must say so). */
  readonly #removed = new Map<string, Set<string>>()
  readonly #listeners = new Set<(touched: PrinterTouched) => void>()
  published = 0

  constructor(options: HubOptions) {
    this.#options = options
    this.#ringSize = options.ringSize ?? 1024
    this.#printerRingSize = options.printerRingSize ?? 16
    this.#hostRingSize = options.hostRingSize ?? 64
    this.#maxStreams = options.maxStreams ?? 5_000
  }

  /** Called for every change this node learns of (after the commit that made it). */
  printerChanged(change: LiveChange): void {
    const org = change.organizationId
    let latest = this.#latest.get(org)
    if (latest === undefined) this.#latest.set(org, (latest = new Map()))
    const printer = change.printer
    latest.set(printer.id, printer)
    this.#removed.get(org)?.delete(printer.id)
    this.#publish(org, 'printers', { printer })
    this.#publish(org, `printer:${printer.id}`, { printer, events: change.events })
    for (const job of change.jobs) this.#publish(org, 'jobs', { job })
    for (const listener of this.#listeners) listener({ organizationId: org, printerId: printer.id })
  }

  /** A printer was deleted: dashboards drop its tile. */
  printerRemoved(removal: LiveRemoval): void {
    const org = removal.organizationId
    this.#latest.get(org)?.delete(removal.printerId)
    let removed = this.#removed.get(org)
    if (removed === undefined) this.#removed.set(org, (removed = new Set()))
    removed.add(removal.printerId)
    const printer = { id: removal.printerId, removed: true }
    this.#publish(org, 'printers', { printer })
    this.#publish(org, `printer:${removal.printerId}`, { printer, events: [] })
    for (const listener of this.#listeners) listener({ organizationId: org, printerId: removal.printerId })
  }

  /** A status display changed (registration, binding, target, capability); `display` is its whole live view, or `{id, deleted: true}`. */
  displayChanged(organizationId: string, display: object): void {
    this.#publish(organizationId, 'displays', { display })
  }

  /**
   * A printer task changed: the topic of the host the dispatcher named gets the whole task (the
   * bridge dedupes commands by id). That host, not `task.host_id`: a running print's commands go
   * to whichever host has the printer now.
   */
  taskChanged(organizationId: string, hostId: string, task: PrinterTask): void {
    this.#publish(organizationId, `host:${hostId}`, { task })
  }

  /** The first waiting jobs of the organization's queue, whole (the `queue` topic). */
  queueChanged(organizationId: string, queue: object): void {
    this.#publish(organizationId, 'queue', { queue })
  }

  /** Whether this node has a subscriber of the topic, or one reading its snapshot (else a change to it need not even be read). */
  follows(organizationId: string, topic: string): boolean {
    if (this.#streams.has(`${organizationId}/${topic}`)) return true
    return this.#options.subscribers(uwsTopic('j', organizationId, topic)) + this.#options.subscribers(uwsTopic('m', organizationId, topic)) > 0
  }

  /** Told of every printer changed or removed, after it was published (lagging sockets record what they missed). */
  onChange(listener: (touched: PrinterTouched) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /** Remembers states from a snapshot, so coalesced frames for lagging clients carry them. */
  remember(organizationId: string, printers: readonly PrinterState[]): void {
    let latest = this.#latest.get(organizationId)
    if (latest === undefined) this.#latest.set(organizationId, (latest = new Map()))
    for (const p of printers) {
      if (!latest.has(p.id)) latest.set(p.id, p)
    }
  }

  /** The latest state of each printer, or `{id, removed: true}` for one deleted since. */
  latestPrinters(organizationId: string, ids: Iterable<string>): (PrinterState | PrinterRemoved)[] {
    const latest = this.#latest.get(organizationId)
    const removed = this.#removed.get(organizationId)
    return [...ids].flatMap((id): (PrinterState | PrinterRemoved)[] => {
      const state = latest?.get(id)
      if (state !== undefined) return [state]
      return removed?.has(id) === true ? [{ id, removed: true }] : []
    })
  }

  /** Makes sure a topic buffers from now on (a subscription about to read its snapshot must not miss what follows). */
  follow(organizationId: string, topic: string): void {
    const key = `${organizationId}/${topic}`
    if (this.#streams.has(key)) return
    if (this.#streams.size >= this.#maxStreams) this.#streams.delete(this.#streams.keys().next().value!)
    this.#streams.set(key, { seq: 0, ring: [] })
  }

  currentSeq(organizationId: string, topic: string): number {
    return this.#streams.get(`${organizationId}/${topic}`)?.seq ?? 0
  }

  /** The frames after `since`, if this node still holds all of them; undefined means "send a snapshot". */
  replay(organizationId: string, topic: string, since: number): ServerFrame[] | undefined {
    const stream = this.#streams.get(`${organizationId}/${topic}`)
    const seq = stream?.seq ?? 0
    if (since > seq) return undefined // a seq this stream never issued
    if (since === seq) return []
    const ring = stream!.ring
    const oldest = ring[0]?.seq ?? seq + 1
    if (since + 1 < oldest) return undefined
    return ring.filter((f) => f.seq! > since)
  }

  encode(frame: ServerFrame, encoding: 'json' | 'msgpack'): string | Uint8Array {
    return encoding === 'json' ? JSON.stringify(frame) : encode(frame)
  }

  #publish(organizationId: string, topic: string, data: unknown): void {
    const key = `${organizationId}/${topic}`
    const json = uwsTopic('j', organizationId, topic)
    const mp = uwsTopic('m', organizationId, topic)
    const jsonSubscribers = this.#options.subscribers(json)
    const mpSubscribers = this.#options.subscribers(mp)
    const perPrinter = topic.startsWith('printer:')
    const perHost = topic.startsWith('host:')
    let stream = this.#streams.get(key)
    // A printer's or a host's own topic is kept only while someone follows it: thousands of
    // them must not each hold a ring nobody will read (a new subscriber gets a snapshot).
    if (stream === undefined && (perPrinter || perHost) && jsonSubscribers + mpSubscribers === 0) return
    if (stream === undefined) {
      if (this.#streams.size >= this.#maxStreams) this.#streams.delete(this.#streams.keys().next().value!)
      stream = { seq: 0, ring: [] }
    } else {
      this.#streams.delete(key) // re-inserted below: insertion order is recency
    }
    this.#streams.set(key, stream)
    const frame: ServerFrame = { op: 'event', topic, seq: ++stream.seq, data }
    stream.ring.push(frame)
    if (stream.ring.length > (perPrinter ? this.#printerRingSize : perHost ? this.#hostRingSize : this.#ringSize)) stream.ring.shift()
    if (jsonSubscribers > 0) this.#options.publish(json, JSON.stringify(frame), false)
    if (mpSubscribers > 0) this.#options.publish(mp, encode(frame), true)
    this.published++
  }
}
