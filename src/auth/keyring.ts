/**
 * The ES256 keys that sign access tokens (DESIGN section 9), kept in the
 * store so every node signs and verifies with the same set. Generated on the
 * first start; the newest key signs, every unretired key verifies, and the
 * public halves are served as the JWKS. A token whose kid is unknown makes the
 * keyring reload (at most every few seconds), so a key added by another node
 * is accepted without a restart.
 */
import { randomUUID } from 'node:crypto'
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet, type JWK, type JWTVerifyGetKey } from 'jose'
import type { Sql } from 'postgres'
import type { Logger } from '../log.js'

export const signingAlgorithm = 'ES256'

interface KeyRow {
  kid: string
  private_jwk: JWK
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

export async function loadKeyring(sql: Sql, logger: Logger): Promise<Keyring> {
  let rows = await readKeys(sql)
  if (rows.length === 0) {
    const { privateKey, publicKey } = await generateKeyPair(signingAlgorithm, { extractable: true })
    const kid = randomUUID()
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: signingAlgorithm, use: 'sig' }
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: signingAlgorithm, use: 'sig' }
    await sql`insert into signing_keys (kid, algorithm, private_jwk, public_jwk)
              values (${kid}, ${signingAlgorithm}, ${sql.json(privateJwk as never)}, ${sql.json(publicJwk as never)})`
    logger.info('token signing key generated', { kid })
    rows = await readKeys(sql)
  }
  let state = await build(rows)
  let lastReload = Date.now()
  const reload = async (): Promise<void> => {
    lastReload = Date.now()
    state = await build(await readKeys(sql))
  }
  return {
    signingKey: () => state.signing,
    jwks: () => state.jwks,
    reload,
    resolver: () => {
      return async (header, token) => {
        const kid = header?.kid
        if (kid !== undefined && !state.jwks.keys.some((k) => k.kid === kid) && Date.now() - lastReload > reloadIntervalMs) {
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

async function build(rows: KeyRow[]): Promise<{ signing: { kid: string; key: CryptoKey }; jwks: JSONWebKeySet; local: ReturnType<typeof createLocalJWKSet> }> {
  const newest = rows[0]
  if (newest === undefined) throw new Error('no signing key in the store')
  const key = (await importJWK(newest.private_jwk, signingAlgorithm)) as CryptoKey
  const jwks: JSONWebKeySet = { keys: rows.map((r) => r.public_jwk) }
  return { signing: { kid: newest.kid, key }, jwks, local: createLocalJWKSet(jwks) }
}
