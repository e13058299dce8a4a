/**
 * Bridge pairing (docs/authentication.md): a bridge with no credential asks for a code,
 * shows it on its console, a signed-in admin types it into the service, and
 * the bridge exchanges the verified code — once — for an API key.
 *
 * Codes: 10 characters of Crockford's base32 (no I, L, O, U), shown
 * XXXXX-XXXXX, read back case-insensitively with spaces and hyphens ignored
 * and O/I/L taken as 0/1. Valid 10 minutes, stored as SHA-256.
 *
 * Guessing arithmetic. 32^10 = 2^50 ≈ 1.13e15 codes. A code is worth stealing
 * only while verified and not yet exchanged — until the bridge's next poll,
 * seconds. Even with 1,000 such codes alive at once, one guess hits with
 * p ≈ 1000 / 1.13e15 ≈ 8.9e-13. Unknown codes are limited to 30 per address
 * per 15 minutes (2,880 a day), so 10,000 addresses guessing all day make
 * 2.9e7 guesses and succeed with p ≈ 2.6e-5. Verification by signed-in users
 * (which could pull someone else's bridge into one's own organization) is
 * limited per user and per address as well.
 */
import { randomBytes } from 'node:crypto'
import { ServiceError } from '../../protocol/errors.js'
import { bridgeScopes } from '../../protocol/scopes.js'
import {
  AuthCodeCreatedSchema,
  AuthCodeParams,
  AuthCodeSchema,
  CreateAuthCodeBody,
  PairedApiKeySchema,
  VerifyAuthCodeBody,
} from '../../protocol/schemas/api-keys.js'
import { membershipsOf } from '../auth/accounts.js'
import { createApiKey } from '../auth/api-keys.js'
import { chooseOrganization } from '../auth/authenticate.js'
import { userOf } from '../auth/principal.js'
import { acquireAll, addressGroup, rateLimited, releaseAll } from '../auth/failure-limiter.js'
import { sha256 } from '../secrets/digest.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the pairing (auth code) routes use of the node. */
export type AuthCodesContext = Pick<Services, 'clock' | 'db' | 'pairingLimits'>

export const authCodeLifetimeSeconds = 10 * 60
const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'

export function newAuthCode(): string {
  // 256 is a multiple of 32, so byte & 31 is uniform.
  const bytes = randomBytes(10)
  let code = ''
  for (const byte of bytes) code += alphabet[byte & 31]
  return code
}

/** The canonical 10 characters, or undefined when the text cannot be a code. */
export function normaliseAuthCode(text: string): string | undefined {
  const code = text
    .toUpperCase()
    .replace(/[\s-]/g, '')
    .replace(/O/g, '0')
    .replace(/[IL]/g, '1')
  return /^[0-9A-HJKMNP-TV-Z]{10}$/.test(code) ? code : undefined
}

export const displayCode = (code: string): string => `${code.slice(0, 5)}-${code.slice(5)}`
const hashCode = sha256


interface CodeRow {
  id: string
  status: 'pending' | 'verified' | 'used'
  expired: boolean
  expires_at: Date
  verified_at: Date | null
  verified_by: string | null
  used_at: Date | null
  api_key_id: string | null
  organization_id: string | null
}

export const createAuthCodeRoute = defineRoute({
  method: 'POST',
  path: '/v1/auth-codes',
  operationId: 'createAuthCode',
  summary: 'Start pairing a bridge: returns a short code, valid 10 minutes, for an admin to verify.',
  description: `Limited per remote address (AUTH_CODES_PER_ADDRESS per 15 minutes). Error bodies of the pairing routes are {error} only (for 400, 404 and 500).`,
  tags: ['pairing'],
  auth: { kind: 'public', reason: 'the bridge has no credential yet: this is how it gets one' },
  emptyBodyAllowed: true,
  errorBody: 'error-only',
  schemas: { body: CreateAuthCodeBody },
  responses: { 200: { description: 'The code.', schema: AuthCodeCreatedSchema } },
  errors: ['rate_limited'],
  handler: async (req, svc: AuthCodesContext) => {
    const wait = svc.pairingLimits.generation.acquire(addressGroup(req.remoteAddress))
    if (wait !== undefined) throw rateLimited('pairing codes from this address', wait)
    for (let attempt = 0; attempt < 3; attempt++) {
      const code = newAuthCode()
      const [row] = await svc.db.sql<{ expires_at: Date }[]>`
        insert into auth_codes (code_hash, status, expires_at, requested_from)
        values (${hashCode(code)}, 'pending', ${new Date(svc.clock.now())}::timestamptz + make_interval(secs => ${authCodeLifetimeSeconds}), ${req.remoteAddress})
        on conflict (code_hash) do nothing
        returning expires_at`
      if (row !== undefined) {
        // Housekeeping on the way: codes a day past their expiry are of no use to anyone.
        await svc.db.sql`delete from auth_codes where expires_at < ${new Date(svc.clock.now())}::timestamptz - interval '1 day'`
        return { body: { code: displayCode(code), expires_at: row.expires_at.toISOString() } }
      }
    }
    throw new Error('could not draw an unused pairing code')
  },
})

export const verifyAuthCodeRoute = defineRoute({
  method: 'POST',
  path: '/v1/auth-codes/verify',
  operationId: 'verifyAuthCode',
  summary: 'Confirm a bridge\'s pairing code for an organization (a signed-in admin of it).',
  description:
    'organizationId defaults to the caller\'s organization (their only one); a caller in several names one. Failed verifications are limited per user and per address.',
  tags: ['pairing'],
  auth: { kind: 'user' },
  access: 'admin of the organization the bridge joins',
  errorBody: 'error-only',
  schemas: { body: VerifyAuthCodeBody },
  responses: { 200: { description: 'The verified code.', schema: AuthCodeSchema } },
  errors: ['auth_code_not_found', 'auth_code_expired', 'auth_code_used', 'organization_not_found', 'organization_required', 'ORG_ADMIN_REQUIRED', 'rate_limited'],
  handler: async (req, svc: AuthCodesContext) => {
    const userId = userOf(req.principal)
    const attempts = [
      [svc.pairingLimits.verifyFailures, `user:${userId}`],
      [svc.pairingLimits.verifyFailures, `address:${addressGroup(req.remoteAddress)}`],
    ] as const
    // Counted before the first await; given back unless the code turns out unknown.
    const wait = acquireAll(attempts)
    if (wait !== undefined) throw rateLimited('failed verifications', wait)
    let unknownCode = false
    try {
      const organization = chooseOrganization(await membershipsOf(svc.db.sql, userId), req.body.organizationId)
      if (organization.role !== 'admin') throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may pair a bridge')
      const code = normaliseAuthCode(req.body.code)
      const result = await svc.db.sql.begin(async (tx) => {
        if (code === undefined) return undefined
        const [row] = await tx<CodeRow[]>`
          select id, status, expires_at <= ${new Date(svc.clock.now())} as expired, expires_at, verified_at, verified_by, used_at, api_key_id, organization_id
          from auth_codes where code_hash = ${hashCode(code)} for update`
        if (row === undefined) return undefined
        if (row.expired) throw new ServiceError('auth_code_expired', 'the pairing code has expired; generate a new one on the bridge')
        if (row.status !== 'pending') throw new ServiceError('auth_code_used', 'the pairing code was already verified')
        const [updated] = await tx<CodeRow[]>`
          update auth_codes set status = 'verified', verified_at = ${new Date(svc.clock.now())}, verified_by = ${userId}, organization_id = ${organization.organizationId}
          where id = ${row.id}
          returning id, status, false as expired, expires_at, verified_at, verified_by, used_at, api_key_id, organization_id`
        return updated!
      })
      if (result === undefined) {
        unknownCode = true
        throw new ServiceError('auth_code_not_found', 'no such pairing code')
      }
      return {
        body: {
          id: result.id,
          code: displayCode(code!),
          status: 'verified' as const,
          verified_at: result.verified_at!.toISOString(),
          verified_by: result.verified_by,
          used_at: null,
          used_by: null,
          expires_at: result.expires_at.toISOString(),
        },
      }
    } finally {
      // Only guessing counts: a refused caller or a used code gives its attempt back.
      if (!unknownCode) releaseAll(attempts)
    }
  },
})

export const exchangeAuthCodeRoute = defineRoute({
  method: 'GET',
  path: '/v1/auth-codes/verify/{code}',
  operationId: 'exchangeAuthCode',
  summary: 'The bridge exchanges its verified code, exactly once, for an API key.',
  description:
    'Poll while the answer is 400 {error: "auth_code_pending"}. The key (the API key record with snake_case field names) carries the bridge scopes: ' +
    bridgeScopes.join(', ') +
    '. Unknown codes are limited per address.',
  tags: ['pairing'],
  auth: { kind: 'public', reason: 'the verified code is the credential: the bridge has no other yet' },
  errorBody: 'error-only',
  schemas: { params: AuthCodeParams },
  responses: { 200: { description: 'The API key, with its secret, shown this once.', schema: PairedApiKeySchema } },
  errors: ['auth_code_not_found', 'auth_code_pending', 'auth_code_expired', 'auth_code_used', 'rate_limited'],
  handler: async (req, svc: AuthCodesContext) => {
    const limitKey = addressGroup(req.remoteAddress)
    // Counted before the first await; given back unless the code turns out unknown.
    const wait = svc.pairingLimits.exchangeFailures.acquire(limitKey)
    if (wait !== undefined) throw rateLimited('unknown pairing codes', wait)
    const code = normaliseAuthCode(req.params.code)
    let unknownCode = true
    // One transaction, the code's row locked: of concurrent exchanges exactly one sees 'verified'.
    const paired = await svc.db.sql.begin(async (tx) => {
      if (code === undefined) return undefined
      const [row] = await tx<CodeRow[]>`
        select id, status, expires_at <= ${new Date(svc.clock.now())} as expired, expires_at, verified_at, verified_by, used_at, api_key_id, organization_id
        from auth_codes where code_hash = ${hashCode(code)} for update`
      if (row === undefined) return undefined
      unknownCode = false
      if (row.status === 'used') throw new ServiceError('auth_code_used', 'the pairing code was already exchanged')
      if (row.expired) throw new ServiceError('auth_code_expired', 'the pairing code has expired')
      if (row.status === 'pending') throw new ServiceError('auth_code_pending', 'the pairing code is not verified yet')
      const { record, key } = await createApiKey(tx, {
        organizationId: row.organization_id!,
        name: `bridge ${code.slice(0, 5)} paired ${new Date(svc.clock.now()).toISOString().slice(0, 10)}`,
        scopes: bridgeScopes,
        expiresAt: null,
        createdBy: row.verified_by,
      })
      await tx`update auth_codes set status = 'used', used_at = ${new Date(svc.clock.now())}, api_key_id = ${record.id} where id = ${row.id}`
      // Kept with the key: the code's row is swept a day after it expired, the binding lasts (src/auth/host-binding.ts).
      await tx`update api_keys set paired_at = ${new Date(svc.clock.now())} where id = ${record.id}`
      return { record, key }
    }).finally(() => {
      // Polling a pending code, or any known code, never uses up the budget.
      if (!unknownCode) svc.pairingLimits.exchangeFailures.release(limitKey)
    })
    if (paired === undefined) throw new ServiceError('auth_code_not_found', 'no such pairing code')
    const { record, key } = paired
    return {
      body: {
        id: record.id,
        key,
        name: record.name,
        organization_id: record.organizationId,
        created_at: record.createdAt,
        expires_at: record.expiresAt,
        enabled: record.enabled,
        scopes: record.scopes,
        verified: true,
      },
    }
  },
})

export const authCodeRoutes: readonly Route<RouteSchemas, AuthCodesContext>[] = [createAuthCodeRoute, verifyAuthCodeRoute, exchangeAuthCodeRoute]
