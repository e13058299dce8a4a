/**
 * Database errors become typed service errors here and nowhere else
 * (STYLE practice 6). A store that cannot be reached is a 503 the client
 * retries; anything else from the driver is a fault (500).
 */
import { ServiceError } from '../../protocol/errors.js'

/** postgres.js connection codes and the server's "not now" SQLSTATEs. */
const unavailableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '57P05', // idle_session_timeout
  '25P03', // idle_in_transaction_session_timeout: the session was ended; nothing of it was committed
  '53300', // too_many_connections
  '08000', // connection_exception
  '08003', // connection_does_not_exist
  '08006', // connection_failure
  '40001', // serialization_failure: safe to retry the whole request
  '40P01', // deadlock_detected: likewise
])

export function isStoreUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && unavailableCodes.has(code)
}

/**
 * Text the database cannot hold (a NUL character, an unconvertible one): the
 * request's input is at fault, and no schema rule names it, so it is a 400 here.
 */
const unstorableTextCodes = new Set(['22021', '22P05'])

export function translateStoreError(error: unknown): ServiceError | undefined {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === 'string' && unstorableTextCodes.has(code)) {
    return new ServiceError('validation_failed', 'a text field holds a character the store cannot keep (such as \\u0000); remove it', { cause: error })
  }
  if (!isStoreUnavailable(error)) return undefined
  return new ServiceError('store_unavailable', 'the database is unreachable; nothing was stored, retry later', {
    headers: { 'retry-after': '1' },
    cause: error,
  })
}
