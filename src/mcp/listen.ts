/**
 * A `subscriptions/listen` request (2026-07-28) checked before the SDK opens
 * its stream: every resource URI it names must be one of this server's, of
 * the token's organization, and readable with the token's scopes. The SDK's
 * listen router checks none of that (it takes any URI), so without this a
 * stream could follow another farm's printer by its id. Refusals are the
 * JSON-RPC errors the SDK gives a bad listen (in-band, before the stream
 * opens), with our error code in `data.error`; a missing scope is the
 * step-up challenge the tools give (403 insufficient_scope).
 */
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { Principal } from '../http/route.js'
import type { ListenScope } from './change-bus.js'
import { resourceOf, scopeOf } from './resources.js'

/** URIs one stream may follow. */
export const maxListenUris = 500
/** Streams open at once on one node, per organization and per person. */
export const maxListenStreamsPerOrganization = 100
export const maxListenStreamsPerPerson = 20
/** Different print jobs an organization's streams follow at once on one node (each change re-reads them). */
export const maxFollowedJobsPerOrganization = 2_000

export interface ListenRequest {
  id: string | number
  uris: readonly string[]
}

/** A refusal answered in-band, as a JSON-RPC error before the stream opens. */
export interface ListenRefusal {
  ok: false
  kind: 'error'
  code: number
  message: string
  data: { error: string; uri?: string }
}

export type ListenCheck = { ok: true; scope: ListenScope } | ListenRefusal | { ok: false; kind: 'scope'; scope: string }

/** The listen request in a POST body, if it is one (its shape is the SDK's to check). */
export function listenRequestOf(body: unknown): ListenRequest | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined
  const message = body as { method?: unknown; id?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } }
  if (message.method !== 'subscriptions/listen' || (typeof message.id !== 'string' && typeof message.id !== 'number')) return undefined
  const uris = message.params?.notifications?.resourceSubscriptions
  return { id: message.id, uris: Array.isArray(uris) ? uris.filter((u): u is string => typeof u === 'string') : [] }
}

const invalid = (message: string, error: string, uri?: string): ListenCheck => ({ ok: false, kind: 'error', code: -32602, message, data: { error, ...(uri === undefined ? {} : { uri }) } })

/** The refusal of a stream over the limits (the SDK's own answer to its limit, with our code). */
export function listenLimitReached(message = `at most ${maxListenStreamsPerPerson} streams per person and ${maxListenStreamsPerOrganization} per organization are open at once on this node; close one, or follow more resources with one`): ListenRefusal {
  return { ok: false, kind: 'error', code: -32603, message: `Subscription limit reached: ${message}`, data: { error: 'mcp_subscription_limit' } }
}

/** `followedJobs`: the jobs the organization's open streams follow already. */
export async function checkListen(sql: Sql, principal: Principal, request: ListenRequest, followedJobs: ReadonlyMap<number, number>): Promise<ListenCheck> {
  if (principal.kind !== 'oauth') throw new ServiceError('unauthorized', 'an MCP stream needs an OAuth token')
  if (request.uris.length > maxListenUris) return invalid(`a stream follows at most ${maxListenUris} resources; this one names ${request.uris.length}`, 'validation_failed')
  const printers = new Set<string>()
  const jobs = new Set<number>()
  let queue = false
  for (const uri of request.uris) {
    const resource = resourceOf(uri)
    if (resource === undefined) {
      return invalid(`unknown resource ${uri.slice(0, 200)}: this server has printfarm://printers/{printer_id}, printfarm://print-jobs/{job_id} and printfarm://queue`, 'mcp_resource_unknown', uri.slice(0, 200))
    }
    const needed = scopeOf(resource)
    if (!principal.scopes.has(needed)) return { ok: false, kind: 'scope', scope: needed }
    if (resource.kind === 'printer') printers.add(resource.printerId)
    else if (resource.kind === 'job') jobs.add(resource.jobId)
    else queue = true
  }
  const organizationId = principal.organizationId
  const newJobs = [...jobs].filter((id) => !followedJobs.has(id)).length
  if (followedJobs.size + newJobs > maxFollowedJobsPerOrganization) {
    return listenLimitReached(`this organization's streams follow ${followedJobs.size} print jobs on this node, at most ${maxFollowedJobsPerOrganization} at once`)
  }
  // Ids of another organization are refused exactly as unknown ones: nothing says they exist.
  if (printers.size > 0) {
    const found = new Set((await sql<{ id: string }[]>`select id::text from printers where organization_id = ${organizationId} and id = any(${[...printers]}::uuid[])`).map((r) => r.id))
    const missing = [...printers].find((id) => !found.has(id))
    if (missing !== undefined) return invalid(`no printer ${missing} in this organization`, 'printer_not_found', `printfarm://printers/${missing}`)
  }
  if (jobs.size > 0) {
    const found = new Set((await sql<{ id: string }[]>`select id::text from print_jobs where organization_id = ${organizationId} and id = any(${[...jobs].map(String)}::bigint[])`).map((r) => Number(r.id)))
    const missing = [...jobs].find((id) => !found.has(id))
    if (missing !== undefined) return invalid(`no print job ${missing} in this organization`, 'print_job_not_found', `printfarm://print-jobs/${missing}`)
  }
  return { ok: true, scope: { organizationId, userId: principal.userId, printers, jobs, queue } }
}
