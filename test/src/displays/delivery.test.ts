import t from 'tap'
import { assign, connectSimulator, getTarget, openDisplayFarm, publishedRevision, registerDisplay, simulatorOptions, type DisplayFarm } from '../../helpers/displays.js'
import { waitFor } from '../../helpers/poll.js'
import { addPrinter, openFarm } from '../../helpers/bridge.js'
import { request } from '../../helpers/http.js'
import { captureLogger, testEnv } from '../../helpers/service.js'
import { loadConfig } from '../../../src/node/config.js'
import { startService } from '../../../src/node/service.js'
import { DisplaySimulator, MemoryFenceStore } from '../../../src/simulators/display-sim.js'

t.test('an assigned revision reaches the display over the broker and the target becomes device_applied on its receipt', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  const sim = await connectSimulator(t, farm, display)
  const revision = await publishedRevision(farm)
  const res = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(res.status, 200, res.text)
  t.equal(res.json.status, 'sync_pending')
  t.same(res.json.desired, { activation_generation: 1, profile_revision_id: revision.id, sha256: revision.sha256 })
  await sim.waitFor(() => sim.active?.activation_generation === 1, 10_000, 'applied')
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied')
  const target = await getTarget(farm, display.id)
  t.same(target.json.applied, target.json.desired)
  t.equal(sim.envelopes[0]!.data, revision.data)
})

t.test('a device that cannot write its fence rejects with profile_persist_failed; retry delivers again and it applies', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  const fenceStore = new MemoryFenceStore()
  const sim = await connectSimulator(t, farm, display, { fenceStore })
  fenceStore.failWrites = true
  const revision = await publishedRevision(farm)
  await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'rejected', 'rejected')
  const rejected = await getTarget(farm, display.id)
  t.equal(rejected.json.errorCode, 'profile_persist_failed')
  t.equal(rejected.json.applied, null)
  t.equal(sim.active, null, 'not activated without its fence')
  fenceStore.failWrites = false
  const retried = await request(farm.url, `/v1/mqtt/displays/${display.id}/profile/retry`, { method: 'POST', headers: farm.admin })
  t.equal(retried.status, 200, retried.text)
  t.equal(retried.json.status, 'sync_pending')
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied after retry')
  const healthy = await request(farm.url, `/v1/mqtt/displays/${display.id}/profile/retry`, { method: 'POST', headers: farm.admin })
  t.equal(healthy.status, 409)
  t.equal(healthy.json.error, 'signal_profile_target_healthy')
})

t.test('a device rejects an older generation than its fence and a reused generation with other bytes', async (t) => {
  const farm = await openDisplayFarm(t)
  const revision = await publishedRevision(farm)
  for (const [fence, code] of [
    [{ activation_generation: 3, profile_revision_id: revision.id, sha256: revision.sha256 }, 'stale_activation'],
    [{ activation_generation: 1, profile_revision_id: '00000000-0000-4000-8000-000000000001', sha256: 'c'.repeat(64) }, 'activation_conflict'],
  ] as const) {
    const fenceStore = new MemoryFenceStore()
    fenceStore.state = { fence, sessionGeneration: 4 }
    const display = await registerDisplay(farm)
    const sim = await connectSimulator(t, farm, display, { fenceStore })
    t.equal(sim.sessionGeneration, 5, 'a new session generation above the stored one')
    await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
    await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'rejected', 'rejected')
    t.equal((await getTarget(farm, display.id)).json.errorCode, code, `generation 1 against a fence at ${fence.activation_generation}`)
    t.equal(sim.active, null)
    t.same(fenceStore.state!.fence, fence, 'the fence never goes down')
  }
})

t.test('a device with no trustworthy fence refuses every activation until a new binding', async (t) => {
  const fenceStore = new MemoryFenceStore()
  fenceStore.state = undefined
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  await connectSimulator(t, farm, display, { fenceStore })
  const revision = await publishedRevision(farm)
  await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'rejected', 'rejected')
  t.equal((await getTarget(farm, display.id)).json.errorCode, 'profile_fence_recovery_required')
})

t.test('a rebind in the middle of delivery: the old binding is abandoned, the new credential gets the next assignment', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  const silent = await connectSimulator(t, farm, display, { decide: () => 'ignore' })
  const revision = await publishedRevision(farm)
  await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  await silent.waitFor(() => silent.envelopes.length > 0, 10_000, 'the envelope')
  const disconnected = new Promise<void>((resolve) => silent.client.once('close', () => resolve()))
  const rebound = await request(farm.url, `/v1/mqtt/displays/${display.id}/rebind`, { method: 'POST', headers: farm.admin })
  await disconnected
  t.equal((await getTarget(farm, display.id)).status, 404, 'no target in the new binding yet')
  const next = { ...display, bindingEpoch: 2, credential: rebound.json.credential }
  const sim = await connectSimulator(t, farm, next)
  const stale = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 1 })
  t.equal(stale.json.error, 'display_binding_epoch_conflict')
  const res = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 2, expectedActivationGeneration: 0 })
  t.equal(res.status, 200, res.text)
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied in binding 2')
  t.equal(sim.envelopes.every((e) => e.binding_epoch === 2), true)
  t.equal(sim.active?.activation_generation, 1, 'generations start again in the new binding')
})

t.test('after a restart the retained configuration is rebuilt from the store (the new embedded broker starts empty)', async (t) => {
  const env = testEnv(t, { MQTT_URL: undefined })
  const { logger } = captureLogger()
  const first = await startService(loadConfig(env), { logger })
  t.teardown(() => first.stop())
  const farm: DisplayFarm = { ...(await openFarm(first.url)), service: first as never, brokerUrl: `mqtt://127.0.0.1:${first.services.mqtt.broker!.port}` }
  const display = await registerDisplay(farm)
  const fenceStore = new MemoryFenceStore()
  const sim = await connectSimulator(t, farm, display, { fenceStore })
  const revision = await publishedRevision(farm)
  await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied')
  await sim.close()
  await first.stop()

  const second = await startService(loadConfig(env), { logger })
  t.teardown(() => second.stop())
  const after: DisplayFarm = { ...farm, url: second.url, brokerUrl: `mqtt://127.0.0.1:${second.services.mqtt.broker!.port}` }
  const rebooted = await DisplaySimulator.connect(simulatorOptions(after, display, { fenceStore }))
  t.teardown(() => rebooted.close())
  await rebooted.waitFor(() => rebooted.envelopes.length > 0, 10_000, 'the rebuilt retained configuration')
  t.same(
    [rebooted.envelopes[0]!.activation_generation, rebooted.envelopes[0]!.profile_revision_id, rebooted.envelopes[0]!.sha256],
    [1, revision.id, revision.sha256],
  )
  // The rebooted simulator announces an empty active slot first (it keeps only its fence), then applies again.
  await waitFor(async () => (await getTarget({ ...farm, url: second.url }, display.id)).json.status === 'device_applied', 'device_applied after the reboot')
  t.same(rebooted.active, rebooted.envelopes[0] && { activation_generation: 1, profile_revision_id: revision.id, sha256: revision.sha256 })
})

t.test('the status feed gives each pixel the display status of its printer, follows changes, and expires', async (t) => {
  const farm = await openDisplayFarm(t)
  const first = await addPrinter(farm)
  const second = await addPrinter(farm)
  const display = await registerDisplay(farm, [first, second])
  const sim = await connectSimulator(t, farm, display)
  await sim.waitFor(() => sim.feed !== null, 10_000, 'a feed')
  t.same(sim.feed!.pixels, ['UNKNOWN', 'UNKNOWN'], 'printers never heard from')
  const online = await request(farm.url, `/v1/printer-config/${first}/connection-status`, {
    method: 'PATCH',
    headers: farm.bridge,
    body: { is_connected: true, last_heartbeat: new Date().toISOString() },
  })
  t.equal(online.status, 200, online.text)
  await sim.waitFor(() => sim.feed?.pixels[0] === 'WAITING', 10_000, 'pixel 1 WAITING')
  t.equal(sim.feed!.pixels[1], 'UNKNOWN')
  await request(farm.url, `/v1/printer-config/${first}/connection-status`, { method: 'PATCH', headers: farm.bridge, body: { is_connected: false, last_heartbeat: new Date().toISOString() } })
  await sim.waitFor(() => sim.feed?.pixels[0] === 'OFFLINE', 10_000, 'pixel 1 OFFLINE')
  const feed = sim.feed!
  t.equal(Date.parse(feed.expires_at) - Date.parse(feed.published_at), 90_000)
  t.notOk(sim.feedStale(Date.parse(feed.published_at)), 'fresh when published')
  t.ok(sim.feedStale(Date.parse(feed.expires_at)), 'stale once expires_at passes without a newer feed')
})
