/**
 * The applications and agents acting in an organization, for the people they
 * act for and its admins to see and end. A sign-in through an application is
 * its refresh-token family (a client without refresh tokens holds nothing
 * beyond access tokens that expire within OAUTH_ACCESS_TTL_S); an agent is its
 * confirmed identity. Ending one revokes what it holds at once: the family's
 * refresh tokens and the access tokens they gave, or the agent.
 */
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { Authorization } from '../../protocol/schemas/oauth.js'
import type { Logger } from '../observability/log.js'
import { revokeFamily } from './families.js'

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

interface Row {
  id: string
  kind: 'application' | 'agent'
  client_id: string
  name: string
  user_id: string
  user_email: string
  scopes: string[]
  created_at: Date
  last_used_at: Date
  expires_at: Date | null
}

export const authorizationNotFound = (): ServiceError =>
  new ServiceError('oauth_authorization_not_found', 'no application sign-in or agent with that id acts for you in this organization')

export class Authorizations {
  readonly #sql: Sql
  readonly #logger: Logger
  /** The node's clock. */
  readonly #now: () => number

  constructor(sql: Sql, logger: Logger, now: () => number) {
    this.#sql = sql
    this.#logger = logger
    this.#now = now
  }

  /** Those acting in the organization; `onlyFor`: only those acting for that person. */
  async list(organizationId: string, onlyFor: string | undefined): Promise<Authorization[]> {
    const rows = await this.#sql<Row[]>`
      select * from (
        select r.family_id::text as id, 'application' as kind, r.client_id, coalesce(c.name, r.client_id) as name, r.user_id, u.email as user_email,
               r.scopes, min(r.created_at) as created_at, max(r.created_at) as last_used_at, max(r.expires_at) as expires_at
        from oauth_refresh_tokens r join users u on u.id = r.user_id left join oauth_clients c on c.client_id = r.client_id
        where r.organization_id = ${organizationId} and r.revoked_at is null
        group by r.family_id, r.client_id, c.name, r.user_id, u.email, r.scopes
        having max(r.expires_at) > ${new Date(this.#now())} and bool_or(r.rotated_at is null)
        union all
        select a.agent_id, 'agent', a.agent_id, a.type, a.user_id, u.email, a.scopes, a.confirmed_at, coalesce(a.delivered_at, a.confirmed_at), null
        from agent_identities a join users u on u.id = a.user_id
        where a.organization_id = ${organizationId} and a.status <> 'pending' and a.revoked_at is null
      ) x
      where ${onlyFor === undefined ? this.#sql`true` : this.#sql`x.user_id = ${onlyFor}`}
      order by created_at desc, id`
    return rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      client_id: r.client_id,
      name: r.name,
      user_id: r.user_id,
      user_email: r.user_email,
      scopes: r.scopes,
      created_at: r.created_at.toISOString(),
      last_used_at: r.last_used_at.toISOString(),
      expires_at: r.expires_at === null ? null : r.expires_at.toISOString(),
    }))
  }

  /** Ends one: the family and its access tokens, or the agent. `onlyFor`: only one acting for that person (else 404). */
  async revoke(organizationId: string, id: string, onlyFor: string | undefined, by: string): Promise<void> {
    const done = await this.#sql.begin(async (tx) => {
      if (id.startsWith('pfa_')) {
        const [row] = await tx`
          update agent_identities set revoked_at = ${new Date(this.#now())}
          where agent_id = ${id} and organization_id = ${organizationId} and status <> 'pending' and revoked_at is null
            and ${onlyFor === undefined ? tx`true` : tx`user_id = ${onlyFor}`}
          returning agent_id`
        return row !== undefined
      }
      if (!uuidPattern.test(id)) return false
      const [owned] = await tx`
        select 1 from oauth_refresh_tokens
        where family_id = ${id} and organization_id = ${organizationId} and revoked_at is null
          and ${onlyFor === undefined ? tx`true` : tx`user_id = ${onlyFor}`}
        limit 1`
      if (owned === undefined) return false
      await revokeFamily(tx, id, new Date(this.#now()))
      return true
    })
    if (!done) throw authorizationNotFound()
    this.#logger.info('oauth revocation', { kind: id.startsWith('pfa_') ? 'agent_identity' : 'authorization', id, organizationId, by })
  }
}
