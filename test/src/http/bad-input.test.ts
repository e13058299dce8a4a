/**
 * Regressions: inputs that once answered 500. Each is a 400 naming what to fix,
 * and nothing is written.
 */
import t from 'tap'
import { request } from '../../helpers/http.js'
import { openFarm } from '../../helpers/bridge.js'
import { startTestService } from '../../helpers/service.js'
import { connectLive } from '../../helpers/live.js'

const svc = await startTestService(t)
const farm = await openFarm(svc.url)
const url = svc.url

/** A raw JSON text, sent as written (so an escape like \ud800 reaches the server unpaired). */
const raw = (method: string, path: string, text: string) =>
  request(url, path, { method, headers: { ...farm.admin, 'content-type': 'application/json' }, body: text })

t.test('bad input - key logs with a huge `before` (1e308, 20 digits) are 400, not 500', async (t) => {
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'logs', scopes: ['printers:read'] } })
  for (const before of ['1e308', '12345678901234567890', '9007199254740992']) {
    const res = await request(url, `/v1/api-keys/${key.json.id}/logs?before=${before}`, { headers: farm.admin })
    t.equal(res.status, 400, `before=${before}`)
    t.equal(res.json.error, 'validation_failed')
    t.match(res.json.message, /query\.before/)
  }
  t.equal((await request(url, `/v1/api-keys/${key.json.id}/logs?before=9007199254740991`, { headers: farm.admin })).status, 200, 'the largest safe integer is fine')
})

t.test('bad input - a lone surrogate in a signal-profile name or draft is 400 and stores nothing', async (t) => {
  const before = (await request(url, '/v1/mqtt/profiles', { headers: farm.admin })).json.length
  const created = await raw('POST', '/v1/mqtt/profiles', '{"name":"shelf \\ud800"}')
  t.equal(created.status, 400)
  t.equal(created.json.error, 'MQTT_DISPLAY_REQUEST_INVALID', "the group's own code")
  t.match(created.json.message, /body\.name holds an unpaired UTF-16 surrogate/)
  t.equal((await request(url, '/v1/mqtt/profiles', { headers: farm.admin })).json.length, before, 'no profile was created')

  const profile = await request(url, '/v1/mqtt/profiles', { method: 'POST', headers: farm.admin, body: { name: 'shelf' } })
  const draft = structuredClone(profile.json.draft) as { name: string }
  const text = JSON.stringify({ expectedRevision: profile.json.draftRevision, draft: { ...draft, name: 'PLACEHOLDER' } }).replace('PLACEHOLDER', '\\udc00x')
  const saved = await raw('PUT', `/v1/mqtt/profiles/${profile.json.id}/draft`, text)
  t.equal(saved.status, 400, saved.text)
  t.equal(saved.json.error, 'MQTT_DISPLAY_REQUEST_INVALID')
  const after = await request(url, `/v1/mqtt/profiles/${profile.json.id}`, { headers: farm.admin })
  t.equal(after.json.draftRevision, profile.json.draftRevision, 'the draft is unchanged')
})

t.test('bad input - a lone surrogate anywhere in a JSON body is 400 invalid_unicode on the other routes too', async (t) => {
  const res = await raw('POST', '/v1/printer-config', '{"name":"P\\ud83d","ip_address":"127.0.0.1"}')
  t.equal(res.status, 400)
  t.equal(res.json.error, 'invalid_unicode')
  const events = await request(url, '/v1/printer-events/batch', {
    method: 'POST',
    headers: { ...farm.bridge, 'content-type': 'application/json' },
    body: '{"events":[{"eventId":"e\\udfff"}]}',
  })
  t.equal(events.status, 400)
  t.equal(events.json.error, 'invalid_unicode')
  t.equal(events.json.code, 'invalid_unicode', 'printer-event routes carry code too')
})

t.test('bad input - a body that is not UTF-8 is 400 invalid_unicode', async (t) => {
  const res = await request(url, '/v1/printer-config', {
    method: 'POST',
    headers: { ...farm.admin, 'content-type': 'application/json' },
    body: Buffer.concat([Buffer.from('{"name":"P'), Buffer.from([0xc3, 0x28]), Buffer.from('","ip_address":"127.0.0.1"}')]),
  })
  t.equal(res.status, 400)
  t.equal(res.json.error, 'invalid_unicode')
})

t.test('bad input - deeply nested JSON with escaped text (once a stack overflow) is an answer, over HTTP and the live feed; the node lives on', async (t) => {
  const deep = (depth: number, inner: string) => '['.repeat(depth) + inner + ']'.repeat(depth)
  const login = await request(url, '/v1/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: deep(20_000, '"\\ud83d\\ude00"') })
  t.equal(login.status, 400, 'a body of the wrong shape, not a 500')
  const live = await connectLive(url, { headers: farm.admin })
  t.teardown(() => live.close())
  live.ws.send(deep(8000, '"\\ud83d\\ude00"'))
  const shape = await live.next((f) => f.op === 'error')
  t.equal((shape.data as { error: string }).error, 'validation_failed')
  live.ws.send('{"op":"subscribe","topics":["printers\\udc00"]}')
  const unicode = await live.next((f) => f.op === 'error' && (f.data as { error: string }).error === 'invalid_unicode')
  t.match((unicode.data as { message: string }).message, /frame\.topics\[0\] holds an unpaired UTF-16 surrogate/)
  t.equal(live.closed, undefined, 'the socket stays open')
  t.equal((await request(url, '/healthz')).status, 200, 'the node is alive')
})
