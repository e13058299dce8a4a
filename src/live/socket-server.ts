/**
 * WebSocket `/v1/live` on the service's uWS app: credentials on the
 * upgrade, subscriptions with snapshot-then-events, resumes, and the slow
 * consumer policy.
 *
 * Slow consumers (decided here): uWS buffers what a socket cannot take yet.
 * A sweep every `checkMs` looks at each socket's buffered amount; past
 * `laggingBytes` the socket is taken off its uWS topics (publishing to the
 * others goes on untouched, serialized once) and only the ids of the printers
 * that changed are noted, latest wins. When it has drained below
 * `recoveredBytes` it gets one coalesced `printers` frame with their latest
 * state (seq = the topic's current seq: the jump tells the client frames were
 * merged), a fresh snapshot of its other topics, and its topics back. Past
 * `maxDirty` changed printers it gets a fresh `printers` snapshot instead; if
 * it stays behind `maxLagMs`, or buffers past `closeBytes`, it is closed with
 * 4008 (too slow). Ingestion never waits for any of this: the hub publishes
 * after the commit, on its own turn of the event loop.
 */
import { parseJsonText } from '../../protocol/json-text.js'
import { decode } from '@msgpack/msgpack'
import type { Clock } from '../../actors/clock.js'
import { ServiceError } from '../../protocol/errors.js'
import { ClientFrameSchema, defaultSubprotocol, liveCloseCodes, liveSubprotocols, maxClientFrameBytes, maxTopicsPerSocket, type ClientFrame, type ServerFrame } from '../../protocol/live.js'
import { compileBodyValidator } from '../../protocol/schemas/validator.js'
import type { Principal } from '../http/route.js'
import { parseQuery } from '../http/server.js'
import { statusLine } from '../http/status.js'
import type { TemplatedApp } from '../http/uws.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import { translateStoreError } from '../storage/errors.js'
import { uwsTopic, type LiveHub, type PrinterTouched } from './hub.js'
import type { Snapshots } from './snapshots.js'

type Encoding = 'json' | 'msgpack'

interface SocketData {
  organizationId: string
  principal: Principal
  encoding: Encoding
  /** Session tokens expire; the socket closes then (4001). API keys: null. */
  expiresAt: number | null
  topics: Set<string>
  lagging: { since: number; dirty: Set<string>; resync: boolean } | null
  badFrames: number
  closed: boolean
}

/** The uWS socket, as far as this module uses it. */
interface Socket {
  getUserData(): SocketData
  send(message: string | Uint8Array, isBinary?: boolean): number
  getBufferedAmount(): number
  subscribe(topic: string): boolean
  unsubscribe(topic: string): boolean
  end(code?: number, message?: string): void
  cork(cb: () => void): void
}

export interface LiveServerOptions {
  hub: LiveHub
  snapshots: Snapshots
  authenticate: (headers: Readonly<Record<string, string>>, query: Readonly<Record<string, string | string[]>>) => Promise<{ principal: Principal; expiresAt: number | null }>
  logger: Logger
  metrics: MetricsRegistry
  /** The node's clock: token expiry, lag time, pong, and the sweeps. */
  clock: Clock
  /** The scopes of those API keys (by id) that still work; the open sockets' keys are checked with it every keyCheckMs. */
  currentKeys?: (ids: readonly string[]) => Promise<ReadonlyMap<string, ReadonlySet<string>>>
  /** Whether an OAuth token's person, role and client still stand (throws when not); checked like API keys. */
  oauthStanding?: (claims: { userId: string; clientId: string; organizationId: string; tokenId: string }) => Promise<{ role: 'admin' | 'member'; allowedScopes: readonly string[] }>
  keyCheckMs?: number
  /** A paired bridge key speaks for one host (src/auth/host-binding.ts): rejects with a coded error for another host's topic. */
  checkHost?: (principal: Principal, hostId: string) => Promise<void>
  idleTimeoutSeconds?: number
  checkMs?: number
  laggingBytes?: number
  recoveredBytes?: number
  closeBytes?: number
  maxDirty?: number
  maxLagMs?: number
}

const validateFrame = compileBodyValidator(ClientFrameSchema)
const topicScope = (topic: string): string =>
  topic === 'jobs' ? 'jobs:read' : topic === 'queue' ? 'print-jobs:read' : topic === 'displays' ? 'fleet:read' : topic.startsWith('host:') ? 'print:launch' : 'printers:read'
/** Topics a member reads only as an admin: a host's tasks, like the poll that lists them (GET /v1/hosts/{hostId}/printer-tasks). */
const adminTopic = (topic: string): boolean => topic.startsWith('host:')

export class LiveServer {
  readonly #o: Required<Omit<LiveServerOptions, 'hub' | 'snapshots' | 'authenticate' | 'logger' | 'metrics' | 'clock' | 'currentKeys' | 'oauthStanding' | 'checkHost'>> & LiveServerOptions
  readonly #sockets = new Set<Socket>()
  /** The lagging ones (a subset): changes are noted for these only. */
  readonly #lagging = new Set<Socket>()
  #sweep: unknown
  #keySweep: unknown
  #checkingKeys = false
  #checkingOAuth = false
  readonly #counts

  constructor(options: LiveServerOptions) {
    this.#o = {
      idleTimeoutSeconds: 60,
      checkMs: 50,
      keyCheckMs: 5_000,
      laggingBytes: 256 * 1024,
      recoveredBytes: 32 * 1024,
      closeBytes: 16 * 1024 * 1024,
      maxDirty: 1_000,
      maxLagMs: 30_000,
      ...options,
    }
    const m = options.metrics
    m.gauge('live_sockets', 'Live-feed WebSockets open on this node.', [], (g) => g.set({}, this.#sockets.size))
    m.gauge('live_sockets_lagging', 'Live-feed WebSockets taken off their topics because they read too slowly.', [], (g) => g.set({}, this.#lagging.size))
    this.#counts = {
      refused: m.counter('live_upgrades_refused_total', 'WebSocket upgrades refused, by HTTP status.', ['status']),
      lagged: m.counter('live_lagging_total', 'Times a socket fell behind and was taken off its topics.'),
      coalesced: m.counter('live_coalesced_frames_total', 'Coalesced frames sent to sockets that caught up.'),
      resyncs: m.counter('live_resyncs_total', 'Fresh snapshots sent to sockets that fell too far behind.'),
      tooSlow: m.counter('live_closed_too_slow_total', 'Sockets closed with 4008 for staying behind.'),
      keyRevoked: m.counter('live_closed_key_revoked_total', 'Sockets closed with 4001 because their API key was deleted, disabled, expired or lost printers:read.'),
    }
    options.hub.onChange((change) => this.#noteForLagging(change))
  }

  attach(app: TemplatedApp): void {
    app.ws<SocketData>('/v1/live', {
      maxPayloadLength: maxClientFrameBytes,
      idleTimeout: this.#o.idleTimeoutSeconds,
      sendPingsAutomatically: true,
      // uWS's own limit sits far above ours: the sweep acts first, so uWS never silently skips a frame.
      maxBackpressure: this.#o.closeBytes * 2,
      upgrade: (res, req, context) => {
        const query = parseQuery(req.getQuery())
        const header = (name: string) => req.getHeader(name) || undefined
        const headers: Record<string, string> = {}
        for (const name of ['authorization', 'x-api-key', 'x-organization-id']) {
          const value = header(name)
          if (value !== undefined) headers[name] = value
        }
        const token = query['access_token']
        if (headers['authorization'] === undefined && typeof token === 'string' && token !== '') headers['authorization'] = `Bearer ${token}`
        const key = req.getHeader('sec-websocket-key')
        const requested = req.getHeader('sec-websocket-protocol')
        const extensions = req.getHeader('sec-websocket-extensions')
        let aborted = false
        res.onAborted(() => {
          aborted = true
        })
        const refuse = (error: unknown) => {
          if (aborted) return
          const coded = error instanceof ServiceError ? error : (translateStoreError(error) ?? new ServiceError('internal_error', 'the upgrade failed; retry'))
          if (!(error instanceof ServiceError) && translateStoreError(error) === undefined) this.#o.logger.error('live upgrade failed', { error })
          this.#counts.refused.inc({ status: String(coded.status) })
          res.cork(() => {
            res.writeStatus(statusLine(coded.status)).writeHeader('content-type', 'application/json').end(JSON.stringify({ error: coded.code, message: coded.message }))
          })
        }
        const offered = requested.split(',').map((p) => p.trim()).filter(Boolean)
        const protocol = offered.length === 0 ? '' : offered.find((p) => (liveSubprotocols as readonly string[]).includes(p))
        if (protocol === undefined) {
          return refuse(new ServiceError('validation_failed', `Sec-WebSocket-Protocol offers none of ${liveSubprotocols.join(', ')} (omit it for ${defaultSubprotocol})`))
        }
        this.#o
          .authenticate(headers, query)
          .then(({ principal, expiresAt }) => {
            if (aborted) return
            if (principal.kind !== 'member' && principal.kind !== 'api_key' && principal.kind !== 'oauth') throw new ServiceError('unauthorized', 'the live feed needs an organization credential')
            const data: SocketData = {
              organizationId: principal.organizationId,
              principal,
              encoding: protocol === 'printfarm.v1.msgpack' ? 'msgpack' : 'json',
              expiresAt,
              topics: new Set(),
              lagging: null,
              badFrames: 0,
              closed: false,
            }
            res.cork(() => res.upgrade(data, key, protocol, extensions, context))
          })
          .catch(refuse)
      },
      open: (ws) => {
        this.#sockets.add(ws as unknown as Socket)
      },
      message: (ws, message, isBinary) => {
        // A throw here would reach no handler but the process's own: one socket's frame must never end the node.
        try {
          this.#message(ws as unknown as Socket, message, isBinary)
        } catch (error) {
          this.#o.logger.error('live frame handling failed; closing that socket', { error })
          ws.end(liveCloseCodes.protocolError, 'the frame could not be handled')
        }
      },
      drain: (ws) => this.#checkRecovered(ws as unknown as Socket),
      close: (ws) => {
        const socket = ws as unknown as Socket
        socket.getUserData().closed = true
        this.#sockets.delete(socket)
        this.#lagging.delete(socket)
      },
    })
    this.#sweep = this.#o.clock.setInterval(() => this.#check(), this.#o.checkMs)
    this.#keySweep = this.#o.clock.setInterval(() => {
      void this.#checkKeys()
      void this.#checkOAuth()
    }, this.#o.keyCheckMs)
  }

  /** Shutdown: every socket is told to go elsewhere (1001). */
  close(): void {
    if (this.#sweep !== undefined) this.#o.clock.clearInterval(this.#sweep)
    if (this.#keySweep !== undefined) this.#o.clock.clearInterval(this.#keySweep)
    for (const socket of [...this.#sockets]) if (!socket.getUserData().closed) socket.end(liveCloseCodes.goingAway, 'server shutting down')
    this.#sockets.clear()
    this.#lagging.clear()
  }

  get size(): number {
    return this.#sockets.size
  }

  #send(socket: Socket, frame: ServerFrame): void {
    const data = socket.getUserData()
    if (data.closed) return
    const payload = this.#o.hub.encode(frame, data.encoding)
    socket.send(payload, data.encoding === 'msgpack')
  }

  #error(socket: Socket, code: string, message: string, topic?: string): void {
    this.#send(socket, { op: 'error', ...(topic === undefined ? {} : { topic }), data: { error: code, message } })
  }

  #message(socket: Socket, message: ArrayBuffer, isBinary: boolean): void {
    const data = socket.getUserData()
    let parsed: unknown
    if (isBinary) {
      try {
        parsed = decode(new Uint8Array(message))
      } catch {
        return this.#bad(socket, 'invalid_frame', 'the frame is not MessagePack')
      }
    } else {
      const text = parseJsonText(new Uint8Array(message), 'frame')
      if (!text.ok) return this.#bad(socket, text.code === 'invalid_json' ? 'invalid_frame' : text.code, text.reason)
      parsed = text.value
    }
    const result = validateFrame(parsed)
    if (!result.ok) return this.#bad(socket, 'validation_failed', result.reason.replace(/^body/, 'frame'))
    const frame = result.value as ClientFrame
    if (data.expiresAt !== null && this.#o.clock.now() >= data.expiresAt * 1000) return socket.end(liveCloseCodes.credentialExpired, 'access token expired')
    if (frame.op === 'ping') return this.#send(socket, { op: 'pong', data: { now: this.#o.clock.now() } })
    if (frame.op === 'unsubscribe') {
      for (const topic of frame.topics) this.#leave(socket, topic)
      return
    }
    void this.#subscribe(socket, frame).catch((error: unknown) => {
      this.#o.logger.warn('live subscription failed', { error })
      this.#error(socket, 'store_unavailable', 'the snapshot could not be read; subscribe again')
    })
  }

  #bad(socket: Socket, code: string, message: string): void {
    const data = socket.getUserData()
    this.#error(socket, code, message)
    if (++data.badFrames > 20) socket.end(liveCloseCodes.protocolError, 'too many invalid frames')
  }

  async #subscribe(socket: Socket, frame: Extract<ClientFrame, { op: 'subscribe' }>): Promise<void> {
    const data = socket.getUserData()
    const hub = this.#o.hub
    for (const topic of frame.topics) {
      if (data.closed) return
      const principal = data.principal
      if ((principal.kind === 'api_key' || principal.kind === 'oauth') && !principal.scopes.has(topicScope(topic))) {
        this.#error(socket, 'insufficient_scope', `topic ${topic} needs the scope ${topicScope(topic)}`, topic)
        continue
      }
      if ((principal.kind === 'member' || principal.kind === 'oauth') && principal.role !== 'admin' && adminTopic(topic)) {
        this.#error(socket, 'ORG_ADMIN_REQUIRED', `topic ${topic} is for admins of the organization (or an API key with ${topicScope(topic)})`, topic)
        continue
      }
      if (topic.startsWith('host:') && this.#o.checkHost !== undefined) {
        const refusal = await this.#o.checkHost(principal, topic.slice('host:'.length)).then(
          () => undefined,
          (error: unknown) => error,
        )
        if (refusal instanceof ServiceError) {
          this.#error(socket, refusal.code, refusal.message, topic)
          continue
        }
        if (refusal !== undefined) throw refusal
      }
      if (!data.topics.has(topic) && data.topics.size >= maxTopicsPerSocket) {
        this.#error(socket, 'validation_failed', `at most ${maxTopicsPerSocket} topics per connection`, topic)
        continue
      }
      const since = frame.stream === hub.stream ? frame.since?.[topic] : undefined
      const replay = since === undefined ? undefined : hub.replay(data.organizationId, topic, since)
      if (replay !== undefined && data.lagging === null) {
        socket.cork(() => {
          for (const f of replay) this.#send(socket, f)
          this.#join(socket, topic)
        })
        continue
      }
      await this.#snapshotAndJoin(socket, topic)
    }
  }

  /** Snapshot first, then what was published while it was read, then live: nothing missed, in order. */
  async #snapshotAndJoin(socket: Socket, topic: string): Promise<void> {
    const data = socket.getUserData()
    const hub = this.#o.hub
    const org = data.organizationId
    hub.follow(org, topic)
    const before = hub.currentSeq(org, topic)
    const snapshot = await this.#load(org, topic)
    if (data.closed) return
    if (snapshot === undefined) {
      // Unknown here and in another organization alike: nothing leaks.
      return this.#error(socket, 'topic_not_found', `no topic ${topic} in this organization`, topic)
    }
    const missed = hub.replay(org, topic, before) ?? []
    socket.cork(() => {
      this.#send(socket, { op: 'snapshot', topic, seq: before, data: { ...snapshot, stream: hub.stream } })
      for (const f of missed) this.#send(socket, f)
      if (data.lagging === null) this.#join(socket, topic)
      else data.topics.add(topic) // joins when it has caught up
    })
  }

  async #load(org: string, topic: string): Promise<object | undefined> {
    const snapshots = this.#o.snapshots
    if (topic === 'printers') {
      const snapshot = await snapshots.printers(org)
      this.#o.hub.remember(org, snapshot.printers)
      return snapshot
    }
    if (topic === 'jobs') return snapshots.jobs(org)
    if (topic === 'queue') return snapshots.queue(org)
    if (topic === 'displays') return snapshots.displays(org)
    if (topic.startsWith('host:')) return snapshots.hostTasks(org, topic.slice('host:'.length))
    return snapshots.printer(org, topic.slice('printer:'.length))
  }

  #join(socket: Socket, topic: string): void {
    const data = socket.getUserData()
    data.topics.add(topic)
    socket.subscribe(uwsTopic(data.encoding === 'json' ? 'j' : 'm', data.organizationId, topic))
  }

  #leave(socket: Socket, topic: string): void {
    const data = socket.getUserData()
    data.topics.delete(topic)
    socket.unsubscribe(uwsTopic(data.encoding === 'json' ? 'j' : 'm', data.organizationId, topic))
  }

  #noteForLagging(touched: PrinterTouched): void {
    for (const socket of this.#lagging) {
      const data = socket.getUserData()
      if (data.lagging === null || data.organizationId !== touched.organizationId || !data.topics.has('printers')) continue
      if (data.lagging.resync) continue
      data.lagging.dirty.add(touched.printerId)
      if (data.lagging.dirty.size > this.#o.maxDirty) {
        data.lagging.resync = true
        data.lagging.dirty.clear()
      }
    }
  }

  #check(): void {
    const now = this.#o.clock.now()
    for (const socket of this.#sockets) {
      const data = socket.getUserData()
      if (data.closed) continue
      if (data.expiresAt !== null && now >= data.expiresAt * 1000) {
        socket.end(liveCloseCodes.credentialExpired, 'access token expired')
        continue
      }
      const buffered = socket.getBufferedAmount()
      if (data.lagging === null) {
        if (buffered > this.#o.laggingBytes) this.#fallBehind(socket)
        continue
      }
      if (buffered > this.#o.closeBytes || now - data.lagging.since > this.#o.maxLagMs) {
        this.#counts.tooSlow.inc()
        socket.end(liveCloseCodes.tooSlow, 'too slow: reconnect and resubscribe with since')
        continue
      }
      this.#checkRecovered(socket)
    }
  }

  /**
   * An API key is checked again while its sockets are open: one deleted, disabled, expired or
   * re-scoped on any node reaches every socket opened with it within keyCheckMs (the bound the
   * API key cache gives requests). Session tokens need no such check: their expiry closes the socket.
   */
  async #checkKeys(): Promise<void> {
    const currentKeys = this.#o.currentKeys
    if (currentKeys === undefined || this.#checkingKeys) return
    const ids = new Set<string>()
    for (const socket of this.#sockets) {
      const data = socket.getUserData()
      if (!data.closed && data.principal.kind === 'api_key') ids.add(data.principal.keyId)
    }
    if (ids.size === 0) return
    this.#checkingKeys = true
    let current: ReadonlyMap<string, ReadonlySet<string>>
    try {
      current = await currentKeys([...ids])
    } catch (error) {
      // The sockets stay open on a failed check (the store is away); the next round checks again.
      this.#o.logger.warn('live: checking the API keys of open sockets failed', { error })
      return
    } finally {
      this.#checkingKeys = false
    }
    for (const socket of this.#sockets) {
      const data = socket.getUserData()
      const principal = data.principal
      // Sockets opened while the query ran were authenticated after it started: checked next round.
      if (data.closed || principal.kind !== 'api_key' || !ids.has(principal.keyId)) continue
      const scopes = current.get(principal.keyId)
      if (scopes === undefined || !scopes.has('printers:read')) {
        this.#counts.keyRevoked.inc()
        socket.end(liveCloseCodes.credentialExpired, 'the API key was deleted, disabled or expired, or lost printers:read')
        continue
      }
      data.principal = { ...principal, scopes }
      for (const topic of [...data.topics]) {
        if (scopes.has(topicScope(topic))) continue
        this.#leave(socket, topic)
        this.#error(socket, 'insufficient_scope', `the API key no longer has the scope ${topicScope(topic)}; left topic ${topic}`, topic)
      }
    }
  }

  /**
   * An OAuth token's standing is checked again while its sockets are open, as API keys are: a client
   * disabled, deleted or narrowed, a token revoked, or a person removed or no longer admin, reaches
   * every socket opened with such a token within keyCheckMs.
   */
  async #checkOAuth(): Promise<void> {
    const standing = this.#o.oauthStanding
    if (standing === undefined || this.#checkingOAuth) return
    const open = [...this.#sockets].filter((socket) => {
      const data = socket.getUserData()
      return !data.closed && data.principal.kind === 'oauth'
    })
    if (open.length === 0) return
    this.#checkingOAuth = true
    try {
      const answers = new Map<string, Promise<{ role: 'admin' | 'member'; allowedScopes: readonly string[] } | undefined>>()
      for (const socket of open) {
        const data = socket.getUserData()
        const principal = data.principal
        if (data.closed || principal.kind !== 'oauth') continue
        const key = `${principal.userId} ${principal.clientId} ${principal.organizationId} ${principal.tokenId}`
        if (!answers.has(key)) {
          answers.set(
            key,
            standing(principal).catch((error: unknown) => {
              if (error instanceof ServiceError) return undefined
              throw error
            }),
          )
        }
        let now: { role: 'admin' | 'member'; allowedScopes: readonly string[] } | undefined
        try {
          now = await answers.get(key)
        } catch (error) {
          // The sockets stay open on a failed check (the store is away); the next round checks again.
          this.#o.logger.warn('live: checking the OAuth tokens of open sockets failed', { error })
          return
        }
        if (data.closed) continue
        const scopes = now === undefined ? new Set<string>() : new Set([...principal.scopes].filter((s) => now.allowedScopes.includes(s)))
        if (now === undefined || !scopes.has('printers:read')) {
          this.#counts.keyRevoked.inc()
          socket.end(liveCloseCodes.credentialExpired, "the OAuth token's client or person no longer stands, or it lost printers:read")
          continue
        }
        data.principal = { ...principal, role: now.role, scopes }
        for (const topic of [...data.topics]) {
          if (scopes.has(topicScope(topic)) && (now.role === 'admin' || !adminTopic(topic))) continue
          this.#leave(socket, topic)
          this.#error(socket, 'insufficient_scope', `the OAuth token no longer opens topic ${topic}; left it`, topic)
        }
      }
    } finally {
      this.#checkingOAuth = false
    }
  }

  #fallBehind(socket: Socket): void {
    const data = socket.getUserData()
    this.#counts.lagged.inc()
    data.lagging = { since: this.#o.clock.now(), dirty: new Set(), resync: false }
    this.#lagging.add(socket)
    for (const topic of data.topics) socket.unsubscribe(uwsTopic(data.encoding === 'json' ? 'j' : 'm', data.organizationId, topic))
  }

  #checkRecovered(socket: Socket): void {
    const data = socket.getUserData()
    if (data.closed || data.lagging === null || socket.getBufferedAmount() > this.#o.recoveredBytes) return
    const lagging = data.lagging
    data.lagging = null
    this.#lagging.delete(socket)
    const hub = this.#o.hub
    const topics = [...data.topics]
    data.topics.clear()
    for (const topic of topics) {
      if (topic === 'printers' && !lagging.resync) {
        const printers = hub.latestPrinters(data.organizationId, lagging.dirty)
        socket.cork(() => {
          if (printers.length > 0) {
            this.#counts.coalesced.inc()
            this.#send(socket, { op: 'event', topic, seq: hub.currentSeq(data.organizationId, topic), data: { printers, coalesced: true } })
          }
          this.#join(socket, topic)
        })
        continue
      }
      this.#counts.resyncs.inc()
      void this.#snapshotAndJoin(socket, topic).catch((error: unknown) => this.#o.logger.warn('live resync failed', { error }))
    }
  }
}
