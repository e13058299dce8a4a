/**
 * MCP resources and change notifications with the official client SDK: an agent reads a printer, a
 * print job and the queue as resources (both protocol eras), and on 2026-07-28 follows them with
 * subscriptions/listen: a printer's event batch, a job's cancellation and the queue's new job each
 * arrive as notifications/resources/updated for that URI. A stream never hears of another
 * organization's printer, and naming another organization's printer or job, an unknown URI or a
 * resource outside the token's scopes is refused before the stream opens.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { addPrinter, batch, EventSender, type Farm, openFarm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { connectAgent, heard, jsonOf, TestAuthProvider, waitFor } from '../../helpers/mcp.js'
import { startOAuthService } from '../../helpers/oauth.js'
import { farmOf } from '../../../src/routes/mcp.js'

const svc = await startOAuthService(t)
const url = svc.url
const farm = await openFarm(url)
const admin = farm.admin

const senders = new Map<Farm, EventSender>()
/** One sender per farm (each printer belongs to one). */
async function send(f: Farm, printer: string, type: string, data: Record<string, unknown> = {}): Promise<void> {
  if (!senders.has(f)) senders.set(f, new EventSender(f))
  await senders.get(f)!.applied(printer, type, data)
}
const printer = await addPrinter(farm, 'host-a', { enabled: true })
await send(farm, printer, 'heartbeat')
const quiet = await addPrinter(farm, 'host-a', { enabled: true })
await send(farm, quiet, 'heartbeat')

const modelId = await createModel(url, admin, { name: 'Listen Benchy' })
const uploaded = await upload(url, admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })
if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${JSON.stringify(uploaded.json)}`)
const fileId: string = uploaded.json.id
async function createJob(name: string): Promise<number> {
  const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: admin, body: { name, model_file_id: fileId, print_options: { auto_assign: false } } })
  if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
  return res.json.id
}
const jobId = await createJob('Listen job')

// Another organization of the same person, with a printer of its own.
const otherOrg = (await request(url, '/v1/organizations', { method: 'POST', headers: admin, body: { name: 'Other farm' } })).json.id as string
const other: Farm = await (async () => {
  const headers = { ...admin, 'x-organization-id': otherOrg }
  const key = await request(url, '/v1/api-keys', { method: 'POST', headers, body: { name: 'other bridge', scopes: ['printers:read', 'printers:write'] } })
  return { url, orgId: otherOrg, admin: headers, bridge: { 'x-api-key': key.json.key as string } }
})()
const foreignPrinter = await addPrinter(other, 'host-a', { enabled: true })
await send(other, foreignPrinter, 'heartbeat')
const foreignJob = await (async () => {
  const model = await createModel(url, other.admin, { name: 'Other Benchy' })
  const file = await upload(url, other.admin, model, { name: 'other.3mf', bytes: bambuThreeMf() })
  const res = await request(url, '/v1/print-jobs/create', { method: 'POST', headers: other.admin, body: { name: 'theirs', model_file_id: file.json.id } })
  return res.json.id as number
})()

const printerUri = `printfarm://printers/${printer}`
const jobUri = `printfarm://print-jobs/${jobId}`

for (const era of ['legacy', 'modern'] as const) {
  t.test(`mcp resources (${era}) - a printer, a print job and the queue read as the tools answer them`, async (t) => {
    const { client } = await connectAgent(url, new TestAuthProvider(url), era)
    t.teardown(() => client.close())
    const caps = client.getServerCapabilities()
    t.equal(caps?.resources?.subscribe ?? false, era === 'modern', 'subscriptions offered on 2026-07-28 only (the stateless 2025 endpoint has no stream)')
    const templates = await client.listResourceTemplates()
    t.same(templates.resourceTemplates.map((r) => r.uriTemplate).sort(), ['printfarm://print-jobs/{job_id}', 'printfarm://printers/{printer_id}'])
    const listed = await client.listResources()
    t.same(listed.resources.map((r) => r.uri), ['printfarm://queue'])

    const read = async (uri: string) => jsonOf(await client.readResource({ uri }))
    t.same(await read(printerUri), (await request(url, `/v1/printers/${printer}`, { headers: admin })).json, 'the printer as GET /v1/printers/{id} answers it')
    t.same(await read(jobUri), (await request(url, `/v1/print-jobs/${jobId}`, { headers: admin })).json, 'the job as GET /v1/print-jobs/{id} answers it')
    t.match(await read('printfarm://queue'), { jobs: Array }, 'the queue')
    await t.rejects(client.readResource({ uri: `printfarm://printers/${foreignPrinter}` }), { code: -32602 }, "another organization's printer is not found")
    await t.rejects(client.readResource({ uri: `printfarm://print-jobs/${foreignJob}` }), { code: -32602 }, "another organization's job is not found")
  })
}

t.test('mcp listen (2026-07-28) - a printer change, a job change and a queue change each arrive as resources/updated', async (t) => {
  const { client } = await connectAgent(url, new TestAuthProvider(url), 'modern')
  t.teardown(() => client.close())
  const counts = heard(client)
  const subscription = await client.listen({ resourceSubscriptions: [printerUri, jobUri, 'printfarm://queue'] })
  t.same(subscription.honoredFilter.resourceSubscriptions, [printerUri, jobUri, 'printfarm://queue'], 'the server honours the three')

  await send(farm, printer, 'heartbeat', { nozzle_temp: 211 })
  await waitFor(() => (counts.get(printerUri) ?? 0) >= 1, 'the printer change is heard')

  await send(farm, quiet, 'heartbeat', { nozzle_temp: 190 })
  const queued = await createJob('Listen second')
  await waitFor(() => (counts.get('printfarm://queue') ?? 0) >= 1, 'the new job changes the queue')

  const cancelled = await request(url, `/v1/print-jobs/${jobId}/status`, { method: 'PATCH', headers: admin, body: { status: 'cancelled' } })
  t.equal(cancelled.status, 200, cancelled.text)
  await waitFor(() => (counts.get(jobUri) ?? 0) >= 1, 'the cancelled job is heard')
  t.notOk(counts.has(`printfarm://printers/${quiet}`), 'a printer not followed is not announced')
  t.notOk(counts.has(`printfarm://print-jobs/${queued}`), 'nor a job not followed')

  // What the stream was told is what a read now shows.
  const job = jsonOf(await client.readResource({ uri: jobUri }))
  t.equal(job.status, 'cancelled')
  await subscription.close()
  t.equal(await subscription.closed, 'local')
})

t.test("mcp listen - another organization's change is never heard, its ids are refused, unknown URIs and missing scopes too", async (t) => {
  const { client } = await connectAgent(url, new TestAuthProvider(url), 'modern')
  t.teardown(() => client.close())
  await t.rejects(client.listen({ resourceSubscriptions: [`printfarm://printers/${foreignPrinter}`] }), /no printer/, "another organization's printer")
  await t.rejects(client.listen({ resourceSubscriptions: [`printfarm://print-jobs/${foreignJob}`] }), /no print job/, "another organization's job")
  await t.rejects(client.listen({ resourceSubscriptions: ['printfarm://spools/1'] }), /unknown resource/, 'a URI this server does not have')

  // The other organization's agent follows its printer; ours follows ours; only theirs hears theirs.
  const theirs = await connectAgent(url, new TestAuthProvider(url, { organizationId: otherOrg }), 'modern')
  t.teardown(() => theirs.client.close())
  const theirCounts = heard(theirs.client)
  const ourCounts = heard(client)
  // Closed here, before the clients: a subscription left to the client's close may be listened to again meanwhile.
  const theirListen = await theirs.client.listen({ resourceSubscriptions: [`printfarm://printers/${foreignPrinter}`] })
  const ourListen = await client.listen({ resourceSubscriptions: [printerUri] })
  t.teardown(() => Promise.all([theirListen.close(), ourListen.close()]))
  await send(other, foreignPrinter, 'heartbeat', { nozzle_temp: 200 })
  await waitFor(() => (theirCounts.get(`printfarm://printers/${foreignPrinter}`) ?? 0) >= 1, 'their agent hears their printer')
  await send(farm, printer, 'heartbeat', { nozzle_temp: 205 })
  await waitFor(() => (ourCounts.get(printerUri) ?? 0) >= 1, 'ours hears ours')
  t.notOk(ourCounts.has(`printfarm://printers/${foreignPrinter}`), "ours never hears theirs")
  t.notOk(theirCounts.has(printerUri), 'nor theirs ours')

  // A token with printers:read only (as a client that asked for less holds) may follow printers, not jobs: 403 insufficient_scope (step-up).
  const provider = new TestAuthProvider(url)
  await (await connectAgent(url, provider)).client.close()
  const me = (await request(url, '/v1/me', { headers: admin })).json
  const clientId = (await provider.clientInformation())!.client_id
  const narrow = await svc.services.oauthTokens.issue({ userId: me.user.id, clientId, organizationId: farm.orgId, scopes: ['printers:read'], audience: `${url}/v1/mcp` })
  const listen = (uris: string[]) =>
    request(url, '/v1/mcp', {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen', authorization: `Bearer ${narrow.token}` },
      body: {
        jsonrpc: '2.0',
        id: 'listen:1',
        method: 'subscriptions/listen',
        params: { notifications: { resourceSubscriptions: uris }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } },
      },
    })
  const res = await listen([printerUri, jobUri])
  t.equal(res.status, 403, res.text)
  t.match(res.headers['www-authenticate'], /error="insufficient_scope"/)
  t.match(res.headers['www-authenticate'], /scope="print-jobs:read/)
  t.match(res.headers['www-authenticate'], /resource_metadata=/)
  const many = await listen(Array.from({ length: 501 }, () => printerUri))
  t.match(JSON.parse(many.text), { error: { code: -32602, data: { error: 'validation_failed' } } }, 'at most 500 resources per stream')
})

t.test('mcp listen - a stream ends when its access token expires (the client listens again with a fresh one)', async (t) => {
  const provider = new TestAuthProvider(url)
  await (await connectAgent(url, provider)).client.close()
  const me = (await request(url, '/v1/me', { headers: admin })).json
  const clientId = (await provider.clientInformation())!.client_id
  const { SignJWT } = await import('jose')
  const { kid, key } = svc.services.keyring.signingKey()
  const now = Math.floor(Date.now() / 1000)
  const shortLived = await new SignJWT({ token_use: 'oauth', client_id: clientId, organization_id: farm.orgId, scope: 'printers:read' })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
    .setIssuer(url)
    .setAudience(`${url}/v1/mcp`)
    .setSubject(me.user.id)
    .setJti(randomUUID())
    .setIssuedAt(now)
    .setExpirationTime(now + 3)
    .sign(key)
  const res = await fetch(`${url}/v1/mcp`, {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen', authorization: `Bearer ${shortLived}` },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'listen:1',
      method: 'subscriptions/listen',
      params: { notifications: { resourceSubscriptions: [printerUri] }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/event-stream/)
  // Read until the server ends the stream; the test's own bound (tap's timeout) fails it if it never does.
  const text = await res.text()
  t.match(text, /notifications\/subscriptions\/acknowledged/, 'the stream was acknowledged, then ended')
  const refused = await fetch(`${url}/v1/mcp`, { method: 'POST', headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${shortLived}` }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' })
  t.equal(refused.status, 401, 'and the expired token opens nothing more')
})

t.test('mcp listen - a stream that starts following a job changed while nobody followed it is not told of that change', async (t) => {
  const { client } = await connectAgent(url, new TestAuthProvider(url), 'modern')
  t.teardown(() => client.close())
  const counts = heard(client)
  const staying = await client.listen({ resourceSubscriptions: [printerUri] })
  const job = await createJob('Followed, then not')
  const uri = `printfarm://print-jobs/${job}`
  const brief = await client.listen({ resourceSubscriptions: [uri] })
  await brief.close()
  // Changed while no stream follows it (the other stream stays open in the organization).
  t.equal((await request(url, `/v1/print-jobs/${job}/status`, { method: 'PATCH', headers: admin, body: { status: 'cancelled' } })).status, 200)
  const marker = await createJob('Marker')
  const markerUri = `printfarm://print-jobs/${marker}`
  const late = await client.listen({ resourceSubscriptions: [uri, markerUri] })
  await send(farm, printer, 'heartbeat', { nozzle_temp: 212 })
  await waitFor(() => (counts.get(printerUri) ?? 0) >= 1, 'the printer change is heard')
  // The marker changes after the printer: once it is heard, every check before it has run.
  t.equal((await request(url, `/v1/print-jobs/${marker}/status`, { method: 'PATCH', headers: admin, body: { status: 'cancelled' } })).status, 200)
  await waitFor(() => (counts.get(markerUri) ?? 0) >= 1, 'the marker job change is heard')
  t.notOk(counts.has(uri), 'the job, unchanged since the stream started, is not announced')
  await Promise.all([staying.close(), late.close()])
})

t.test('mcp listen - streams opened at once by one person stop at the per-person limit (20), each refused one says so', async (t) => {
  // The same person's streams of the tests before hold places until the service has seen them close.
  await waitFor(() => svcStreams() === 0, 'the streams of earlier tests are gone')
  const provider = new TestAuthProvider(url)
  await (await connectAgent(url, provider)).client.close()
  const token = provider.accessToken!
  const controllers: AbortController[] = []
  t.teardown(() => controllers.forEach((c) => c.abort()))
  const open = async (n: number): Promise<string> => {
    const controller = new AbortController()
    controllers.push(controller)
    const res = await fetch(`${url}/v1/mcp`, {
      method: 'POST',
      signal: controller.signal,
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen', authorization: `Bearer ${token}` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: `listen:${n}`,
        method: 'subscriptions/listen',
        params: { notifications: { resourceSubscriptions: [printerUri] }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } },
      }),
    })
    if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return 'stream'
    const body = (await res.json()) as { error?: { data?: { error?: string } } }
    return body.error?.data?.error ?? `status ${res.status}`
  }
  const outcomes = await Promise.all(Array.from({ length: 26 }, (_, n) => open(n)))
  t.equal(outcomes.filter((o) => o === 'stream').length, 20, 'twenty streams open')
  t.equal(outcomes.filter((o) => o === 'mcp_subscription_limit').length, 6, 'the others are refused with mcp_subscription_limit')
  controllers.forEach((c) => c.abort())
  // Closed streams give their places back.
  await waitFor(() => svcStreams() === 0, 'the closed streams are gone')
  t.equal(await open(99), 'stream', 'a new stream opens once the others closed')
})

/** Streams open on the service (what the per-organization limit counts). */
function svcStreams(): number {
  let n = 0
  for (const org of [farm.orgId, otherOrg]) n += farmOf(svc.services).bus.streams(org)
  return n
}
