/**
 * Many WebSocket clients at little cost: raw sockets, a hand-made upgrade,
 * and a frame parser that only reads headers — except on a few "sampling"
 * clients, which also read each frame's timestamp marker for latency. So
 * 1,000 clients cost the generator far less than 1,000 full WebSocket
 * libraries would, and the server is what gets measured.
 */
import { randomBytes } from 'node:crypto'
import { connect, type Socket } from 'node:net'

export interface WsClientsOptions {
  port: number
  path: string
  count: number
  /** Clients that parse frames for the latency marker. */
  sampling: number
  /** Extra upgrade headers (credential). */
  headers?: Record<string, string>
  /** Text frame sent once open (subscribe). */
  hello?: string
  /** Reads the send time (ms, same clock as `now`) from a frame's text, or undefined. */
  marker: (text: string) => number | undefined
  now: () => number
}

export interface WsClients {
  frames: number
  latencies: number[]
  sockets: Socket[]
  /** Resolves when every client got at least `n` frames. */
  everyoneGot(n: number, timeoutMs: number): Promise<void>
  close(): void
}

function maskedText(text: string): Buffer {
  const payload = Buffer.from(text)
  const mask = randomBytes(4)
  const header = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255])
  const masked = Buffer.alloc(payload.length)
  for (let i = 0; i < payload.length; i++) masked[i] = payload[i]! ^ mask[i & 3]!
  return Buffer.concat([header, mask, masked])
}

export async function openWsClients(o: WsClientsOptions): Promise<WsClients> {
  const state: WsClients = {
    frames: 0,
    latencies: [],
    sockets: [],
    async everyoneGot(n, timeoutMs) {
      const deadline = Date.now() + timeoutMs
      while (counts.some((c) => c < n)) {
        if (Date.now() > deadline) throw new Error(`not every client got ${n} frames in time`)
        await new Promise((r) => setTimeout(r, 20))
      }
    },
    close() {
      for (const s of state.sockets) s.destroy()
    },
  }
  const counts = new Array<number>(o.count).fill(0)
  const extra = Object.entries(o.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  const open = (index: number) =>
    new Promise<void>((resolve, reject) => {
      const socket = connect(o.port, '127.0.0.1')
      socket.setNoDelay(true)
      const sample = index < o.sampling
      let upgraded = false
      let buffer: Buffer = Buffer.alloc(0)
      socket.on('error', reject)
      socket.on('connect', () => {
        socket.write(`GET ${o.path} HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`)
      })
      socket.on('data', (chunk: Buffer) => {
        buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
        if (!upgraded) {
          const end = buffer.indexOf('\r\n\r\n')
          if (end < 0) return
          const head = buffer.subarray(0, end).toString()
          if (!head.startsWith('HTTP/1.1 101')) return reject(new Error(`upgrade refused: ${head.split('\r\n')[0]}`))
          upgraded = true
          buffer = buffer.subarray(end + 4)
          if (o.hello !== undefined) socket.write(maskedText(o.hello))
          resolve()
        }
        let offset = 0
        for (;;) {
          if (buffer.length - offset < 2) break
          let length = buffer[offset + 1]! & 0x7f
          let header = 2
          if (length === 126) {
            if (buffer.length - offset < 4) break
            length = buffer.readUInt16BE(offset + 2)
            header = 4
          } else if (length === 127) {
            if (buffer.length - offset < 10) break
            length = Number(buffer.readBigUInt64BE(offset + 2))
            header = 10
          }
          if (buffer.length - offset < header + length) break
          const opcode = buffer[offset]! & 0x0f
          if (opcode === 1 || opcode === 2) {
            counts[index]!++
            state.frames++
            if (sample) {
              const at = o.marker(buffer.toString('utf8', offset + header, offset + header + length))
              if (at !== undefined) state.latencies.push(o.now() - at)
            }
          }
          offset += header + length
        }
        buffer = offset === buffer.length ? Buffer.alloc(0) : buffer.subarray(offset)
      })
      state.sockets.push(socket)
    })
  // Open in waves: a thousand handshakes at once would only measure the accept queue.
  for (let i = 0; i < o.count; i += 100) await Promise.all(Array.from({ length: Math.min(100, o.count - i) }, (_, k) => open(i + k)))
  return state
}
