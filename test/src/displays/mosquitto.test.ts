/**
 * Status displays on Mosquitto with the dynamic-security plugin, end to end:
 * the service manages each display's broker client and role, Mosquitto
 * enforces them, the simulator speaks the device side.
 */
import t from 'tap'
import { connectAsync, type MqttClient } from 'mqtt'
import { randomBytes, randomUUID } from 'node:crypto'
import { assign, connectSimulator, getTarget, publishedRevision, registerDisplay, type DisplayFarm, type RegisteredDisplay } from '../../helpers/displays.js'
import { waitFor } from '../../helpers/poll.js'
import { openFarm } from '../../helpers/bridge.js'
import { request } from '../../helpers/http.js'
import { mosquittoSkip, startMosquitto, type TestMosquitto } from '../../helpers/mosquitto.js'
import { startTestService, type TestContext } from '../../helpers/service.js'
import { baseTopic, credentialTopic } from '../../../protocol/display-mqtt.js'
import { setupServiceLogin } from '../../../src/mqtt/setup-cli.js'
import { DynamicSecurity } from '../../../src/mqtt/dynamic-security.js'
import type { DynsecCredentials } from '../../../src/displays/broker-credentials.js'
import { systemClock } from '../../../actors/clock.js'

if (mosquittoSkip) t.plan(0, mosquittoSkip)

interface MosquittoFarm extends DisplayFarm {
  mosquitto: TestMosquitto
  /** A dynsec admin client: sees every topic (its role subscribes to #) and runs plugin commands. */
  mqttAdmin: MqttClient
  dynsec: DynamicSecurity
  credentials: DynsecCredentials
}

async function openMosquittoFarm(t: TestContext): Promise<MosquittoFarm> {
  const mosquitto = await startMosquitto(t)
  const service = { username: 'printfarm', password: randomBytes(16).toString('base64url') }
  await setupServiceLogin(mosquitto.url(mosquitto.admin.username, mosquitto.admin.password), service)
  const svc = await startTestService(t, { MQTT_URL: mosquitto.url(service.username, service.password), MQTT_DISPLAY_CREDENTIALS: 'dynamic-security' })
  const admin = await connectAsync(mosquitto.url(mosquitto.admin.username, mosquitto.admin.password), { protocolVersion: 4, reconnectPeriod: 0 })
  t.teardown(() => admin.endAsync())
  const farm = await openFarm(svc.url)
  return {
    ...farm,
    service: svc,
    brokerUrl: `mqtt://127.0.0.1:${mosquitto.port}`,
    mosquitto,
    mqttAdmin: admin,
    dynsec: await DynamicSecurity.attach(admin, systemClock),
    credentials: svc.services.displays.credentials as DynsecCredentials,
  }
}

/** Connects with a login; resolves to the client or to the refusal's message. */
async function login(t: TestContext, url: string): Promise<MqttClient | string> {
  try {
    const client = await connectAsync(url, { protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 5_000 })
    t.teardown(() => client.endAsync())
    return client
  } catch (error) {
    return (error as Error).message
  }
}

const displayLogin = (farm: MosquittoFarm, display: RegisteredDisplay) => farm.mosquitto.url(display.credential.username, display.credential.password)

/** Messages the admin sees on `filter`, collected from now on. */
async function watch(farm: MosquittoFarm, filter: string): Promise<{ topic: string; payload: string; retain: boolean }[]> {
  const seen: { topic: string; payload: string; retain: boolean }[] = []
  farm.mqttAdmin.on('message', (topic, payload, packet) => {
    if (topic.startsWith('$CONTROL')) return
    seen.push({ topic, payload: payload.toString(), retain: packet.retain })
  })
  await farm.mqttAdmin.subscribeAsync(filter, { qos: 1 })
  return seen
}

t.test('mosquitto-setup gives the service login its role: the display tree and the plugin, nothing else; run again it changes the password', async (t) => {
  const mosquitto = await startMosquitto(t)
  const adminUrl = mosquitto.url(mosquitto.admin.username, mosquitto.admin.password)
  await setupServiceLogin(adminUrl, { username: 'svc', password: 'first-password' })
  const admin = await connectAsync(adminUrl, { protocolVersion: 4, reconnectPeriod: 0 })
  t.teardown(() => admin.endAsync())
  const seen: string[] = []
  admin.on('message', (topic) => seen.push(topic))
  await admin.subscribeAsync('#', { qos: 1 })
  const service = await login(t, mosquitto.url('svc', 'first-password'))
  if (typeof service === 'string') throw new Error(service)
  const inside = `svc/v1/${randomUUID()}/display/${randomUUID()}/b/1/status/feed`
  await service.publishAsync('elsewhere/topic', 'x', { qos: 1 })
  await service.publishAsync(inside, 'y', { qos: 1 })
  await waitFor(() => seen.includes(inside), 'the publication inside the display tree')
  t.notOk(seen.includes('elsewhere/topic'), 'a publication outside the display tree is dropped by the broker')
  await t.rejects(service.subscribeAsync('elsewhere/#'), /Subscribe error/, 'no subscription outside the display tree')

  await setupServiceLogin(adminUrl, { username: 'svc', password: 'second-password' })
  t.match(await login(t, mosquitto.url('svc', 'first-password')), /Not authorized/)
  t.type(await login(t, mosquitto.url('svc', 'second-password')), 'object')
})

t.test('a service whose MQTT login has no dynamic-security rights does not start, and says what to do', async (t) => {
  const mosquitto = await startMosquitto(t)
  const admin = await connectAsync(mosquitto.url(mosquitto.admin.username, mosquitto.admin.password), { protocolVersion: 4, reconnectPeriod: 0 })
  t.teardown(() => admin.endAsync())
  await (await DynamicSecurity.attach(admin, systemClock)).run({ command: 'createClient', username: 'plain', password: 'plain-password' })
  await t.rejects(
    startTestService(t, { MQTT_URL: mosquitto.url('plain', 'plain-password'), MQTT_DISPLAY_CREDENTIALS: 'dynamic-security' }),
    { name: 'DynamicSecurityUnavailable', message: /mosquitto-setup/ },
  )
})

t.test('on Mosquitto a registered display logs in with its credential, advertises its capability and an assigned revision reaches device_applied', async (t) => {
  const farm = await openMosquittoFarm(t)
  const display = await registerDisplay(farm)
  const sim = await connectSimulator(t, farm, display)
  const revision = await publishedRevision(farm)
  const res = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(res.status, 200, res.text)
  await sim.waitFor(() => sim.active?.activation_generation === 1, 10_000, 'applied')
  await waitFor(async () => (await getTarget(farm, display.id)).json.status === 'device_applied', 'device_applied')
  t.equal(sim.envelopes[0]!.data, revision.data)
  await waitFor(() => sim.feed !== null, 'the status feed')
  t.equal(sim.feed!.pixels.length, display.pixels.length)
  t.match(await login(t, farm.mosquitto.url(display.credential.username, 'wrong-password')), /Not authorized/, 'a wrong password is refused')
})

t.test('Mosquitto enforces the MQTT access of a display: subscriptions only inside its own base, publications only to its own credential topics', async (t) => {
  const farm = await openMosquittoFarm(t)
  const a = await registerDisplay(farm)
  const b = await registerDisplay(farm)
  const addressOf = (d: RegisteredDisplay) => ({ organizationId: farm.orgId, displayId: d.id, bindingEpoch: d.bindingEpoch })
  const client = await login(t, displayLogin(farm, a))
  if (typeof client === 'string') throw new Error(client)
  t.same((await client.subscribeAsync(`${baseTopic(addressOf(a))}/#`))[0]!.qos, 0, 'its own base')
  for (const filter of [`${baseTopic(addressOf(b))}/#`, `svc/v1/${farm.orgId}/#`, '#', '$CONTROL/dynamic-security/v1/response']) {
    await t.rejects(client.subscribeAsync(filter), /Subscribe error/, `refused: ${filter}`)
  }
  const seen = await watch(farm, 'svc/v1/#')
  const forbidden = [
    credentialTopic(addressOf(b), b.credential.credentialId, 'receipt'),
    `${baseTopic(addressOf(a))}/profile/config`,
    credentialTopic(addressOf(a), randomUUID(), 'health'),
  ]
  for (const topic of forbidden) await client.publishAsync(topic, '{}', { qos: 1 })
  const own = credentialTopic(addressOf(a), a.credential.credentialId, 'health')
  await client.publishAsync(own, '{"ok":true}', { qos: 1 })
  // One client's publications are forwarded in order: once its last one arrived, a refused one would have too.
  await waitFor(() => seen.some((m) => m.topic === own), 'its own health message')
  t.same(seen.filter((m) => forbidden.includes(m.topic)), [], 'nothing outside its credential topics got through')
  const denied = await client.publishAsync('$CONTROL/dynamic-security/v1', JSON.stringify({ commands: [{ command: 'deleteClient', username: b.credential.username }] }), { qos: 1 }).then(() => login(t, displayLogin(farm, b)))
  t.type(denied, 'object', 'a display cannot drive the plugin: the other display still logs in')
})

t.test('a rebind on Mosquitto disconnects and refuses the old credential; deleting the display removes the new one', async (t) => {
  const farm = await openMosquittoFarm(t)
  const display = await registerDisplay(farm)
  const old = await login(t, displayLogin(farm, display))
  if (typeof old === 'string') throw new Error(old)
  const closed = new Promise<void>((resolve) => old.once('close', () => resolve()))
  const rebound = await request(farm.url, `/v1/mqtt/displays/${display.id}/rebind`, { method: 'POST', headers: farm.admin })
  t.equal(rebound.status, 200, rebound.text)
  await closed
  t.match(await login(t, displayLogin(farm, display)), /Not authorized/, 'the old credential is refused')
  const current = { ...display, bindingEpoch: rebound.json.bindingEpoch, credential: rebound.json.credential }
  t.type(await login(t, displayLogin(farm, current)), 'object', 'the new credential logs in')
  const removed = await request(farm.url, `/v1/mqtt/displays/${display.id}`, { method: 'DELETE', headers: farm.admin })
  t.equal(removed.status, 200, removed.text)
  t.match(await login(t, displayLogin(farm, current)), /Not authorized/, 'a deleted display\'s credential is refused')
})

t.test('reconciliation deletes broker clients of revoked credentials at once and unknown ones on the second pass, and reports current credentials the broker lost', async (t) => {
  const farm = await openMosquittoFarm(t)
  const display = await registerDisplay(farm)
  const rebound = await request(farm.url, `/v1/mqtt/displays/${display.id}/rebind`, { method: 'POST', headers: farm.admin })
  t.equal(rebound.status, 200, rebound.text)
  // What a crash between a store commit and the broker command leaves behind.
  const revokedName = display.credential.username
  const unknownName = `display-${randomUUID()}`
  for (const username of [revokedName, unknownName]) await farm.dynsec.run({ command: 'createClient', username, password: 'left-behind' })
  const names = async () => ((await farm.dynsec.run({ command: 'listClients', verbose: false, count: -1, offset: 0 })) as { clients: string[] }).clients
  const first = await farm.credentials.reconcile()
  t.equal(first.removed, 1)
  t.notOk((await names()).includes(revokedName), 'the revoked credential is gone after one pass')
  t.ok((await names()).includes(unknownName), 'an unknown one may be a registration between its grant and its commit: kept once')
  const second = await farm.credentials.reconcile()
  t.equal(second.removed, 1)
  t.notOk((await names()).includes(unknownName), 'gone on the second pass')
  t.ok((await names()).includes(rebound.json.credential.username), 'the current credential stays')

  await farm.dynsec.run({ command: 'deleteClient', username: rebound.json.credential.username })
  t.same((await farm.credentials.reconcile()).missing, [display.id], 'a current credential the broker lost is reported')
  const metrics = await request(farm.url, '/metrics')
  t.match(metrics.text, /displays_broker_credentials_missing 1/)
})

t.test('when Mosquitto is down, registration answers 503 mqtt_broker_unavailable and stores nothing', async (t) => {
  const farm = await openMosquittoFarm(t)
  const before = await registerDisplay(farm)
  await farm.mosquitto.stop()
  const refused = await request(farm.url, '/v1/mqtt/displays', { method: 'POST', headers: farm.admin, body: { name: 'Rack B', pixels: before.pixels } })
  t.equal(refused.status, 503, refused.text)
  t.equal(refused.json.error, 'mqtt_broker_unavailable')
  t.ok(refused.headers['retry-after'], 'with Retry-After')
  const list = await request(farm.url, '/v1/mqtt/displays', { headers: farm.admin })
  t.same(list.json.map((d: { id: string }) => d.id), [before.id], 'no display without a broker credential')
})

t.test('a retained message a display left on Mosquitto is not taken as fresh when the service subscribes again, and is cleared', async (t) => {
  const farm = await openMosquittoFarm(t)
  const display = await registerDisplay(farm)
  const client = await login(t, displayLogin(farm, display))
  if (typeof client === 'string') throw new Error(client)
  const topic = credentialTopic({ organizationId: farm.orgId, displayId: display.id, bindingEpoch: 1 }, display.credential.credentialId, 'capabilities')
  await client.publishAsync(topic, JSON.stringify({ signal_profile: { format_version: 1, max_decoded_bytes: 750, max_phases: 8, supports_white_output: true, supports_cct: true } }), { qos: 1, retain: true })
  await waitFor(async () => (await request(farm.url, `/v1/mqtt/displays/${display.id}`, { headers: farm.admin })).json.capabilitiesReportedAt !== null, 'the live report recorded')
  // The service's connection drops; MQTT.js reconnects and subscribes again, and the broker replays what is retained.
  farm.service.services.mqtt.client.stream.destroy()
  await waitFor(async () => /displays_mqtt_messages_total\{kind="capabilities",outcome="retained"\} 1/.test((await request(farm.url, '/metrics')).text), 'the replay dropped')
  const seen = await watch(farm, 'svc/v1/#')
  const marker = credentialTopic({ organizationId: farm.orgId, displayId: display.id, bindingEpoch: 1 }, display.credential.credentialId, 'health')
  await client.publishAsync(marker, '{}', { qos: 1 })
  // A retained message is sent on subscription, before anything published after it.
  await waitFor(() => seen.some((m) => m.topic === marker), 'the marker')
  t.same(seen.filter((m) => m.topic === topic), [], 'no retained display message is left on the broker')
})
