/**
 * Secrets the service must read back (a printer's LAN access code, its API
 * key) cannot be hashed like passwords; they are sealed with AES-256-GCM
 * instead: `v1.<iv>.<ciphertext+tag>` (base64url), a fresh 96-bit IV per
 * value, the tag authenticating it. The organization and field are bound in
 * as associated data, so a sealed value copied into another row or column
 * does not open.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

export class SealedBox {
  readonly #key: Buffer
  readonly #fallbacks: readonly Buffer[]

  /** Seals with `key`; opens with it or any of `fallbacks` (keys used before a change). */
  constructor(key: Buffer, fallbacks: readonly Buffer[] = []) {
    for (const k of [key, ...fallbacks]) if (k.length !== 32) throw new TypeError('the sealing key must be 32 bytes')
    this.#key = key
    this.#fallbacks = fallbacks
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv)
    cipher.setAAD(Buffer.from(context))
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `v1.${iv.toString('base64url')}.${body.toString('base64url')}`
  }

  /**
   * Keys for another purpose (signing download URLs), derived from the sealing
   * key with HKDF so one secret serves both and neither use reveals the other.
   * The first signs; all of them verify (keys used before a change included).
   */
  derivedKeys(purpose: string): Buffer[] {
    return [this.#key, ...this.#fallbacks].map((key) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `printfarm ${purpose}`, 32)))
  }

  /** Throws when the value was not sealed by one of these keys for this context. */
  open(sealed: string, context: string): string {
    const [version, iv, body] = sealed.split('.')
    if (version !== 'v1' || iv === undefined || body === undefined) throw new Error('not a sealed value')
    const bytes = Buffer.from(body, 'base64url')
    if (bytes.length < 16) throw new Error('sealed value too short')
    let failure: unknown
    for (const key of [this.#key, ...this.#fallbacks]) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'))
        decipher.setAAD(Buffer.from(context))
        decipher.setAuthTag(bytes.subarray(bytes.length - 16))
        return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString('utf8')
      } catch (error) {
        failure = error
      }
    }
    throw failure
  }
}
