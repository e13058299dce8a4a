/**
 * Settings for the rest of the current transaction only (what SET LOCAL does), all in one
 * statement, so a transaction that bounds its waits pays one round trip for it, or none when the
 * statement is pipelined with the next. Durations in milliseconds.
 */
import type { Sql } from 'postgres'

export interface LocalSettings {
  /** How long a statement waits for a lock before it fails. */
  lockTimeoutMs?: number
  /** How long the transaction may sit idle (its process frozen, say) before PostgreSQL ends it and its session. */
  idleInTransactionMs?: number
}

const names: Record<keyof LocalSettings, string> = {
  lockTimeoutMs: 'lock_timeout',
  idleInTransactionMs: 'idle_in_transaction_session_timeout',
}

export function setLocal(tx: Pick<Sql, 'unsafe'>, settings: LocalSettings) {
  const chosen = (Object.keys(names) as (keyof LocalSettings)[]).filter((key) => settings[key] !== undefined)
  const calls = chosen.map((key, i) => `set_config('${names[key]}', $${i + 1}, true)`)
  return tx.unsafe(`select ${calls.join(', ')}`, chosen.map((key) => `${settings[key]}ms`))
}
