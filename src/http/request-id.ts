/**
 * Request ids: a random UUID per process whose last 48 bits count requests — as unique as a random
 * id per request for the service's logs, at a fraction of the cost. A request's id is kept as its
 * number and turned into text only when something reads it (an error body, a log line); the
 * response header is written from bytes filled in place, with no string built at all
 * (bench/http-floor: the text and its UTF-8 copy were about 3% of a GET /healthz).
 */
import { randomUUID } from 'node:crypto'

const prefix = randomUUID().slice(0, 24)
const counterDigits = 12
const hex = Buffer.from('0123456789abcdef')
/** The header value being written: uWS copies it at once, so one buffer serves every response. */
const headerBytes = Buffer.from(prefix + '0'.repeat(counterDigits))
const low24 = 0x1000000
let counter = 0

/** The next request's number (wraps after 2^48 requests). */
export function nextRequestNumber(): number {
  counter = counter + 1 === low24 * low24 ? 0 : counter + 1
  return counter
}

/** The id of request number `n` as text: the UUID prefix and n in 12 hex digits. */
export function requestIdText(n: number): string {
  return prefix + n.toString(16).padStart(counterDigits, '0')
}

/** The same id as bytes, in a buffer that the next call overwrites. */
export function requestIdBytes(n: number): Buffer {
  let low = n % low24
  let high = (n - low) / low24
  for (let i = headerBytes.length - 1; i >= headerBytes.length - 6; i--) {
    headerBytes[i] = hex[low & 15]!
    low >>>= 4
  }
  for (let i = headerBytes.length - 7; i >= headerBytes.length - counterDigits; i--) {
    headerBytes[i] = hex[high & 15]!
    high >>>= 4
  }
  return headerBytes
}
