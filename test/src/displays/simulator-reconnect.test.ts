/**
 * The display simulator outlives its broker, as a device must: when the
 * broker goes away (the service restarts) it retries with backoff, and when
 * the broker is back it starts a new session, reports its capabilities,
 * subscribes again and announces what it has. Only a refused login ends it.
 *
 * The broker is the embedded one, started and stopped in this process on the
 * same port. Its login check waits until this test's service-side observer
 * is subscribed, so nothing the display sends on (re)connecting is missed.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { connectAsync, type MqttClient } from 'mqtt'
import { createLogger } from '../../../src/observability/log.js'
import { startEmbeddedBroker, type DisplayLogin, type EmbeddedBroker } from '../../../src/mqtt/embedded-broker.js'
import { BrokerRefusedLogin, DisplaySimulator, type ConnectionEvent, type SimulatorOptions } from '../../../src/simulators/display-sim.js'
import { runDisplaySim, type DisplaySimIo } from '../../../src/simulators/display-sim-cli.js'
import { deviceTopicsFilter, feedTopic, parseDeviceTopic, type ReceiptMessage } from '../../../protocol/display-mqtt.js'
import type { TestContext } from '../../helpers/service.js'
import { systemClock } from '../../../actors/clock.js'

const logger = createLogger('silent', { now: systemClock.now })

interface DeviceMessage {
  kind: string
  body: Record<string, unknown>
}

/** A value some later event makes true; `check` runs on every `changed()`. */
class Signal {
  readonly #waiters = new Set<() => void>()
  changed(): void {
    for (const waiter of [...this.#waiters]) waiter()
  }
  until(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    if (check()) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const waiter = () => {
        if (!check()) return
        this.#waiters.delete(waiter)
        clearTimeout(timer)
        resolve()
      }
      // A deadline, not a sleep: the wait ends at the event.
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter)
        reject(new Error(`timed out waiting for ${what}`))
      }, timeoutMs)
      this.#waiters.add(waiter)
    })
  }
}

/** The embedded broker on one port, stopped and started again like a restarting service, with an observer in the service's place. */
class RestartingBroker {
  readonly display: DisplayLogin = { organizationId: randomUUID(), displayId: randomUUID(), bindingEpoch: 1, credentialId: randomUUID() }
  readonly username = `display-${this.display.displayId}`
  readonly password = 'display-secret-1'
  /** Whether the broker accepts the display's credential (false: as if it had been revoked while the broker was down). */
  accepts = true
  port = 0
  readonly received: DeviceMessage[] = []
  readonly signal = new Signal()
  #broker: EmbeddedBroker | undefined
  #observer: MqttClient | undefined

  get url(): string {
    return `mqtt://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    let open!: () => void
    const opened = new Promise<void>((resolve) => (open = resolve))
    this.#broker = await startEmbeddedBroker('127.0.0.1', this.port, logger, {
      verifyDisplay: async (username, password) => {
        await opened
        return this.accepts && username === this.username && password.toString() === this.password ? this.display : undefined
      },
    })
    this.port = this.#broker.port
    const observer = await connectAsync(this.url, { ...this.#broker.serviceCredentials, protocolVersion: 4, reconnectPeriod: 0 })
    observer.on('message', (topic, payload) => {
      const device = parseDeviceTopic(topic)
      if (device === undefined) return
      this.received.push({ kind: device.kind, body: JSON.parse(payload.toString()) })
      this.signal.changed()
    })
    await observer.subscribeAsync(deviceTopicsFilter, { qos: 1 })
    this.#observer = observer
    open()
  }

  async stop(): Promise<void> {
    await this.#observer?.endAsync(true)
    await this.#broker?.close()
    this.#observer = undefined
    this.#broker = undefined
  }

  /** Publishes as the service does: retained, QoS 1. */
  async publishRetained(topic: string, payload: unknown): Promise<void> {
    await this.#observer!.publishAsync(topic, JSON.stringify(payload), { qos: 1, retain: true })
  }

  receipts(): ReceiptMessage[] {
    return this.received.filter((m) => m.kind === 'receipt').map((m) => m.body as unknown as ReceiptMessage)
  }

  capabilityReports(): number {
    return this.received.filter((m) => m.kind === 'capabilities').length
  }

  simulatorOptions(extra: Partial<SimulatorOptions> = {}): SimulatorOptions {
    return { url: this.url, ...this.display, username: this.username, password: this.password, ...extra, clock: extra.clock ?? systemClock }
  }

  cliArgs(password = this.password): string[] {
    const d = this.display
    return ['--url', this.url, '--organization', d.organizationId, '--display', d.displayId, '--epoch', String(d.bindingEpoch), '--credential', d.credentialId, '--username', this.username, '--password', password]
  }
}

async function startedBroker(t: TestContext): Promise<RestartingBroker> {
  const broker = new RestartingBroker()
  await broker.start()
  t.teardown(() => broker.stop())
  return broker
}

const announced = (broker: RestartingBroker, generation: number) => () =>
  broker.receipts().some((r) => r.profile.result === 'announced' && r.session_generation === generation)

/** Short delays, so the test waits on events and not on a device's patience. */
const quickReconnect = { initialDelayMs: 20, maxDelayMs: 80 }

t.test('display simulator - after the broker goes away it retries with doubling delays, and when it is back it starts a new session, reports capabilities, subscribes and announces', async (t) => {
  const broker = await startedBroker(t)
  const sim = await DisplaySimulator.connect(broker.simulatorOptions({ reconnect: quickReconnect }))
  t.teardown(() => sim.close())
  await broker.signal.until(announced(broker, 1), 'the first announcement')
  const first = broker.receipts().at(-1)!
  t.equal(broker.capabilityReports(), 1)

  await broker.stop()
  await sim.waitFor(() => sim.connectionEvents.filter((e) => e.type === 'retrying').length >= 3, 20_000, 'three failed attempts')
  t.equal(sim.connection, 'offline')
  const [lost, ...retries] = sim.connectionEvents
  t.match(lost, { type: 'lost', retryInMs: 20 }, 'the loss is reported with the first delay')
  t.strictSame(retries.slice(0, 3).map((e) => (e.type === 'retrying' ? e.retryInMs : e.type)), [40, 80, 80], 'each failed attempt doubles the delay, up to the maximum')

  await broker.start()
  await sim.waitFor(() => sim.connection === 'connected', 20_000, 'resumed')
  await broker.signal.until(announced(broker, 2), 'the announcement of the new session')
  const resumed = sim.connectionEvents.at(-1)
  t.match(resumed, { type: 'resumed', sessionGeneration: 2 })
  t.equal(broker.capabilityReports(), 2, 'the capabilities are reported again')
  const again = broker.receipts().find((r) => r.session_generation === 2)!
  t.not(again.session_id, first.session_id, 'a new session id')
  t.equal(again.status_sequence, 1, 'its sequence starts again')
  t.equal(again.profile.result, 'announced')
  const order = broker.received.filter((m) => m.body['session_generation'] === 2 || m.kind === 'capabilities').map((m) => m.kind)
  t.strictSame(order.slice(-2), ['capabilities', 'receipt'], 'capabilities before the announcement, as on the first connection')

  // Subscribed again: the retained feed the service publishes now reaches the display.
  const now = Date.now()
  await broker.publishRetained(feedTopic(broker.display), {
    feed_version: 1, organization_id: broker.display.organizationId, display_id: broker.display.displayId, binding_epoch: 1,
    sequence: 7, published_at: new Date(now).toISOString(), expires_at: new Date(now + 90_000).toISOString(), pixels: ['RUNNING'],
  })
  await sim.waitFor(() => sim.feed?.sequence === 7, 20_000, 'the feed after the reconnection')
  t.pass('the feed published after the reconnection arrives')
})

t.test('display simulator - a login the broker refuses is final: rejected at the start, and a failed event after a reconnection', async (t) => {
  const broker = await startedBroker(t)
  const refused = DisplaySimulator.connect(broker.simulatorOptions({ password: 'wrong', reconnect: quickReconnect }))
  await t.rejects(refused, BrokerRefusedLogin)
  await t.rejects(refused, { returnCode: 4, message: /bad user name or password/ })

  const events: ConnectionEvent[] = []
  const sim = await DisplaySimulator.connect(broker.simulatorOptions({ reconnect: quickReconnect, onConnection: (e) => events.push(e) }))
  t.teardown(() => sim.close())
  await broker.stop()
  broker.accepts = false
  await broker.start()
  await sim.waitFor(() => sim.connection === 'failed', 20_000, 'the failed event')
  t.match(events.at(-1), { type: 'failed', reason: /refused the login: bad user name or password/ })
  t.ok(sim.client.disconnecting, 'the client is ended: no further attempt')
})

/** The command's output, with a stop the test controls. */
function cliIo(signal: Signal): DisplaySimIo & { errLines: string[]; stop(): void } {
  let stop!: () => void
  const stopped = new Promise<void>((resolve) => (stop = resolve))
  const errLines: string[] = []
  return {
    errLines,
    stop,
    out: () => undefined,
    err: (text) => {
      errLines.push(...text.split('\n').filter(Boolean))
      signal.changed()
    },
    stopRequested: () => stopped,
    clock: systemClock,
  }
}

t.test('printfarm display-sim - logs the lost connection and the return, keeps running, and exits 1 once the broker refuses its login', async (t) => {
  const broker = await startedBroker(t)
  const io = cliIo(broker.signal)
  const exited = runDisplaySim(broker.cliArgs(), io)
  await broker.signal.until(announced(broker, 1), 'the first announcement')
  t.match(io.errLines, [/connected to mqtt:\/\/127\.0\.0\.1:\d+ as display .*session 1/])

  await broker.stop()
  await broker.signal.until(() => io.errLines.some((l) => /connection to .* lost/.test(l)), 'the lost line')
  await broker.start()
  await broker.signal.until(() => io.errLines.some((l) => /reconnected to .* session 2/.test(l)), 'the reconnected line')
  await broker.signal.until(announced(broker, 2), 'the announcement of its new session')
  t.match(io.errLines.find((l) => /lost/.test(l)), /printfarm display-sim: connection to mqtt:\/\/127\.0\.0\.1:\d+ lost \(.*\); reconnecting in 1 s/)

  await broker.stop()
  broker.accepts = false
  await broker.start()
  t.equal(await exited, 1, 'exits 1')
  t.match(io.errLines.at(-1), /refused the login: bad user name or password.*giving up/)
})

t.test('printfarm display-sim - a refused login at the start exits 1 with the reason, a bad URL exits 2', async (t) => {
  const broker = await startedBroker(t)
  const io = cliIo(broker.signal)
  t.equal(await runDisplaySim(broker.cliArgs('wrong'), io), 1)
  t.match(io.errLines.join('\n'), /refused the login: bad user name or password \(MQTT CONNACK return code 4\); check --username and --password/)

  const args = broker.cliArgs()
  args[1] = 'http://127.0.0.1:1883'
  t.equal(await runDisplaySim(args, io), 2)
  t.match(io.errLines.join('\n'), /--url http:\/\/127\.0\.0\.1:1883 is not a broker URL/)
})
