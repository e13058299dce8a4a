/** A live-feed client for tests: connect with a credential, collect frames, wait for the one you want. */
import { decode, encode } from '@msgpack/msgpack'
import WebSocket from 'ws'

export interface Frame {
  op: string
  topic?: string
  seq?: number
  data?: any
}

export class LiveClient {
  readonly frames: Frame[] = []
  readonly ws: WebSocket
  closed: { code: number; reason: string } | undefined
  #waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = []

  constructor(ws: WebSocket) {
    this.ws = ws
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const frame = (isBinary ? decode(data) : JSON.parse(data.toString('utf8'))) as Frame
      this.frames.push(frame)
      this.#waiters = this.#waiters.filter((w) => (w.match(frame) ? (w.resolve(frame), false) : true))
    })
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() }
    })
  }

  send(frame: unknown): void {
    this.ws.send(this.ws.protocol === 'printfarm.v1.msgpack' ? encode(frame) : JSON.stringify(frame))
  }

  /** The first frame (already received or coming) that matches; rejects after timeoutMs. */
  next(match: (f: Frame) => boolean, timeoutMs = 10_000): Promise<Frame> {
    const seen = this.frames.find(match)
    if (seen !== undefined) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching frame within ${timeoutMs} ms; got ${this.frames.length} frames, the last: ${JSON.stringify(this.frames.at(-1)).slice(0, 300)}`)), timeoutMs)
      this.#waiters.push({ match, resolve: (f) => (clearTimeout(timer), resolve(f)) })
    })
  }

  closedWith(timeoutMs = 10_000): Promise<{ code: number; reason: string }> {
    if (this.closed) return Promise.resolve(this.closed)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('not closed in time')), timeoutMs)
      this.ws.once('close', (code, reason) => (clearTimeout(timer), resolve({ code, reason: reason.toString() })))
    })
  }

  close(): void {
    this.ws.terminate()
  }
}

/** Opens /v1/live; resolves with the client, or rejects with the refused upgrade's status and body. */
export function connectLive(baseUrl: string, options: { headers?: Record<string, string>; query?: string; protocols?: string[] } = {}): Promise<LiveClient> {
  const url = baseUrl.replace(/^http/, 'ws') + '/v1/live' + (options.query ? `?${options.query}` : '')
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers ?? {} })
    const client = new LiveClient(ws)
    ws.once('open', () => resolve(client))
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (c: Buffer) => (body += c.toString()))
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, body: body ? JSON.parse(body) : undefined })))
    })
    ws.once('error', (error) => reject(error))
  })
}
