/**
 * Organizations for queue tests: the queue is per organization, so each case
 * opens its own, with a bridge key, a host name of its own and the uploaded
 * Bambu plate (filament 1: PLA #FFFFFF, 11.66 g, sliced for a Bambu Lab P1S
 * with a 0.4 mm nozzle); and a sender of bridge events that numbers each
 * printer's events.
 */
import { randomUUID } from 'node:crypto'
import { bridgeScopes } from '../../protocol/scopes.js'
import { batch, item, postBatch } from './bridge.js'
import { bambuThreeMf, createModel, upload } from './files.js'
import { request } from './http.js'

export interface Org {
  id: string
  admin: Record<string, string>
  bridge: Record<string, string>
  hostId: string
  fileId: string
}

/** AMS slots holding what the plate needs. */
export const white = [{ position: 0, materialType: 'PLA', color: 'FFFFFFFF' }]

export async function openOrg(url: string, signedIn: Record<string, string>, name: string): Promise<Org> {
  const created = await request(url, '/v1/organizations', { method: 'POST', headers: signedIn, body: { name: `${name} ${randomUUID().slice(0, 6)}` } })
  if (created.status !== 201) throw new Error(`organization: ${created.status} ${created.text}`)
  const admin = { ...signedIn, 'x-organization-id': created.json.id as string }
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: admin, body: { name: 'bridge', scopes: [...bridgeScopes] } })
  if (key.status !== 200) throw new Error(`api key: ${key.status} ${key.text}`)
  const modelId = await createModel(url, admin)
  const uploaded = await upload(url, admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
  return { id: created.json.id, admin, bridge: { 'x-api-key': key.json.key as string }, hostId: `host-${name}`, fileId: uploaded.json.id }
}

/** Sends one bridge event for a printer of the organization (each printer's events numbered in order); throws unless applied. */
export function eventSender(url: string): (org: Org, printer: string, type: string, data?: Record<string, unknown>, epoch?: number) => Promise<void> {
  const seqns = new Map<string, number>()
  return async (org, printer, type, data = {}, epoch = 1) => {
    const seqn = (seqns.get(printer) ?? -1) + 1
    seqns.set(printer, seqn)
    const res = await postBatch(
      { url, orgId: org.id, admin: org.admin, bridge: org.bridge },
      batch(printer, [item(seqn, { type, data, hostId: org.hostId, assignmentEpoch: epoch, eventId: `ev-${randomUUID()}` })], { hostId: org.hostId, assignmentEpoch: epoch }),
    )
    if (res.status !== 200 || res.json.events?.[0]?.outcome !== 'applied') throw new Error(`${type}: ${res.status} ${res.text}`)
  }
}

/** The HTTP calls queue tests make, as one organization's admin (and its bridge for the host poll). */
export function queueCalls(url: string) {
  return {
    async createJob(org: Org, extra: Record<string, unknown> = {}): Promise<number> {
      const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: org.admin, body: { name: 'Benchy', model_file_id: org.fileId, ...extra } })
      if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
      return res.json.id
    },
    getJob: async (org: Org, id: number) => (await request(url, `/v1/print-jobs/${id}`, { headers: org.admin })).json,
    getQueue: async (org: Org) => (await request(url, '/v1/queue?limit=200', { headers: org.admin })).json,
    entryOf: (queue: any, jobId: number) => queue.jobs.find((e: any) => e.job.id === jobId),
    hostTasks: async (org: Org) => (await request(url, `/v1/hosts/${org.hostId}/printer-tasks`, { headers: org.bridge })).json.tasks as any[],
  }
}
