/** JSON over HTTP/1.1 to a server on loopback, on a keep-alive agent the bench owns. */
import { request as httpRequest, type Agent } from 'node:http'

export interface Reply {
  status: number
  body: string
}

export function jsonClient(agent: Agent) {
  /** One request; a string body is sent as JSON. */
  const call = (port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method, path, agent, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }))
        },
      )
      req.on('error', reject)
      req.end(body)
    })
  /** The parsed body of an answer with the expected status (undefined for an empty one); anything else throws. */
  const json = async (reply: Promise<Reply>, expect = 200): Promise<any> => {
    const r = await reply
    if (r.status !== expect) throw new Error(`unexpected ${r.status}: ${r.body.slice(0, 300)}`)
    return r.body === '' ? undefined : JSON.parse(r.body)
  }
  return { call, json }
}
