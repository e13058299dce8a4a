/**
 * The printer API of a node (what routes call): each call goes to the
 * printer's actor on the owner of its shard (DESIGN section 6). Here when
 * this node owns the shard; forwarded through the Forwarder when another
 * node does; 503 printer_owner_unavailable (with Retry-After) while no node
 * holds the shard (a lease expiring after a crash, a handoff) or the owner
 * does not answer in time. Nothing is silently dropped: a bridge either gets
 * the owner's answer or a 503 it retries, and the owner deduplicates the
 * retry if the first attempt was stored after all.
 */
import type { FilamentAssignment } from '../../machines/printer.js'
import type { IngestRequest, IngestResult, PrinterChange, PrinterView } from '../../actors/printer-actor.js'
import type { PersistedPrinterState } from '../../actors/printer-persistence.js'
import type { PrinterRuntime } from '../../actors/printer-runtime.js'
import { shardOf, type ShardDirectory } from '../../actors/shard-directory.js'
import { ServiceError } from '../../protocol/errors.js'
import type { Forwarder } from './forwarder.js'
import { local, OwnerUnavailable, routeToOwner } from './route-to-owner.js'

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

type Args = Record<string, unknown>

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
    forwarder.handle('printer.ingest', async (a) => wireResult(await r.ingest(a['printerId'] as string, a['request'] as IngestRequest)))
    forwarder.handle('printer.assignHost', (a) => r.assignHost(a['printerId'] as string, a['organizationId'] as string, a['hostId'] as string))
    forwarder.handle('printer.setMaintenance', (a) => r.setMaintenance(a['printerId'] as string, a['organizationId'] as string, a['on'] as boolean))
    forwarder.handle('printer.assignFilaments', (a) =>
      r.assignFilaments(a['printerId'] as string, a['organizationId'] as string, a['slots'] as FilamentAssignment[], (a['jobId'] as number | null | undefined) ?? null),
    )
    forwarder.handle('printer.reportConnection', (a) =>
      r.reportConnection(a['printerId'] as string, a['organizationId'] as string, a['connected'] as boolean, a['at'] as number, (a['status'] as string | null | undefined) ?? undefined),
    )
    forwarder.handle('printer.view', (a) => r.view(a['printerId'] as string, a['organizationId'] as string))
    forwarder.handle('printer.reload', (a) => r.reload(a['printerId'] as string))
  }

  async ingest(printerId: string, request: IngestRequest): Promise<IngestResult> {
    const remote = await this.#route(printerId, 'printer.ingest', { printerId, request })
    if (remote === local) return this.runtime.ingest(printerId, request)
    return fromWireResult(remote as WireResult)
  }

  async assignHost(printerId: string, organizationId: string, hostId: string): Promise<{ printerId: string; hostId: string; assignmentEpoch: number }> {
    const remote = await this.#route(printerId, 'printer.assignHost', { printerId, organizationId, hostId })
    return remote === local ? this.runtime.assignHost(printerId, organizationId, hostId) : (remote as { printerId: string; hostId: string; assignmentEpoch: number })
  }

  async setMaintenance(printerId: string, organizationId: string, on: boolean): Promise<void> {
    const remote = await this.#route(printerId, 'printer.setMaintenance', { printerId, organizationId, on })
    if (remote === local) await this.runtime.setMaintenance(printerId, organizationId, on)
  }

  async assignFilaments(printerId: string, organizationId: string, slots: readonly FilamentAssignment[], jobId: number | null): Promise<PersistedPrinterState['ams']> {
    const remote = await this.#route(printerId, 'printer.assignFilaments', { printerId, organizationId, slots, jobId })
    return remote === local ? this.runtime.assignFilaments(printerId, organizationId, slots, jobId) : (remote as PersistedPrinterState['ams'])
  }

  async reportConnection(printerId: string, organizationId: string, connected: boolean, at: number, status: string | undefined): Promise<void> {
    const remote = await this.#route(printerId, 'printer.reportConnection', { printerId, organizationId, connected, at, status })
    if (remote === local) await this.runtime.reportConnection(printerId, organizationId, connected, at, status)
  }

  async view(printerId: string, organizationId: string): Promise<PrinterView> {
    const remote = await this.#route(printerId, 'printer.view', { printerId, organizationId })
    return remote === local ? this.runtime.view(printerId, organizationId) : (remote as PrinterView)
  }

  /** The store changed under the printer's actor: whichever node runs it rebuilds it. Best effort (a node that lost the shard has no actor left). */
  async reload(printerId: string): Promise<void> {
    const remote = await this.#route(printerId, 'printer.reload', { printerId }).catch(() => undefined)
    if (remote === local) await this.runtime.reload(printerId)
  }

  sweep(): Promise<void> {
    return this.runtime.sweep()
  }

  onChange(listener: (change: PrinterChange) => void): () => void {
    return this.runtime.onChange(listener)
  }

  /** `local` when this node runs the printer's actor (or the id names no printer: the runtime says so); else the owner's answer. */
  async #route(printerId: string, op: string, args: Args): Promise<unknown> {
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


type WireResult = Omit<IngestResult, 'jobOf'> & { jobOf: [string, number | null][] }

function wireResult(result: IngestResult): WireResult {
  return { ...result, jobOf: [...result.jobOf] }
}

function fromWireResult(wire: WireResult): IngestResult {
  return { ...wire, jobOf: new Map(wire.jobOf) }
}
