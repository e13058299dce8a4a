/**
 * API keys (docs/authentication.md): `pfk_<prefix>_<secret>`.
 *
 * The 10-hex-digit prefix is public and indexed, so finding a key is one
 * index probe; the secret is 256 random bits, so a fast SHA-256 of the whole
 * key is a safe thing to store (a slow KDF protects guessable secrets, and
 * this one is not guessable). Comparison is constant-time.
 *
 * The hot-path lookup is cached for `cacheTtlMs` (5 s): a key disabled,
 * expired, re-scoped or deleted stops working at once on the node that made
 * the change and within 5 s on every other node.
 */
import type { Clock } from '../../actors/clock.js'
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { ServiceError } from '../../protocol/errors.js'
import type { ApiKeyRecord } from '../../protocol/schemas/api-keys.js'
import type { Logger } from '../observability/log.js'
import type { Sql } from 'postgres'
import type { Queryable } from '../storage/database.js'
import { sha256 } from '../secrets/digest.js'

const keyPattern = /^pfk_([0-9a-f]{10})_([A-Za-z0-9_-]{43})$/
export const cacheTtlMs = 5_000

export function newApiKey(): { key: string; prefix: string; hash: Buffer } {
  const prefix = randomBytes(5).toString('hex')
  const key = `pfk_${prefix}_${randomBytes(32).toString('base64url')}`
  return { key, prefix, hash: sha256(key) }
}


interface Row {
  id: string
  organization_id: string
  name: string
  prefix: string
  secret_hash: Buffer
  scopes: string[]
  enabled: boolean
  expires_at: Date | null
  created_at: Date
  last_used_at: Date | null
}

const columns = 'id, organization_id, name, prefix, secret_hash, scopes, enabled, expires_at, created_at, last_used_at'

export function toRecord(row: Row): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    organizationId: row.organization_id,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at?.toISOString() ?? null,
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    enabled: row.enabled,
    scopes: row.scopes,
  }
}

export async function createApiKey(
  sql: Queryable,
  input: { organizationId: string; name: string; scopes: readonly string[]; expiresAt: string | null; createdBy: string | null },
): Promise<{ record: ApiKeyRecord; key: string }> {
  // A prefix collision (1 in 2^40 per pair) just draws again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const { key, prefix, hash } = newApiKey()
    const [row] = await sql.unsafe<Row[]>(
      `insert into api_keys (organization_id, name, prefix, secret_hash, scopes, expires_at, created_by)
       values ($1, $2, $3, $4, $5::text[], $6, $7) on conflict (prefix) do nothing returning ${columns}`,
      [input.organizationId, input.name, prefix, hash, input.scopes as string[], input.expiresAt, input.createdBy],
    )
    if (row !== undefined) return { record: toRecord(row), key }
  }
  throw new Error('could not draw a unique API key prefix')
}

export async function listApiKeys(sql: Queryable, organizationId: string): Promise<ApiKeyRecord[]> {
  const rows = await sql.unsafe<Row[]>(`select ${columns} from api_keys where organization_id = $1 order by created_at, id`, [organizationId])
  return rows.map(toRecord)
}

/** Another organization's key is "not found", exactly like a missing one. */
export async function getApiKey(sql: Queryable, organizationId: string, id: string): Promise<ApiKeyRecord> {
  const [row] = await sql.unsafe<Row[]>(`select ${columns} from api_keys where organization_id = $1 and id = $2`, [organizationId, id])
  if (row === undefined) throw new ServiceError('api_key_not_found', 'no such API key in this organization')
  return toRecord(row)
}

export async function updateApiKey(
  sql: Queryable,
  organizationId: string,
  id: string,
  patch: { name?: string; enabled?: boolean; expiresAt?: string | null; scopes?: readonly string[] },
): Promise<{ record: ApiKeyRecord; prefix: string }> {
  const [row] = await sql.unsafe<Row[]>(
    `update api_keys set
       name = coalesce($3, name),
       enabled = coalesce($4, enabled),
       expires_at = case when $5 then $6::timestamptz else expires_at end,
       scopes = coalesce($7::text[], scopes)
     where organization_id = $1 and id = $2
     returning ${columns}`,
    [organizationId, id, patch.name ?? null, patch.enabled ?? null, patch.expiresAt !== undefined, patch.expiresAt ?? null, (patch.scopes as string[] | undefined) ?? null],
  )
  if (row === undefined) throw new ServiceError('api_key_not_found', 'no such API key in this organization')
  return { record: toRecord(row), prefix: row.prefix }
}

export async function deleteApiKey(sql: Queryable, organizationId: string, id: string): Promise<string> {
  const [row] = await sql<{ prefix: string }[]>`delete from api_keys where organization_id = ${organizationId} and id = ${id} returning prefix`
  if (row === undefined) throw new ServiceError('api_key_not_found', 'no such API key in this organization')
  return row.prefix
}

/** A key as the authenticator needs it. */
/**
 * The scopes of those of `ids` that still work now (enabled, not expired, not deleted): one
 * query for every key behind the open live sockets of a node, which are checked again with it.
 */
export async function currentApiKeyScopes(sql: Queryable, ids: readonly string[], now: Date): Promise<Map<string, ReadonlySet<string>>> {
  if (ids.length === 0) return new Map()
  const rows = await sql<{ id: string; scopes: string[] }[]>`
    select id, scopes from api_keys where id = any(${ids as string[]}::uuid[]) and enabled and (expires_at is null or expires_at > ${now})`
  return new Map(rows.map((r) => [r.id, new Set(r.scopes)]))
}

export interface ResolvedApiKey {
  id: string
  organizationId: string
  scopes: ReadonlySet<string>
  enabled: boolean
  expiresAt: number | null
}

interface CacheEntry {
  at: number
  /** undefined: no key has this prefix (cached too, so a flood of bogus keys does not reach the store). */
  key: (ResolvedApiKey & { hash: Buffer }) | undefined
}

export class ApiKeyCache {
  readonly #sql: Queryable
  /** Keys that exist; misses live apart, so a flood of bogus prefixes cannot push real keys out. */
  readonly #found = new Map<string, CacheEntry>()
  readonly #missing = new Map<string, CacheEntry>()
  /** Bumped by invalidate(): a load that started before it must not write its (stale) answer back. */
  readonly #generations = new Map<string, number>()
  readonly #maxEntries: number
  readonly #now: () => number

  /** `now`: the node's clock (a cached key is read again after a while). */
  constructor(sql: Queryable, options: { maxEntries?: number; now: () => number }) {
    this.#sql = sql
    this.#maxEntries = options.maxEntries ?? 50_000
    this.#now = options.now
  }

  /** The key's record when the presented text is a key we issued, else undefined (whatever the reason). */
  async resolve(presented: string): Promise<ResolvedApiKey | undefined> {
    const match = keyPattern.exec(presented)
    if (!match) return undefined
    const prefix = match[1]!
    let entry = this.#found.get(prefix) ?? this.#missing.get(prefix)
    if (entry === undefined || this.#now() - entry.at > cacheTtlMs) {
      const generation = this.#generations.get(prefix) ?? 0
      entry = { at: this.#now(), key: await this.#load(prefix) }
      if ((this.#generations.get(prefix) ?? 0) === generation) this.#remember(prefix, entry)
    }
    const key = entry.key
    if (key === undefined || !timingSafeEqual(sha256(presented), key.hash)) return undefined
    return key
  }

  invalidate(prefix: string): void {
    this.#found.delete(prefix)
    this.#missing.delete(prefix)
    this.#generations.set(prefix, (this.#generations.get(prefix) ?? 0) + 1)
    if (this.#generations.size > this.#maxEntries) this.#generations.delete(this.#generations.keys().next().value!)
  }

  #remember(prefix: string, entry: CacheEntry): void {
    const map = entry.key === undefined ? this.#missing : this.#found
    map.delete(prefix)
    if (map.size >= this.#maxEntries) map.delete(map.keys().next().value!)
    map.set(prefix, entry)
  }

  async #load(prefix: string): Promise<CacheEntry['key']> {
    const [row] = await this.#sql<Pick<Row, 'id' | 'organization_id' | 'secret_hash' | 'scopes' | 'enabled' | 'expires_at'>[]>`
      select id, organization_id, secret_hash, scopes, enabled, expires_at from api_keys where prefix = ${prefix}`
    if (row === undefined) return undefined
    return {
      id: row.id,
      organizationId: row.organization_id,
      scopes: new Set(row.scopes),
      enabled: row.enabled,
      expiresAt: row.expires_at?.getTime() ?? null,
      hash: row.secret_hash,
    }
  }
}

export interface UsageEntry {
  apiKeyId: string
  usedAt: Date
  method: string
  route: string
  status: number
  remoteAddress: string
  requestId: string
}

/**
 * Each authenticated use of a key, written off the request path: entries
 * collect in memory and go to the store in one statement per flush (every
 * second, or at once past `batchSize`). Bounded: past `maxBuffered` the oldest
 * unwritten entries are dropped and counted, rather than growing without end
 * while the store is down.
 */
export class UsageLogWriter {
  readonly #sql: Sql
  readonly #logger: Logger
  readonly #buffer: UsageEntry[] = []
  readonly #batchSize: number
  readonly #maxBuffered: number
  readonly #clock: Pick<Clock, 'setInterval' | 'clearInterval'>
  readonly #timer: unknown
  #flushing: Promise<void> | undefined
  dropped = 0

  /** `clock`: the node's, whose timers do not keep a stopping process up. */
  constructor(sql: Sql, logger: Logger, clock: Pick<Clock, 'setInterval' | 'clearInterval'>, options: { intervalMs?: number; batchSize?: number; maxBuffered?: number } = {}) {
    this.#sql = sql
    this.#clock = clock
    this.#logger = logger
    this.#batchSize = options.batchSize ?? 1_000
    this.#maxBuffered = options.maxBuffered ?? 50_000
    this.#timer = clock.setInterval(() => void this.flush(), options.intervalMs ?? 1_000)
  }

  record(entry: UsageEntry): void {
    if (this.#buffer.length >= this.#maxBuffered) {
      this.#buffer.shift()
      this.dropped++
    }
    this.#buffer.push(entry)
    if (this.#buffer.length >= this.#batchSize) void this.flush()
  }

  /** Writes what is buffered; concurrent calls share one write. */
  flush(): Promise<void> {
    this.#flushing ??= this.#write().finally(() => {
      this.#flushing = undefined
    })
    return this.#flushing
  }

  async close(): Promise<void> {
    this.#clock.clearInterval(this.#timer)
    await this.flush()
    if (this.#buffer.length) await this.flush()
  }

  async #write(): Promise<void> {
    while (this.#buffer.length) {
      const batch = this.#buffer.splice(0, this.#batchSize)
      try {
        // One transaction: the entries and last_used_at land together or not at all, so a retry never doubles them.
        await this.#sql.begin(async (tx) => {
        // Entries of a key deleted meanwhile are skipped by the join instead of failing the batch;
        // ordinality keeps the ids in the order of use, which the log pages by.
        await tx.unsafe(
          `insert into api_key_usage (api_key_id, used_at, method, route, status, remote_address, request_id)
           select u.k, u.t, u.m, u.r, u.s, u.a, u.q
           from unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[])
             with ordinality as u(k, t, m, r, s, a, q, n)
           join api_keys on api_keys.id = u.k
           order by u.n`,
          [
            batch.map((e) => e.apiKeyId),
            batch.map((e) => e.usedAt.toISOString()),
            batch.map((e) => e.method),
            batch.map((e) => e.route),
            batch.map((e) => e.status),
            batch.map((e) => e.remoteAddress),
            batch.map((e) => e.requestId),
          ] as never[],
        )
        const latest = new Map<string, string>()
        for (const e of batch) {
          const at = e.usedAt.toISOString()
          if ((latest.get(e.apiKeyId) ?? '') < at) latest.set(e.apiKeyId, at)
        }
        await tx.unsafe(
          `update api_keys k set last_used_at = v.t
           from unnest($1::uuid[], $2::timestamptz[]) as v(id, t)
           where k.id = v.id and (k.last_used_at is null or k.last_used_at < v.t)`,
          [[...latest.keys()], [...latest.values()]] as never[],
        )
        })
      } catch (error) {
        // Put the batch back (bounded by record()) and try again at the next tick.
        this.#buffer.unshift(...batch)
        while (this.#buffer.length > this.#maxBuffered) {
          this.#buffer.shift()
          this.dropped++
        }
        this.#logger.warn('API key usage log: write failed, will retry', { error, buffered: this.#buffer.length })
        return
      }
    }
  }
}
