/**
 * The printer API of a node (what routes call): each call goes to the
 * printer's actor on the owner of its shard (docs/operations.md). Here when
 * this node owns the shard; forwarded through the Forwarder when another
 * node does; 503 printer_owner_unavailable (with Retry-After) while no node
 * holds the shard (a lease expiring after a crash, a handoff) or the owner
 * does not answer in time. Nothing is silently dropped: a bridge either gets
 * the owner's answer or a 503 it retries, and the owner deduplicates the
 * retry if the first attempt was stored after all.
 *
 * The calls and their answers are typed by protocol/node-calls.ts: what the
 * runtime returns must fit the result schema (the handlers below), and what
 * the schema lets through must fit what the routes expect (the methods).
 */
import type { FilamentAssignment, PrinterError } from '../../machines/printer.js'
import type { ConnectionFence, IngestRequest, IngestResult, PrinterChange, PrinterView } from '../../actors/printer-actor.js'
import type { PersistedPrinterState } from '../../actors/printer-persistence.js'
import type { PrinterRuntime } from '../../actors/printer-runtime.js'
import { shardOf, type ShardDirectory } from '../../actors/shard-directory.js'
import { ServiceError } from '../../protocol/errors.js'
import type { NodeCallArgs, NodeCallResult, PrinterOp } from '../../protocol/node-calls.js'
import type { Forwarder } from './forwarder.js'
import { local, OwnerUnavailable, routeToOwner } from './route-to-owner.js'

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export class RoutedPrinters {
  readonly runtime: PrinterRuntime
  readonly #directory: ShardDirectory
  readonly #forwarder: Forwarder | undefined

  constructor(runtime: PrinterRuntime, directory: ShardDirectory, forwarder?: Forwarder) {
    this.runtime = runtime
    this.#directory = directory
    this.#forwarder = forwarder
    if (forwarder === undefined) return
    const r = runtime
    forwarder.handle('printer.ingest', async (a) => wireResult(await r.ingest(a.printerId, a.request)))
    forwarder.handle('printer.assignHost', (a) => r.assignHost(a.printerId, a.organizationId, a.hostId))
    forwarder.handle('printer.setMaintenance', async (a) => {
      await r.setMaintenance(a.printerId, a.organizationId, a.on)
      return null
    })
    forwarder.handle('printer.assignFilaments', (a) => r.assignFilaments(a.printerId, a.organizationId, a.slots, a.jobId))
    forwarder.handle('printer.reportConnection', async (a) => {
      await r.reportConnection(a.printerId, a.organizationId, a.connected, a.at, a.status, a.fence)
      return null
    })
    forwarder.handle('printer.view', (a) => r.view(a.printerId, a.organizationId))
    forwarder.handle('printer.acknowledgeError', (a) => r.acknowledgeError(a.printerId, a.organizationId))
    forwarder.handle('printer.reload', async (a) => {
      await r.reload(a.printerId)
      return null
    })
  }

  async ingest(printerId: string, request: IngestRequest): Promise<IngestResult> {
    const remote = await this.#route(printerId, 'printer.ingest', () => ({ printerId, request: wireRequest(request) }))
    return remote === local ? this.runtime.ingest(printerId, request) : fromWireResult(remote)
  }

  async assignHost(printerId: string, organizationId: string, hostId: string): Promise<{ printerId: string; hostId: string; assignmentEpoch: number }> {
    const remote = await this.#route(printerId, 'printer.assignHost', () => ({ printerId, organizationId, hostId }))
    return remote === local ? this.runtime.assignHost(printerId, organizationId, hostId) : remote
  }

  async setMaintenance(printerId: string, organizationId: string, on: boolean): Promise<void> {
    const remote = await this.#route(printerId, 'printer.setMaintenance', () => ({ printerId, organizationId, on }))
    if (remote === local) await this.runtime.setMaintenance(printerId, organizationId, on)
  }

  async assignFilaments(printerId: string, organizationId: string, slots: readonly FilamentAssignment[], jobId: number | null): Promise<PersistedPrinterState['ams']> {
    const remote = await this.#route(printerId, 'printer.assignFilaments', () => ({ printerId, organizationId, slots: [...slots], jobId }))
    return remote === local ? this.runtime.assignFilaments(printerId, organizationId, slots, jobId) : remote
  }

  async reportConnection(printerId: string, organizationId: string, connected: boolean, at: number, status: string | undefined, fence: ConnectionFence | undefined): Promise<void> {
    const remote = await this.#route(printerId, 'printer.reportConnection', () => ({ printerId, organizationId, connected, at, status, fence }))
    if (remote === local) await this.runtime.reportConnection(printerId, organizationId, connected, at, status, fence)
  }

  async view(printerId: string, organizationId: string): Promise<PrinterView> {
    const remote = await this.#route(printerId, 'printer.view', () => ({ printerId, organizationId }))
    return remote === local ? this.runtime.view(printerId, organizationId) : remote
  }

  async acknowledgeError(printerId: string, organizationId: string): Promise<{ acknowledged: PrinterError | null; view: PrinterView }> {
    const remote = await this.#route(printerId, 'printer.acknowledgeError', () => ({ printerId, organizationId }))
    return remote === local ? this.runtime.acknowledgeError(printerId, organizationId) : remote
  }

  /** The store changed under the printer's actor: whichever node runs it rebuilds it. Best effort (a node that lost the shard has no actor left). */
  async reload(printerId: string): Promise<void> {
    const remote = await this.#route(printerId, 'printer.reload', () => ({ printerId })).catch(() => undefined)
    if (remote === local) await this.runtime.reload(printerId)
  }

  sweep(): Promise<void> {
    return this.runtime.sweep()
  }

  onChange(listener: (change: PrinterChange) => void): () => void {
    return this.runtime.onChange(listener)
  }

  /** `local` when this node runs the printer's actor (or the id names no printer: the runtime says so); else the owner's answer. */
  async #route<Op extends PrinterOp>(printerId: string, op: Op, args: () => NodeCallArgs<Op>): Promise<NodeCallResult<Op> | typeof local> {
    if (this.#forwarder === undefined || !uuidPattern.test(printerId)) return local
    try {
      return await routeToOwner(this.#directory, this.#forwarder, shardOf(printerId.toLowerCase()), op, args)
    } catch (error) {
      if (!(error instanceof OwnerUnavailable)) throw error
      const message = error.noOwner ? "no node holds the printer's shard right now (it is moving after a node left); retry" : `${error.message}; retry`
      throw new ServiceError('printer_owner_unavailable', message, { cause: error })
    }
  }
}

/**
 * Exactly the fields of the call's schema: a batch route hands over its items as they came (with
 * their hostId, assignmentEpoch and persistedId), which the owner would refuse as unknown fields.
 */
function wireRequest(request: IngestRequest): NodeCallArgs<'printer.ingest'>['request'] {
  return {
    organizationId: request.organizationId,
    hostId: request.hostId,
    assignmentEpoch: request.assignmentEpoch,
    events: request.events.map((e) => ({
      eventId: e.eventId,
      idempotencyKey: e.idempotencyKey,
      type: e.type,
      seqn: e.seqn,
      timestamp: e.timestamp,
      deliveryAttempt: e.deliveryAttempt,
      data: e.data,
    })),
  }
}

function wireResult(result: IngestResult): NodeCallResult<'printer.ingest'> {
  return { ...result, jobOf: [...result.jobOf] }
}

function fromWireResult(wire: NodeCallResult<'printer.ingest'>): IngestResult {
  return { ...wire, jobOf: new Map(wire.jobOf) }
}
