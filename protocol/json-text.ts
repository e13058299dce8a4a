/**
 * JSON text from outside the service (HTTP bodies, MQTT payloads, live-feed
 * frames) becomes a value here and nowhere else, so every edge refuses the
 * same things the same way.
 *
 * Two kinds of text are not Unicode and are refused rather than stored:
 * - bytes that are not UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is
 *   UTF-8). A lenient decoder would silently turn them into U+FFFD, so what
 *   was stored would not be what was sent.
 * - a `\u` escape of half a surrogate pair (`"\ud800"` alone). RFC 8259 §8.2
 *   lets a parser accept it, but the result is not a Unicode string:
 *   PostgreSQL cannot keep it, TextEncoder replaces it, a hash of it depends
 *   on the encoder. Raw UTF-8 cannot encode a surrogate, so only an escape
 *   can bring one in, and the string walk runs only when the text has one.
 */

export type JsonTextResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly code: 'invalid_json' | 'invalid_unicode'; readonly reason: string }

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })
/** An escape of a high (D800-DBFF) or low (DC00-DFFF) surrogate. */
const surrogateEscape = /\\u[dD][89a-fA-F]/

/** `what` names the text in the reason, as the validators do: 'body', 'payload', 'frame'. */
export function parseJsonText(bytes: Uint8Array, what: string): JsonTextResult {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return { ok: false, code: 'invalid_unicode', reason: `${what} is not valid UTF-8; send UTF-8 text` }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return { ok: false, code: 'invalid_json', reason: `${what} is not valid JSON: ${(error as Error).message}` }
  }
  if (text.includes('\\u') && surrogateEscape.test(text)) {
    const where = loneSurrogatePath(value, what)
    if (where !== undefined) {
      return {
        ok: false,
        code: 'invalid_unicode',
        reason: `${where} holds an unpaired UTF-16 surrogate escape (such as \\ud800 alone), which is not Unicode text; escape a character outside the BMP as a pair`,
      }
    }
  }
  return { ok: true, value }
}

/** The path (`.name`, `[3]`) of the first string or key with an unpaired surrogate, or undefined. */
export function loneSurrogatePath(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return isWellFormedText(value) ? undefined : path
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = loneSurrogatePath(value[i], `${path}[${i}]`)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const at = `${path}.${key}`
      if (!isWellFormedText(key)) return at
      const found = loneSurrogatePath(item, at)
      if (found !== undefined) return found
    }
  }
  return undefined
}

/** Every high surrogate is followed by a low one and every low one follows a high one. */
export function isWellFormedText(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0xd800 || unit > 0xdfff) continue
    if (unit > 0xdbff) return false
    const next = text.charCodeAt(i + 1)
    if (!(next >= 0xdc00 && next <= 0xdfff)) return false
    i++
  }
  return true
}
