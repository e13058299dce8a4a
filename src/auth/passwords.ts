/**
 * Password hashing with scrypt, a memory-hard KDF from node:crypto.
 *
 * Stored form: `scrypt$<logN>$<r>$<p>$<salt b64url>$<hash b64url>`, so the
 * cost can be raised later without breaking stored hashes: a sign-in with a
 * hash below the current cost stores a new one (`needsRehash`).
 * N = 2^17, r = 8, p = 1 (current guidance, OWASP's password storage cheat
 * sheet) → 128 MiB and ~0.4 s per hash on this project's machines: slow for a
 * guesser, bearable for a sign-in. PASSWORD_HASH_COST sets log2 N (15-20) for
 * machines that cannot spare that memory per sign-in (`setPasswordCost`, at
 * start); hashes keep their own cost, so changing it strands nobody.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

export const defaultPasswordCost = 17
/** The cost new hashes take; one per process (every service of a process reads the same setting). */
const current = { logN: defaultPasswordCost, r: 8, p: 1 }

/** log2 N of new hashes (the start sets it from PASSWORD_HASH_COST). */
export function setPasswordCost(logN: number): void {
  if (!Number.isInteger(logN) || logN < 15 || logN > 20) throw new RangeError(`the scrypt cost must be 15-20 (log2 N), got ${logN}`)
  current.logN = logN
}
const keyLength = 32
const saltLength = 16

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** logN
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, keyLength, options, (error, key) => (error ? reject(error) : resolve(key)))
  })
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(saltLength)
  const hash = await derive(password, salt, current.logN, current.r, current.p)
  return ['scrypt', current.logN, current.r, current.p, salt.toString('base64url'), hash.toString('base64url')].join('$')
}

interface Parsed {
  logN: number
  r: number
  p: number
  salt: Buffer
  hash: Buffer
}

function parse(stored: string): Parsed | undefined {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined
  const [logN, r, p] = parts.slice(1, 4).map(Number) as [number, number, number]
  // Bounds keep a corrupted row from asking scrypt for gigabytes.
  if (![logN, r, p].every(Number.isInteger) || logN < 10 || logN > 20 || r < 1 || r > 32 || p < 1 || p > 16) return undefined
  return { logN, r, p, salt: Buffer.from(parts[4]!, 'base64url'), hash: Buffer.from(parts[5]!, 'base64url') }
}

/** Constant-time comparison of the derived key; false (never a throw) for a malformed stored hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parse(stored)
  if (parsed === undefined || parsed.hash.length !== keyLength) return false
  const candidate = await derive(password, parsed.salt, parsed.logN, parsed.r, parsed.p)
  return timingSafeEqual(candidate, parsed.hash)
}

export function needsRehash(stored: string): boolean {
  const parsed = parse(stored)
  return parsed === undefined || parsed.logN < current.logN || parsed.r !== current.r || parsed.p !== current.p
}

/**
 * A hash of a random password, to verify against when the account does not
 * exist: a login for an unknown email then costs as much as a wrong password,
 * so timing does not reveal which emails have accounts.
 */
let decoy: Promise<string> | undefined
export function decoyHash(): Promise<string> {
  return (decoy ??= hashPassword(randomBytes(16).toString('hex')))
}
