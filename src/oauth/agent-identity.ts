/**
 * Agent identity (docs/oauth.md): an AI agent asks for an identity,
 * a person confirms it for one organization and a set of scopes, and the
 * agent collects tokens by polling the token endpoint with the claim grant.
 *
 * - The claim token is the agent's secret (kept as a SHA-256). The claim
 *   URL carries it in the fragment, which browsers never send to a server
 *   or in a Referer; whoever opens it can only grant their own authority.
 * - Tokens act for the confirming person (`sub`), with the agent as the
 *   client (`client_id` = agent_id): the agent's scopes bound them, and
 *   the person's membership and role are re-checked on every request.
 * - With the tokens comes an identity assertion: a JWT of this service
 *   (`typ: agent-identity+jwt`, `sub` the agent, `aud` the token endpoint)
 *   the agent exchanges with the jwt-bearer grant (RFC 7523) for new tokens
 *   and a new assertion. Each assertion is single use (its `jti` is
 *   remembered until it expires), so a stolen one is worth one exchange at
 *   most and its use shows.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose'
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { AgentIdentity, AgentIdentityBody, ClaimSummary, ConfirmClaimBody, RenewClaimBody, Token, TokenBody } from '../../protocol/schemas/oauth.js'
import { signingAlgorithm, type Keyring } from '../auth/keyring.js'
import type { Logger } from '../observability/log.js'
import type { Queryable } from '../storage/database.js'
import type { OAuthAccessTokens } from './access-tokens.js'
import { narrowScopes } from './authorization.js'
import type { GrantClient } from './client-store.js'
import { pruneExpiredGrants } from './prune.js'
import type { Resources } from './resources.js'
import { sha256 } from '../secrets/digest.js'

/** Seconds an agent waits between polls of the token endpoint. */
export const claimPollInterval = 5
const assertionType = 'agent-identity+jwt'
const newClaimToken = (): string => `pfct_${randomBytes(32).toString('base64url')}`

interface AgentRow {
  id: string
  agent_id: string
  type: string
  login_hint: string | null
  status: 'pending' | 'confirmed' | 'delivered'
  email: string | null
  user_id: string | null
  organization_id: string | null
  scopes: string[] | null
  claim_expires_at: Date
  expired: boolean
  revoked: boolean
}

export interface AgentLifetimes {
  claimTtlSeconds: number
  assertionTtlSeconds: number
}

export class AgentIdentities {
  readonly #sql: Sql
  readonly #keyring: Keyring
  readonly #tokens: OAuthAccessTokens
  readonly #resources: Resources
  readonly #issuer: string
  readonly #lifetimes: AgentLifetimes
  readonly #logger: Logger
  /** The node's clock: claims and assertions expire on its time. */
  readonly #now: () => number

  constructor(sql: Sql, keyring: Keyring, tokens: OAuthAccessTokens, resources: Resources, lifetimes: AgentLifetimes, logger: Logger, now: () => number) {
    this.#now = now
    this.#sql = sql
    this.#keyring = keyring
    this.#tokens = tokens
    this.#resources = resources
    this.#issuer = resources.api
    this.#lifetimes = lifetimes
    this.#logger = logger
  }

  /** Where an identity assertion is presented: its audience (RFC 7523 §3). */
  get tokenEndpoint(): string {
    return `${this.#issuer}/v1/oauth/token`
  }

  claimUrl(claimToken: string): string {
    return `${this.#issuer}/agent/claim#claim_token=${claimToken}`
  }

  async create(body: AgentIdentityBody, from: string): Promise<AgentIdentity> {
    const agentId = `pfa_${randomBytes(16).toString('base64url')}`
    const claimToken = newClaimToken()
    const [row] = await this.#sql<{ claim_expires_at: Date }[]>`
      insert into agent_identities (id, agent_id, type, login_hint, claim_hash, claim_expires_at, created_from)
      values (${randomUUID()}, ${agentId}, ${body.type}, ${body.login_hint ?? null}, ${sha256(claimToken)},
              ${new Date(this.#now())}::timestamptz + make_interval(secs => ${this.#lifetimes.claimTtlSeconds}), ${from})
      returning claim_expires_at`
    this.#logger.info('agent identity created', { agentId, type: body.type, from })
    pruneExpiredGrants(this.#sql, this.#logger, this.#now())
    return { agent_id: agentId, claim_token: claimToken, claim_url: this.claimUrl(claimToken), expires_at: row!.claim_expires_at.toISOString(), interval: claimPollInterval }
  }

  /** An expired attempt gets a new claim token; from then on only the person with `email` may confirm it. */
  async renew(body: RenewClaimBody): Promise<AgentIdentity> {
    const claimToken = newClaimToken()
    return this.#sql.begin(async (tx) => {
      const row = await this.#byClaim(tx, body.claim_token, true)
      if (row === undefined) throw claimNotFound()
      if (row.status !== 'pending') throw new ServiceError('claim_already_confirmed', 'this claim was already confirmed; the agent collects its tokens with the claim grant')
      if (!row.expired) throw new ServiceError('claim_attempt_active', `the claim attempt runs until ${row.claim_expires_at.toISOString()}: open its claim_url, or renew it after that`)
      const [renewed] = await tx<{ claim_expires_at: Date }[]>`
        update agent_identities set claim_hash = ${sha256(claimToken)}, email = ${body.email.toLowerCase()},
          claim_expires_at = ${new Date(this.#now())}::timestamptz + make_interval(secs => ${this.#lifetimes.claimTtlSeconds})
        where id = ${row.id} returning claim_expires_at`
      this.#logger.info('agent identity claim renewed', { agentId: row.agent_id })
      return { agent_id: row.agent_id, claim_token: claimToken, claim_url: this.claimUrl(claimToken), expires_at: renewed!.claim_expires_at.toISOString(), interval: claimPollInterval }
    })
  }

  /** What the claim page shows: the kind of agent, its login hint, where the claim stands. */
  async inspect(claimToken: string): Promise<ClaimSummary> {
    const row = await this.#byClaim(this.#sql, claimToken, false)
    if (row === undefined) throw claimNotFound()
    const status = row.status !== 'pending' ? 'confirmed' : row.expired ? 'expired' : 'pending'
    return { type: row.type, login_hint: row.login_hint, status, expires_at: row.claim_expires_at.toISOString() }
  }

  /** A signed-in person gives the agent the scopes in one of their organizations. */
  async confirm(userId: string, body: ConfirmClaimBody): Promise<{ agent_id: string; organization_id: string; scopes: string[]; status: 'confirmed' }> {
    const organizationId = body.organization_id.toLowerCase()
    return this.#sql.begin(async (tx) => {
      const row = await this.#byClaim(tx, body.claim_token, true)
      if (row === undefined) throw claimNotFound()
      if (row.status !== 'pending') throw new ServiceError('claim_already_confirmed', 'this claim was already confirmed')
      if (row.expired) throw new ServiceError('expired_token', 'the claim attempt has expired; the agent renews it with POST /agent/identity/claim')
      const [person] = await tx<{ email: string; member: boolean }[]>`
        select u.email, exists (select 1 from memberships m where m.user_id = u.id and m.organization_id = ${organizationId}) as member
        from users u where u.id = ${userId}`
      if (person === undefined || !person.member) throw new ServiceError('organization_not_found', 'no organization of yours has that id')
      if (row.email !== null && row.email !== person.email.toLowerCase()) throw new ServiceError('claim_email_mismatch', 'this claim was renewed for another email address')
      await tx`
        update agent_identities set status = 'confirmed', user_id = ${userId}, organization_id = ${organizationId}, scopes = ${body.scopes as string[]}, confirmed_at = ${new Date(this.#now())}
        where id = ${row.id}`
      this.#logger.info('agent identity confirmed', { agentId: row.agent_id, userId, organizationId, scopes: body.scopes })
      return { agent_id: row.agent_id, organization_id: organizationId, scopes: [...body.scopes], status: 'confirmed' as const }
    })
  }

  /** The claim grant: authorization_pending until confirmed, then the tokens once, expired_token when time ran out. */
  async collect(body: TokenBody, client: GrantClient | string | undefined): Promise<Token> {
    if (body.claim_token === undefined || body.claim_token === '') throw new ServiceError('invalid_request', 'claim_token is required')
    // The claim token also rides in the claim URL a person opens: collecting needs the agent_id too, which only the agent was told.
    if (typeof client !== 'string') {
      throw new ServiceError(client === undefined ? 'invalid_client' : 'unauthorized_client', 'the claim grant is for agents: send client_id = the agent_id POST /agent/identity answered')
    }
    const resource = this.#resources.stored(body.resource)
    const token = await this.#sql.begin(async (tx) => {
      const row = await this.#byClaim(tx, body.claim_token!, true)
      if (row === undefined) throw new ServiceError('invalid_grant', 'the claim_token is unknown')
      assertAgentClient(client, row.agent_id)
      if (row.status === 'delivered') throw new ServiceError('invalid_grant', "this claim's tokens were already collected; use the identity assertion with the jwt-bearer grant")
      if (row.status === 'pending') {
        if (row.expired) throw new ServiceError('expired_token', 'nobody confirmed the claim in time; renew it with POST /agent/identity/claim')
        throw new ServiceError('authorization_pending', `not confirmed yet; poll again in ${claimPollInterval} s`)
      }
      await tx`update agent_identities set status = 'delivered', delivered_at = ${new Date(this.#now())} where id = ${row.id}`
      return this.#issue(tx, row, resource, body.scope)
    })
    this.#logger.info('oauth grant', { grant: 'agent_claim', clientId: token.agentId, userId: token.userId, organizationId: token.organizationId, scope: token.token.scope })
    return token.token
  }

  /** RFC 7523: an identity assertion of this service, used once, for new tokens and a new assertion. */
  async exchangeAssertion(body: TokenBody, client: GrantClient | string | undefined): Promise<Token> {
    if (body.assertion === undefined || body.assertion === '') throw new ServiceError('invalid_request', 'assertion is required')
    const resource = this.#resources.stored(body.resource)
    if (client !== undefined && typeof client !== 'string') throw new ServiceError('unauthorized_client', 'the jwt-bearer grant takes identity assertions of agents; an OAuth client signs people in with authorization_code')
    const claims = await this.#verifyAssertion(body.assertion)
    assertAgentClient(client, claims.agentId)
    const outcome = await this.#sql.begin(async (tx) => {
      const [fresh] = await tx`
        insert into oauth_assertion_ids (jti, expires_at) values (${claims.jti}, to_timestamp(${claims.exp})) on conflict (jti) do nothing returning jti`
      if (fresh === undefined) {
        // Two holders of one chain: the agent's and a thief's. Which is which is unknowable, so the agent ends
        // (committed, not thrown: the revocation must stick), and a person claims it again.
        await this.#revokeIn(tx, claims.agentId)
        return 'replayed' as const
      }
      const [row] = await tx<AgentRow[]>`select *, claim_expires_at <= ${new Date(this.#now())} as expired, revoked_at is not null as revoked from agent_identities where agent_id = ${claims.agentId}`
      if (row === undefined || row.status === 'pending' || row.revoked) throw new ServiceError('invalid_grant', 'the agent identity is unknown or revoked')
      return this.#issue(tx, row, resource, body.scope)
    })
    if (outcome === 'replayed') {
      this.#logger.warn('agent identity assertion replayed: the agent is revoked', { agentId: claims.agentId })
      throw new ServiceError('invalid_grant', 'this assertion was already used: the agent identity is revoked, every token of it refused; claim the agent again')
    }
    const token = outcome
    this.#logger.info('oauth grant', { grant: 'jwt_bearer', clientId: token.agentId, userId: token.userId, organizationId: token.organizationId, scope: token.token.scope })
    return token.token
  }

  /** The agent an identity assertion of this service names (signature checked, expiry and replay not), for revocation. */
  async assertionAgent(token: string): Promise<string | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#keyring.resolver(), {
        issuer: this.#issuer,
        algorithms: [signingAlgorithm],
        typ: assertionType,
        requiredClaims: ['sub'],
        currentDate: new Date(0),
      })
      return payload['token_use'] === 'agent_identity' ? payload.sub : undefined
    } catch {
      return undefined
    }
  }

  /** Ends an agent: its access tokens are refused from now on (their standing is read per request) and nothing renews. */
  async revoke(agentId: string, why: string): Promise<void> {
    await this.#revokeIn(this.#sql, agentId)
    this.#logger.info('oauth revocation', { kind: 'agent_identity', clientId: agentId, why })
  }

  async #revokeIn(sql: Queryable, agentId: string): Promise<void> {
    await sql`update agent_identities set revoked_at = coalesce(revoked_at, ${new Date(this.#now())}) where agent_id = ${agentId}`
  }

  async #issue(tx: Queryable, row: AgentRow, resource: string, asked: string | undefined): Promise<{ agentId: string; userId: string; organizationId: string; token: Token }> {
    const [member] = await tx`select 1 from memberships where user_id = ${row.user_id} and organization_id = ${row.organization_id}`
    if (member === undefined) throw new ServiceError('invalid_grant', 'the person who confirmed the agent is no longer a member of the organization')
    const scopes = narrowScopes(asked, row.scopes ?? [])
    const access = await this.#tokens.issue({
      userId: row.user_id!,
      clientId: row.agent_id,
      organizationId: row.organization_id!,
      scopes,
      audience: this.#resources.audience(resource),
    })
    const assertion = await this.#assertion(row.agent_id)
    return {
      agentId: row.agent_id,
      userId: row.user_id!,
      organizationId: row.organization_id!,
      token: { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn, scope: scopes.join(' '), identity_assertion: assertion.jwt, assertion_expires: assertion.expires },
    }
  }

  async #assertion(agentId: string): Promise<{ jwt: string; expires: number }> {
    const { kid, key } = this.#keyring.signingKey()
    const issuedAt = Math.floor(this.#now() / 1000)
    const expires = issuedAt + this.#lifetimes.assertionTtlSeconds
    const jwt = await new SignJWT({ token_use: 'agent_identity' })
      .setProtectedHeader({ alg: signingAlgorithm, kid, typ: assertionType })
      .setIssuer(this.#issuer)
      .setAudience(this.tokenEndpoint)
      .setSubject(agentId)
      .setJti(randomUUID())
      .setIssuedAt(issuedAt)
      .setExpirationTime(expires)
      .sign(key)
    return { jwt, expires }
  }

  async #verifyAssertion(assertion: string): Promise<{ agentId: string; jti: string; exp: number }> {
    try {
      const { payload } = await jwtVerify(assertion, this.#keyring.resolver(), {
        issuer: this.#issuer,
        audience: [this.tokenEndpoint, this.#issuer],
        algorithms: [signingAlgorithm],
        typ: assertionType,
        requiredClaims: ['sub', 'exp', 'jti'],
        currentDate: new Date(this.#now()),
      })
      if (payload['token_use'] !== 'agent_identity') throw new ServiceError('invalid_grant', 'the assertion is not an identity assertion of this service')
      return { agentId: payload.sub!, jti: payload.jti!, exp: payload.exp! }
    } catch (error) {
      if (error instanceof ServiceError) throw error
      if (error instanceof joseErrors.JWTExpired) throw new ServiceError('invalid_grant', 'the identity assertion has expired; claim the agent again')
      throw new ServiceError('invalid_grant', 'the assertion is not a valid identity assertion of this service')
    }
  }

  async #byClaim(sql: Queryable, claimToken: string, lock: boolean): Promise<AgentRow | undefined> {
    const [row] = lock
      ? await sql<AgentRow[]>`select *, claim_expires_at <= ${new Date(this.#now())} as expired, revoked_at is not null as revoked from agent_identities where claim_hash = ${sha256(claimToken)} for update`
      : await sql<AgentRow[]>`select *, claim_expires_at <= ${new Date(this.#now())} as expired, revoked_at is not null as revoked from agent_identities where claim_hash = ${sha256(claimToken)}`
    return row
  }
}

/** An agent that names itself as the client must be the agent of the grant; an OAuth client authenticated itself already. */
function assertAgentClient(client: GrantClient | string | undefined, agentId: string): void {
  if (typeof client === 'string' && client !== agentId) throw new ServiceError('invalid_client', 'client_id is another agent than the one of this grant')
}

const claimNotFound = (): ServiceError => new ServiceError('agent_claim_not_found', 'no agent identity claim with that claim_token')
