/**
 * A plain HTTP client for tests: one connection per request (no keep-alive,
 * so a stopped server leaves nothing open), raw access to status and headers.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'

export interface HttpResult {
  status: number
  headers: IncomingHttpHeaders
  text: string
  json: any
}

export interface RequestOptions {
  method?: string
  headers?: Record<string, string>
  /** An object is sent as JSON; a string or Buffer as is. */
  body?: unknown
  /** Abandons the request (rejects) after this long without an answer (a stopped server). */
  timeoutMs?: number
}

export function request(baseUrl: string, path: string, options: RequestOptions = {}): Promise<HttpResult> {
  const url = new URL(path, baseUrl)
  let payload: Buffer | undefined
  const headers: Record<string, string> = { ...options.headers }
  if (options.body !== undefined) {
    if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) payload = Buffer.from(options.body as string)
    else {
      payload = Buffer.from(JSON.stringify(options.body))
      headers['content-type'] ??= 'application/json'
    }
    headers['content-length'] = String(payload.length)
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', reject)
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown = undefined
        try {
          json = text ? JSON.parse(text) : undefined
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
    })
    req.on('error', reject)
    if (options.timeoutMs !== undefined) req.setTimeout(options.timeoutMs, () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)))
    req.end(payload)
  })
}

/**
 * Writes raw bytes to the server and collects everything it answers until it
 * closes the connection (or `settleMs` of silence after a response arrived).
 */
export function rawExchange(
  port: number,
  write: (socket: import('node:net').Socket) => void,
  options: { closeAfterWrite?: boolean; maxWaitMs?: number } = {},
): Promise<{ response: string; closedByServer: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let closedByServer = false
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ response: Buffer.concat(chunks).toString('latin1'), closedByServer })
    }, options.maxWaitMs ?? 5_000)
    socket.on('connect', () => {
      write(socket)
      if (options.closeAfterWrite) {
        socket.destroy()
        clearTimeout(timer)
        resolve({ response: '', closedByServer: false })
      }
    })
    socket.on('data', (c) => chunks.push(c))
    socket.on('end', () => {
      closedByServer = true
    })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ response: Buffer.concat(chunks).toString('latin1'), closedByServer })
    })
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') return
      clearTimeout(timer)
      reject(error)
    })
  })
}

/** Reads one Prometheus sample value, or 0 when the series does not exist yet. */
export function metricValue(exposition: string, series: string): number {
  for (const line of exposition.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1))
  }
  return 0
}

/** Signs in and returns the token pair and a header set for authenticated calls. */
export async function signIn(baseUrl: string, email: string, password: string): Promise<{ access: string; refresh: string; auth: Record<string, string> }> {
  const res = await request(baseUrl, '/v1/auth/login', { method: 'POST', body: { email, password } })
  if (res.status !== 200) throw new Error(`sign-in as ${email} failed: ${res.status} ${res.text}`)
  return { access: res.json.access_token, refresh: res.json.refresh_token, auth: { authorization: `Bearer ${res.json.access_token}` } }
}
