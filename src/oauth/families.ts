/**
 * Ending a sign-in through an application: every refresh token of its family,
 * and the access tokens they issued (their ids refused until they would have
 * expired). Used on refresh-token reuse, code reuse, revocation and when a
 * person or an admin ends the sign-in.
 */
import type { Queryable } from '../storage/database.js'

/** `at`: now, on the node's clock. */
export async function revokeFamily(tx: Queryable, familyId: string, at: Date): Promise<void> {
  await tx`update oauth_refresh_tokens set revoked_at = ${at} where family_id = ${familyId} and revoked_at is null`
  await tx`
    insert into oauth_revoked_tokens (jti, expires_at)
    select access_jti, access_expires_at from oauth_refresh_tokens
    where family_id = ${familyId} and access_jti is not null and access_expires_at > ${at}
    on conflict (jti) do nothing`
}
