/**
 * Status displays for tests: a service on the embedded broker (whose ACL is
 * the service's own), a registered display, a simulator logged in with its
 * credential, and published profile revisions.
 */
import { request, type HttpResult } from './http.js'
import { openFarm, addPrinter, type Farm } from './bridge.js'
import { startTestService, type TestContext, type TestService } from './service.js'
import { waitFor } from './poll.js'
import { DisplaySimulator, type SimulatorOptions } from '../../src/simulators/display-sim.js'
import type { Draft } from '../../protocol/signal-profile/draft.js'
import { systemClock } from '../../actors/clock.js'

export interface DisplayFarm extends Farm {
  service: TestService
  brokerUrl: string
}

/** A service with the embedded broker (MQTT_URL unset for this test), signed in as the first admin. */
export async function openDisplayFarm(t: TestContext, env: Record<string, string | undefined> = {}): Promise<DisplayFarm> {
  const service = await startTestService(t, { MQTT_URL: undefined, ...env })
  const broker = service.services.mqtt.broker
  if (broker === undefined) throw new Error('expected the embedded broker')
  const farm = await openFarm(service.url)
  return { ...farm, service, brokerUrl: `mqtt://127.0.0.1:${broker.port}` }
}

export interface RegisteredDisplay {
  id: string
  bindingEpoch: number
  credential: { credentialId: string; username: string; password: string }
  pixels: string[]
}

export async function registerDisplay(farm: Farm, pixels?: string[]): Promise<RegisteredDisplay> {
  const printers = pixels ?? [await addPrinter(farm), await addPrinter(farm)]
  const res = await request(farm.url, '/v1/mqtt/displays', { method: 'POST', headers: farm.admin, body: { name: 'Rack A', pixels: printers } })
  if (res.status !== 201) throw new Error(`display: ${res.status} ${res.text}`)
  return res.json
}

export function simulatorOptions(farm: Farm & { brokerUrl: string }, display: RegisteredDisplay, extra: Partial<SimulatorOptions> = {}): SimulatorOptions {
  return {
    url: farm.brokerUrl,
    organizationId: farm.orgId,
    displayId: display.id,
    bindingEpoch: display.bindingEpoch,
    credentialId: display.credential.credentialId,
    username: display.credential.username,
    password: display.credential.password,
    ...extra,
    clock: extra.clock ?? systemClock,
  }
}

/** A simulator connected with the display's credential; closed at teardown. Waits until its capability is recorded. */
export async function connectSimulator(t: TestContext, farm: DisplayFarm, display: RegisteredDisplay, extra: Partial<SimulatorOptions> = {}): Promise<DisplaySimulator> {
  const sim = await DisplaySimulator.connect(simulatorOptions(farm, display, extra))
  t.teardown(() => sim.close())
  await waitFor(async () => (await getDisplay(farm, display.id)).json.capabilitiesReportedAt !== null, 'capabilities recorded')
  return sim
}

export function getDisplay(farm: Farm, id: string): Promise<HttpResult> {
  return request(farm.url, `/v1/mqtt/displays/${id}`, { headers: farm.admin })
}

export function getTarget(farm: Farm, id: string): Promise<HttpResult> {
  return request(farm.url, `/v1/mqtt/displays/${id}/profile`, { headers: farm.admin })
}

/** A new profile with `draft` (or the default), published; returns the revision. */
export async function publishedRevision(farm: Farm, draft?: Draft, name = 'Profile'): Promise<Record<string, any>> {
  const created = await request(farm.url, '/v1/mqtt/profiles', { method: 'POST', headers: farm.admin, body: { name } })
  if (created.status !== 201) throw new Error(`profile: ${created.status} ${created.text}`)
  let revision = created.json.draftRevision
  if (draft !== undefined) {
    const saved = await request(farm.url, `/v1/mqtt/profiles/${created.json.id}/draft`, { method: 'PUT', headers: farm.admin, body: { draft, expectedRevision: revision } })
    if (saved.status !== 200) throw new Error(`draft: ${saved.status} ${saved.text}`)
    revision = saved.json.draftRevision
  }
  const published = await request(farm.url, `/v1/mqtt/profiles/${created.json.id}/publish`, { method: 'POST', headers: farm.admin, body: { expectedRevision: revision } })
  if (published.status !== 200) throw new Error(`publish: ${published.status} ${published.text}`)
  return published.json
}

export function assign(farm: Farm, displayId: string, body: { profileRevisionId: string; expectedBindingEpoch: number; expectedActivationGeneration: number }): Promise<HttpResult> {
  return request(farm.url, `/v1/mqtt/displays/${displayId}/profile`, { method: 'POST', headers: farm.admin, body })
}

