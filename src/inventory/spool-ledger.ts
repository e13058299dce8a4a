/**
 * The one way `remaining_g` changes ("Ledger entry"; docs/inventory.md): an
 * entry is written with what was asked and what was done, in the transaction
 * that holds the spool's row. Shared by adjustments and job deductions.
 */
import { randomUUID } from 'node:crypto'
import type { TransactionSql } from 'postgres'
import type { LedgerEntry } from '../../protocol/schemas/inventory.js'

/** The most a spool may hold, and the largest single change (the schemas' bound). */
export const maxSpoolGrams = 100_000

export interface LedgerRow {
  id: string
  spool_id: string
  delta_g: number
  applied_g: number
  shortfall_g: number
  reason: string
  job_id: string | number | null
  created_at: Date
}

/** Milligram resolution: sums of decimals never show as 988.3399999999999 g. */
export const roundGrams = (grams: number): number => Math.round(grams * 1000) / 1000

/**
 * What a change of `delta` does to a spool holding `remaining` grams: the
 * spool never goes below 0, and what it could not give is the shortfall.
 */
export function applyDelta(remaining: number, delta: number): { applied: number; shortfall: number; remaining: number } {
  const next = roundGrams(Math.max(0, remaining + delta))
  const applied = roundGrams(next - remaining)
  return { applied, shortfall: roundGrams(Math.abs(delta - applied)), remaining: next }
}

export interface LedgerWrite {
  organizationId: string
  spoolId: string
  /** The spool's grams now (its row is locked by the caller). */
  remaining: number
  /** Not 0 at milligram resolution (the caller checks). */
  delta: number
  reason: string
  job: { id: number; attempt: number } | null
  now: Date
}

/**
 * Writes the entry and moves the spool; undefined when the job run already has
 * its entry for this spool (the unique index: a deduction retried after a lost
 * commit answer changes nothing).
 */
export async function writeLedgerEntry(tx: TransactionSql, w: LedgerWrite): Promise<{ entry: LedgerEntry; remaining: number } | undefined> {
  const delta = roundGrams(w.delta)
  const change = applyDelta(w.remaining, delta)
  const [row] = await tx<LedgerRow[]>`
    insert into spool_ledger (id, organization_id, spool_id, delta_g, applied_g, shortfall_g, reason, job_id, job_attempt, created_at)
    values (${randomUUID()}, ${w.organizationId}, ${w.spoolId}, ${delta}, ${change.applied}, ${change.shortfall}, ${w.reason},
            ${w.job?.id ?? null}, ${w.job?.attempt ?? null}, ${w.now})
    on conflict (spool_id, job_id, job_attempt) where job_id is not null do nothing
    returning id, spool_id, delta_g, applied_g, shortfall_g, reason, job_id, created_at`
  if (row === undefined) return undefined
  await tx`update spools set remaining_g = ${change.remaining}, updated_at = ${w.now} where id = ${w.spoolId}`
  return { entry: ledgerEntryOf(row), remaining: change.remaining }
}

export function ledgerEntryOf(row: LedgerRow): LedgerEntry {
  return {
    id: row.id,
    spool_id: row.spool_id,
    delta_g: row.delta_g,
    applied_g: row.applied_g,
    shortfall_g: row.shortfall_g,
    reason: row.reason,
    job_id: row.job_id === null ? null : Number(row.job_id),
    created_at: row.created_at.toISOString(),
  }
}
