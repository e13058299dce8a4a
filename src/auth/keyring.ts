/**
 * The ES256 keys that sign access tokens (docs/authentication.md), kept in the
 * store so every node signs and verifies with the same set. Generated on the
 * first start; the newest key signs, every unretired key verifies, and the
 * public halves are served as the JWKS. A token whose kid is unknown makes the
 * keyring reload (at most every few seconds), so a key added by another node
 * is accepted without a restart.
 */
import { randomUUID } from 'node:crypto'
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet, type JWK, type JWTVerifyGetKey } from 'jose'
import type { Sql } from 'postgres'
import type { Logger } from '../observability/log.js'
import type { SealedBox } from '../secrets/sealed-box.js'

export const signingAlgorithm = 'ES256'

interface KeyRow {
  kid: string
  /** `{sealed}`: the private JWK sealed with the secret box (a database copy alone cannot forge tokens). */
  private_jwk: { sealed: string } | JWK
  public_jwk: JWK
}

export interface Keyring {
  /** The key new tokens are signed with. */
  signingKey(): { kid: string; key: CryptoKey }
  /** Public keys for verification and for /.well-known/jwks.json. */
  jwks(): JSONWebKeySet
  /** A jose key resolver that reloads once when a kid is not known. */
  resolver(): JWTVerifyGetKey
  reload(): Promise<void>
}

const reloadIntervalMs = 5_000

/** `now`: the node's clock (an unknown key id reloads the keys at most once per interval). */
export async function loadKeyring(sql: Sql, box: SealedBox, logger: Logger, now: () => number): Promise<Keyring> {
  let rows = await readKeys(sql)
  if (rows.length === 0) {
    const { privateKey, publicKey } = await generateKeyPair(signingAlgorithm, { extractable: true })
    const kid = randomUUID()
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: signingAlgorithm, use: 'sig' }
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: signingAlgorithm, use: 'sig' }
    const sealed = { sealed: box.seal(JSON.stringify(privateJwk), `signing_keys/${kid}`) }
    await sql`insert into signing_keys (kid, algorithm, private_jwk, public_jwk)
              values (${kid}, ${signingAlgorithm}, ${sql.json(sealed as never)}, ${sql.json(publicJwk as never)})`
    logger.info('token signing key generated', { kid })
    rows = await readKeys(sql)
  }
  // A key stored in clear by an earlier build is sealed now.
  for (const row of rows) {
    if (!('sealed' in row.private_jwk)) {
      const sealed = { sealed: box.seal(JSON.stringify(row.private_jwk), `signing_keys/${row.kid}`) }
      await sql`update signing_keys set private_jwk = ${sql.json(sealed as never)} where kid = ${row.kid}`
    }
  }
  let state = await build(rows, box)
  let lastReload = now()
  const reload = async (): Promise<void> => {
    lastReload = now()
    state = await build(await readKeys(sql), box)
  }
  return {
    signingKey: () => state.signing,
    jwks: () => state.jwks,
    reload,
    resolver: () => {
      return async (header, token) => {
        const kid = header?.kid
        if (kid !== undefined && !state.jwks.keys.some((k) => k.kid === kid) && now() - lastReload > reloadIntervalMs) {
          await reload()
        }
        return state.local(header, token)
      }
    },
  }
}

async function readKeys(sql: Sql): Promise<KeyRow[]> {
  return sql<KeyRow[]>`select kid, private_jwk, public_jwk from signing_keys where retired_at is null order by created_at desc, kid`
}

async function build(
  rows: KeyRow[],
  box: SealedBox,
): Promise<{ signing: { kid: string; key: CryptoKey }; jwks: JSONWebKeySet; local: ReturnType<typeof createLocalJWKSet> }> {
  const newest = rows[0]
  if (newest === undefined) throw new Error('no signing key in the store')
  const stored = newest.private_jwk
  const jwk = 'sealed' in stored && typeof stored.sealed === 'string' ? (JSON.parse(box.open(stored.sealed, `signing_keys/${newest.kid}`)) as JWK) : (stored as JWK)
  const key = (await importJWK(jwk, signingAlgorithm)) as CryptoKey
  const jwks: JSONWebKeySet = { keys: rows.map((r) => r.public_jwk) }
  return { signing: { kid: newest.kid, key }, jwks, local: createLocalJWKSet(jwks) }
}
