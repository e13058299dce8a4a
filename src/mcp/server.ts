/**
 * The MCP server of the farm: `createMcpHandler` of the official SDK,
 * stateless, serving both the 2025 protocol versions (each request answered
 * by a fresh instance) and 2026-07-28. The factory builds an instance for
 * the request's principal (the person behind the OAuth token): every tool
 * acts as them.
 *
 * Argument validation happens in the tool (the route's schemas), not in the
 * SDK: a wrong argument is a tool error the model can read and correct
 * (`isError` with our error code), not a protocol error.
 */
import { createMcpHandler, McpServer, type AuthInfo, type McpHttpHandler, type ScopeChallengeHandler, type StandardSchemaWithJSON } from '@modelcontextprotocol/server'
import type { Principal } from '../http/route.js'
import type { Services } from '../routes/route-context.js'
import { serviceVersion } from '../node/version.js'
import { queueHead } from '../queue/queue-view.js'
import { OrganizationBus } from './change-bus.js'
import { McpChangeFeed } from './change-feed.js'
import { farmSummary, farmSummaryOutput, type FarmSummaryContext } from './farm-summary.js'
import { registerResources } from './resources.js'
import type { RouteTool, ToolResult } from './route-tools.js'
import { routeTools, type ToolsContext } from './tools.js'

/** What the MCP server uses of the node: its own needs, the tools' routes' and the farm summary's. */
export type FarmMcpContext = Pick<Services, 'clock' | 'config' | 'db' | 'live' | 'logger' | 'queue'> & ToolsContext & FarmSummaryContext

/** Jobs the queue resource's change check compares (the live `queue` topic's head). */
const queueHeadLength = 100

/** A JSON Schema for tools/list whose validation is left to the tool itself. */
function described(jsonSchema: Record<string, unknown>): StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>> {
  return {
    '~standard': {
      version: 1,
      vendor: 'printfarm',
      validate: (value: unknown) => ({ value: (value ?? {}) as Record<string, unknown> }),
      jsonSchema: { input: () => jsonSchema, output: () => jsonSchema },
    },
  }
}

/** Step-up (MCP authorization): a call without any of the tool's scopes answers 403 insufficient_scope naming them. */
function needsOneOf(scopes: readonly string[]): ScopeChallengeHandler {
  return ({ authInfo }) => {
    if (authInfo === undefined || scopes.some((s) => authInfo.scopes.includes(s))) return undefined
    return { scopes: [scopes[0]!, ...authInfo.scopes], errorDescription: `this tool needs the scope ${scopes.join(' or ')}` }
  }
}

function resultOf(result: ToolResult): { content: { type: 'text'; text: string }[]; structuredContent: Record<string, unknown>; isError: boolean } {
  return { content: [{ type: 'text', text: JSON.stringify(result.body) }], structuredContent: result.body, isError: !result.ok }
}

/** The principal the gate resolved, carried in the SDK's pass-through AuthInfo. */
export function principalOf(authInfo: AuthInfo | undefined): Principal | undefined {
  const principal = authInfo?.extra?.['principal']
  return principal === undefined ? undefined : (principal as Principal)
}

export class FarmMcp {
  readonly tools: readonly RouteTool<ToolsContext>[]
  readonly handler: McpHttpHandler
  /** The listen streams, per organization. */
  readonly bus: OrganizationBus
  readonly changes: McpChangeFeed
  readonly #services: FarmMcpContext

  constructor(services: FarmMcpContext) {
    this.#services = services
    this.tools = routeTools()
    this.bus = new OrganizationBus(
      (error) => services.logger.warn('mcp: a change notification failed', { error: String(error) }),
      (scope) => this.changes.closed(scope),
    )
    const { sql } = services.db
    this.changes = new McpChangeFeed({
      bus: this.bus,
      sql,
      queueHead: (organizationId) => queueHead(sql, organizationId, services.queue.settings, services.clock.now(), queueHeadLength),
      logger: services.logger,
      clock: services.clock,
    })
    services.live.onOrganizationChange((change) => this.changes.changed(change))
    this.handler = createMcpHandler(({ authInfo, era }) => this.#server(authInfo, era), {
      legacy: 'stateless',
      responseMode: 'auto',
      bus: this.bus,
      // The node's bound; organizations and people have their own, lower (src/mcp/listen.ts).
      maxSubscriptions: 10_000,
      maxRequestBodySize: services.config.bodyLimitBytes,
      onerror: (error) => services.logger.warn('mcp request failed', { error }),
    })
  }

  /** The tool of that name (resources are read through the same routes). */
  tool(name: string): RouteTool<ToolsContext> {
    const tool = this.tools.find((t) => t.spec.name === name)
    if (tool === undefined) throw new TypeError(`no MCP tool ${name}`)
    return tool
  }

  #server(authInfo: AuthInfo | undefined, era: 'legacy' | 'modern'): McpServer {
    const services = this.#services
    const principal = principalOf(authInfo)
    const requestId = String(authInfo?.extra?.['requestId'] ?? '')
    // Resource subscriptions need a stream to deliver on: 2026-07-28's subscriptions/listen. The
    // 2025 protocol's GET stream does not exist on this stateless endpoint, so those clients read.
    const server = new McpServer(
      { name: 'printfarm', title: 'printfarm', version: serviceVersion },
      { capabilities: { tools: { listChanged: false }, resources: { subscribe: era === 'modern', listChanged: false } } },
    )
    registerResources(server, { printer: this.tool('get_printer'), job: this.tool('get_print_job'), queue: this.tool('queue_status') }, { principal, services, requestId, challenge: needsOneOf })
    for (const tool of this.tools) {
      const { spec } = tool
      server.registerTool(
        spec.name,
        {
          title: spec.title,
          description: `${spec.description} Scope: ${tool.scopes.join(' or ')}.`,
          inputSchema: described(tool.inputSchema),
          ...(tool.outputSchema === undefined ? {} : { outputSchema: described(tool.outputSchema) }),
          annotations: { title: spec.title, readOnlyHint: spec.readOnly, destructiveHint: !spec.readOnly, openWorldHint: false },
          scopeChallenge: needsOneOf(tool.scopes),
        },
        async (args: Record<string, unknown>) => {
          if (principal === undefined) return resultOf({ ok: false, body: { error: 'unauthorized', message: 'no credential' } })
          return resultOf(await tool.call(args, principal, services, requestId))
        },
      )
    }
    server.registerTool(
      'farm_summary',
      {
        title: 'Farm summary',
        description: 'The farm at a glance: printers by status and online, print jobs by status, and the queue. Scope: printers:read and print-jobs:read.',
        inputSchema: described({ type: 'object', properties: {}, additionalProperties: false }),
        outputSchema: described(farmSummaryOutput),
        annotations: { title: 'Farm summary', readOnlyHint: true, openWorldHint: false },
        scopeChallenge: needsOneOf(['printers:read']),
      },
      async () => {
        if (principal === undefined) return resultOf({ ok: false, body: { error: 'unauthorized', message: 'no credential' } })
        return resultOf(await farmSummary(principal, services))
      },
    )
    return server
  }
}
