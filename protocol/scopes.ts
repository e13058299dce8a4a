/**
 * Scope values. An API key or OAuth token carries some of
 * these; every route that accepts one names the scope it needs.
 */
export const consentScopes = [
  'printers:read',
  'printers:write',
  'jobs:read',
  'jobs:write',
  'telemetry:read',
  'models:read',
  'models:write',
  'files:read',
  'files:write',
  'print-jobs:read',
  'print-jobs:write',
  'inventory:read',
  'inventory:write',
  'makes:read',
  'makes:write',
  'fleet:read',
  'fleet:write',
  'host:pair',
  'print:launch',
] as const

export type Scope = (typeof consentScopes)[number]

/**
 * The scopes that make a credential a bridge's: pairing a host and running the
 * prints dispatched to it. Only an admin grants them (by verifying a pairing
 * code, or by consenting for an application), and a credential granted them
 * speaks for one host (src/auth/host-binding.ts).
 */
export const bridgeOnlyScopes = ['host:pair', 'print:launch'] as const satisfies readonly Scope[]

/** Whether a scope is one of the bridge-only scopes. */
export function isBridgeOnly(scope: string): boolean {
  return (bridgeOnlyScopes as readonly string[]).includes(scope)
}

/** OAuth client scopes (17): the consent scopes without host:pair and print:launch. */
export const clientScopes = consentScopes.filter((s) => !isBridgeOnly(s))

/** Whether a set of granted scopes holds one of the bridge-only scopes. */
export function holdsBridgeScope(scopes: Iterable<string>): boolean {
  for (const s of scopes) if (isBridgeOnly(s)) return true
  return false
}

/** The scopes a person with `role` may hold: the bridge-only scopes are an admin's. */
export function scopesForRole(scopes: readonly string[], role: 'admin' | 'member'): string[] {
  return role === 'admin' ? [...scopes] : scopes.filter((s) => !isBridgeOnly(s))
}

/**
 * What a bridge paired through an auth code may do (docs/authentication.md, bridge
 * pairing): read its printers' configuration, post their events and
 * connection state, follow and update the jobs it runs, fetch the files it
 * prints, poll and claim the printer tasks dispatched to it (print:launch).
 * Nothing that changes the fleet, inventory or accounts.
 */
export const bridgeScopes = [
  'printers:read',
  'printers:write',
  'jobs:read',
  'jobs:write',
  'print-jobs:read',
  'print-jobs:write',
  'files:read',
  'fleet:read',
  'print:launch',
] as const satisfies readonly Scope[]

export function isScope(value: string): value is Scope {
  return (consentScopes as readonly string[]).includes(value)
}
