/**
 * Users, organizations and memberships in the store.
 * Every function takes the connection or transaction to run on, so callers
 * compose them into one transaction where a change must be all-or-nothing.
 */
import { randomBytes } from 'node:crypto'
import type { Static } from '@sinclair/typebox'
import { ServiceError } from '../../protocol/errors.js'
import type { MemberSchema, OrganizationSchema, Role as RoleSchema, UserSchema } from '../../protocol/schemas/accounts.js'
import type { Logger } from '../observability/log.js'
import type { Queryable } from '../storage/database.js'
import { hashPassword } from './passwords.js'
import { perTurn } from '../async/per-turn.js'

// The answers' own types: the schemas the routes publish are the one definition.
export type Role = Static<typeof RoleSchema>
export type User = Static<typeof UserSchema>
export type Organization = Static<typeof OrganizationSchema>
export type Member = Static<typeof MemberSchema>

export interface Membership {
  organizationId: string
  name: string
  role: Role
}

export const emailKey = (email: string): string => email.trim().toLowerCase()

export async function findUserForLogin(sql: Queryable, email: string): Promise<{ id: string; passwordHash: string } | undefined> {
  const [row] = await sql<{ id: string; password_hash: string }[]>`select id, password_hash from users where email_key = ${emailKey(email)}`
  return row && { id: row.id, passwordHash: row.password_hash }
}

export async function getUser(sql: Queryable, userId: string): Promise<User | undefined> {
  const [row] = await sql<{ id: string; email: string; created_at: Date }[]>`select id, email, created_at from users where id = ${userId}`
  return row && { id: row.id, email: row.email, createdAt: row.created_at.toISOString() }
}

export async function createUser(sql: Queryable, email: string, password: string): Promise<User> {
  const hash = await hashPassword(password)
  const [row] = await sql<{ id: string; created_at: Date }[]>`
    insert into users (email, email_key, password_hash) values (${email.trim()}, ${emailKey(email)}, ${hash})
    on conflict (email_key) do nothing
    returning id, created_at`
  if (row === undefined) throw new ServiceError('user_exists', 'that email already has an account; add it as a member without a password')
  return { id: row.id, email: email.trim(), createdAt: row.created_at.toISOString() }
}

/**
 * Sets a new password and ends every sign-in of the account (its refresh
 * tokens are revoked; access tokens already issued run out within 15 minutes).
 * Whoever held the old password, or a token from it, is out. `at`: the node's time, when they were
 * revoked (the grant sweep counts from it).
 */
export async function setPassword(sql: { begin<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> }, userId: string, password: string, at: Date): Promise<void> {
  const hash = await hashPassword(password)
  await sql.begin(async (tx) => {
    // Locked before the tokens, as a refresh locks them: no refresh in flight can outlive the change.
    await tx`select 1 from users where id = ${userId} for update`
    await tx`update users set password_hash = ${hash} where id = ${userId}`
    await tx`update refresh_tokens set revoked_at = ${at} where user_id = ${userId} and revoked_at is null`
  })
}

/** A password nobody chose: 20 characters of base64url (120 bits). */
export function generatePassword(): string {
  return randomBytes(15).toString('base64url')
}

export async function membershipsOf(sql: Queryable, userId: string): Promise<Membership[]> {
  const rows = await sql<{ organization_id: string; name: string; role: Role }[]>`
    select m.organization_id, o.name, m.role from memberships m join organizations o on o.id = m.organization_id
    where m.user_id = ${userId} order by o.created_at, o.id`
  return rows.map((r) => ({ organizationId: r.organization_id, name: r.name, role: r.role }))
}

const uuidText = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * Reads memberships for the users asked about in one turn of the event loop with one statement.
 * Every request of a signed-in person checks their memberships as they stand (a departed member
 * loses access at once, as sessions do), and a dashboard's or a script's concurrent
 * requests asked the same question one statement each: under bench/displays those reads were
 * four statements in ten. Each request still sees memberships read after it arrived.
 */
export function membershipReader(sql: Queryable): (userId: string) => Promise<Membership[]> {
  const readLater = perTurn<{ userId: string; resolve: (m: Membership[]) => void; reject: (e: unknown) => void }>((asked) => {
    // A user id comes from a verified token; anything else has no memberships rather than failing the others' statement.
    const ids = [...new Set(asked.map((a) => a.userId.toLowerCase()).filter((id) => uuidText.test(id)))]
    sql<{ user_id: string; organization_id: string; name: string; role: Role }[]>`
      select m.user_id, m.organization_id, o.name, m.role from memberships m join organizations o on o.id = m.organization_id
      where m.user_id = any(${ids}::uuid[]) order by o.created_at, o.id`.then(
      (rows) => {
        const byUser = new Map<string, Membership[]>()
        for (const r of rows) {
          let list = byUser.get(r.user_id)
          if (list === undefined) byUser.set(r.user_id, (list = []))
          list.push({ organizationId: r.organization_id, name: r.name, role: r.role })
        }
        for (const a of asked) a.resolve(byUser.get(a.userId.toLowerCase()) ?? [])
      },
      (error: unknown) => {
        for (const a of asked) a.reject(error)
      },
    )
  })
  return (userId) => new Promise((resolve, reject) => readLater({ userId, resolve, reject }))
}

export async function roleIn(sql: Queryable, userId: string, organizationId: string): Promise<Role | undefined> {
  const [row] = await sql<{ role: Role }[]>`select role from memberships where user_id = ${userId} and organization_id = ${organizationId}`
  return row?.role
}

export async function createOrganization(sql: Queryable, name: string, adminUserId: string): Promise<Organization> {
  const [org] = await sql<{ id: string; created_at: Date }[]>`insert into organizations (name) values (${name}) returning id, created_at`
  await sql`insert into memberships (organization_id, user_id, role) values (${org!.id}, ${adminUserId}, 'admin')`
  return { id: org!.id, name, role: 'admin', createdAt: org!.created_at.toISOString() }
}

export async function listMembers(sql: Queryable, organizationId: string): Promise<Member[]> {
  const rows = await sql<{ user_id: string; email: string; role: Role; created_at: Date }[]>`
    select m.user_id, u.email, m.role, m.created_at from memberships m join users u on u.id = m.user_id
    where m.organization_id = ${organizationId} order by m.created_at, m.user_id`
  return rows.map((r) => ({ userId: r.user_id, email: r.email, role: r.role, joinedAt: r.created_at.toISOString() }))
}

/**
 * Adds a person to an organization. A new email becomes an account with the
 * given password. An existing account is added without a password (nobody
 * sets another person's password), and only by someone who is already an
 * admin of one of that person's organizations: anyone may create an
 * organization, so "add any account by its email" would let a stranger pull
 * people into theirs. Re-adding changes the role; demoting the last admin is
 * refused like removing them. Run inside a transaction.
 */
export async function addMember(
  sql: Queryable,
  organizationId: string,
  email: string,
  password: string | undefined,
  role: Role,
  actingUserId: string,
): Promise<Member> {
  const existing = await findUserForLogin(sql, email)
  let userId: string
  if (existing !== undefined) {
    if (password !== undefined) throw new ServiceError('user_exists', 'that email already has an account; add it as a member without a password')
    const [shared] = await sql`
      select 1 from memberships theirs join memberships mine on mine.organization_id = theirs.organization_id
      where theirs.user_id = ${existing.id} and mine.user_id = ${actingUserId} and mine.role = 'admin' limit 1`
    if (shared === undefined) {
      throw new ServiceError('user_exists', 'that email has an account you do not administer; an admin of one of its organizations can add it')
    }
    userId = existing.id
    if (role !== 'admin') await guardLastAdmin(sql, organizationId, userId)
  } else {
    if (password === undefined) throw new ServiceError('password_required', 'a new account needs a password (12 to 200 characters)')
    userId = (await createUser(sql, email, password)).id
  }
  const [row] = await sql<{ created_at: Date }[]>`
    insert into memberships (organization_id, user_id, role) values (${organizationId}, ${userId}, ${role})
    on conflict (organization_id, user_id) do update set role = excluded.role
    returning created_at`
  const user = await getUser(sql, userId)
  return { userId, email: user!.email, role, joinedAt: row!.created_at.toISOString() }
}

/**
 * Refuses a change that would take away the organization's last admin (if
 * `userId` is an admin now). The admin rows are locked, so two concurrent
 * changes cannot each leave one admin. Run inside a transaction.
 */
async function guardLastAdmin(sql: Queryable, organizationId: string, userId: string): Promise<'admin' | 'member' | undefined> {
  const admins = await sql<{ user_id: string }[]>`
    select user_id from memberships where organization_id = ${organizationId} and role = 'admin' order by user_id for update`
  const [target] = await sql<{ role: Role }[]>`select role from memberships where organization_id = ${organizationId} and user_id = ${userId} for update`
  if (target?.role === 'admin' && admins.length <= 1) {
    throw new ServiceError('last_admin', 'this is the last admin of the organization; make another member admin first')
  }
  return target?.role
}

/** Removes a member; refuses to leave the organization without an admin. Run inside a transaction. */
export async function removeMember(sql: Queryable, organizationId: string, userId: string): Promise<void> {
  const role = await guardLastAdmin(sql, organizationId, userId)
  if (role === undefined) throw new ServiceError('member_not_found', 'no such member in this organization')
  await sql`delete from memberships where organization_id = ${organizationId} and user_id = ${userId}`
}

/** Advisory lock key for first-start bootstrap ("PFAD"). */
const BOOTSTRAP_LOCK = 0x5046_4144

/**
 * First start of an empty database: one organization and its admin, from
 * PRINTFARM_ADMIN_EMAIL / PRINTFARM_ADMIN_PASSWORD; a generated password is
 * printed once and never stored in clear. Under an advisory lock, so two nodes
 * starting together create one admin, not two.
 */
export async function bootstrapAdmin(
  sql: { begin<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  options: { email: string | undefined; password: string | undefined },
  logger: Logger,
): Promise<{ email: string; generatedPassword: string | undefined } | undefined> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`
    const [any] = await tx`select 1 from users limit 1`
    if (any !== undefined) return undefined
    const email = options.email ?? 'admin@printfarm.local'
    const generatedPassword = options.password === undefined ? generatePassword() : undefined
    const user = await createUser(tx, email, options.password ?? generatedPassword!)
    const org = await createOrganization(tx, 'My farm', user.id)
    logger.info('first start: organization and admin created', { organizationId: org.id, email })
    return { email, generatedPassword }
  })
}
