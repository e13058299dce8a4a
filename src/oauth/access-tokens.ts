/**
 * OAuth access tokens (RFC 9068): JWTs signed with the service's ES256
 * keyring, `typ: at+jwt`, bound to one audience (the resource: the API at
 * PUBLIC_BASE_URL, or the MCP endpoint), carrying the person (`sub`), the
 * client (`client_id`), the organization (`organization_id`) and the granted
 * `scope`. `token_use: oauth` tells them from sign-in session tokens, which
 * have their own audience and never open routes by scope.
 */
import { randomUUID } from 'node:crypto'
import { decodeJwt, errors as joseErrors, jwtVerify, SignJWT } from 'jose'
import { ServiceError } from '../../protocol/errors.js'
import { signingAlgorithm, type Keyring } from '../auth/keyring.js'
import { VerifiedTokens } from '../auth/verified-tokens.js'

export interface OAuthGrant {
  userId: string
  clientId: string
  organizationId: string
  scopes: readonly string[]
  /** The resource the token is for (RFC 8707); the API itself when absent. */
  audience?: string
  /** The grant's id when it holds a bridge-only scope: its tokens speak for one host (src/auth/host-binding.ts). */
  bridgeGrant?: string
}

export interface OAuthClaims {
  userId: string
  clientId: string
  organizationId: string
  scopes: ReadonlySet<string>
  tokenId: string
  expiresAt: number
  /** Set on the tokens of a bridge's grant (see OAuthGrant). */
  bridgeGrant: string | null
}

/** What kind of token a bearer token says it is (read before verification, to choose the verifier; verification follows). */
export function tokenUse(token: string): string | undefined {
  try {
    const use = decodeJwt(token)['token_use']
    return typeof use === 'string' ? use : undefined
  } catch {
    return undefined
  }
}

export class OAuthAccessTokens {
  readonly #keyring: Keyring
  readonly #issuer: string
  readonly #ttlSeconds: number
  /** Signature and claims only: revocation, the client and the person's membership are read on every request (oauthStanding). */
  readonly #verified: VerifiedTokens<OAuthClaims>
  /** The node's clock: tokens are issued and checked on its time. */
  readonly #now: () => number

  constructor(keyring: Keyring, issuer: string, ttlSeconds: number, now: () => number) {
    this.#keyring = keyring
    this.#issuer = issuer
    this.#ttlSeconds = ttlSeconds
    this.#now = now
    this.#verified = new VerifiedTokens(now)
  }

  /** The API's own resource identifier: the audience of a token asked for without `resource`. */
  get apiAudience(): string {
    return this.#issuer
  }

  async issue(grant: OAuthGrant): Promise<{ token: string; tokenId: string; expiresIn: number }> {
    const { kid, key } = this.#keyring.signingKey()
    const tokenId = randomUUID()
    const claims: Record<string, string> = { token_use: 'oauth', client_id: grant.clientId, organization_id: grant.organizationId, scope: grant.scopes.join(' ') }
    if (grant.bridgeGrant !== undefined) claims['bridge_grant'] = grant.bridgeGrant
    const issuedAt = Math.floor(this.#now() / 1000)
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: signingAlgorithm, kid, typ: 'at+jwt' })
      .setIssuer(this.#issuer)
      .setAudience(grant.audience ?? this.#issuer)
      .setSubject(grant.userId)
      .setJti(tokenId)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + this.#ttlSeconds)
      .sign(key)
    return { token, tokenId, expiresIn: this.#ttlSeconds }
  }

  /** Any unexpired OAuth access token of this service, whatever its audience (revocation); undefined otherwise. */
  async inspect(token: string): Promise<OAuthClaims | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#keyring.resolver(), {
        issuer: this.#issuer,
        algorithms: [signingAlgorithm],
        typ: 'at+jwt',
        requiredClaims: ['sub', 'exp', 'jti', 'client_id', 'organization_id', 'scope'],
        currentDate: new Date(this.#now()),
      })
      if (payload['token_use'] !== 'oauth' || typeof payload['client_id'] !== 'string' || typeof payload['organization_id'] !== 'string') return undefined
      return {
        userId: payload.sub!,
        clientId: payload['client_id'],
        organizationId: payload['organization_id'],
        scopes: new Set(String(payload['scope']).split(' ').filter((s) => s !== '')),
        tokenId: payload.jti!,
        expiresAt: payload.exp!,
        bridgeGrant: typeof payload['bridge_grant'] === 'string' ? payload['bridge_grant'] : null,
      }
    } catch {
      return undefined
    }
  }

  /** The token's claims when it is ours, unexpired and for `audience`; else 401 (token_expired when only its time is up). */
  async verify(token: string, audience: string): Promise<OAuthClaims> {
    // Keyed by audience too: the same token checked for another resource is checked afresh.
    const key = `${audience} ${token}`
    const known = this.#verified.lookup(key)
    if (known === 'expired') throw oauthTokenExpired()
    if (known !== undefined) return known
    const claims = await this.#verify(token, audience)
    this.#verified.remember(key, claims)
    return claims
  }

  async #verify(token: string, audience: string): Promise<OAuthClaims> {
    try {
      const { payload } = await jwtVerify(token, this.#keyring.resolver(), {
        issuer: this.#issuer,
        audience,
        algorithms: [signingAlgorithm],
        typ: 'at+jwt',
        requiredClaims: ['sub', 'exp', 'jti', 'client_id', 'organization_id', 'scope'],
        currentDate: new Date(this.#now()),
      })
      if (payload['token_use'] !== 'oauth' || typeof payload['client_id'] !== 'string' || typeof payload['organization_id'] !== 'string' || typeof payload['scope'] !== 'string') {
        throw new ServiceError('unauthorized', 'the bearer token is not an OAuth access token of this service')
      }
      return {
        userId: payload.sub!,
        clientId: payload['client_id'],
        organizationId: payload['organization_id'],
        scopes: new Set(payload['scope'].split(' ').filter((s) => s !== '')),
        tokenId: payload.jti!,
        expiresAt: payload.exp!,
        bridgeGrant: typeof payload['bridge_grant'] === 'string' ? payload['bridge_grant'] : null,
      }
    } catch (error) {
      if (error instanceof ServiceError) throw error
      if (error instanceof joseErrors.JWTExpired) throw oauthTokenExpired()
      if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'aud') {
        throw new ServiceError('unauthorized', `the OAuth access token is for another resource (audience), not ${audience}`)
      }
      throw new ServiceError('unauthorized', 'the bearer token is not valid')
    }
  }
}

function oauthTokenExpired(): ServiceError {
  return new ServiceError('token_expired', 'the OAuth access token has expired; get a new one from the token endpoint with your refresh token')
}
