/** SHA-256 of a secret's text: how tokens, keys and codes are kept at rest (looked up by digest, never stored plain). */
import { createHash } from 'node:crypto'

export const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest()
