/**
 * The farm_summary tool: the farm at a glance for an agent, in one call.
 * Printers by display status and how many are online (printers:read); print
 * jobs by lifecycle status (with print-jobs:read, else left out).
 */
import { displayStatuses } from '../../protocol/display-status.js'
import { organizationOf } from '../auth/principal.js'
import type { Principal } from '../http/route.js'
import type { Services } from '../routes/route-context.js'
import type { ToolResult } from './route-tools.js'

/** What the farm summary reads of the node: printer counts from the read model, job counts from the store. */
export type FarmSummaryContext = Pick<Services, 'db' | 'printerReads'>

const jobStatuses = ['queued', 'dispatching', 'printing', 'paused', 'awaiting_verification', 'succeeded', 'failed', 'cancelled'] as const

const counts = (keys: readonly string[]) => ({ type: 'object', properties: Object.fromEntries(keys.map((k) => [k, { type: 'integer', minimum: 0 }])), required: [...keys], additionalProperties: false })

export const farmSummaryOutput: Record<string, unknown> = {
  type: 'object',
  properties: {
    printers: {
      type: 'object',
      properties: { total: { type: 'integer', minimum: 0 }, online: { type: 'integer', minimum: 0 }, by_status: counts(displayStatuses) },
      required: ['total', 'online', 'by_status'],
      additionalProperties: false,
    },
    jobs: { type: 'object', properties: { by_status: counts(jobStatuses) }, required: ['by_status'], additionalProperties: false, description: 'With print-jobs:read only.' },
  },
  required: ['printers'],
  additionalProperties: false,
}

function holds(principal: Principal, scope: string): boolean {
  return principal.kind === 'oauth' || principal.kind === 'api_key' ? principal.scopes.has(scope) : true
}

export async function farmSummary(principal: Principal, services: FarmSummaryContext): Promise<ToolResult> {
  if (!holds(principal, 'printers:read')) return { ok: false, body: { error: 'insufficient_scope', message: 'farm_summary needs the scope printers:read' } }
  const organizationId = organizationOf(principal)
  const { byStatus, online } = await services.printerReads.statusCounts(organizationId)
  const printers = {
    total: [...byStatus.values()].reduce((a, b) => a + b, 0),
    online,
    by_status: Object.fromEntries(displayStatuses.map((s) => [s, byStatus.get(s) ?? 0])),
  }
  if (!holds(principal, 'print-jobs:read')) return { ok: true, body: { printers } }
  const rows = await services.db.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from print_jobs where organization_id = ${organizationId} group by status`
  const jobs = { by_status: Object.fromEntries(jobStatuses.map((s) => [s, rows.find((r) => r.status === s)?.n ?? 0])) }
  return { ok: true, body: { printers, jobs } }
}
