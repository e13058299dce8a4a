/**
 * The MCP resources: a printer, a print job and the queue, each the answer
 * of the REST route (and tool) that reads it, so an agent can read them and,
 * on the 2026-07-28 protocol, follow them with `subscriptions/listen`
 * (src/mcp/change-feed.ts says when each changes). Decision: resources only
 * for what changes on its own (a printer's state, a job's progress, the
 * queue); models, files and materials change only when someone changes
 * them, and their tools answer them. Nothing is listed by resources/list
 * but the queue: a farm has thousands of printers and jobs, and the tools
 * find them (list_printers, list_jobs).
 */
import { ProtocolError, ProtocolErrorCode, ResourceNotFoundError, ResourceTemplate, type McpServer, type ScopeChallengeHandler } from '@modelcontextprotocol/server'
import type { Principal } from '../http/route.js'
import type { RouteTool } from './route-tools.js'
import type { ToolsContext } from './tools.js'

export const queueUri = 'printfarm://queue'
export const printerUri = (printerId: string): string => `printfarm://printers/${printerId}`
export const jobUri = (jobId: number): string => `printfarm://print-jobs/${jobId}`

export type FarmResource = { kind: 'printer'; printerId: string } | { kind: 'job'; jobId: number } | { kind: 'queue' }

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const jobIdText = /^[1-9][0-9]{0,14}$/

/** The resource a URI names, or undefined for one this server does not have. Printer ids in lower case, as the API answers them. */
export function resourceOf(uri: string): FarmResource | undefined {
  if (uri === queueUri) return { kind: 'queue' }
  const printer = /^printfarm:\/\/printers\/([^/]+)$/.exec(uri)?.[1]
  if (printer !== undefined && uuid.test(printer)) return { kind: 'printer', printerId: printer }
  const job = /^printfarm:\/\/print-jobs\/([^/]+)$/.exec(uri)?.[1]
  if (job !== undefined && jobIdText.test(job)) return { kind: 'job', jobId: Number(job) }
  return undefined
}

/** The scope a resource needs (the route's that reads it). */
export function scopeOf(resource: FarmResource): string {
  return resource.kind === 'printer' ? 'printers:read' : 'print-jobs:read'
}

interface Readers {
  printer: RouteTool<ToolsContext>
  job: RouteTool<ToolsContext>
  queue: RouteTool<ToolsContext>
}

/** A resource's JSON, read by its route as `principal`; a refusal is a protocol error carrying our code in `data.error`. */
async function read(tool: RouteTool<ToolsContext>, args: Record<string, unknown>, uri: URL, principal: Principal | undefined, services: ToolsContext, requestId: string) {
  if (principal === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidRequest, 'no credential', { error: 'unauthorized' })
  const result = await tool.call(args, principal, services, requestId)
  if (!result.ok) {
    const code = String(result.body['error'])
    const message = String(result.body['message'])
    if (code.endsWith('_not_found')) throw new ResourceNotFoundError(uri.href, message)
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, message, { error: code })
  }
  return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(result.body) }] }
}

export function registerResources(
  server: McpServer,
  readers: Readers,
  context: { principal: Principal | undefined; services: ToolsContext; requestId: string; challenge: (scopes: readonly string[]) => ScopeChallengeHandler },
): void {
  const { principal, services, requestId, challenge } = context
  // Live data: a client caches nothing.
  const cacheHint = { ttlMs: 0, cacheScope: 'private' } as const
  server.registerResource(
    'printer',
    new ResourceTemplate('printfarm://printers/{printer_id}', { list: undefined }),
    {
      title: 'Printer',
      description: "One printer's live state (as get_printer answers it). Follow it with subscriptions/listen to hear when it changes. Scope: printers:read.",
      mimeType: 'application/json',
      cacheHint,
      scopeChallenge: challenge(['printers:read']),
    },
    (uri, variables) => read(readers.printer, { id: String(variables['printer_id']).toLowerCase() }, uri, principal, services, requestId),
  )
  server.registerResource(
    'print-job',
    new ResourceTemplate('printfarm://print-jobs/{job_id}', { list: undefined }),
    {
      title: 'Print job',
      description: 'One print job (as get_print_job answers it): status, printer, progress, verification, and while it waits why. Follow it with subscriptions/listen. Scope: print-jobs:read.',
      mimeType: 'application/json',
      cacheHint,
      scopeChallenge: challenge(['print-jobs:read']),
    },
    (uri, variables) => read(readers.job, { id: String(variables['job_id']) }, uri, principal, services, requestId),
  )
  server.registerResource(
    'queue',
    queueUri,
    {
      title: 'Queue',
      description: 'The queue in order (as queue_status answers it, first page): jobs being dispatched, then waiting jobs and why each waits. Follow it with subscriptions/listen. Scope: print-jobs:read.',
      mimeType: 'application/json',
      cacheHint,
      scopeChallenge: challenge(['print-jobs:read']),
    },
    (uri) => read(readers.queue, {}, uri, principal, services, requestId),
  )
}
