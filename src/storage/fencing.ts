/**
 * The fencing check of docs/operations.md inside a transaction: the shard's
 * token row is share-locked, so a new owner's raise waits for this
 * transaction (and hydrates after it) or this transaction sees the raised
 * token and stores nothing. Token 0 is the local directory: not checked.
 */
import type { TransactionSql } from 'postgres'
import { ShardUnavailable, type Fence } from '../../actors/shard-directory.js'
import { commandTimeoutMs } from '../mqtt/dynamic-security.js'
import { setLocal } from './set-local.js'

/**
 * How long a fenced transaction may sit idle before PostgreSQL ends it (and its session). From the
 * check on, it holds its shard's token row; a node frozen before its COMMIT (stopped, a paused VM)
 * would otherwise keep every other node from raising the token, and so from taking the shard, for
 * as long as it stays frozen. Longer than the longest wait inside such a transaction: a display's
 * rebind asks the broker to take the new credential before it commits (dynamic-security.ts).
 * Nothing of a transaction ended this way was acknowledged.
 */
export const fencedIdleTimeoutMs = commandTimeoutMs + 5_000

export async function checkFence(tx: TransactionSql, fence: Fence | undefined): Promise<void> {
  if (fence === undefined || fence.token === 0) return
  // Both sent at once, in this order (a transaction's queries are pipelined): no extra round trip.
  const [, [row]] = await Promise.all([
    setLocal(tx, { idleInTransactionMs: fencedIdleTimeoutMs }),
    tx<{ token: string }[]>`select token from shard_tokens where shard = ${fence.shard} for share`,
  ])
  if (row !== undefined && Number(row.token) > fence.token) throw new ShardUnavailable(fence.shard, 'fenced')
}
