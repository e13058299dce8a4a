/**
 * The display actors of this node and their delivery worker (docs/displays.md,
 * delivery). One actor per display, one message at a time (a
 * mailbox each); the activation machine decides, this runtime persists and
 * publishes.
 *
 * Delivery, per display:
 * - An assignment is written to the store before anything is published.
 * - At most one publication per display per second: an assignment inside
 *   the second waits for it, and whatever is desired when it fires is what
 *   goes out, so a burst of assignments coalesces to the newest.
 * - While a receipt is outstanding (sync_pending, no error) the same
 *   activation is published again every 45 s with fresh timestamps.
 * - A failed publication is retried after 1 s, 2 s, 4 s ... up to 60 s; the
 *   20th failure records publish_failed and stops until the retry route.
 * - A refresh request (the device's envelope expired) republishes the same
 *   activation with new timestamps.
 * - start() publishes every stored target again, from the store: the broker's
 *   retained copy is never trusted to survive a restart.
 * The network publication runs outside the mailbox, so a broker that hangs
 * never stalls receipts or assignments behind it.
 *
 * Several nodes: a display belongs to the shard of its id, and only the
 * shard's owner runs its actor. Other nodes ignore its device messages and
 * answer its API calls with 503 display_owner_unavailable (src/cluster
 * forwards them to the owner first); the owner publishes alone, checking its
 * lease before each publication, and every write carries the shard's fence.
 * Taking a shard resumes its displays' delivery from the store; losing one
 * drops their entries and timers.
 *
 * Memory: an entry per display that was touched (a snapshot, a payload of at
 * most 1,000 characters, a timer). Displays number in the thousands per
 * farm, so entries are not passivated.
 */
import { buildEnvelope, maxEnvelopeBytes, utf8Length, type DeviceTopic, type DisplayAddress, type DisplayCredential } from '../protocol/display-mqtt.js'
import { ServiceError } from '../protocol/errors.js'
import { displayActivationMachine, type ActivationEvent, type Receipt } from '../machines/display-activation.js'
import { pureTransition } from '../machines/transition.js'
import type { Clock } from './clock.js'
import { Mailbox } from './mailbox.js'
import { storedStatus, type AssignRequest, type DisplayPersistence, type StoredActivation } from './display-persistence.js'
import { LocalShardDirectory, ShardUnavailable, shardOf, type Fence, type ShardDirectory } from './shard-directory.js'

export const newActivationIntervalMs = 1_000
export const republishIntervalMs = 45_000
export const backoffCeilingMs = 60_000

/** Delay before publication attempt n+1 after n consecutive failures. */
export const backoffMs = (failures: number): number => Math.min(1_000 * 2 ** Math.max(0, failures - 1), backoffCeilingMs)

export interface ProfileTransport {
  /** Retained, QoS 1; resolves on the broker's acknowledgement, rejects on failure or timeout. */
  publishConfig(address: DisplayAddress, payload: string): Promise<void>
  /** Removes the retained configuration of a binding that ended. */
  clearConfig(address: DisplayAddress): Promise<void>
  /** Makes the broker accept a new credential (before the store commits it). */
  grantCredential(credential: DisplayCredential): Promise<void>
  /** The revoked credential no longer logs in; its clients are disconnected. */
  revokeCredential(credentialId: string): Promise<void>
}

export interface DisplayRuntimeOptions {
  persistence: DisplayPersistence
  /** Who owns which display (the local directory, owning all, by default). */
  directory?: ShardDirectory
  transport: ProfileTransport
  /** The node's clock (a simulated one in tests): the 1/s limit, the 45 s republish and the backoff run on it. */
  clock: Clock
  /** After every stored change of a target (live feed, metrics). */
  onChange?: (activation: StoredActivation) => void
  /** Each publication attempt's outcome (metrics). */
  onPublish?: (outcome: 'ok' | 'failed', reason: 'new' | 'republish') => void
  /** Background work failed (a store write after a receipt, a publication bookkeeping); never throws. */
  onBackgroundError?: (what: string, error: unknown) => void
}

type Snapshot = ReturnType<typeof displayActivationMachine.resolveState>

interface Entry {
  readonly displayId: string
  readonly shard: number
  readonly mailbox: Mailbox
  stored: StoredActivation
  snapshot: Snapshot
  timer: unknown
  timerAt: number
  /** When the last publication started (the 1/s limit). */
  lastPublishAt: number
  /** What the next publication is: an activation the device has not seen, or the same again. */
  due: 'new' | 'republish' | null
  inFlight: boolean
}

const hydrate = (stored: StoredActivation): Snapshot =>
  displayActivationMachine.resolveState({
    value: storedStatus(stored),
    context: {
      displayId: stored.displayId,
      bindingEpoch: stored.bindingEpoch,
      credentialId: stored.credentialId,
      desired: stored.desired,
      applied: stored.applied,
      errorCode: stored.errorCode,
      publishError: stored.publishError,
      publishAttempts: stored.publishAttempts,
      session: stored.session,
    },
  })

export class DisplayRuntime {
  readonly #options: DisplayRuntimeOptions
  readonly #clock: Clock
  readonly #entries = new Map<string, Entry>()
  /** Entries being loaded, so two first messages share one load. */
  readonly #loading = new Map<string, Promise<Entry | undefined>>()
  #stopping = false
  readonly #directory: ShardDirectory
  readonly #unsubscribe: (() => void)[] = []

  constructor(options: DisplayRuntimeOptions) {
    this.#options = options
    this.#clock = options.clock
    this.#directory = options.directory ?? new LocalShardDirectory()
  }

  /** Publishes every stored target of the owned shards again (the restart rebuild), and follows shard moves. */
  async start(): Promise<number> {
    this.#unsubscribe.push(
      this.#directory.onShardLost((shard) => this.#dropShard(shard)),
      this.#directory.onShardGained((shards) => {
        const taken = new Set(shards)
        void this.#resume((id) => taken.has(shardOf(id))).catch((error: unknown) => this.#background(`resuming shards ${shards.join(', ')}`, error))
      }),
    )
    return this.#resume((id) => this.#directory.ownsShard(shardOf(id)))
  }

  async #resume(filter: (displayId: string) => boolean): Promise<number> {
    const ids = (await this.#options.persistence.targets()).filter(filter)
    let scheduled = 0
    for (const id of ids) {
      const entry = await this.#entry(id)
      if (entry === undefined || entry.stored.publishError !== null) continue
      this.#due(entry, 'republish')
      scheduled++
    }
    return scheduled
  }

  async stop(): Promise<void> {
    this.#stopping = true
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe()
    for (const entry of this.#entries.values()) this.#cancel(entry)
    await Promise.all([...this.#entries.values()].map((e) => e.mailbox.drained()))
  }

  /** The state of a display's actor (tests and diagnostics). */
  peek(displayId: string): { status: string; stored: StoredActivation; due: Entry['due'] } | undefined {
    const entry = this.#entries.get(displayId)
    return entry && { status: String(entry.snapshot.value), stored: entry.stored, due: entry.due }
  }

  /** docs/displays.md: fenced, capability-checked, persisted, then published. */
  async assign(displayId: string, request: AssignRequest): Promise<StoredActivation> {
    const entry = await this.#known(displayId, request.organizationId)
    return this.#owned(entry, async () => {
      const stored = await this.#options.persistence.assign(displayId, request, this.#fence(entry))
      const sameBinding = stored.bindingEpoch === entry.stored.bindingEpoch && stored.credentialId === entry.stored.credentialId
      if (sameBinding && stored.desired !== null) {
        const [next] = pureTransition(displayActivationMachine, entry.snapshot, { type: 'ASSIGN', identity: stored.desired })
        entry.snapshot = next
      } else {
        entry.snapshot = hydrate(stored)
      }
      this.#adopt(entry, stored)
      this.#due(entry, 'new')
      return stored
    })
  }

  /** the contract: a rejected or errored target goes back to sync_pending and publishing resumes. */
  async retry(displayId: string, organizationId: string): Promise<StoredActivation> {
    const entry = await this.#known(displayId, organizationId)
    return this.#owned(entry, async () => {
      if (entry.stored.desired === null) throw new ServiceError('signal_profile_target_not_found', 'nothing is assigned to this display in its current binding')
      if (!entry.snapshot.can({ type: 'RETRY' })) throw new ServiceError('signal_profile_target_healthy', 'the target has no recorded error; delivery is going on or done')
      const [next] = pureTransition(displayActivationMachine, entry.snapshot, { type: 'RETRY' })
      const saved = await this.#save(entry, next)
      if (saved === undefined) throw new ServiceError('signal_profile_activation_conflict', 'the target changed while retrying; read it again')
      this.#due(entry, 'republish')
      return saved
    })
  }

  /** A receipt from the display's credential topic; ignored unless the receipt rules accept it. */
  async receipt(topic: DeviceTopic, receipt: Receipt & { organization_id: string; display_id: string; binding_epoch: number }): Promise<'accepted' | 'ignored'> {
    const consistent =
      receipt.organization_id === topic.organizationId && receipt.display_id === topic.displayId && receipt.binding_epoch === topic.bindingEpoch && receipt.credential_id === topic.credentialId
    if (!consistent || !this.#directory.ownsShard(shardOf(topic.displayId))) return 'ignored'
    const entry = await this.#entry(topic.displayId)
    if (entry === undefined) return 'ignored'
    return entry.mailbox.post(async () => {
      if (entry.stored.organizationId !== topic.organizationId || entry.stored.bindingEpoch !== topic.bindingEpoch) return 'ignored'
      const [next, actions] = pureTransition(displayActivationMachine, entry.snapshot, { type: 'RECEIPT', receipt })
      if (next.context.session === entry.snapshot.context.session) return 'ignored'
      const saved = await this.#save(entry, next)
      if (saved === undefined) return 'ignored'
      if (actions.some((a) => a.type === 'republish')) this.#due(entry, 'republish')
      else if (next.value !== 'sync_pending') this.#cancel(entry)
      else if (entry.timer === undefined && !entry.inFlight && next.context.publishError === null) {
        // Back to waiting (e.g. a rebooted device announced an empty slot): the 45 s republish resumes.
        entry.due = 'republish'
        this.#arm(entry, this.#clock.now() + republishIntervalMs)
      }
      return 'accepted'
    })
  }

  /** docs/displays.md: new epoch, new credential, old one revoked, old retained configuration removed. */
  async rebind(displayId: string, organizationId: string): Promise<{ current: StoredActivation; username: string; password: string }> {
    const entry = await this.#known(displayId, organizationId)
    return this.#owned(entry, async () => {
      const { previous, current, username, password } = await this.#options.persistence.rebind(
        displayId,
        organizationId,
        (credential) => this.#options.transport.grantCredential(credential),
        this.#fence(entry),
      )
      this.#cancel(entry)
      const [next] = pureTransition(displayActivationMachine, entry.snapshot, { type: 'REBIND', bindingEpoch: current.bindingEpoch, credentialId: current.credentialId })
      entry.snapshot = next
      this.#adopt(entry, current)
      const transport = this.#options.transport
      await transport.revokeCredential(previous.credentialId).catch((error: unknown) => this.#background('credential revocation', error))
      await transport.clearConfig(previous).catch((error: unknown) => this.#background('clearing the old retained configuration', error))
      return { current, username, password }
    })
  }

  /** The device lost its state and asked again: the current activation goes out again (within the 1/s limit). */
  async resync(displayId: string, bindingEpoch: number): Promise<void> {
    if (!this.#directory.ownsShard(shardOf(displayId))) return
    const entry = await this.#entry(displayId)
    if (entry === undefined) return
    await entry.mailbox.post(async () => {
      const c = entry.snapshot.context
      if (c.bindingEpoch === bindingEpoch && c.desired !== null && c.publishError === null) this.#due(entry, 'republish')
    })
  }

  /** Forgets a display's actor (the display was deleted). */
  async forget(displayId: string): Promise<void> {
    const entry = this.#entries.get(displayId)
    if (entry === undefined) return
    await entry.mailbox.post(async () => {
      this.#cancel(entry)
      this.#entries.delete(displayId)
    })
  }

  /** A display of this organization, else 404 display_not_found (another organization's display is unknown here too). */
  async #known(displayId: string, organizationId: string): Promise<Entry> {
    if (this.#stopping) throw new ServiceError('shutting_down', 'this node is shutting down; retry')
    if (!this.#directory.ownsShard(shardOf(displayId))) throw ownerUnavailable(new ShardUnavailable(shardOf(displayId), 'not_owned'))
    const entry = await this.#entry(displayId)
    if (entry === undefined || entry.stored.organizationId !== organizationId) throw new ServiceError('display_not_found', 'no display with that id in this organization')
    return entry
  }

  /** Whether this node runs the display's actor now (src/cluster routes API calls by it). */
  owns(displayId: string): boolean {
    return this.#directory.ownsShard(shardOf(displayId))
  }

  /** Runs an API message in the display's mailbox; a shard lost or fenced meanwhile is a 503, with nothing stored. */
  #owned<T>(entry: Entry, task: () => Promise<T>): Promise<T> {
    return entry.mailbox.post(async () => {
      try {
        return await task()
      } catch (error) {
        if (!(error instanceof ShardUnavailable)) throw error
        this.#unavailable(error)
        throw ownerUnavailable(error)
      }
    })
  }

  /** The fence of the entry's shard now; throws ShardUnavailable when this node no longer owns it. */
  #fence(entry: Entry): Fence {
    return { shard: entry.shard, token: this.#directory.tokenOf(entry.shard) }
  }

  #unavailable(error: ShardUnavailable): void {
    if (error.reason === 'fenced') this.#directory.fenced(error.shard)
    this.#dropShard(error.shard)
  }

  /** Forgets the displays of a shard another node now runs: timers off, entries gone. */
  #dropShard(shard: number): void {
    for (const [id, entry] of this.#entries) {
      if (entry.shard !== shard) continue
      this.#cancel(entry)
      this.#entries.delete(id)
    }
  }

  async #entry(displayId: string): Promise<Entry | undefined> {
    const resident = this.#entries.get(displayId)
    if (resident !== undefined) return resident
    let loading = this.#loading.get(displayId)
    if (loading === undefined) {
      loading = this.#options.persistence.load(displayId).then((stored) => {
        if (stored === undefined) return undefined
        const entry: Entry = { displayId, shard: shardOf(displayId), mailbox: new Mailbox(), stored, snapshot: hydrate(stored), timer: undefined, timerAt: 0, lastPublishAt: -Infinity, due: null, inFlight: false }
        this.#entries.set(displayId, entry)
        return entry
      })
      this.#loading.set(displayId, loading)
      void loading.finally(() => this.#loading.delete(displayId)).catch(() => undefined)
    }
    return loading
  }

  /** Write first, then adopt: memory never runs ahead of the store. */
  async #save(entry: Entry, next: Snapshot): Promise<StoredActivation | undefined> {
    const c = next.context
    const progress = { applied: c.applied, errorCode: c.errorCode, publishError: c.publishError, publishAttempts: c.publishAttempts, session: c.session }
    const updatedAt = await this.#options.persistence.saveProgress(entry.displayId, entry.stored.bindingEpoch, entry.stored.generation, progress, this.#fence(entry))
    if (updatedAt === undefined) {
      // Another writer moved the binding or generation on: start again from what is stored.
      const stored = await this.#options.persistence.load(entry.displayId)
      if (stored !== undefined) {
        entry.snapshot = hydrate(stored)
        this.#adopt(entry, stored)
      }
      return undefined
    }
    // Only the progress fields changed: what else is stored (binding, payload) is what the entry holds.
    const saved = { ...entry.stored, ...progress, updatedAt }
    entry.snapshot = next
    this.#adopt(entry, saved)
    return saved
  }

  #adopt(entry: Entry, stored: StoredActivation): void {
    entry.stored = stored
    this.#options.onChange?.(stored)
  }

  /** Marks a publication due and sets the timer for the earliest moment the 1/s limit allows. */
  #due(entry: Entry, kind: 'new' | 'republish'): void {
    if (this.#stopping) return
    entry.due = entry.due === 'new' ? 'new' : kind
    this.#arm(entry, Math.max(this.#clock.now(), entry.lastPublishAt + newActivationIntervalMs))
  }

  #arm(entry: Entry, at: number): void {
    if (this.#stopping) return
    if (entry.timer !== undefined) {
      if (entry.timerAt <= at) return
      this.#clock.clearTimeout(entry.timer)
    }
    entry.timerAt = at
    entry.timer = this.#clock.setTimeout(() => {
      entry.timer = undefined
      void entry.mailbox.post(() => this.#publish(entry)).catch((error: unknown) => this.#background('publication', error))
    }, Math.max(0, at - this.#clock.now()))
  }

  #cancel(entry: Entry): void {
    if (entry.timer !== undefined) this.#clock.clearTimeout(entry.timer)
    entry.timer = undefined
    entry.due = null
  }

  /** Runs in the mailbox: stamps the envelope, then publishes outside it. */
  async #publish(entry: Entry): Promise<void> {
    const kind = entry.due
    const { desired, publishError, bindingEpoch } = entry.snapshot.context
    const stored = entry.stored
    if (kind === null || this.#stopping || entry.inFlight) return
    // The lease is checked before every publication: a node that lost the shard never publishes beside its new owner.
    if (!this.#directory.ownsShard(entry.shard)) {
      entry.due = null
      return this.#dropShard(entry.shard)
    }
    if (desired === null || publishError !== null || stored.payload === null) {
      entry.due = null
      return
    }
    const now = this.#clock.now()
    if (now < entry.lastPublishAt + newActivationIntervalMs) return this.#arm(entry, entry.lastPublishAt + newActivationIntervalMs)
    entry.due = null
    entry.lastPublishAt = now
    entry.inFlight = true
    const address = { organizationId: stored.organizationId, displayId: entry.displayId, bindingEpoch }
    const text = JSON.stringify(buildEnvelope(address, desired, stored.payload, now))
    if (utf8Length(text) > maxEnvelopeBytes) throw new Error(`envelope of ${utf8Length(text)} bytes exceeds ${maxEnvelopeBytes}`)
    const generation = desired.activation_generation
    this.#options.transport.publishConfig(address, text).then(
      () => this.#settle(entry, generation, bindingEpoch, { type: 'PUBLISHED' }, kind),
      (error: unknown) => this.#settle(entry, generation, bindingEpoch, { type: 'PUBLISH_FAILED', error: String((error as Error)?.message ?? error).slice(0, 200) }, kind),
    )
  }

  #settle(entry: Entry, generation: number, bindingEpoch: number, event: ActivationEvent, kind: 'new' | 'republish'): void {
    this.#options.onPublish?.(event.type === 'PUBLISHED' ? 'ok' : 'failed', kind)
    void entry.mailbox
      .post(async () => {
        entry.inFlight = false
        const context = entry.snapshot.context
        // An outcome for an activation that was replaced meanwhile says nothing about the new one.
        if (context.bindingEpoch !== bindingEpoch || context.desired?.activation_generation !== generation) return
        const [next] = pureTransition(displayActivationMachine, entry.snapshot, event)
        if (event.type === 'PUBLISHED') {
          // A success after failures resets the stored count; otherwise nothing durable changed.
          if (next.context.publishAttempts !== context.publishAttempts) {
            if ((await this.#save(entry, next)) === undefined) return
          } else entry.snapshot = next
          // While the device has not answered, the same activation goes out again in 45 s.
          if (entry.due === null && next.value === 'sync_pending') {
            entry.due = 'republish'
            this.#arm(entry, this.#clock.now() + republishIntervalMs)
          }
          return
        }
        // A failure is written each time, so the count (and the stop at 20) survives a restart.
        if ((await this.#save(entry, next)) === undefined) return
        if (next.context.publishError !== null) {
          this.#cancel(entry)
          return
        }
        entry.due = entry.due === 'new' ? 'new' : kind
        this.#arm(entry, this.#clock.now() + backoffMs(next.context.publishAttempts))
      })
      .catch((error: unknown) => {
        if (error instanceof ShardUnavailable) this.#unavailable(error)
        else this.#background('publication outcome', error)
      })
      .finally(() => {
        // A publication due while this one was in flight goes out now.
        if (entry.due !== null && entry.timer === undefined) this.#arm(entry, Math.max(this.#clock.now(), entry.lastPublishAt + newActivationIntervalMs))
      })
  }

  #background(what: string, error: unknown): void {
    this.#options.onBackgroundError?.(what, error)
  }
}

function ownerUnavailable(cause: ShardUnavailable): ServiceError {
  const message = cause.reason === 'fenced' ? "another node took the display's shard; nothing was stored; retry" : "this node does not own the display's shard now; retry"
  return new ServiceError('display_owner_unavailable', message, { cause })
}
