/**
 * The authorization code flow's front half: a signed-in person's consent
 * becomes a single-use handoff, and GET /v1/oauth/authorize turns a handoff
 * into an authorization code on the client's redirect URI.
 *
 * Order of checks at authorize (RFC 6749 §4.1.2.1): the client and its
 * redirect URI first — when either is wrong nothing is sent to that URI
 * (400, never a redirect, so the endpoint cannot be used to bounce people
 * to any site); after that, errors go back to the client on the redirect
 * URI with `state` and `iss` (RFC 9207). A handoff that does not match the
 * request it comes back with is refused with 400 and no code: it was made
 * for another request.
 *
 * A client that registered itself (RFC 7591) named its redirect URIs itself:
 * anyone can register one on any site. Its errors go back to that URI only
 * once the person has seen its consent page (the page carries a consent
 * token, signed here and bound to the client, the redirect URI and the
 * state, which Deny and Allow send back); before that an error is a 400 page
 * and no redirect, so this endpoint cannot bounce a link's victim to a site
 * of the registrant's choosing (RFC 9700 section 4.11.2). An organization's
 * own clients were registered by its admin and are sent back at once.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import { redirectUriMatches } from '../../protocol/redirect-uris.js'
import type { AuthorizeQuery, SessionHandoffBody } from '../../protocol/schemas/oauth.js'
import { bridgeOnlyScopes, isBridgeOnly, isScope, scopesForRole } from '../../protocol/scopes.js'
import { chooseOrganization } from '../auth/authenticate.js'
import { membershipsOf } from '../auth/accounts.js'
import type { Logger } from '../observability/log.js'
import type { GrantClient, OAuthClientStore } from './client-store.js'
import { pruneExpiredGrants } from './prune.js'
import type { Resources } from './resources.js'
import { sha256 } from '../secrets/digest.js'

export const handoffTtlSeconds = 300

/** What the consent page needs to show and to come back with. */
export interface ConsentRequest {
  client: { client_id: string; name: string; client_uri: string | null; organization_id: string | null }
  redirect_uri: string
  scopes: string[]
  resource: string
  code_challenge: string | null
  organization_id: string | null
  /** Proof that this page was shown, sent back with Deny and Allow (see the module header). */
  consent_token: string
}

/** How long a consent page's token proves the page was seen. */
const consentTokenTtlSeconds = 3600

export type AuthorizeOutcome = { kind: 'consent'; request: ConsentRequest } | { kind: 'redirect'; location: string }

/** An error that goes back to the client on its redirect URI (after the client and URI checked out). */
class RedirectError extends Error {
  readonly error: string
  readonly description: string
  constructor(error: string, description: string) {
    super(description)
    this.error = error
    this.description = description
  }
}

/** The scopes asked for, as the client may have them: unknown values refused, others dropped; nothing left → invalid_scope. */
export function narrowScopes(asked: string | undefined, allowed: readonly string[]): string[] {
  if (asked === undefined || asked.trim() === '') return [...allowed]
  const values = [...new Set(asked.trim().split(/\s+/))]
  const unknown = values.filter((s) => !isScope(s))
  if (unknown.length > 0) throw new ServiceError('invalid_scope', `unknown scope ${unknown[0]!.slice(0, 60)}`)
  const kept = values.filter((s) => allowed.includes(s))
  if (kept.length === 0) throw new ServiceError('invalid_scope', `none of the requested scopes is allowed here (allowed: ${allowed.join(' ')})`)
  return kept
}

/**
 * What a client may be granted for a resource: its registered scopes, without the bridge-only ones for
 * MCP (no MCP tool uses them, so an MCP token is never a bridge's). Whether the person may grant the
 * bridge-only ones (an admin) is decided when the code is issued, for the organization chosen then.
 */
function grantable(clientScopes: readonly string[], resource: string): string[] {
  return resource === '' ? [...clientScopes] : clientScopes.filter((s) => !isBridgeOnly(s))
}

export const adminOnly = `${bridgeOnlyScopes.join(' and ')} let an application act as a bridge of the farm: only an admin of the organization can allow them`

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x))
}

export class Authorization {
  readonly #sql: Sql
  readonly #clients: OAuthClientStore
  readonly #resources: Resources
  readonly #issuer: string
  readonly #codeTtlSeconds: number
  readonly #logger: Logger
  /** `[0]` signs consent tokens; every key verifies. */
  readonly #consentKeys: readonly Buffer[]
  readonly #now: () => number

  constructor(sql: Sql, clients: OAuthClientStore, resources: Resources, issuer: string, codeTtlSeconds: number, logger: Logger, consentKeys: readonly Buffer[], now: () => number) {
    if (consentKeys.length === 0) throw new TypeError('consent tokens need a key')
    this.#consentKeys = consentKeys
    this.#now = now
    this.#sql = sql
    this.#clients = clients
    this.#resources = resources
    this.#issuer = issuer
    this.#codeTtlSeconds = codeTtlSeconds
    this.#logger = logger
  }

  /**
   * A signed-in person consents: the handoff binds client, redirect URI, scopes, resource and code
   * challenge, and the organization (x-organization-id; an organization's own client: its
   * organization; else the person's first).
   */
  async createHandoff(userId: string, body: SessionHandoffBody, requestedOrganization: string | undefined): Promise<{ handoff: string; expires_in: number }> {
    const client = await this.#clients.forGrant(body.clientId)
    if (client === undefined || !client.isEnabled) throw new ServiceError('invalid_client', 'unknown or disabled clientId')
    if (!client.redirectUris.some((r) => redirectUriMatches(r, body.redirectUri))) {
      throw new ServiceError('invalid_request', 'redirectUri is not one of the client\'s redirect URIs')
    }
    const resource = this.#resources.stored(body.resource)
    const allowed = grantable(client.scopes, resource)
    const scopes = body.scopes.filter((s) => allowed.includes(s))
    if (scopes.length === 0) throw new ServiceError('invalid_scope', `none of the scopes is one this client may have here (${allowed.join(' ')})`)
    if (client.isPublic && body.codeChallenge === undefined) throw new ServiceError('invalid_request', 'a public client needs PKCE: send codeChallenge (S256)')
    const memberships = await membershipsOf(this.#sql, userId)
    const organization = chooseOrganization(memberships, requestedOrganization ?? client.organizationId ?? memberships[0]?.organizationId)
    if (client.organizationId !== null && client.organizationId !== organization.organizationId) {
      throw new ServiceError('invalid_request', "this client belongs to another organization: select the client's organization")
    }
    // Said now, on the consent page, rather than as a code that cannot be issued.
    if (scopesForRole(scopes, organization.role).length === 0) throw new ServiceError('invalid_scope', `${adminOnly}, and nothing else was asked for`)
    const handoff = `pfoh_${randomBytes(32).toString('base64url')}`
    await this.#sql`
      insert into oauth_handoffs (handoff_hash, user_id, organization_id, client_id, redirect_uri, scopes, resource, code_challenge, expires_at)
      values (${sha256(handoff)}, ${userId}, ${organization.organizationId}, ${client.clientId}, ${body.redirectUri}, ${scopes}, ${resource},
              ${body.codeChallenge ?? null}, ${new Date(this.#now())}::timestamptz + make_interval(secs => ${handoffTtlSeconds}))`
    pruneExpiredGrants(this.#sql, this.#logger, this.#now())
    return { handoff, expires_in: handoffTtlSeconds }
  }

  /** GET /v1/oauth/authorize: the consent page to show, or where to send the browser. */
  async authorize(query: AuthorizeQuery): Promise<AuthorizeOutcome> {
    const client = await this.#clients.forGrant(query.client_id)
    if (client === undefined || !client.isEnabled) throw new ServiceError('invalid_client', 'unknown or disabled client_id: nothing is sent back to the application')
    if (!client.redirectUris.some((r) => redirectUriMatches(r, query.redirect_uri))) {
      throw new ServiceError('invalid_request', "redirect_uri is not one of the client's registered redirect URIs: nothing is sent back to the application")
    }
    try {
      return await this.#decide(client, query)
    } catch (error) {
      const back =
        error instanceof RedirectError
          ? { error: error.error, error_description: error.description }
          : error instanceof ServiceError && (error.code === 'invalid_scope' || error.code === 'invalid_target')
            ? { error: error.code, error_description: error.message }
            : undefined
      if (back === undefined) throw error
      if (client.organizationId === null && !this.#consentSeen(query)) {
        throw new ServiceError('invalid_request', `${back.error}: ${back.error_description} (an application that registered itself is sent back only from its consent page, so nothing is sent to it)`)
      }
      return { kind: 'redirect', location: this.#location(query, back) }
    }
  }

  /** The consent page's token for this request: the client, redirect URI and state it was shown for, and until when. */
  #consentToken(query: AuthorizeQuery, expiresAt: number, key: Buffer): string {
    const mac = createHmac('sha256', key).update(JSON.stringify([query.client_id, query.redirect_uri, query.state ?? null, expiresAt])).digest('base64url')
    return `${expiresAt}.${mac}`
  }

  /** Whether the request carries a consent token of this request's page that has not expired (any current key). */
  #consentSeen(query: AuthorizeQuery): boolean {
    const token = query.consent
    if (token === undefined) return false
    const [at, mac] = token.split('.')
    const expiresAt = Number(at)
    if (mac === undefined || !Number.isSafeInteger(expiresAt) || expiresAt * 1000 < this.#now()) return false
    const given = Buffer.from(token)
    return this.#consentKeys.some((key) => {
      const expected = Buffer.from(this.#consentToken(query, expiresAt, key))
      return expected.length === given.length && timingSafeEqual(expected, given)
    })
  }

  async #decide(client: GrantClient, query: AuthorizeQuery): Promise<AuthorizeOutcome> {
    if (query.response_type !== 'code') throw new RedirectError('unsupported_response_type', 'response_type must be code')
    if (!client.grantTypes.includes('authorization_code')) throw new RedirectError('unauthorized_client', 'this client is not registered for the authorization code flow')
    if (query.code_challenge !== undefined && (query.code_challenge_method ?? 'plain') !== 'S256') {
      throw new RedirectError('invalid_request', 'code_challenge_method must be S256')
    }
    if (query.code_challenge !== undefined && !/^[A-Za-z0-9._~-]{43,128}$/.test(query.code_challenge)) {
      throw new RedirectError('invalid_request', 'code_challenge must be 43-128 characters of [A-Za-z0-9._~-] (RFC 7636)')
    }
    if (client.isPublic && query.code_challenge === undefined) throw new RedirectError('invalid_request', 'a public client must use PKCE: send code_challenge with code_challenge_method=S256')
    const resource = this.#resources.stored(query.resource)
    const scopes = narrowScopes(query.scope, grantable(client.scopes, resource))
    if (query.decision === 'deny') {
      this.#logger.info('oauth consent denied', { clientId: client.clientId })
      throw new RedirectError('access_denied', 'the person declined')
    }
    if (query.decision !== undefined && query.decision !== 'allow') throw new RedirectError('invalid_request', 'decision must be allow or deny')
    if (query.organization_id !== undefined && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(query.organization_id)) {
      throw new RedirectError('invalid_request', 'organization_id must be a uuid')
    }
    if (query.handoff === undefined) {
      return {
        kind: 'consent',
        request: {
          client: { client_id: client.clientId, name: client.name, client_uri: client.clientUri, organization_id: client.organizationId },
          redirect_uri: query.redirect_uri,
          scopes,
          resource,
          code_challenge: query.code_challenge ?? null,
          organization_id: query.organization_id?.toLowerCase() ?? client.organizationId,
          consent_token: this.#consentToken(query, Math.floor(this.#now() / 1000) + consentTokenTtlSeconds, this.#consentKeys[0]!),
        },
      }
    }
    const code = await this.#redeemHandoff(client, query, scopes, resource)
    return { kind: 'redirect', location: this.#location(query, { code }) }
  }

  /** The handoff, used once, must repeat this request exactly; it becomes an authorization code. */
  async #redeemHandoff(client: GrantClient, query: AuthorizeQuery, scopes: string[], resource: string): Promise<string> {
    const code = `pfoc_${randomBytes(32).toString('base64url')}`
    const outcome = await this.#sql.begin(async (tx) => {
      const [row] = await tx<{ user_id: string; organization_id: string; client_id: string; redirect_uri: string; scopes: string[]; resource: string; code_challenge: string | null; usable: boolean }[]>`
        update oauth_handoffs set used_at = ${new Date(this.#now())}
        where handoff_hash = ${sha256(query.handoff!)} and used_at is null
        returning user_id, organization_id, client_id, redirect_uri, scopes, resource, code_challenge, expires_at > ${new Date(this.#now())} as usable`
      if (row === undefined || !row.usable) return 'unknown' as const
      const matches =
        row.client_id === client.clientId &&
        row.redirect_uri === query.redirect_uri &&
        sameSet(row.scopes, scopes) &&
        row.resource === resource &&
        row.code_challenge === (query.code_challenge ?? null)
      if (!matches) return 'mismatch' as const
      let organizationId = row.organization_id
      if (query.organization_id !== undefined && query.organization_id.toLowerCase() !== organizationId) {
        const [member] = await tx`select 1 from memberships where user_id = ${row.user_id} and organization_id = ${query.organization_id.toLowerCase()}`
        if (member === undefined) return 'organization' as const
        organizationId = query.organization_id.toLowerCase()
      }
      if (client.organizationId !== null && client.organizationId !== organizationId) return 'organization' as const
      // The bridge-only scopes are an admin's to grant: a member's consent leaves them out (the token's `scope` says so, RFC 6749 §3.3).
      const [person] = await tx<{ role: 'admin' | 'member' }[]>`select role from memberships where user_id = ${row.user_id} and organization_id = ${organizationId}`
      if (person === undefined) return 'organization' as const
      const granted = scopesForRole(scopes, person.role)
      if (granted.length === 0) return 'admin' as const
      await tx`
        insert into oauth_codes (code_hash, client_id, user_id, organization_id, redirect_uri, scopes, resource, code_challenge, expires_at)
        values (${sha256(code)}, ${client.clientId}, ${row.user_id}, ${organizationId}, ${query.redirect_uri}, ${granted}, ${resource},
                ${row.code_challenge}, ${new Date(this.#now())}::timestamptz + make_interval(secs => ${this.#codeTtlSeconds}))`
      this.#logger.info('oauth authorization code issued', { clientId: client.clientId, userId: row.user_id, organizationId, scopes: granted, resource: resource || 'api' })
      return 'issued' as const
    })
    if (outcome === 'unknown') throw new ServiceError('invalid_request', 'the handoff is unknown, expired or already used: sign in on the consent page again')
    if (outcome === 'mismatch') {
      throw new ServiceError('invalid_request', 'the handoff was made for another request (client, redirect_uri, scope, resource or code_challenge differ): sign in on the consent page again')
    }
    if (outcome === 'organization') throw new ServiceError('invalid_request', 'organization_id is not an organization of yours this client may act in')
    if (outcome === 'admin') throw new ServiceError('invalid_scope', `${adminOnly}, and nothing else was asked for`)
    return code
  }

  #location(query: AuthorizeQuery, params: Record<string, string>): string {
    const url = new URL(query.redirect_uri)
    for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value)
    if (query.state !== undefined) url.searchParams.set('state', query.state)
    url.searchParams.set('iss', this.#issuer)
    return url.toString()
  }
}

/** RFC 7636 §4.6: BASE64URL(SHA256(verifier)) equals the challenge, compared in constant time. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'))
  const expected = Buffer.from(challenge)
  return computed.length === expected.length && timingSafeEqual(computed, expected)
}
