/**
 * The queue actors of this node: one per organization whose queue this node
 * owns (the shard of `queue:<organizationId>`, the same directory as the
 * printers), alive while the organization has waiting jobs. The machine
 * (machines/queue.ts) decides when a pass runs; the pass itself is the
 * service's (src/queue), handed the shard's fence so that its writes are
 * refused once another node has taken the queue: two nodes never dispatch
 * for one organization at once.
 */
import { createActor, fromPromise, type Actor } from 'xstate'
import { queueMachine, type PassOutcome } from '../machines/queue.js'
import type { Clock } from './clock.js'
import { ShardUnavailable, shardOf, type Fence, type ShardDirectory } from './shard-directory.js'

export interface QueueRuntimeOptions {
  directory: ShardDirectory
  clock: Clock
  /** One pass of an organization's queue; its writes carry the fence. */
  pass: (organizationId: string, fence: Fence) => Promise<PassOutcome>
  /** Quiet time after a wake before the pass (coalesces bursts), ms. */
  settleMs: number
  /** A pass without a wake at least this often while jobs wait, ms. */
  sweepMs: number
  /** A pass failed (it is retried); never throws. */
  onError?: (organizationId: string, error: unknown) => void
}

type QueueActor = Actor<typeof queueMachine>

export const queueKey = (organizationId: string): string => `queue:${organizationId}`

export class QueueRuntime {
  readonly #options: QueueRuntimeOptions
  readonly #actors = new Map<string, { actor: QueueActor; shard: number }>()
  readonly #unsubscribe: () => void
  #stopped = false

  constructor(options: QueueRuntimeOptions) {
    this.#options = options
    this.#unsubscribe = options.directory.onShardLost((shard) => {
      for (const [organizationId, entry] of this.#actors) if (entry.shard === shard) this.#drop(organizationId)
    })
  }

  /** Whether this node runs the organization's queue now. */
  owns(organizationId: string): boolean {
    return this.#options.directory.ownsShard(shardOf(queueKey(organizationId)))
  }

  /** Wakes the organization's queue if this node owns it; false when another node does. */
  wake(organizationId: string): boolean {
    if (this.#stopped || !this.owns(organizationId)) return false
    const running = this.#actors.get(organizationId)
    if (running !== undefined) {
      running.actor.send({ type: 'WAKE' })
      return true
    }
    this.#start(organizationId)
    return true
  }

  /** The organizations whose queue actors run here. */
  running(): string[] {
    return [...this.#actors.keys()]
  }

  stop(): void {
    this.#stopped = true
    this.#unsubscribe()
    for (const organizationId of [...this.#actors.keys()]) this.#drop(organizationId)
  }

  #start(organizationId: string): void {
    const shard = shardOf(queueKey(organizationId))
    const { directory, clock } = this.#options
    // The entry is made before the actor so that the pass can tell whether it still belongs to the actor this node runs.
    const entry = { actor: undefined as unknown as QueueActor, shard }
    const current = () => this.#actors.get(organizationId) === entry
    const logic = queueMachine.provide({
      delays: { settle: this.#options.settleMs, sweep: this.#options.sweepMs },
      actors: {
        pass: fromPromise<PassOutcome>(async () => {
          try {
            // Throws ShardUnavailable once the shard is not ours: nothing is written.
            const fence: Fence = { shard, token: directory.tokenOf(shard) }
            return await this.#options.pass(organizationId, fence)
          } catch (error) {
            if (error instanceof ShardUnavailable) {
              // A late answer of an actor already dropped changes nothing (the node may hold the shard again, rightly).
              if (!current()) return { empty: true, wakeInMs: null }
              if (error.reason === 'fenced') directory.fenced(shard)
              // Another node runs this queue now: end here without a retry.
              clock.setTimeout(() => this.#dropEntry(organizationId, entry), 0)
              return { empty: true, wakeInMs: null }
            }
            if (current()) this.#options.onError?.(organizationId, error)
            throw error
          }
        }),
      },
    })
    entry.actor = createActor(logic, { clock })
    this.#actors.set(organizationId, entry)
    entry.actor.subscribe({
      complete: () => {
        if (current()) this.#actors.delete(organizationId)
      },
    })
    entry.actor.start()
  }

  #dropEntry(organizationId: string, entry: { actor: QueueActor; shard: number }): void {
    if (this.#actors.get(organizationId) !== entry) return
    this.#drop(organizationId)
  }

  #drop(organizationId: string): void {
    const entry = this.#actors.get(organizationId)
    if (entry === undefined) return
    this.#actors.delete(organizationId)
    entry.actor.stop()
  }
}
