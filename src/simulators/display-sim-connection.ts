/**
 * The simulated display's MQTT connection, kept the way a device keeps one:
 * when the broker goes away (the service restarts, the network drops) it
 * tries again with a doubling delay (MQTT.js reconnectPeriod, raised before
 * each attempt and reset on success), and it stops only when the broker
 * refuses the login itself, which no retry can change.
 *
 * MQTT.js re-arms its reconnect timer after every failed attempt reading
 * `options.reconnectPeriod` afresh, so raising it on each `reconnect` event
 * is the backoff. Refused CONNACKs are retried too (`reconnectOnConnackError`)
 * because "server unavailable" is temporary: the embedded broker answers it
 * when the store cannot check a login. The others end the client here.
 */
import { connect, type IClientOptions, type MqttClient } from 'mqtt'

export interface ReconnectPolicy {
  /** Delay before the first attempt after a loss; doubled before each further attempt. */
  initialDelayMs: number
  maxDelayMs: number
}

export const deviceReconnect: ReconnectPolicy = { initialDelayMs: 1_000, maxDelayMs: 30_000 }

/** What happened to the connection, for a log line or a test to wait on. */
export type ConnectionEvent =
  /** An established connection dropped; the next attempt is in retryInMs. */
  | { type: 'lost'; reason: string; retryInMs: number }
  /** An attempt failed (also before the first connection); the next is in retryInMs. */
  | { type: 'retrying'; reason: string; retryInMs: number }
  /** Connected again, and the device has started its new session (capabilities, subscriptions, announcement). */
  | { type: 'resumed'; sessionGeneration: number; offlineMs: number }
  /** Refused for good (or lost without a reconnect policy): no further attempt. */
  | { type: 'failed'; reason: string }

/**
 * MQTT 3.1.1 CONNACK return codes (section 3.2.2.3) that another attempt
 * with the same login cannot change. 3, server unavailable, is retried.
 */
const refusedForGood = new Map<number, string>([
  [1, 'unacceptable protocol version'],
  [2, 'client identifier rejected'],
  [4, 'bad user name or password'],
  [5, 'not authorized'],
])

/** The broker refused the login in its CONNACK: wrong credential, revoked, or not allowed. */
export class BrokerRefusedLogin extends Error {
  override name = 'BrokerRefusedLogin'
  readonly returnCode: number
  constructor(returnCode: number) {
    super(`the broker refused the login: ${refusedForGood.get(returnCode) ?? 'refused'} (MQTT CONNACK return code ${returnCode})`)
    this.returnCode = returnCode
  }
}

function refusal(error: unknown): BrokerRefusedLogin | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'number' && refusedForGood.has(code) ? new BrokerRefusedLogin(code) : undefined
}

function describe(error: unknown): string {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  return typeof code === 'string' && typeof message === 'string' && !message.includes(code) ? `${code}: ${message}` : String(message ?? error)
}

/**
 * TCP_NODELAY on the device's socket (when it is one: not over WebSocket): a receipt written right
 * behind the PUBACK of the message it answers is otherwise held by Nagle's algorithm until the
 * broker acknowledges the PUBACK, which a delayed ACK can put off by up to 40 ms.
 */
export function answerAtOnce(client: MqttClient): MqttClient {
  const socket = client.stream as unknown as { setNoDelay?: (noDelay: boolean) => unknown }
  socket.setNoDelay?.(true)
  return client
}

export interface ConnectionHooks {
  onEvent(event: ConnectionEvent): void
  /** The device's time: how long it was offline. */
  now(): number
  /** Starts the device's session again after a reconnection (not the first connection); resolves with its session generation. */
  resume(): Promise<number>
}

/**
 * Connects, and resolves at the first accepted CONNACK. Without a policy it
 * behaves like `connectAsync` with reconnectPeriod 0: the first error
 * rejects, a later loss is final. With one, only a refused login rejects (or,
 * later, ends the client with a `failed` event).
 */
export function connectSupervised(url: string, options: IClientOptions, policy: ReconnectPolicy | undefined, hooks: ConnectionHooks): Promise<MqttClient> {
  const client = connect(url, {
    ...options,
    reconnectPeriod: policy?.initialDelayMs ?? 0,
    reconnectOnConnackError: policy !== undefined,
    // The device subscribes itself on every connection, after its capabilities report (order).
    resubscribe: false,
  })
  const onEvent = (event: ConnectionEvent) => hooks.onEvent(event)
  let established = false
  let everConnected = false
  let offlineSince = 0
  let lastError = 'connection closed'
  let finished = false
  return new Promise((resolve, reject) => {
    const fail = (error: Error) => {
      if (finished) return
      finished = true
      client.end(true)
      if (!everConnected) reject(error)
      else onEvent({ type: 'failed', reason: error.message })
    }
    client.on('error', (error) => {
      lastError = describe(error)
      const refused = refusal(error)
      if (refused !== undefined) return fail(refused)
      if (policy === undefined && !everConnected) fail(error)
    })
    client.on('reconnect', () => {
      if (policy !== undefined) client.options.reconnectPeriod = Math.min(policy.maxDelayMs, (client.options.reconnectPeriod ?? policy.initialDelayMs) * 2)
    })
    client.on('close', () => {
      if (finished || client.disconnecting) return
      const reason = lastError
      lastError = 'connection closed'
      if (policy === undefined) return fail(new Error(`connection lost: ${reason}`))
      // MQTT.js has armed the next attempt with this period (its own close handler runs first).
      const retryInMs = client.options.reconnectPeriod ?? policy.initialDelayMs
      if (established) {
        established = false
        offlineSince = hooks.now()
        onEvent({ type: 'lost', reason, retryInMs })
      } else {
        onEvent({ type: 'retrying', reason, retryInMs })
      }
    })
    client.on('connect', () => {
      answerAtOnce(client)
      established = true
      if (policy !== undefined) client.options.reconnectPeriod = policy.initialDelayMs
      if (!everConnected) {
        everConnected = true
        resolve(client)
        return
      }
      const offlineMs = hooks.now() - offlineSince
      hooks.resume().then(
        (sessionGeneration) => onEvent({ type: 'resumed', sessionGeneration, offlineMs }),
        // The connection dropped again while resuming: its close starts the next attempt.
        (error: unknown) => (lastError = describe(error)),
      )
    })
  })
}
