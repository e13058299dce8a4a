/**
 * The change-event bus of the MCP endpoint's `subscriptions/listen` streams,
 * kept per organization. The SDK's listen router registers one listener per
 * open stream and filters by the URIs the stream asked for; it knows nothing
 * of organizations, and its default bus would hand a change of one farm's
 * printer to any stream naming that printer's URI. So a stream is
 * registered under the organization of the token that opened it (the route
 * opens the stream inside `listening(…)`, and the router registers
 * synchronously within that call), and a change reaches only the streams of
 * its own organization. The SDK's organization-less `publish` (its `notify`
 * helpers) delivers nothing.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server'

/** What an open stream follows, as the route checked it. */
export interface ListenScope {
  organizationId: string
  userId: string
  printers: ReadonlySet<string>
  jobs: ReadonlySet<number>
  queue: boolean
}

interface Stream {
  scope: ListenScope
  listener: (event: ServerEvent) => void
}

/** What an organization's open streams follow, counted, so a change asks in O(1) whether anyone cares. */
interface Followed {
  streams: Set<Stream>
  printers: Map<string, number>
  jobs: Map<number, number>
  queue: number
}

function count<K>(map: Map<K, number>, key: K, by: 1 | -1): void {
  const n = (map.get(key) ?? 0) + by
  if (n <= 0) map.delete(key)
  else map.set(key, n)
}

const nothing: ReadonlyMap<number, number> = new Map()

export class OrganizationBus implements ServerEventBus {
  readonly #opening = new AsyncLocalStorage<ListenScope>()
  readonly #followed = new Map<string, Followed>()
  /** Streams being checked or opened, per organization and per person: counted against the limits before the first await. */
  readonly #reserved = new Map<string, number>()
  readonly #registered = new WeakMap<ListenScope, () => void>()
  readonly #onError: (error: unknown) => void
  readonly #onClosed: (scope: ListenScope) => void

  /** `onClosed` is told of each stream that ended (what it followed may now be followed by nobody). */
  constructor(onError: (error: unknown) => void, onClosed: (scope: ListenScope) => void = () => undefined) {
    this.#onError = onError
    this.#onClosed = onClosed
  }

  /**
   * Runs `open` (the SDK handler serving a `subscriptions/listen`) so the stream it registers belongs
   * to `scope`; `registered` (the stream's reservation) is called the moment it is registered, so
   * the stream is never counted twice, as open and as being opened, by listens arriving meanwhile.
   */
  listening<T>(scope: ListenScope, open: () => T, registered?: () => void): T {
    if (registered !== undefined) this.#registered.set(scope, registered)
    return this.#opening.run(scope, open)
  }

  publish(_event: ServerEvent): void {
    // Every change belongs to an organization: see deliver().
  }

  subscribe(listener: (event: ServerEvent) => void): () => void {
    const scope = this.#opening.getStore()
    // A stream not opened through listening() is no organization's: it hears nothing.
    if (scope === undefined) return () => undefined
    const stream: Stream = { scope, listener }
    let followed = this.#followed.get(scope.organizationId)
    if (followed === undefined) this.#followed.set(scope.organizationId, (followed = { streams: new Set(), printers: new Map(), jobs: new Map(), queue: 0 }))
    followed.streams.add(stream)
    for (const id of scope.printers) count(followed.printers, id, 1)
    for (const id of scope.jobs) count(followed.jobs, id, 1)
    if (scope.queue) followed.queue++
    const registered = this.#registered.get(scope)
    if (registered !== undefined) {
      this.#registered.delete(scope)
      registered()
    }
    let open = true
    return () => {
      if (!open) return
      open = false
      const current = this.#followed.get(scope.organizationId)
      if (current === undefined || !current.streams.delete(stream)) return
      for (const id of scope.printers) count(current.printers, id, -1)
      for (const id of scope.jobs) count(current.jobs, id, -1)
      if (scope.queue) current.queue--
      if (current.streams.size === 0) this.#followed.delete(scope.organizationId)
      this.#onClosed(scope)
    }
  }

  /**
   * Takes a place for a stream about to be checked and opened, if the keys (organization, person)
   * are under their limits counting the streams open and those being opened; release it once the
   * stream is open or refused. Synchronous: requests arriving together cannot all pass one check.
   */
  reserve(keys: readonly { key: string; limit: number; open: number }[]): (() => void) | undefined {
    if (keys.some(({ key, limit, open }) => open + (this.#reserved.get(key) ?? 0) >= limit)) return undefined
    for (const { key } of keys) this.#reserved.set(key, (this.#reserved.get(key) ?? 0) + 1)
    let held = true
    return () => {
      if (!held) return
      held = false
      for (const { key } of keys) count(this.#reserved, key, -1)
    }
  }

  /** `notifications/resources/updated` for `uri` to the organization's streams (each router passes it on if its stream asked for the URI). */
  deliver(organizationId: string, uri: string): void {
    const followed = this.#followed.get(organizationId)
    if (followed === undefined) return
    for (const stream of [...followed.streams]) {
      try {
        stream.listener({ kind: 'resource_updated', uri })
      } catch (error) {
        this.#onError(error)
      }
    }
  }

  /** Streams open for the organization (a change of another is not even looked at). */
  streams(organizationId: string): number {
    return this.#followed.get(organizationId)?.streams.size ?? 0
  }

  /** Streams open for one person (of the organization). */
  streamsOf(organizationId: string, userId: string): number {
    let n = 0
    for (const stream of this.#followed.get(organizationId)?.streams ?? []) if (stream.scope.userId === userId) n++
    return n
  }

  /** Whether one of the organization's streams follows this printer. */
  followsPrinter(organizationId: string, printerId: string): boolean {
    return this.#followed.get(organizationId)?.printers.has(printerId) ?? false
  }

  /** The print jobs the organization's streams follow (ids as keys; read-only). */
  followedJobs(organizationId: string): ReadonlyMap<number, number> {
    return this.#followed.get(organizationId)?.jobs ?? nothing
  }

  /** Whether one of the organization's streams follows its queue. */
  followsQueue(organizationId: string): boolean {
    return (this.#followed.get(organizationId)?.queue ?? 0) > 0
  }
}
