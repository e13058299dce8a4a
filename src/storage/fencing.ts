/**
 * The fencing check of DESIGN section 6 inside a transaction: the shard's
 * token row is share-locked, so a new owner's raise waits for this
 * transaction (and hydrates after it) or this transaction sees the raised
 * token and stores nothing. Token 0 is the local directory: not checked.
 */
import type { TransactionSql } from 'postgres'
import { ShardUnavailable, type Fence } from '../../actors/shard-directory.js'

export async function checkFence(tx: TransactionSql, fence: Fence | undefined): Promise<void> {
  if (fence === undefined || fence.token === 0) return
  const [row] = await tx<{ token: string }[]>`select token from shard_tokens where shard = ${fence.shard} for share`
  if (row !== undefined && Number(row.token) > fence.token) throw new ShardUnavailable(fence.shard, 'fenced')
}
