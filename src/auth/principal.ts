/** Reading a resolved principal inside handlers, whose route auth already guaranteed its kind. */
import { ServiceError } from '../../protocol/errors.js'
import type { Scope } from '../../protocol/scopes.js'
import type { Principal } from '../http/route.js'

export function organizationOf(principal: Principal): string {
  if (principal.kind !== 'member' && principal.kind !== 'api_key' && principal.kind !== 'oauth') throw new TypeError('organization route without an organization principal')
  return principal.organizationId
}

/** The organization of the request, checked against an `organizationId` the body names (lets several bodies name it). */
export function organizationFor(principal: Principal, body: { organizationId?: string | undefined }): string {
  const organizationId = organizationOf(principal)
  if (body.organizationId !== undefined && body.organizationId.toLowerCase() !== organizationId) {
    throw new ServiceError('validation_failed', "body.organizationId names another organization than the request's (x-organization-id or your only one)")
  }
  return organizationId
}

/** The signed-in person behind a user or member principal (routes that need one). */
export function userOf(principal: Principal): string {
  if (principal.kind !== 'user' && principal.kind !== 'member') throw new TypeError('route without a signed-in principal')
  return principal.userId
}

/** The person behind the request, or null when an API key is calling (e.g. for created_by). */
export function userIdOrNull(principal: Principal): string | null {
  return principal.kind === 'member' || principal.kind === 'user' || principal.kind === 'oauth' ? principal.userId : null
}

/**
 * Whether the caller may do what `scope` names, beyond what the route itself
 * checked: an organization admin may do everything in it; an API key what its
 * scopes say; an OAuth token what its scopes say when its person is an admin;
 * a member who is not admin, nothing more.
 */
export function holdsScope(principal: Principal, scope: Scope): boolean {
  if (principal.kind === 'member') return principal.role === 'admin'
  if (principal.kind === 'api_key') return principal.scopes.has(scope)
  if (principal.kind === 'oauth') return principal.role === 'admin' && principal.scopes.has(scope)
  return false
}
