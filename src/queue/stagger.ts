/**
 * Staggered starts: at most QUEUE_MAX_STARTS tasks offered per organization
 * within QUEUE_STAGGER_MS, counted from the store (every offer, the hand
 * assignments included: they draw power too, though they are never held
 * back), so the count holds across restarts and queue moves.
 */
import type { Sql, TransactionSql } from 'postgres'

export interface StaggerSettings {
  /** 0: no limit. */
  maxStarts: number
  /** 0: no limit. */
  staggerMs: number
}

export interface Stagger {
  /** Starts the window allows now (Infinity without a limit). */
  startsAvailable: number
  startsInWindow: number
  maxStarts: number
  /** When the full window frees a start (ms), else null. */
  nextStartAt: number | null
}

export async function staggerOf(sql: Sql | TransactionSql, organizationId: string, settings: StaggerSettings, now: number): Promise<Stagger> {
  if (settings.maxStarts === 0 || settings.staggerMs === 0) return { startsAvailable: Infinity, startsInWindow: 0, maxStarts: Infinity, nextStartAt: null }
  const recent = await sql<{ offered_at: Date }[]>`
    select offered_at from printer_tasks
    where organization_id = ${organizationId} and offered_at > ${new Date(now - settings.staggerMs)}
    order by offered_at desc limit ${settings.maxStarts}`
  const full = recent.length >= settings.maxStarts
  return {
    startsAvailable: Math.max(0, settings.maxStarts - recent.length),
    startsInWindow: recent.length,
    maxStarts: settings.maxStarts,
    nextStartAt: full ? recent[recent.length - 1]!.offered_at.getTime() + settings.staggerMs : null,
  }
}
