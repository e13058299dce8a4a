import type { Migration } from './index.js'

/**
 * Shard fencing tokens (docs/operations.md). PostgreSQL is the
 * fencing authority: a node that takes a shard's lease in Redis raises the
 * shard's token here and carries it with every durable write of the
 * shard's actors, so a node that lost its lease (GC pause, SIGSTOP,
 * partition) cannot overwrite the new owner. A Redis counter alone could
 * repeat after a Redis failover; this one never goes back.
 *
 * Rows are made on first acquisition. `owner` and `acquired_at` are for
 * operators (who took it last, when); only `token` fences.
 */
export const shardTokens: Migration = {
  version: 7,
  name: 'shard-tokens',
  up: `
    create table shard_tokens (
      shard integer primary key check (shard >= 0),
      token bigint not null check (token > 0),
      owner text not null,
      acquired_at timestamptz not null default now()
    );
  `,
}
