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

/**
 * The path (`.name`, `[3]`) of the first string or key with an unpaired
 * surrogate, or undefined. Iterative, with parents kept beside the values:
 * JSON.parse reads nesting thousands of levels deep, and a recursive walk of
 * such a value would overflow the stack (one 12 KB body did). The path is
 * built only for the value found, so well-formed text costs one pass.
 */
export function loneSurrogatePath(root: unknown, rootPath: string): string | undefined {
  interface Step {
    readonly value: unknown
    readonly key: string | number | undefined
    readonly parent: Step | undefined
  }
  const pathOf = (step: Step | undefined): string => {
    const parts: string[] = []
    for (let at = step; at?.key !== undefined; at = at.parent) parts.push(typeof at.key === 'number' ? `[${at.key}]` : `.${at.key}`)
    parts.reverse()
    // A path thousands of levels deep would make the message as large as the input.
    return rootPath + (parts.length > 16 ? [...parts.slice(0, 8), '…', ...parts.slice(-8)] : parts).join('')
  }
  const pending: Step[] = [{ value: root, key: undefined, parent: undefined }]
  for (let step = pending.pop(); step !== undefined; step = pending.pop()) {
    const value = step.value
    if (typeof value === 'string') {
      if (!isWellFormedText(value)) return pathOf(step)
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push({ value: value[i], key: i, parent: step })
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value)
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i]!
        if (!isWellFormedText(key)) return pathOf({ value: item, key, parent: step })
        pending.push({ value: item, key, parent: step })
      }
    }
  }
  return undefined
}

declare global {
  interface String {
    /** ES2024, in Node 20; the ES2023 typings lack it. */
    isWellFormed(): boolean
  }
}

/** Every high surrogate is followed by a low one and every low one follows a high one. */
export function isWellFormedText(text: string): boolean {
  return text.isWellFormed()
}
