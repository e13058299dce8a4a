/**
 * The per-address failure budget of the public OAuth and agent routes
 * (OAUTH_FAILURES_PER_ADDRESS in 15 minutes, then 429): an attempt is counted
 * before it runs, so parallel guesses cannot slip past the check, and given
 * back unless it failed in a way that looks like guessing.
 */
import { ServiceError } from '../../protocol/errors.js'
import { addressGroup, rateLimited } from '../auth/failure-limiter.js'
import type { RouteRequest } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the failure budget uses of the node: the per-address limiter of the OAuth server. */
export type OAuthFailuresContext = Pick<Services, 'oauthServer'>

export async function withinFailureBudget<T>(svc: OAuthFailuresContext, req: RouteRequest, attempt: () => Promise<T>, isGuess: (error: unknown) => boolean): Promise<T> {
  const from = addressGroup(req.remoteAddress)
  const wait = svc.oauthServer.failures.acquire(from)
  if (wait !== undefined) throw rateLimited('failed OAuth requests from this address', wait)
  try {
    const result = await attempt()
    svc.oauthServer.failures.release(from)
    return result
  } catch (error) {
    if (!isGuess(error)) svc.oauthServer.failures.release(from)
    throw error
  }
}
