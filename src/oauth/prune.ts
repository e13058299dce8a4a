/**
 * What the authorization server stored and no longer needs is dropped now
 * and then: at most once a minute per node, on a sign-in, a grant or a new
 * agent identity (no timer: a quiet node has nothing to prune). Used codes
 * stay a day (a late second use still revokes what the first gave), refresh
 * tokens a day past expiry, the revocation and assertion lists until the
 * tokens they name expire, unclaimed agent identities 30 days, a bridge
 * grant's host binding until no refresh token of the grant is left and its
 * last access token has expired (an access token lives at most a day).
 */
import type { Sql } from 'postgres'
import type { Logger } from '../observability/log.js'

const everyMs = 60_000
let lastRun = 0

/** `now`: the node's clock, in milliseconds since the epoch. */
export function pruneExpiredGrants(sql: Sql, logger: Logger, now: number): void {
  if (now - lastRun < everyMs) return
  lastRun = now
  const at = new Date(now)
  void (async () => {
    await sql`delete from oauth_handoffs where expires_at < ${at}::timestamptz - interval '1 hour'`
    await sql`delete from oauth_codes where expires_at < ${at}::timestamptz - interval '1 day'`
    await sql`delete from oauth_refresh_tokens where expires_at < ${at}::timestamptz - interval '1 day'`
    await sql`delete from oauth_revoked_tokens where expires_at < ${at}`
    await sql`delete from oauth_assertion_ids where expires_at < ${at}`
    await sql`
      delete from oauth_host_bindings b where b.bound_at < ${at}::timestamptz - interval '2 days'
      and not exists (select 1 from oauth_refresh_tokens r where r.family_id = b.grant_id)`
    await sql`delete from agent_identities where status = 'pending' and claim_expires_at < ${at}::timestamptz - interval '30 days'`
  })().catch((error: unknown) => logger.warn('could not prune expired oauth records', { error }))
}
