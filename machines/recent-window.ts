/**
 * A printer's window of recently applied event ids and idempotency keys
 * (./host-assignment.ts): at most `idempotencyWindow` of each, newest last.
 * A value: `with` answers a new window and leaves this one as it was.
 *
 * Looking up is what a batch does most: each of its events against the
 * window. Each list keeps an index (how often each entry is in it), built on
 * its first look-up and handed on to the list `with` makes from it, updated
 * by what entered and what left instead of rebuilt, so a batch costs its own
 * events, not the window's size (a Set of the whole window per batch, and a
 * prefixed string per id, were about 8% of the server's main thread under
 * ingest load and most of the strings it kept). A list that handed its index on builds a new one
 * if it is asked again, so old and new both answer for their own entries.
 */

/** Recent eventIds / idempotency keys remembered per printer (each), beyond the seqn high-water mark. */
export const idempotencyWindow = 256

class RecentList {
  readonly entries: readonly string[]
  #index: Map<string, number> | undefined

  constructor(entries: readonly string[], index?: Map<string, number>) {
    this.entries = entries
    this.#index = index
  }

  has(value: string): boolean {
    this.#index ??= indexOf(this.entries)
    return this.#index.has(value)
  }

  with(added: readonly string[]): RecentList {
    if (added.length === 0) return this
    const joined = this.entries.concat(added)
    const entries = joined.length > idempotencyWindow ? joined.slice(-idempotencyWindow) : joined
    const index = this.#index
    if (index === undefined) return new RecentList(entries)
    this.#index = undefined
    for (const value of added) index.set(value, (index.get(value) ?? 0) + 1)
    for (let i = 0; i < joined.length - entries.length; i++) {
      const value = joined[i]!
      const count = index.get(value)!
      if (count === 1) index.delete(value)
      else index.set(value, count - 1)
    }
    return new RecentList(entries, index)
  }
}

function indexOf(entries: readonly string[]): Map<string, number> {
  const index = new Map<string, number>()
  for (const value of entries) index.set(value, (index.get(value) ?? 0) + 1)
  return index
}

export class RecentWindow {
  static readonly empty = new RecentWindow(new RecentList([]), new RecentList([]))

  /** From stored entries, oldest first (the newest `idempotencyWindow` of each are kept). */
  static of(eventIds: readonly string[], keys: readonly string[]): RecentWindow {
    return RecentWindow.empty.with(eventIds, keys)
  }

  readonly #eventIds: RecentList
  readonly #keys: RecentList

  private constructor(eventIds: RecentList, keys: RecentList) {
    this.#eventIds = eventIds
    this.#keys = keys
  }

  /** Oldest first. */
  get eventIds(): readonly string[] {
    return this.#eventIds.entries
  }

  /** Oldest first. */
  get keys(): readonly string[] {
    return this.#keys.entries
  }

  hasEventId(eventId: string): boolean {
    return this.#eventIds.has(eventId)
  }

  hasKey(key: string): boolean {
    return this.#keys.has(key)
  }

  /** This window with these applied last (the oldest leave beyond `idempotencyWindow`). */
  with(eventIds: readonly string[], keys: readonly string[]): RecentWindow {
    if (eventIds.length === 0 && keys.length === 0) return this
    return new RecentWindow(this.#eventIds.with(eventIds), this.#keys.with(keys))
  }
}
