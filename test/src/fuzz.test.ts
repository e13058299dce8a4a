/**
 * Every operation of the served OpenAPI document gets a bounded, seeded set
 * of hostile requests (path, query and body cases from test/helpers/
 * fuzz-cases.ts), with the admin's session and, where the route takes one,
 * an API key holding every scope; no answer may be 5xx. The document is read
 * at run time, so routes added later are fuzzed without touching this file.
 * A failure names the method, path, input kind, answer and the error the
 * service logged for it. FUZZ_SEED picks another deterministic run;
 * FUZZ_DUMP=<file> appends one line per request, to see what reached where.
 *
 * Safety (this machine may only reach loopback): every printer the run
 * creates, the fixture included, has the address 127.0.0.1 (fuzz-inputs.ts
 * never sends another address), and an operation that opens connections
 * (test-connection) names only ids that do not exist or the fixture, whose
 * address is checked again before each such request. The admin session is
 * never revoked: the run never sends its refresh token or password, and never
 * names its own API key in a path.
 *
 * Then the isolation check of test/helpers/isolation.ts on this service, after
 * all that: every id field of a body or query, given another organization's
 * resource instead of the caller's own, answers 404.
 *
 * Last, a display publishes messages with a lone surrogate escape over MQTT:
 * each must be dropped, and the service must keep answering.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { appendFileSync } from 'node:fs'
import { connectAsync } from 'mqtt'
import { credentialTopic } from '../../protocol/display-mqtt.js'
import { consentScopes } from '../../protocol/scopes.js'
import { fullCapability } from '../../src/simulators/display-sim.js'
import { setupServiceLogin } from '../../src/mqtt/setup-cli.js'
import { openDisplayFarm, registerDisplay } from '../helpers/displays.js'
import { waitFor } from '../helpers/poll.js'
import { casesFor, operationsOf, resourceOf, type FuzzCase, type Operation, type Parameter } from '../helpers/fuzz-cases.js'
import { addressLike, fillFreshFields, hasFreshFields, isObject, loopback, seededRandom, seedFor, type Json } from '../helpers/fuzz-inputs.js'
import { hostileForms, sendRaw } from '../helpers/hostile-forms.js'
import { request, signIn } from '../helpers/http.js'
import { crossOrganizationIds, twoOrganizations } from '../helpers/isolation.js'
import { startMosquitto } from '../helpers/mosquitto.js'
import { startTestService, testAdmin } from '../helpers/service.js'

const seed = Number(process.env['FUZZ_SEED'] ?? 20_240_601)
const requestsPerOperation = 60
const concurrency = 6
const requestTimeoutMs = 15_000

/**
 * In the real-service run, a Mosquitto of the test's own with dynamic security (on loopback): the shared
 * one on 1883 has no plugin, so every display route would stop at 503 MQTT_DISPLAY_NOT_CONFIGURED.
 */
async function brokerEnv(): Promise<Record<string, string>> {
  if (!process.env['MQTT_URL']) return {}
  const mosquitto = await startMosquitto(t)
  const login = { username: 'printfarm', password: randomBytes(16).toString('base64url') }
  await setupServiceLogin(mosquitto.url(mosquitto.admin.username, mosquitto.admin.password), login)
  return { MQTT_URL: mosquitto.url(login.username, login.password), MQTT_DISPLAY_CREDENTIALS: 'dynamic-security' }
}

const svc = await startTestService(t, await brokerEnv())
const url = svc.url
const admin = await signIn(url, testAdmin.email, testAdmin.password)
const orgId: string = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0].id
const adminHeaders = { ...admin.auth, 'x-organization-id': orgId }
const createdKey = await request(url, '/v1/api-keys', { method: 'POST', headers: adminHeaders, body: { name: 'fuzz: every scope', scopes: [...consentScopes] } })
if (createdKey.status !== 200) throw new Error(`api key: ${createdKey.status} ${createdKey.text}`)
const ownKeyId: string = createdKey.json.id
const keyHeaders = { 'x-api-key': String(createdKey.json.key) }
const fixture = await request(url, '/v1/printer-config', { method: 'POST', headers: adminHeaders, body: { name: 'fuzz fixture', ip_address: loopback } })
if (fixture.status !== 200) throw new Error(`fixture printer: ${fixture.status} ${fixture.text}`)
const fixtureId: string = fixture.json.id

/** Ids the fuzz itself created (2xx with a top-level id), by the path template that created them. */
const createdIds = new Map<string, string[]>()
/** Structured values seen in 2xx answers, by property name: valid-ish bodies for routes that take them back (a draft). */
const examples = new Map<string, Json>()

function harvest(op: Operation, answer: unknown): void {
  if (!isObject(answer)) return
  const id = answer['id']
  if (typeof id === 'string' && id !== ownKeyId && id !== orgId) createdIds.set(op.path, [...(createdIds.get(op.path) ?? []), id])
  const walk = (value: Json, depth: number): void => {
    if (depth > 3 || !isObject(value)) return
    for (const [key, child] of Object.entries(value)) {
      if (typeof child === 'object' && child !== null && !addressLike.test(key) && !examples.has(key)) examples.set(key, structuredClone(child))
      walk(child, depth + 1)
    }
  }
  walk(answer, 0)
}

function harvestText(op: Operation, text: string): void {
  let answer: unknown
  try {
    answer = JSON.parse(text)
  } catch {
    return // not JSON (the farm page, metrics): nothing to learn from it
  }
  harvest(op, answer)
}

function isPrinterParam(op: Operation, param: Parameter): boolean {
  const before = op.path.split(`/{${param.name}}`)[0] ?? ''
  return /printer/i.test(param.name) || /printer[^/]*$/.test(before)
}

/** Operations that open connections to a printer's address (safety: see the module header). */
const opensConnections = (op: Operation) => /connect/i.test(op.path) && op.method !== 'GET' && !/status/.test(op.path)

function knownIds(op: Operation, param: Parameter): string[] {
  // Deleting the fixture would end the run's safety check: a delete names printers the run created.
  const printer = isPrinterParam(op, param) && op.method !== 'DELETE' ? [fixtureId] : []
  // An operation that connects names only the fixture (re-checked before each request) or ids that do not exist.
  if (opensConnections(op)) return printer
  const prefix = op.path.split(`/{${param.name}}`)[0] ?? ''
  return [...printer, ...(createdIds.get(prefix) ?? [])].filter((id) => id !== ownKeyId)
}

async function assertFixtureIsLoopback(): Promise<void> {
  const res = await request(url, `/v1/printer-config/${fixtureId}`, { headers: adminHeaders })
  const address = res.json?.printer?.ip_address
  if (address !== loopback) throw new Error(`the fixture printer's address changed to ${JSON.stringify(address)}: stopping before anything connects to it`)
}

interface Outcome {
  status: number
  text: string
  requestId: string | undefined
  /** The body as sent (optimistic-concurrency fields filled in). */
  sent: string | Buffer | undefined
}

/** The body to send, with optimistic-concurrency fields set to the resource's current values. */
async function freshBody(op: Operation, c: FuzzCase, headers: Record<string, string>): Promise<string | Buffer | undefined> {
  if (typeof c.body !== 'string' || !hasFreshFields(c.body)) return c.body
  const resource = resourceOf(op, c.url)
  const current = resource === undefined ? undefined : await request(url, resource, { headers })
  return fillFreshFields(c.body, current?.status === 200 ? current.json : null)
}

async function send(op: Operation, c: FuzzCase, headers: Record<string, string>): Promise<Outcome> {
  if (opensConnections(op) && c.pathIds.includes(fixtureId)) await assertFixtureIsLoopback()
  const init: RequestInit = { method: op.method, headers: { ...headers, ...(c.contentType ? { 'content-type': c.contentType } : {}) }, signal: AbortSignal.timeout(requestTimeoutMs) }
  const body = await freshBody(op, c, headers)
  if (body !== undefined && op.method !== 'GET') init.body = body
  try {
    const res = await fetch(`${url}${c.url}`, init)
    const text = await res.text()
    return { status: res.status, text, requestId: res.headers.get('x-request-id') ?? undefined, sent: body }
  } catch (error) {
    return { status: 0, text: `no answer: ${String(error)}`, requestId: undefined, sent: body }
  }
}

/** The error the service logged for a request, the root cause of a 500. */
function loggedError(requestId: string | undefined): string {
  if (requestId === undefined) return ''
  const line = svc.logs.find((l) => l['requestId'] === requestId && l['level'] === 'error')
  const error = line?.['error']
  return isObject(error) ? String(error['message'] ?? '') : ''
}

async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await fn(items[i]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

const served = await fetch(`${url}/openapi.json`)
const operations = operationsOf(await served.json())
// Creating routes first (their ids feed the routes under them), removals last.
const rank = (op: Operation) => (op.method === 'DELETE' ? 2 : op.path.includes('{') ? 1 : 0)
const ordered = [...operations].sort((a, b) => rank(a) - rank(b))
const byName = (name: string): Json | undefined => (/^printerId$/i.test(name) ? fixtureId : /^organizationId$/i.test(name) ? orgId : examples.get(name))
t.comment(`fuzz seed ${seed} (FUZZ_SEED), ${operations.length} operations`)

t.test('fuzz - the document lists operations to fuzz', async (t) => {
  t.ok(operations.length > 10, `${operations.length} operations`)
})

/** 2xx and 4xx are answers; anything else (5xx, no answer, a redirect) is a failure. */
const isAnswer = (status: number) => (status >= 200 && status < 300) || (status >= 400 && status < 500)

interface Failure {
  count: number
  message: string
}

/** Failures keyed by input kind, status and logged cause: one report per root cause and input, with a count. */
function recordFailure(failures: Map<string, Failure>, op: Operation, c: FuzzCase, who: string, outcome: Outcome): void {
  const cause = loggedError(outcome.requestId)
  const signature = `${c.kind} | ${outcome.status} | ${cause || outcome.text.slice(0, 120)}`
  const seen = failures.get(signature)
  if (seen) {
    seen.count++
    return
  }
  const sent = outcome.sent
  const body = typeof sent === 'string' ? sent.slice(0, 300) : sent === undefined ? '(none)' : `<${sent.length} bytes: ${sent.toString('hex').slice(0, 80)}>`
  failures.set(signature, {
    count: 1,
    message:
      `${op.method} ${c.url.slice(0, 300)} [${who}] input "${c.kind}" answered ${outcome.status}: ${outcome.text.slice(0, 400)}` +
      `${cause ? ` (logged: ${cause})` : ''}; request body ${body}`,
  })
}

for (const op of ordered) {
  t.test(`fuzz - ${op.method} ${op.path} answers no 5xx to hostile input`, async (t) => {
    await assertFixtureIsLoopback()
    const credentials: [string, Record<string, string>][] = [['admin session', adminHeaders]]
    if (op.acceptsApiKey) credentials.push(['API key', keyHeaders])
    const failures = new Map<string, Failure>()
    const random = seededRandom(seedFor(seed, `${op.method} ${op.path}`))
    for (const [who, headers] of credentials) {
      const cases = casesFor(op, { random, hints: { random, byName }, knownIds, budget: requestsPerOperation })
      // One at a time: cases naming the fixture in an operation that connects (each after a fresh check), and
      // cases that read the resource's current revision first (so the read and the write are not interleaved).
      const serial = opensConnections(op) || cases.some((c) => typeof c.body === 'string' && hasFreshFields(c.body))
      const outcomes = await pool(cases, serial ? 1 : concurrency, async (c) => ({ c, outcome: await send(op, c, headers) }))
      const statuses = new Map<number, number>()
      for (const { c, outcome } of outcomes) {
        const dump = process.env['FUZZ_DUMP']
        if (dump) appendFileSync(dump, `${op.method} ${c.url.slice(0, 200)} [${who}] ${c.kind} -> ${outcome.status} ${outcome.text.slice(0, 200)}\n`)
        statuses.set(outcome.status, (statuses.get(outcome.status) ?? 0) + 1)
        if (outcome.status >= 200 && outcome.status < 300) harvestText(op, outcome.text)
        if (!isAnswer(outcome.status)) recordFailure(failures, op, c, who, outcome)
      }
      t.comment(`${who}: ${cases.length} requests, statuses ${[...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}x${n}`).join(' ')}`)
      // A revoked credential would turn the rest of the run into 401s that prove nothing.
      if (!op.public) t.ok([...statuses.keys()].some((s) => s !== 401), `${who}: some requests got past authentication`)
    }
    for (const { count, message } of failures.values()) t.fail(`${message}${count > 1 ? ` (and ${count - 1} more like it)` : ''}`)
    if (failures.size === 0) t.pass('every answer is 2xx or 4xx')
  })
}

const multipartOperations = operations.filter((op) => op.multipart)

t.test('fuzz - the document lists the upload routes whose forms are fuzzed', async (t) => {
  t.ok(multipartOperations.length > 0, multipartOperations.map((op) => `${op.method} ${op.path}`).join(', '))
})

for (const op of multipartOperations) {
  t.test(`fuzz - ${op.method} ${op.path} answers hostile multipart forms with 2xx or 4xx, sent whole, chunked and cut off, and stays up`, async (t) => {
    // The route's path ids: a model of the test's own (the upload routes live under a model).
    const model = await request(url, '/v1/models', { method: 'POST', headers: adminHeaders, body: { name: 'fuzz: hostile forms' } })
    t.equal(model.status, 201, model.text)
    const path = op.path.replace(/\{[^}]+\}/g, String(model.json.id))
    const failures: string[] = []
    for (const hostile of hostileForms()) {
      for (const framing of ['content-length', 'chunked'] as const) {
        const sent = { method: op.method, path, headers: adminHeaders, contentType: hostile.contentType, body: hostile.body, framing }
        const answer = await sendRaw(url, sent)
        if (!isAnswer(answer.status)) failures.push(`${hostile.kind} (${framing}): answered ${answer.status} ${answer.text.slice(0, 200)}`)
        // The client leaves halfway through the body: no answer is read, the node must simply carry on.
        if (hostile.body.length > 1) await sendRaw(url, { ...sent, cutAt: Math.floor(hostile.body.length / 2) })
        const health = await request(url, '/healthz')
        if (health.status !== 200) failures.push(`${hostile.kind} (${framing}): /healthz answered ${health.status} afterwards`)
      }
    }
    for (const failure of failures) t.fail(failure)
    // (The node runs in this process: had any form ended it, this test would not be reporting.)
    t.pass(`${hostileForms().length} forms, each sent whole and cut off, with a Content-Length and chunked`)
    // A request whose client left is cleaned up after the socket closed: what it stored goes soon after.
    await waitFor(async () => {
      const audit = await request(url, `/v1/models/${model.json.id}/files/audit`, { headers: adminHeaders })
      return audit.status === 200 && audit.json.orphaned_files.length === 0
    }, 'no stored bytes are left without a file row')
  })
}

t.test("fuzz - isolation: after the hostile requests, every id field of the document given another organization's resource answers 404", async (t) => {
  const { a, b } = await twoOrganizations(url)
  await crossOrganizationIds(t, url, a, b)
})

t.test('fuzz - a display message with a lone surrogate escape is dropped; the service stays up', async (t) => {
  const farm = await openDisplayFarm(t)
  const display = await registerDisplay(farm)
  // A bare client with the display's credential, not the simulator: nothing else publishes on the display's topics, so
  // the outcome counted after each message is that message's.
  const device = await connectAsync(farm.brokerUrl, {
    username: display.credential.username,
    password: display.credential.password,
    protocolVersion: 4,
    clientId: `fuzz-display-${randomBytes(6).toString('hex')}`,
    reconnectPeriod: 0,
  })
  t.teardown(() => device.endAsync(true))
  const address = { organizationId: farm.orgId, displayId: display.id, bindingEpoch: display.bindingEpoch }
  /** Display messages of one kind the gateway has dealt with, by outcome. */
  const outcomes = async (kind: string): Promise<Map<string, number>> => {
    const prefix = `displays_mqtt_messages_total{kind="${kind}",outcome="`
    const lines = (await request(farm.url, '/metrics')).text.split('\n').filter((line) => line.startsWith(prefix))
    return new Map(lines.map((line) => [line.slice(prefix.length, line.indexOf('"', prefix.length)), Number(line.slice(line.lastIndexOf(' ') + 1))]))
  }
  const total = (counts: Map<string, number>) => [...counts.values()].reduce((a, b) => a + b, 0)
  const marker = '\u0000surrogate\u0000'
  const receipt = {
    organization_id: farm.orgId,
    display_id: display.id,
    binding_epoch: display.bindingEpoch,
    credential_id: display.credential.credentialId,
    session_id: marker,
    session_generation: 1,
    status_sequence: 1,
    observed_at: new Date().toISOString(),
    refresh_requested: false,
    profile: { active: null, attempted: null, highest_admitted: null, result: 'announced', refresh_requested: false, error_code: null },
  }
  // Each payload is one the gateway would take but for the escape of half a surrogate pair.
  const payloads: [kind: 'capabilities' | 'receipt' | 'resync' | 'health', payload: string][] = [
    ['capabilities', JSON.stringify({ firmware: marker, pixels: 64, signal_profile: fullCapability })],
    ['receipt', JSON.stringify(receipt)],
    ['resync', JSON.stringify({ reason: marker })],
    ['health', JSON.stringify({ uptime_s: 5, note: marker })],
  ]
  for (const [kind, template] of payloads) {
    const payload = template.replace('"\\u0000surrogate\\u0000"', '"\\ud800"')
    t.match(payload, /"\\ud800"/, `${kind}: the payload carries the escape`)
    const before = await outcomes(kind)
    await device.publishAsync(credentialTopic(address, display.credential.credentialId, kind), payload, { qos: 1 })
    await waitFor(async () => total(await outcomes(kind)) > total(before), `the ${kind} message was handled`)
    const after = await outcomes(kind)
    const grew = [...after].filter(([outcome, n]) => n > (before.get(outcome) ?? 0)).map(([outcome]) => outcome)
    t.notOk(grew.includes('accepted'), `${kind}: dropped, not accepted (outcome ${grew.join(', ')})`)
    t.equal((await request(farm.url, '/healthz')).status, 200, `${kind}: the service still answers /healthz`)
  }
  const read = await request(farm.url, `/v1/mqtt/displays/${display.id}`, { headers: farm.admin })
  t.equal(read.status, 200, 'the display still reads')
  t.equal(read.json?.capabilitiesReportedAt, null, 'the capabilities report was not recorded')
  t.notMatch(read.text, /\ufffd|\\ud800/, 'nothing of the escape was stored')
})
