/**
 * Signed download URLs (docs/files.md):
 * `{PUBLIC_BASE_URL}/v1/files/{id}?expires=…&signature=…`, readable with no
 * other credential until `expires` (Unix seconds, 15 minutes on). The
 * signature is HMAC-SHA256 over the file id, the file's SHA-256 and the
 * expiry, so a URL opens one file's exact bytes: another id, another expiry
 * or a file replaced under the same id does not verify. Compared in constant
 * time. The key is derived from the service's sealing key, so every node
 * signs and verifies alike.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'

export const downloadUrlLifetimeSeconds = 15 * 60

export class DownloadSigner {
  readonly #keys: readonly Buffer[]
  readonly #baseUrl: string

  /** `keys[0]` signs; every key verifies. */
  constructor(keys: readonly Buffer[], publicBaseUrl: string) {
    if (keys.length === 0) throw new TypeError('a download signer needs a key')
    this.#keys = keys
    this.#baseUrl = publicBaseUrl
  }

  url(fileId: string, sha256: string, nowMs: number): { download_url: string; expires_at: string } {
    const expires = Math.floor(nowMs / 1000) + downloadUrlLifetimeSeconds
    const signature = sign(this.#keys[0]!, fileId, sha256, expires)
    return { download_url: `${this.#baseUrl}/v1/files/${fileId}?expires=${expires}&signature=${signature}`, expires_at: new Date(expires * 1000).toISOString() }
  }

  /** True when the signature is this file's, for these bytes, and `expires` has not passed. */
  verify(fileId: string, sha256: string, expires: string, signature: string, nowMs: number): boolean {
    if (!/^\d{1,12}$/.test(expires) || Number(expires) * 1000 <= nowMs) return false
    const presented = Buffer.from(signature, 'base64url')
    return this.#keys.some((key) => {
      const expected = Buffer.from(sign(key, fileId, sha256, Number(expires)), 'base64url')
      return presented.length === expected.length && timingSafeEqual(presented, expected)
    })
  }
}

function sign(key: Buffer, fileId: string, sha256: string, expires: number): string {
  return createHmac('sha256', key).update(`v1\n${fileId}\n${sha256}\n${expires}`).digest('base64url')
}
