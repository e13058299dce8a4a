/**
 * The printer actors of this node (docs/operations.md): spawned on a printer's
 * first message and hydrated from the store, one message at a time each
 * (a mailbox per printer), passivated when idle, and bounded in number.
 *
 * Memory: a resident printer costs its machine context plus a window of
 * recent event ids (idempotencyWindow). Idle printers are passivated after
 * `idleMs`; past `maxResident` the least recently used idle printers go
 * first, whatever their presence, so a burst of thousands of printers never
 * grows the heap without bound. A passivated online printer keeps its
 * stored `online` flag; the silence sweep marks it offline when its bridge
 * stays quiet, exactly as its timer would have.
 */
import { printerMachine, type FilamentAssignment } from '../machines/printer.js'
import { ServiceError } from '../protocol/errors.js'
import { Mailbox } from './mailbox.js'
import type { Clock } from './clock.js'
import { PrinterActor, type ConnectionFence, type IngestRequest, type IngestResult, type PrinterChange, type PrinterView } from './printer-actor.js'
import type { PersistedPrinterState, PrinterPersistence } from './printer-persistence.js'
import { ShardUnavailable, shardOf, type ShardDirectory } from './shard-directory.js'

export interface PrinterRuntimeOptions {
  directory: ShardDirectory
  persistence: PrinterPersistence
  /** Silence after which a printer is offline. */
  presenceTimeoutMs: number
  /** Idle time after which an actor is passivated (at least the presence timeout, so timers fire while resident). */
  idleMs: number
  maxResident: number
  /** The node's clock (a simulated one in tests): the actors' presence timers, the sweeps and their idea of now. */
  clock: Clock
  /** After each ingest that got an answer (metrics). */
  onIngested?: (result: IngestResult) => void
  /** Called when background work (a presence write, a sweep) fails; never throws. */
  onBackgroundError?: (what: string, error: unknown) => void
}

interface Entry {
  actor: PrinterActor
  mailbox: Mailbox
  shard: number
}

/** A printer id is a UUID (the store's key); anything else cannot name one. */
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export class PrinterRuntime {
  readonly #options: PrinterRuntimeOptions
  readonly #logic
  /** Insertion order is recency order: every use moves an entry to the end. */
  readonly #entries = new Map<string, Entry>()
  readonly #listeners = new Set<(change: PrinterChange) => void>()
  #sweep: unknown
  #stopping = false
  readonly #clock: Clock
  readonly #unsubscribe: () => void

  constructor(options: PrinterRuntimeOptions) {
    this.#options = options
    this.#clock = options.clock
    this.#logic = printerMachine.provide({ delays: { presenceTimeout: options.presenceTimeoutMs } })
    // A lost shard's actors are caches of state another node now writes: dropped, never reused.
    this.#unsubscribe = options.directory.onShardLost((shard) => this.dropShard(shard))
  }

  /** Forgets every actor of a shard (lost or fenced); a message in flight fails on its token and nothing of it is stored. */
  dropShard(shard: number): void {
    for (const [id, entry] of this.#entries) {
      if (entry.shard !== shard) continue
      this.#entries.delete(id)
      void entry.mailbox.drained().then(() => entry.actor.stop())
    }
  }

  get resident(): number {
    return this.#entries.size
  }

  /** Starts the passivation and silence sweeps. */
  start(): void {
    const every = Math.max(1_000, Math.min(this.#options.idleMs, this.#options.presenceTimeoutMs) / 2)
    this.#sweep = this.#clock.setInterval(() => void this.sweep(), every)
  }

  /** Stops taking messages, lets every mailbox finish, stops the actors. */
  async stop(): Promise<void> {
    this.#stopping = true
    this.#unsubscribe()
    if (this.#sweep !== undefined) this.#clock.clearInterval(this.#sweep)
    await Promise.all([...this.#entries.values()].map((e) => e.mailbox.drained()))
    for (const entry of this.#entries.values()) entry.actor.stop()
    this.#entries.clear()
  }

  /** The live-feed hook: called after each commit, off the request's path; returns an unsubscribe. */
  onChange(listener: (change: PrinterChange) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  ingest(printerId: string, request: IngestRequest): Promise<IngestResult> {
    return this.#send(printerId, async (a) => {
      const result = await a.ingest(request)
      this.#options.onIngested?.(result)
      return result
    })
  }

  assignHost(printerId: string, organizationId: string, hostId: string) {
    return this.#send(printerId, (a) => a.assignHost(organizationId, hostId))
  }

  setMaintenance(printerId: string, organizationId: string, on: boolean): Promise<void> {
    return this.#send(printerId, (a) => a.setMaintenance(organizationId, on))
  }

  assignFilaments(printerId: string, organizationId: string, slots: readonly FilamentAssignment[], jobId: number | null): Promise<PersistedPrinterState['ams']> {
    return this.#send(printerId, (a) => a.assignFilaments(organizationId, slots, jobId))
  }

  reportConnection(printerId: string, organizationId: string, connected: boolean, at: number, status: string | undefined, fence?: ConnectionFence): Promise<void> {
    return this.#send(printerId, (a) => a.reportConnection(organizationId, connected, at, status, fence))
  }

  acknowledgeError(printerId: string, organizationId: string) {
    return this.#send(printerId, (a) => a.acknowledgeError(organizationId))
  }

  view(printerId: string, organizationId: string): Promise<PrinterView> {
    return this.#send(printerId, (a) => a.view(organizationId))
  }

  /** The store changed under the actor (configuration written elsewhere): rebuild before its next message. */
  reload(printerId: string): Promise<void> {
    const entry = this.#entries.get(printerId)
    if (entry === undefined) return Promise.resolve()
    return entry.mailbox.post(async () => entry.actor.invalidate())
  }

  /** Passivates idle actors and marks silent printers offline; run on a timer, callable from tests. */
  async sweep(): Promise<void> {
    const now = this.#clock.now()
    for (const [id, entry] of this.#entries) {
      if (!entry.mailbox.idle) continue
      const idle = now - entry.actor.lastUsed >= this.#options.idleMs
      const over = this.#entries.size > this.#options.maxResident
      // Online printers stay while they report; past the bound, recency alone decides.
      if ((idle && !entry.actor.online) || over) this.#passivate(id, entry)
    }
    try {
      // Only actors online in memory keep their stored flag: a resident offline actor (rebuilt, or
      // hydrated by a non-event message) may have inherited a stale `online` from the store.
      const live = [...this.#entries].flatMap(([id, entry]) => (entry.actor.online ? [id] : []))
      const directory = this.#options.directory
      await this.#options.persistence.markSilentOffline(new Date(now - this.#options.presenceTimeoutMs), live, (id) => directory.ownsShard(shardOf(id)))
    } catch (error) {
      this.#options.onBackgroundError?.('presence sweep', error)
    }
  }

  #evictIdle(count: number): void {
    for (const [id, entry] of this.#entries) {
      if (count <= 0) return
      if (!entry.mailbox.idle) continue
      this.#passivate(id, entry)
      count--
    }
  }

  #passivate(id: string, entry: Entry): void {
    entry.actor.stop()
    this.#entries.delete(id)
  }

  async #send<T>(printerId: string, task: (actor: PrinterActor) => Promise<T>): Promise<T> {
    if (this.#stopping) throw new ServiceError('shutting_down', 'this node is shutting down; retry')
    if (!uuidPattern.test(printerId)) throw new ServiceError('printer_not_found', 'no such printer in this organization')
    const id = printerId.toLowerCase()
    const shard = shardOf(id)
    // Routing to the owner happens before the runtime (src/cluster); here a shard not owned is refused.
    if (!this.#options.directory.ownsShard(shard)) throw ownerUnavailable(new ShardUnavailable(shard, 'not_owned'))
    let entry = this.#entries.get(id)
    if (entry === undefined) {
      // The bound holds between sweeps too: the least recently used idle actors make room.
      if (this.#entries.size >= this.#options.maxResident) this.#evictIdle(this.#entries.size - this.#options.maxResident + 1)
      entry = this.#spawn(id, shard)
    } else {
      this.#entries.delete(id)
      this.#entries.set(id, entry)
    }
    const { actor, mailbox } = entry
    actor.lastUsed = this.#clock.now()
    return mailbox.post(async () => {
      try {
        return await task(actor)
      } catch (error) {
        if (!(error instanceof ShardUnavailable)) throw error
        // The lease ran out mid-message, or the store saw a newer owner's token: nothing was stored.
        if (error.reason === 'fenced') this.#options.directory.fenced(error.shard)
        this.dropShard(error.shard)
        throw ownerUnavailable(error)
      } finally {
        actor.lastUsed = this.#clock.now()
        // An id that names no printer is not kept (unless more messages wait): unknown ids cannot fill memory.
        if (actor.missing && mailbox.size === 1 && this.#entries.get(id) === entry) this.#passivate(id, entry)
      }
    })
  }

  #spawn(id: string, shard: number): Entry {
    const mailbox = new Mailbox()
    const actor: PrinterActor = new PrinterActor(id, {
      persistence: this.#options.persistence,
      logic: this.#logic,
      clock: this.#options.clock,
      fencingToken: () => this.#options.directory.tokenOf(shard),
      onOwnChange: () => {
        mailbox.post(() => actor.persistPresence()).catch((error: unknown) => this.#options.onBackgroundError?.('presence write', error))
      },
      onCommitted: (change) => this.#publish(change),
    })
    const entry = { actor, mailbox, shard }
    this.#entries.set(id, entry)
    return entry
  }

  #publish(change: PrinterChange): void {
    if (this.#listeners.size === 0) return
    // Off the request's path: the reply goes out first, subscribers run on the next turn.
    setImmediate(() => {
      for (const listener of this.#listeners) {
        try {
          listener(change)
        } catch (error) {
          this.#options.onBackgroundError?.('live-feed listener', error)
        }
      }
    })
  }
}

function ownerUnavailable(cause: ShardUnavailable): ServiceError {
  const message = cause.reason === 'fenced' ? "another node took the printer's shard; nothing was stored; retry" : "this node does not own the printer's shard now; retry"
  return new ServiceError('printer_owner_unavailable', message, { cause })
}
