/**
 * Reading a request body from uWS, bounded before anything is parsed
 * (docs/errors.md).
 *
 * uWS hands out chunks that are only valid during the onData callback
 * (docs/development.md), so each one is copied. A declared Content-Length over the
 * limit is refused before a byte is read; an undeclared (chunked) body is cut
 * off the moment it passes the limit. An aborted request settles the promise
 * so nothing waits forever on a socket that is gone.
 */
import { ServiceError } from '../../protocol/errors.js'

export interface BodySource {
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): unknown
}

/** Shared between the adapter's single onAborted handler and whoever is waiting. */
export interface RequestLifecycle {
  aborted: boolean
  onAbort: (() => void) | undefined
}

export class RequestAborted extends Error {
  constructor() {
    super('the client closed the connection before the request was read')
    this.name = 'RequestAborted'
  }
}

export function payloadTooLarge(limitBytes: number, limitName?: string): ServiceError {
  if (limitName !== undefined) return new ServiceError('payload_too_large', `the upload exceeds the limit of ${limitBytes} bytes (${limitName})`)
  return new ServiceError('payload_too_large', `the request body exceeds the limit of ${limitBytes} bytes`)
}

export function readBody(
  source: BodySource,
  limitBytes: number,
  declaredLength: number | undefined,
  life: RequestLifecycle,
): Promise<Buffer> {
  if (declaredLength !== undefined && declaredLength > limitBytes) return Promise.reject(payloadTooLarge(limitBytes))
  if (life.aborted) return Promise.reject(new RequestAborted())
  return new Promise<Buffer>((resolve, reject) => {
    let settled = false
    let size = 0
    // With a declared length the body lands in one buffer: one copy per chunk, no concat.
    const whole = declaredLength !== undefined ? Buffer.allocUnsafe(declaredLength) : undefined
    const chunks: Buffer[] = []
    life.onAbort = () => {
      if (settled) return
      settled = true
      reject(new RequestAborted())
    }
    source.onData((chunk, isLast) => {
      if (settled) return
      const length = chunk.byteLength
      if (size + length > limitBytes || (whole !== undefined && size + length > whole.length)) {
        settled = true
        reject(payloadTooLarge(limitBytes))
        return
      }
      if (whole !== undefined) whole.set(new Uint8Array(chunk), size)
      else if (length > 0) chunks.push(Buffer.from(new Uint8Array(chunk)))
      size += length
      if (!isLast) return
      settled = true
      life.onAbort = undefined
      resolve(whole !== undefined ? whole.subarray(0, size) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
    })
  })
}
