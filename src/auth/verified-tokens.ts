/**
 * Access tokens whose signature and claims were checked, remembered until they expire. A token is
 * presented on every request of a dashboard, a script or an agent, and the same bytes always get
 * the same answer from the ES256 check (which runs on the thread pool: it was the largest single
 * cost of a session request in bench/displays). So a remembered token has only its expiry looked at
 * again, as jose does it: expired once `exp` is not after the current second. Whatever can end a
 * token early (an OAuth revocation, a disabled client, a departed member) is checked per request
 * elsewhere, never here.
 */
const kept = 5_000

export class VerifiedTokens<Claims extends { expiresAt: number }> {
  readonly #claims = new Map<string, Claims>()
  readonly #now: () => number

  /** `now`: the node's clock (milliseconds since the epoch). */
  constructor(now: () => number) {
    this.#now = now
  }

  /** The remembered claims, 'expired' once their time is up (and forgotten), undefined when not known. */
  lookup(key: string): Claims | 'expired' | undefined {
    const known = this.#claims.get(key)
    if (known === undefined) return undefined
    if (known.expiresAt > Math.floor(this.#now() / 1000)) return known
    this.#claims.delete(key)
    return 'expired'
  }

  /** Remembers a checked token (about 0.7 KB each; past `kept` the memory starts again empty). */
  remember(key: string, claims: Claims): void {
    if (this.#claims.size >= kept) this.#claims.clear()
    this.#claims.set(key, claims)
  }
}
