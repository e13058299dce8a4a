/**
 * MQTT access (docs/displays.md), on the embedded broker: a display credential
 * reaches only its own display's topics, and a rebind cuts the old
 * credential off at once.
 */
import t from 'tap'
import { connectAsync, type MqttClient } from 'mqtt'
import { metricValue, request } from '../../helpers/http.js'
import { assign, connectSimulator, openDisplayFarm, publishedRevision, registerDisplay, type DisplayFarm, type RegisteredDisplay } from '../../helpers/displays.js'
import { waitFor } from '../../helpers/poll.js'
import type { TestContext } from '../../helpers/service.js'

async function login(t: TestContext, farm: DisplayFarm, username: string, password: string): Promise<MqttClient> {
  const client = await connectAsync(farm.brokerUrl, { username, password, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 5_000 })
  t.teardown(() => client.endAsync(true))
  return client
}
const base = (farm: DisplayFarm, d: RegisteredDisplay, epoch = d.bindingEpoch) => `svc/v1/${farm.orgId}/display/${d.id}/b/${epoch}`

t.test('a wrong password, an unknown user and no credentials are all refused at CONNECT', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  await t.rejects(connectAsync(farm.brokerUrl, { username: display.credential.username, password: 'wrong', protocolVersion: 4, reconnectPeriod: 0 }), /Bad username or password|Not authorized/i)
  await t.rejects(connectAsync(farm.brokerUrl, { username: 'display-00000000-0000-0000-0000-000000000000', password: 'x', protocolVersion: 4, reconnectPeriod: 0 }), /Bad username or password|Not authorized/i)
  await t.rejects(connectAsync(farm.brokerUrl, { protocolVersion: 4, reconnectPeriod: 0 }), /Bad username or password|Not authorized/i)
})

t.test("a display may subscribe under its own base topic only: another display's topics and the whole tree are refused", async (t) => {
  const farm = await openDisplayFarm(t)
  const mine = await registerDisplay(farm)
  const other = await registerDisplay(farm)
  const client = await login(t, farm, mine.credential.username, mine.credential.password)
  const granted = await client.subscribeAsync([`${base(farm, mine)}/profile/config`, `${base(farm, mine)}/status/#`], { qos: 1 })
  t.same(granted.map((g) => g.qos), [1, 1])
  for (const filter of [`${base(farm, other)}/profile/config`, 'svc/v1/#', `${base(farm, mine, 2)}/profile/config`, '#']) {
    // MQTT.js rejects a SUBACK whose return code is 0x80 (failure).
    await t.rejects(client.subscribeAsync(filter, { qos: 1 }), /Subscribe error/, `refused: ${filter}`)
  }
  t.ok(client.connected, 'a refused subscription does not close the connection')
})

t.test("a display may publish only to its own credential topics, never retained; anything else closes its connection", async (t) => {
  const farm = await openDisplayFarm(t)
  const mine = await registerDisplay(farm)
  const other = await registerDisplay(farm)
  const forbidden = [
    { topic: `${base(farm, other)}/credential/${other.credential.credentialId}/profile/status`, retain: false, why: "another display's receipt topic" },
    { topic: `${base(farm, mine)}/profile/config`, retain: false, why: 'the service-only configuration topic' },
    { topic: `${base(farm, mine)}/credential/${mine.credential.credentialId}/health`, retain: true, why: 'a retained message' },
    { topic: `elsewhere/${farm.orgId}`, retain: false, why: 'a topic outside the display tree' },
  ]
  const client = await login(t, farm, mine.credential.username, mine.credential.password)
  await client.publishAsync(`${base(farm, mine)}/credential/${mine.credential.credentialId}/health`, '{}', { qos: 1 })
  t.pass('its own health topic is accepted')
  for (const { topic, retain, why } of forbidden) {
    const c = await login(t, farm, mine.credential.username, mine.credential.password)
    const closed = new Promise<void>((resolve) => c.once('close', () => resolve()))
    c.publish(topic, '{}', { qos: 1, retain })
    await closed
    t.pass(`closed after publishing to ${why}`)
  }
})

t.test('a rebind disconnects the old credential at once and refuses it from then on; the new one works', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  const old = await login(t, farm, display.credential.username, display.credential.password)
  const closed = new Promise<void>((resolve) => old.once('close', () => resolve()))
  const rebound = await request(farm.url, `/v1/mqtt/displays/${display.id}/rebind`, { method: 'POST', headers: farm.admin })
  t.equal(rebound.status, 200, rebound.text)
  t.equal(rebound.json.bindingEpoch, 2)
  await closed
  t.pass('the old session was closed')
  await t.rejects(connectAsync(farm.brokerUrl, { username: display.credential.username, password: display.credential.password, protocolVersion: 4, reconnectPeriod: 0 }), /Bad username or password|Not authorized/i)
  const sim = await connectSimulator(t, farm, { ...display, bindingEpoch: 2, credential: rebound.json.credential })
  t.ok(sim.client.connected, 'the new credential logs in and reports its capabilities')
})

t.test('a display that advertises no signal_profile capability is refused an assignment, and nothing is published', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  const sim = await connectSimulator(t, farm, display, { capability: null })
  const revision = await publishedRevision(farm)
  const res = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(res.status, 409)
  t.equal(res.json.error, 'signal_profile_capability_missing')
  t.equal(sim.envelopes.length, 0)
})

t.test('bad messages from a display are dropped and counted, never applied: non-JSON, oversized, unknown fields, another display named, an invalid capability', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  const sim = await connectSimulator(t, farm, display)
  const revision = await publishedRevision(farm)
  await sim.client.endAsync(true)
  const client = await login(t, farm, display.credential.username, display.credential.password)
  const receiptTopic = `${base(farm, display)}/credential/${display.credential.credentialId}/profile/status`
  const valid = sim.receipts[0]!
  const sends = [
    'not json',
    JSON.stringify({ ...valid, status_sequence: 50, padding: 'x'.repeat(3000) }),
    JSON.stringify({ ...valid, status_sequence: 51, extra: true }),
    JSON.stringify({ ...valid, status_sequence: 52, display_id: '00000000-0000-4000-8000-000000000009' }),
  ]
  for (const payload of sends) await client.publishAsync(receiptTopic, payload, { qos: 1 })
  const capabilitiesTopic = `${base(farm, display)}/credential/${display.credential.credentialId}/capabilities`
  await client.publishAsync(capabilitiesTopic, JSON.stringify({ signal_profile: { format_version: 1, max_decoded_bytes: 9000 } }), { qos: 1 })
  const metric = async (kind: string, outcome: string) => metricValue((await request(farm.url, '/metrics')).text, `displays_mqtt_messages_total{kind="${kind}",outcome="${outcome}"}`)
  await waitFor(async () => (await metric('capabilities', 'invalid')) === 1, 'the invalid capability report counted')
  t.equal(await metric('receipt', 'invalid_json'), 1)
  t.equal(await metric('receipt', 'too_large'), 1)
  t.equal(await metric('receipt', 'invalid'), 1, 'an unknown field')
  t.equal(await metric('receipt', 'ignored'), 1, 'a receipt naming another display than its topic')
  const after = await request(farm.url, `/v1/mqtt/displays/${display.id}`, { headers: farm.admin })
  t.equal(after.json.capabilities, null, 'an invalid signal_profile object counts as no capability')
  const refused = await assign(farm, display.id, { profileRevisionId: revision.id, expectedBindingEpoch: 1, expectedActivationGeneration: 0 })
  t.equal(refused.json.error, 'signal_profile_capability_missing')
  t.ok(client.connected, 'bad content is dropped, the display stays connected')
})
