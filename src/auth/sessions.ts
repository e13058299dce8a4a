/**
 * Sign-in sessions (docs/authentication.md): short-lived ES256 access tokens and
 * long-lived refresh tokens that rotate on every use.
 *
 * Refresh tokens are random 256-bit secrets, stored only as SHA-256 hashes.
 * Each login starts a family; a refresh marks its token rotated and issues
 * the next one in the family. Presenting a rotated token again means it was
 * copied (RFC 6819 §5.2.2.3, OAuth 2.0 Security BCP §4.14): the whole family
 * is revoked, the thief's copy and the user's alike, and the user signs in
 * again.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose'
import type { Sql } from 'postgres'
import type { Static } from '@sinclair/typebox'
import { ServiceError } from '../../protocol/errors.js'
import type { TokenPairSchema } from '../../protocol/schemas/accounts.js'
import type { Queryable } from '../storage/database.js'
import { signingAlgorithm, type Keyring } from './keyring.js'
import { VerifiedTokens } from './verified-tokens.js'

export const accessTokenTtlSeconds = 15 * 60
export const refreshTokenTtlSeconds = 30 * 24 * 60 * 60
const refreshPrefix = 'pfr_'

export type TokenPair = Static<typeof TokenPairSchema>

export interface AccessClaims {
  userId: string
  tokenId: string
  expiresAt: number
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest()
}

export class Sessions {
  readonly #sql: Sql
  readonly #keyring: Keyring
  readonly #issuer: string
  readonly #audience: string
  /** Nothing revokes a session access token before its expiry (sign-out and password changes end the refresh tokens). */
  readonly #verified: VerifiedTokens<AccessClaims>
  /** The node's clock: tokens are issued and checked, and refresh tokens expire, on its time. */
  readonly #now: () => number

  constructor(sql: Sql, keyring: Keyring, issuer: string, now: () => number) {
    this.#sql = sql
    this.#keyring = keyring
    this.#issuer = issuer
    this.#audience = `${issuer}/v1`
    this.#now = now
    this.#verified = new VerifiedTokens(now)
  }

  async accessToken(userId: string): Promise<string> {
    const { kid, key } = this.#keyring.signingKey()
    const issuedAt = Math.floor(this.#now() / 1000)
    // typ at+jwt (RFC 9068) keeps an ID token or other JWT from being replayed as an access token.
    return new SignJWT({ token_use: 'session' })
      .setProtectedHeader({ alg: signingAlgorithm, kid, typ: 'at+jwt' })
      .setIssuer(this.#issuer)
      .setAudience(this.#audience)
      .setSubject(userId)
      .setJti(randomUUID())
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + accessTokenTtlSeconds)
      .sign(key)
  }

  async verifyAccessToken(token: string): Promise<AccessClaims> {
    const known = this.#verified.lookup(token)
    if (known === 'expired') throw new ServiceError('token_expired', 'the access token has expired; refresh it at POST /v1/auth/refresh')
    if (known !== undefined) return known
    const claims = await this.#verifyAccessToken(token)
    this.#verified.remember(token, claims)
    return claims
  }

  async #verifyAccessToken(token: string): Promise<AccessClaims> {
    try {
      const { payload } = await jwtVerify(token, this.#keyring.resolver(), {
        issuer: this.#issuer,
        audience: this.#audience,
        algorithms: [signingAlgorithm],
        typ: 'at+jwt',
        requiredClaims: ['sub', 'exp', 'jti'],
        currentDate: new Date(this.#now()),
      })
      if (payload['token_use'] !== 'session') throw new ServiceError('unauthorized', 'the bearer token is not a session access token')
      return { userId: payload.sub!, tokenId: payload.jti!, expiresAt: payload.exp! }
    } catch (error) {
      if (error instanceof ServiceError) throw error
      if (error instanceof joseErrors.JWTExpired) throw new ServiceError('token_expired', 'the access token has expired; refresh it at POST /v1/auth/refresh')
      throw new ServiceError('unauthorized', 'the bearer token is not valid')
    }
  }

  /** A new family: the first refresh token of a login. */
  async start(userId: string): Promise<TokenPair> {
    const refresh = await this.#insertRefresh(this.#sql, userId, randomUUID())
    return this.#pair(userId, refresh)
  }

  async refresh(presented: string): Promise<TokenPair> {
    const hash = hashSecret(presented)
    const now = new Date(this.#now())
    const outcome = await this.#sql.begin(async (tx) => {
      // The account is locked before the token, in the order setPassword locks them: a refresh racing a
      // password change either commits first (and its new token is revoked with the rest) or sees the revocation.
      const [owner] = await tx<{ user_id: string }[]>`select user_id from refresh_tokens where token_hash = ${hash}`
      if (owner === undefined) return { kind: 'invalid' as const }
      await tx`select 1 from users where id = ${owner.user_id} for share`
      const [row] = await tx<{ id: string; family_id: string; user_id: string; expired: boolean; rotated: boolean; revoked: boolean }[]>`
        select id, family_id, user_id, expires_at <= ${now} as expired, rotated_at is not null as rotated, revoked_at is not null as revoked
        from refresh_tokens where token_hash = ${hash} for update`
      if (row === undefined || row.revoked) return { kind: 'invalid' as const }
      if (row.rotated) {
        // Reuse of a rotated token: committed before answering, so the revocation sticks.
        await tx`update refresh_tokens set revoked_at = ${now} where family_id = ${row.family_id} and revoked_at is null`
        return { kind: 'reused' as const }
      }
      if (row.expired) return { kind: 'expired' as const }
      await tx`update refresh_tokens set rotated_at = ${now} where id = ${row.id}`
      const next = await this.#insertRefresh(tx, row.user_id, row.family_id)
      return { kind: 'rotated' as const, userId: row.user_id, next }
    })
    switch (outcome.kind) {
      case 'invalid':
        throw new ServiceError('refresh_token_invalid', 'the refresh token is not valid; sign in again')
      case 'reused':
        throw new ServiceError('refresh_token_reused', 'this refresh token was already used; every session from that sign-in is revoked, sign in again')
      case 'expired':
        throw new ServiceError('refresh_token_invalid', 'the refresh token has expired; sign in again')
      case 'rotated':
        return this.#pair(outcome.userId, outcome.next)
    }
  }

  /** Ends the sign-in the token belongs to (its whole family). Unknown tokens are ignored: logout is idempotent. */
  async logout(presented: string): Promise<void> {
    await this.#sql`
      update refresh_tokens set revoked_at = ${new Date(this.#now())}
      where family_id = (select family_id from refresh_tokens where token_hash = ${hashSecret(presented)})
        and revoked_at is null`
  }

  async #insertRefresh(sql: Queryable, userId: string, familyId: string): Promise<string> {
    const secret = refreshPrefix + randomBytes(32).toString('base64url')
    await sql`
      insert into refresh_tokens (family_id, user_id, token_hash, expires_at)
      values (${familyId}, ${userId}, ${hashSecret(secret)}, ${new Date(this.#now())}::timestamptz + make_interval(secs => ${refreshTokenTtlSeconds}))`
    return secret
  }

  async #pair(userId: string, refresh: string): Promise<TokenPair> {
    return { access_token: await this.accessToken(userId), token_type: 'Bearer', expires_in: accessTokenTtlSeconds, refresh_token: refresh }
  }
}
