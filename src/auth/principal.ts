/** Reading a resolved principal inside handlers, whose route auth already guaranteed its kind. */
import type { Principal } from '../http/route.js'

export function organizationOf(principal: Principal): string {
  if (principal.kind !== 'member' && principal.kind !== 'api_key') throw new TypeError('organization route without an organization principal')
  return principal.organizationId
}
