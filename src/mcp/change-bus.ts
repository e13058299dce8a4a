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
  printers: ReadonlySet<string>
  jobs: ReadonlySet<number>
  queue: boolean
}

interface Stream {
  scope: ListenScope
  listener: (event: ServerEvent) => void
}

export class OrganizationBus implements ServerEventBus {
  readonly #opening = new AsyncLocalStorage<ListenScope>()
  readonly #streams = new Map<string, Set<Stream>>()
  readonly #onError: (error: unknown) => void

  constructor(onError: (error: unknown) => void) {
    this.#onError = onError
  }

  /** Runs `open` (the SDK handler serving a `subscriptions/listen`) so the stream it registers belongs to `scope`. */
  listening<T>(scope: ListenScope, open: () => T): T {
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
    let streams = this.#streams.get(scope.organizationId)
    if (streams === undefined) this.#streams.set(scope.organizationId, (streams = new Set()))
    streams.add(stream)
    return () => {
      const current = this.#streams.get(scope.organizationId)
      if (current?.delete(stream) === true && current.size === 0) this.#streams.delete(scope.organizationId)
    }
  }

  /** `notifications/resources/updated` for `uri` to the organization's streams (each router passes it on if its stream asked for the URI). */
  deliver(organizationId: string, uri: string): void {
    const streams = this.#streams.get(organizationId)
    if (streams === undefined) return
    for (const stream of [...streams]) {
      try {
        stream.listener({ kind: 'resource_updated', uri })
      } catch (error) {
        this.#onError(error)
      }
    }
  }

  /** Streams open for the organization (a change of another is not even looked at). */
  streams(organizationId: string): number {
    return this.#streams.get(organizationId)?.size ?? 0
  }

  /** Whether one of the organization's streams follows this printer. */
  followsPrinter(organizationId: string, printerId: string): boolean {
    for (const stream of this.#streams.get(organizationId) ?? []) if (stream.scope.printers.has(printerId)) return true
    return false
  }

  /** The print jobs the organization's streams follow. */
  followedJobs(organizationId: string): Set<number> {
    const jobs = new Set<number>()
    for (const stream of this.#streams.get(organizationId) ?? []) for (const id of stream.scope.jobs) jobs.add(id)
    return jobs
  }

  /** Whether one of the organization's streams follows its queue. */
  followsQueue(organizationId: string): boolean {
    for (const stream of this.#streams.get(organizationId) ?? []) if (stream.scope.queue) return true
    return false
  }
}
