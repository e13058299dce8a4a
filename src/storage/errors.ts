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

export function translateStoreError(error: unknown): ServiceError | undefined {
  if (!isStoreUnavailable(error)) return undefined
  return new ServiceError('store_unavailable', 'the database is unreachable; nothing was stored, retry later', {
    headers: { 'retry-after': '1' },
    cause: error,
  })
}
