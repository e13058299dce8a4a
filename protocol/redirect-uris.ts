/**
 * Which redirect URIs an OAuth client may register (RFC 6749 §3.1.2, RFC 8252
 * §7, the OAuth 2.0 Security BCP). Pure, shared by organization-managed
 * clients and dynamic registration.
 *
 * - https to any host;
 * - http only to a loopback host (127.0.0.1, [::1], localhost): native apps
 *   listen there, and RFC 8252 lets the port vary at authorization time;
 * - a private-use scheme with a dot (com.example.app:/callback), as native
 *   apps register them;
 * - never a fragment, never credentials in the URI, at most 2048 characters.
 */

const loopbackHosts = new Set(['127.0.0.1', '[::1]', 'localhost'])

/** Why `uri` cannot be a redirect URI, or undefined when it can. */
export function redirectUriProblem(uri: string): string | undefined {
  if (uri.length === 0 || uri.length > 2048) return 'must be 1-2048 characters'
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return 'is not an absolute URI'
  }
  if (uri.includes('#')) return 'must not have a fragment (#…)'
  if (url.username !== '' || url.password !== '') return 'must not carry a user name or password'
  const scheme = url.protocol.slice(0, -1).toLowerCase()
  if (scheme === 'https') return url.hostname === '' ? 'needs a host' : undefined
  if (scheme === 'http') return loopbackHosts.has(url.hostname.toLowerCase()) ? undefined : 'may use http only on a loopback host (127.0.0.1, [::1], localhost); use https'
  if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+$/.test(scheme)) return undefined
  return `uses the scheme ${scheme}:, which is neither https, http on loopback, nor a private-use scheme with a dot (com.example.app:/callback)`
}

/** Loopback http redirect URIs match whatever port the client listens on (RFC 8252 §7.3); every other one matches exactly. */
export function redirectUriMatches(registered: string, presented: string): boolean {
  if (registered === presented) return true
  let a: URL
  let b: URL
  try {
    a = new URL(registered)
    b = new URL(presented)
  } catch {
    return false
  }
  if (a.protocol !== 'http:' || b.protocol !== 'http:' || !loopbackHosts.has(a.hostname) || a.hostname !== b.hostname) return false
  // Only the port may differ: credentials or a fragment the registration could never have carried do not ride along.
  if (b.username !== '' || b.password !== '' || presented.includes('#')) return false
  return a.pathname === b.pathname && a.search === b.search
}
