/**
 * Multipart bodies a careless or hostile client sends, and a raw HTTP/1.1
 * client that sends them with a Content-Length, chunked, or cut off mid-body.
 * fetch cannot send most of these (it frames forms itself, and never leaves a
 * body half sent), so the requests are written to a socket by hand.
 */
import { connect } from 'node:net'

export interface HostileForm {
  kind: string
  contentType: string
  body: Buffer
}

const boundary = 'pfBoundary7Mx'
const crlf = '\r\n'
const fileHead = (disposition = 'form-data; name="file"; filename="part.gcode"', extra = '') =>
  `--${boundary}${crlf}Content-Disposition: ${disposition}${crlf}${extra}Content-Type: application/octet-stream${crlf}${crlf}`
const closing = `${crlf}--${boundary}--${crlf}`
const gcode = 'G28\nG1 X10 Y10 F3000\n'
const form = (kind: string, body: string | Buffer, contentType = `multipart/form-data; boundary=${boundary}`): HostileForm => ({
  kind,
  contentType,
  body: typeof body === 'string' ? Buffer.from(body, 'latin1') : body,
})

/** Every form of the hostile list; a few are in fact valid (the answer may then be 201). */
export function hostileForms(): HostileForm[] {
  return [
    form('valid form (control)', fileHead() + gcode + closing),
    form('unterminated (no closing boundary)', fileHead() + gcode),
    form('cut inside the part headers', `--${boundary}${crlf}Content-Disposition: form-da`),
    form('only the opening boundary', `--${boundary}${crlf}`),
    form('empty body', ''),
    form('closing boundary only', `--${boundary}--${crlf}`),
    form('boundary that differs from the header', `--otherBoundary${crlf}Content-Disposition: form-data; name="file"; filename="a.gcode"${crlf}${crlf}${gcode}${crlf}--otherBoundary--${crlf}`),
    form('no boundary parameter', fileHead() + gcode + closing, 'multipart/form-data'),
    form('empty boundary parameter', fileHead() + gcode + closing, 'multipart/form-data; boundary='),
    form('200-character boundary', `--${'b'.repeat(200)}${crlf}Content-Disposition: form-data; name="file"; filename="a.gcode"${crlf}${crlf}${gcode}${crlf}--${'b'.repeat(200)}--${crlf}`, `multipart/form-data; boundary=${'b'.repeat(200)}`),
    form('LF-only line endings', (fileHead() + gcode + closing).replaceAll(crlf, '\n')),
    form('file part without filename', fileHead('form-data; name="file"') + gcode + closing),
    form('file part with an empty filename', fileHead('form-data; name="file"; filename=""') + gcode + closing),
    form('../ in the filename', fileHead('form-data; name="file"; filename="../../../etc/passwd.gcode"') + gcode + closing),
    form('NUL in the filename', fileHead('form-data; name="file"; filename="a\u0000b.gcode"') + gcode + closing),
    form('5,000-character filename', fileHead(`form-data; name="file"; filename="${'n'.repeat(5000)}.gcode"`) + gcode + closing),
    form('broken RFC 5987 filename*', fileHead(`form-data; name="file"; filename*=UTF-8''%E2%28%A1%ZZ%`) + gcode + closing),
    form('RFC 5987 filename* without a charset', fileHead(`form-data; name="file"; filename*=''a.gcode`) + gcode + closing),
    form('two file parts', fileHead() + gcode + crlf + fileHead().slice(0) + gcode + closing),
    form('100 part headers', fileHead('form-data; name="file"; filename="a.gcode"', Array.from({ length: 100 }, (_, i) => `X-Extra-${i}: ${i}${crlf}`).join('')) + gcode + closing),
    form('64 KiB part header', fileHead('form-data; name="file"; filename="a.gcode"', `X-Large: ${'h'.repeat(64 * 1024)}${crlf}`) + gcode + closing),
    form('Content-Transfer-Encoding: base64', fileHead('form-data; name="file"; filename="a.gcode"', `Content-Transfer-Encoding: base64${crlf}`) + Buffer.from(gcode).toString('base64') + closing),
    form(
      'nested multipart/mixed part',
      `--${boundary}${crlf}Content-Disposition: form-data; name="file"${crlf}Content-Type: multipart/mixed; boundary=inner${crlf}${crlf}` +
        `--inner${crlf}Content-Disposition: file; filename="a.gcode"${crlf}${crlf}${gcode}${crlf}--inner--${closing}`,
    ),
    form(
      'invalid UTF-8 in the tags field',
      Buffer.concat([Buffer.from(`--${boundary}${crlf}Content-Disposition: form-data; name="tags"${crlf}${crlf}a,`), Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from(crlf + fileHead() + gcode + closing)]),
    ),
    form('1 MiB field', `--${boundary}${crlf}Content-Disposition: form-data; name="tags"${crlf}${crlf}${'t'.repeat(1024 * 1024)}${crlf}${fileHead()}${gcode}${closing}`),
  ]
}

export type Framing = 'content-length' | 'chunked'

export interface RawAnswer {
  /** The status line's code, or 0 when the connection closed without an answer. */
  status: number
  text: string
}

/**
 * Sends one request on a fresh connection and reads the answer's status.
 * `cutAt` sends only that many body bytes (declaring all of them) and then
 * leaves: the answer, if any, is not waited for. Bounded by `timeoutMs`.
 */
export function sendRaw(
  url: string,
  options: { method: string; path: string; headers: Record<string, string>; contentType: string; body: Buffer; framing: Framing; cutAt?: number; timeoutMs?: number },
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url)
  const { body, framing, cutAt } = options
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname)
    const chunks: Buffer[] = []
    let done = false
    const finish = (answer: RawAnswer) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resolve(answer)
    }
    const timer = setTimeout(() => finish({ status: 0, text: 'no answer within the time limit' }), options.timeoutMs ?? 15_000)
    socket.on('error', () => finish(answerOf(chunks)))
    socket.on('close', () => finish(answerOf(chunks)))
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      const answer = answerOf(chunks)
      if (answer.status !== 0 && answer.complete) finish(answer)
    })
    socket.on('connect', () => {
      const head = [`${options.method} ${options.path} HTTP/1.1`, `host: ${hostname}:${port}`, `content-type: ${options.contentType}`, 'connection: close']
      for (const [name, value] of Object.entries(options.headers)) head.push(`${name}: ${value}`)
      head.push(framing === 'chunked' ? 'transfer-encoding: chunked' : `content-length: ${body.length}`)
      socket.write(`${head.join('\r\n')}\r\n\r\n`)
      const sent = cutAt === undefined ? body : body.subarray(0, cutAt)
      if (framing === 'content-length') socket.write(sent)
      else {
        // Chunks of uneven sizes, so a boundary falls across them.
        for (let at = 0, size = 1; at < sent.length; at += size, size = (size * 7 + 3) % 4093 || 1) {
          const piece = sent.subarray(at, at + size)
          socket.write(`${piece.length.toString(16)}\r\n`)
          socket.write(piece)
          socket.write('\r\n')
        }
        if (cutAt === undefined) socket.write('0\r\n\r\n')
      }
      if (cutAt !== undefined) finish({ status: 0, text: 'left mid-body' })
    })
  })
}

function answerOf(chunks: Buffer[]): RawAnswer & { complete: boolean } {
  const text = Buffer.concat(chunks).toString('latin1')
  const match = /^HTTP\/1\.1 (\d{3})/.exec(text)
  const headEnd = text.indexOf('\r\n\r\n')
  if (match === null || headEnd < 0) return { status: 0, text, complete: false }
  const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd))
  const complete = length === null || text.length - headEnd - 4 >= Number(length[1])
  return { status: Number(match[1]), text: text.slice(headEnd + 4), complete }
}
