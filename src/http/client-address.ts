/**
 * The address a request came from, for the per-address limits (sign-in, pairing codes, OAuth).
 *
 * Behind a reverse proxy every request arrives from the proxy, so every client would share one
 * budget. With TRUSTED_PROXIES set (addresses or CIDR ranges of the proxies), a request whose
 * connection comes from one of them is taken to be from the address its X-Forwarded-For names:
 * the right-most entry that is not itself a trusted proxy (each proxy appends the address it saw;
 * entries left of the first untrusted one could have been written by the client). A request from
 * anywhere else keeps its connection's address, whatever headers it sends: only the configured
 * proxies are believed.
 */
import { BlockList, isIP } from 'node:net'

export class TrustedProxies {
  readonly #list = new BlockList()
  readonly size: number

  /** `entries`: addresses or CIDR ranges (already checked by `parseTrustedProxies`). */
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const [address, prefix] = entry.split('/') as [string, string | undefined]
      const family = isIP(address) === 6 ? 'ipv6' : 'ipv4'
      if (prefix === undefined) this.#list.addAddress(address, family)
      else this.#list.addSubnet(address, Number(prefix), family)
    }
    this.size = entries.length
  }

  trusts(address: string): boolean {
    const plain = unmapped(address)
    const family = isIP(plain)
    return family !== 0 && this.#list.check(plain, family === 6 ? 'ipv6' : 'ipv4')
  }

  /** The client's address: `peer` unless it is a trusted proxy that forwarded the request for someone. */
  clientOf(peer: string, forwardedFor: string | undefined): string {
    if (this.size === 0 || forwardedFor === undefined || !this.trusts(peer)) return peer
    const hops = forwardedFor.split(',').map((h) => h.trim()).filter((h) => h.length > 0)
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!
      // A hop that is no address (a proxy writing "unknown", a port on it) stops the walk: nothing left of it can be trusted.
      if (isIP(unmapped(hop)) === 0) return peer
      if (!this.trusts(hop)) return unmapped(hop)
    }
    return peer
  }
}

/** Problems with a TRUSTED_PROXIES value: each entry an IPv4 or IPv6 address, optionally with a /prefix. */
export function trustedProxyProblems(entries: readonly string[]): string[] {
  const problems: string[] = []
  for (const entry of entries) {
    const [address, prefix, extra] = entry.split('/')
    const family = isIP(address ?? '')
    const bits = family === 6 ? 128 : 32
    if (family === 0 || extra !== undefined || (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))) {
      problems.push(`TRUSTED_PROXIES: '${entry}' is not an IP address or a CIDR range (such as 10.0.0.5 or 10.0.0.0/8)`)
    }
  }
  return problems
}

/** ::ffff:1.2.3.4 (an IPv4 client on a dual-stack socket) as 1.2.3.4. */
function unmapped(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  return mapped ? mapped[1]! : address
}
