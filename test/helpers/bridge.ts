/**
 * A simulated bridge for tests: an organization admin, an API key with the
 * bridge's scopes, printers assigned to a host, and event/batch builders
 * that follow docs/printers-and-events.md.
 */
import { randomUUID } from 'node:crypto'
import { request, signIn, type HttpResult } from './http.js'
import { testAdmin } from './service.js'

export interface Farm {
  url: string
  orgId: string
  /** Admin session headers with x-organization-id. */
  admin: Record<string, string>
  /** A bridge's API key headers (printers:read + printers:write). */
  bridge: Record<string, string>
}

export async function openFarm(url: string, email: string = testAdmin.email, password: string = testAdmin.password): Promise<Farm> {
  const session = await signIn(url, email, password)
  const orgId: string = (await request(url, '/v1/me', { headers: session.auth })).json.organizations[0].id
  const admin = { ...session.auth, 'x-organization-id': orgId }
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: `bridge ${randomUUID().slice(0, 8)}`, scopes: ['printers:read', 'printers:write'] } })
  if (key.status !== 200) throw new Error(`api key: ${key.status} ${key.text}`)
  return { url, orgId, admin, bridge: { 'x-api-key': key.json.key } }
}

/** A printer assigned to `hostId` at epoch 1. */
export async function addPrinter(farm: Farm, hostId = 'host-a', fields: Record<string, unknown> = {}): Promise<string> {
  const res = await request(farm.url, '/v1/printer-config', { method: 'POST', headers: farm.admin, body: { name: `P-${randomUUID().slice(0, 6)}`, ip_address: '127.0.0.1', host_id: hostId, ...fields } })
  if (res.status !== 200) throw new Error(`printer: ${res.status} ${res.text}`)
  return res.json.id
}

export interface ItemOptions {
  type?: string
  data?: Record<string, unknown>
  hostId?: string
  assignmentEpoch?: number
  deliveryAttempt?: number
  eventId?: string
  idempotencyKey?: string
  timestamp?: number
}

export function item(seqn: number, o: ItemOptions = {}): Record<string, unknown> {
  return {
    eventId: o.eventId ?? `ev-${seqn}`,
    ...(o.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey }),
    type: o.type ?? 'printer:deltaUpdate',
    timestamp: o.timestamp ?? 1_700_000_000_000 + seqn,
    seqn,
    hostId: o.hostId ?? 'host-a',
    assignmentEpoch: o.assignmentEpoch ?? 1,
    deliveryAttempt: o.deliveryAttempt ?? 1,
    data: o.data ?? { nozzleTemp: 210 },
  }
}

export function batch(printerId: string, items: Record<string, unknown>[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  const first = items[0] ?? {}
  return { printerId, events: items, timestamp: 1_700_000_000_000, hostId: first['hostId'] ?? 'host-a', assignmentEpoch: first['assignmentEpoch'] ?? 1, ...extra }
}

export function single(printerId: string, seqn: number, o: ItemOptions = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const { type, ...rest } = item(seqn, o)
  return { printerId, eventType: type, ...rest, ...extra }
}

export function postBatch(farm: Farm, body: unknown, headers: Record<string, string> = farm.bridge): Promise<HttpResult> {
  return request(farm.url, '/v1/printer-events/batch', { method: 'POST', headers, body })
}

export function postEvent(farm: Farm, body: unknown, headers: Record<string, string> = farm.bridge): Promise<HttpResult> {
  return request(farm.url, '/v1/printer-events', { method: 'POST', headers, body })
}

export interface EventOptions {
  hostId?: string
  assignmentEpoch?: number
  eventId?: string
}

/**
 * A bridge's own numbering of its printers' events, as the tests that drive jobs need it: each event of a
 * printer gets the next seqn and a fresh eventId. `next` builds the one-event batch (post it once, or again
 * to re-deliver it); `post` sends it; `applied` sends it and fails unless it was applied.
 */
export class EventSender {
  readonly #farm: Farm
  readonly #headers: Record<string, string>
  readonly #seqns = new Map<string, number>()

  constructor(farm: Farm, headers: Record<string, string> = farm.bridge) {
    this.#farm = farm
    this.#headers = headers
  }

  next(printer: string, type: string, data: Record<string, unknown> = {}, o: EventOptions = {}): Record<string, unknown> {
    const seqn = (this.#seqns.get(printer) ?? -1) + 1
    this.#seqns.set(printer, seqn)
    const fence = { hostId: o.hostId ?? 'host-a', assignmentEpoch: o.assignmentEpoch ?? 1 }
    return batch(printer, [item(seqn, { type, data, ...fence, eventId: o.eventId ?? `ev-${randomUUID()}` })], fence)
  }

  post(printer: string, type: string, data: Record<string, unknown> = {}, o: EventOptions = {}): Promise<HttpResult> {
    return postBatch(this.#farm, this.next(printer, type, data, o), this.#headers)
  }

  /** Posted and answered 200; the event's outcome (applied, refused with its reason…). */
  async accepted(printer: string, type: string, data: Record<string, unknown> = {}, o: EventOptions = {}): Promise<{ outcome: string; reason?: string }> {
    const res = await this.post(printer, type, data, o)
    if (res.status !== 200) throw new Error(`${type}: ${res.status} ${res.text}`)
    return res.json.events[0] as { outcome: string; reason?: string }
  }

  /** Posted and applied, or the test fails here. */
  async applied(printer: string, type: string, data: Record<string, unknown> = {}, o: EventOptions = {}): Promise<HttpResult> {
    const res = await this.post(printer, type, data, o)
    if (res.status !== 200 || res.json.events?.[0]?.outcome !== 'applied') throw new Error(`${type} for ${printer}: ${res.status} ${res.text}`)
    return res
  }
}
