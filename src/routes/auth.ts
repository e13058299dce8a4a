/**
 * Signing in and out (docs/authentication.md): password login, refresh rotation,
 * logout, the caller's own account, and the public keys that verify tokens.
 */
import { ServiceError } from '../../protocol/errors.js'
import { ChangePasswordBody, JwksSchema, LoginBody, MeSchema, RefreshBody, TokenPairSchema } from '../../protocol/schemas/accounts.js'
import { emailKey, findUserForLogin, getUser, membershipsOf, setPassword } from '../auth/accounts.js'
import { userOf } from '../auth/principal.js'
import { decoyHash, hashPassword, needsRehash, verifyPassword } from '../auth/passwords.js'
import { acquireAll, addressGroup, rateLimited, releaseAll } from '../auth/failure-limiter.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the sign-in and session routes use of the node. */
export type AuthContext = Pick<Services, 'clock' | 'db' | 'keyring' | 'logger' | 'loginFailures' | 'sessions'>

/** A password guess counts per account at one address, per address, and per account from everywhere. */
function passwordAttempts(svc: Pick<AuthContext, 'loginFailures'>, email: string, remoteAddress: string) {
  const account = emailKey(email)
  const address = addressGroup(remoteAddress)
  return [
    [svc.loginFailures.accountAtAddress, `${account}|${address}`],
    [svc.loginFailures.address, address],
    [svc.loginFailures.account, account],
  ] as const
}

const budgetNames = ['account at address', 'address', 'account'] as const

/**
 * A failed guess that spent a budget locks it for the rest of its window: said once, at warn level,
 * so an operator asked "why can't I sign in?" finds which account, from where and until when
 * (blocked attempts are refused before they are counted, so this runs once per lock).
 */
function logLockouts(svc: Pick<AuthContext, 'logger'>, attempts: ReturnType<typeof passwordAttempts>, email: string, remoteAddress: string): void {
  for (const [i, [limiter, key]] of attempts.entries()) {
    const seconds = limiter.blockedFor(key)
    if (seconds === undefined) continue
    svc.logger.warn('sign-ins locked after repeated failures', { budget: budgetNames[i], account: emailKey(email), address: addressGroup(remoteAddress), retryAfterSeconds: seconds })
  }
}

export const loginRoute = defineRoute({
  method: 'POST',
  path: '/v1/auth/login',
  operationId: 'login',
  summary: 'Sign in with email and password; returns an access token and a refresh token.',
  description:
    'Access tokens are ES256 JWTs valid for 15 minutes (verify with /.well-known/jwks.json). Refresh tokens are single use, valid 30 days. ' +
    'Failed sign-ins are limited per account and per address (429 with Retry-After); successful ones are not.',
  tags: ['auth'],
  auth: { kind: 'public', reason: 'signing in is how a credential is obtained' },
  schemas: { body: LoginBody },
  responses: { 200: { description: 'Signed in.', schema: TokenPairSchema } },
  errors: ['invalid_credentials', 'rate_limited'],
  handler: async (req, svc: AuthContext) => {
    const { email, password } = req.body
    // Counted before the first await, given back on success: parallel guesses cannot slip past the check.
    const attempts = passwordAttempts(svc, email, req.remoteAddress)
    const wait = acquireAll(attempts)
    if (wait !== undefined) throw rateLimited('failed sign-ins', wait)
    const user = await findUserForLogin(svc.db.sql, email)
    // An unknown email costs a full hash too, so response time does not reveal which emails exist.
    const ok = await verifyPassword(password, user?.passwordHash ?? (await decoyHash()))
    if (user === undefined || !ok) {
      logLockouts(svc, attempts, email, req.remoteAddress)
      throw new ServiceError('invalid_credentials', 'the email or password is wrong')
    }
    releaseAll(attempts)
    if (needsRehash(user.passwordHash)) {
      await svc.db.sql`update users set password_hash = ${await hashPassword(password)} where id = ${user.id}`
    }
    return { body: await svc.sessions.start(user.id) }
  },
})

export const refreshRoute = defineRoute({
  method: 'POST',
  path: '/v1/auth/refresh',
  operationId: 'refreshSession',
  summary: 'Exchange a refresh token for a new access token and a new refresh token.',
  description:
    'The presented refresh token is spent. Presenting a spent token again revokes every token of that sign-in (reuse detection, RFC 6819 5.2.2.3): sign in again.',
  tags: ['auth'],
  auth: { kind: 'public', reason: 'the refresh token in the body is the credential' },
  schemas: { body: RefreshBody },
  responses: { 200: { description: 'New tokens.', schema: TokenPairSchema } },
  errors: ['refresh_token_invalid', 'refresh_token_reused'],
  handler: async (req, svc: AuthContext) => ({ body: await svc.sessions.refresh(req.body.refresh_token) }),
})

export const logoutRoute = defineRoute({
  method: 'POST',
  path: '/v1/auth/logout',
  operationId: 'logout',
  summary: 'End a sign-in: its refresh tokens stop working at once.',
  description: 'Access tokens already issued stay valid until they expire (at most 15 minutes). Idempotent: an unknown token is not an error.',
  tags: ['auth'],
  auth: { kind: 'public', reason: 'the refresh token in the body is the credential' },
  schemas: { body: RefreshBody },
  responses: { 204: { description: 'Signed out.' } },
  handler: async (req, svc: AuthContext) => {
    await svc.sessions.logout(req.body.refresh_token)
    return { status: 204 }
  },
})

export const meRoute = defineRoute({
  method: 'GET',
  path: '/v1/me',
  operationId: 'getMe',
  summary: 'The signed-in user and the organizations they belong to, with their role in each.',
  tags: ['auth'],
  auth: { kind: 'user' },
  schemas: {},
  responses: { 200: { description: 'The caller.', schema: MeSchema } },
  handler: async (req, svc: AuthContext) => {
    const user = await getUser(svc.db.sql, userOf(req.principal))
    if (user === undefined) throw new ServiceError('unauthorized', 'this account no longer exists')
    const organizations = (await membershipsOf(svc.db.sql, user.id)).map((m) => ({ id: m.organizationId, name: m.name, role: m.role }))
    return { body: { user, organizations } }
  },
})

export const changePasswordRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/me/password',
  operationId: 'changeMyPassword',
  summary: "Change the signed-in person's password; every other sign-in of the account ends.",
  description:
    'Needs the current password (a stolen access token alone cannot take the account over); wrong guesses count against the same limits as ' +
    'sign-in (429 with Retry-After). On success every refresh token of the account is revoked and the answer is a new sign-in for the caller. ' +
    'Access tokens issued before stay valid until they expire (at most 15 minutes). A forgotten password is reset by an operator on the ' +
    'server: `printfarm admin reset-password EMAIL`.',
  tags: ['auth'],
  auth: { kind: 'user' },
  schemas: { body: ChangePasswordBody },
  responses: { 200: { description: 'Changed; a new sign-in for this session.', schema: TokenPairSchema } },
  errors: ['invalid_credentials', 'rate_limited', 'validation_failed'],
  handler: async (req, svc: AuthContext) => {
    const userId = userOf(req.principal)
    const user = await getUser(svc.db.sql, userId)
    if (user === undefined) throw new ServiceError('unauthorized', 'this account no longer exists')
    const attempts = passwordAttempts(svc, user.email, req.remoteAddress)
    const wait = acquireAll(attempts)
    if (wait !== undefined) throw rateLimited('failed sign-ins', wait)
    const stored = await findUserForLogin(svc.db.sql, user.email)
    if (stored === undefined || !(await verifyPassword(req.body.current_password, stored.passwordHash))) {
      logLockouts(svc, attempts, user.email, req.remoteAddress)
      throw new ServiceError('invalid_credentials', 'the current password is wrong')
    }
    releaseAll(attempts)
    if (req.body.new_password === req.body.current_password) throw new ServiceError('validation_failed', 'body.new_password is the current password; choose another')
    await setPassword(svc.db.sql, userId, req.body.new_password, new Date(svc.clock.now()))
    return { body: await svc.sessions.start(userId) }
  },
})

export const jwksRoute = defineRoute({
  method: 'GET',
  path: '/.well-known/jwks.json',
  operationId: 'getJwks',
  summary: 'Public keys (JWKS) that verify the access tokens this service signs.',
  tags: ['auth', 'discovery'],
  auth: { kind: 'public', reason: 'public keys are public by design' },
  schemas: {},
  responses: { 200: { description: 'The key set.', schema: JwksSchema } },
  handler: (_req, svc: AuthContext) => ({ body: svc.keyring.jwks(), headers: { 'cache-control': 'public, max-age=300' } }),
})

export const authRoutes: readonly Route<RouteSchemas, AuthContext>[] = [loginRoute, refreshRoute, logoutRoute, meRoute, changePasswordRoute, jwksRoute]
