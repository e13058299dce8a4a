/**
 * The bridge's sequence numbers, one count per printer and assignment epoch (docs/printers-and-
 * events.md, "seqn and idempotency"): they only grow, across restarts and crashes too, and never
 * start at or below what the service has applied. A seqn the service saw twice with two events
 * would be refused as reused, so a number once handed out is never handed out again.
 *
 * Writing the state file for every event would cost a flush per report. Instead the store reserves
 * a block of numbers (written and flushed before the first of them is used) and hands them out
 * from memory; after a crash it starts past the whole reserved block. The numbers skipped that way
 * are a gap, which the service allows.
 */
import { Type } from '@sinclair/typebox'
import { compileBodyValidator } from '../../protocol/schemas/validator.js'
import type { BridgeStateDir } from './state-dir.js'

const fileName = 'seqns.json'

const Reserved = Type.Record(Type.String(), Type.Object({ epoch: Type.Integer({ minimum: 1 }), reserved: Type.Integer({ minimum: 0 }) }))
const readReserved = compileBodyValidator(Reserved)

interface Count {
  epoch: number
  /** The last number handed out. */
  last: number
  /** The highest number written to the state file: everything up to it may have been used. */
  reserved: number
}

export class SeqnStore {
  readonly #state: BridgeStateDir
  readonly #blockSize: number
  readonly #counts = new Map<string, Count>()
  /** What the state file said at the start, per printer. */
  readonly #kept: Map<string, { epoch: number; reserved: number }>

  /** `blockSize`: numbers reserved per flush of the state file. */
  constructor(state: BridgeStateDir, blockSize = 1_000) {
    this.#state = state
    this.#blockSize = blockSize
    this.#kept = this.#load()
  }

  /**
   * Starts (or continues) a printer's count in `epoch`: its next number is past what this bridge
   * may have used in that epoch and past `serviceLast`, the service's `last_seqn` (null before
   * any). A new epoch starts a new count.
   */
  open(printerId: string, epoch: number, serviceLast: number | null): void {
    const current = this.#counts.get(printerId)
    const kept = this.#kept.get(printerId)
    const usedHere = current?.epoch === epoch ? current.reserved : kept?.epoch === epoch ? kept.reserved : 0
    const last = Math.max(usedHere, serviceLast ?? 0)
    this.#counts.set(printerId, { epoch, last, reserved: last })
  }

  /** The printer's next seqn; flushes a new block to the state file first when the reserved one is used up. */
  next(printerId: string): number {
    const count = this.#counts.get(printerId)
    if (count === undefined) throw new Error(`no seqn count is open for printer ${printerId}`)
    if (count.last >= count.reserved) {
      count.reserved = count.last + this.#blockSize
      this.#save()
    }
    count.last += 1
    return count.last
  }

  #save(): void {
    const reserved: Record<string, { epoch: number; reserved: number }> = Object.fromEntries(this.#kept)
    for (const [printerId, count] of this.#counts) reserved[printerId] = { epoch: count.epoch, reserved: count.reserved }
    this.#state.write(fileName, `${JSON.stringify(reserved)}\n`)
  }

  #load(): Map<string, { epoch: number; reserved: number }> {
    const text = this.#state.read(fileName)
    if (text === undefined) return new Map()
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      throw new Error(`${this.#state.path}/${fileName} is not JSON; remove it, and each printer's count starts after the service's last_seqn`)
    }
    const read = readReserved(parsed)
    if (!read.ok) throw new Error(`${this.#state.path}/${fileName} is not a seqn reservation (${read.reason}); remove it, and each printer's count starts after the service's last_seqn`)
    return new Map(Object.entries(read.value))
  }
}
