/**
 * A node made of parts (docs/development.md, "Layout"). Each part has a name, the parts it needs,
 * a `start` that is given exactly those and answers the part, and a `stop`. The node lists its
 * parts once; `startParts` starts them in the order their needs give (the listed order where the
 * needs leave it open), and stops them in reverse, the same way on a graceful stop and on a start
 * that failed halfway (StartedParts). What one part does when another changes is a reaction
 * (src/node/reactions.ts), connected as soon as the parts it joins are up.
 *
 * The values of a node's parts are one record type `V` (name → value), so a part's `start` is
 * typed by what it names in `needs` and nothing else: reaching for a part it did not declare does
 * not compile, and declaring one makes the order follow.
 */
import type { StartedParts } from './started-parts.js'

export interface Part<V, N extends keyof V = keyof V, D extends keyof V = keyof V> {
  readonly name: N
  /** The parts (or given values) `start` reads; they are up before it starts and stop after it. */
  readonly needs: readonly D[]
  start(got: Pick<V, NoInfer<D>>): Promise<V[NoInfer<N>]> | V[NoInfer<N>]
  /** Undoes the start (given what it needed, still up); absent for a part that holds nothing (a store object, a check). */
  stop?(value: V[NoInfer<N>], got: Pick<V, NoInfer<D>>): unknown
}

/** One part of a node whose values are `V`: typed by its own name and needs. */
export function definePart<V>() {
  // NoInfer: the list a part goes into must not widen its name and needs to every part's.
  return <N extends keyof V, D extends keyof V>(part: Part<V, N, D>): Part<V, NoInfer<N>, NoInfer<D>> => part
}

/** What follows what between parts: connected once every part in `joins` is up (and not absent, as the relay without Redis). */
export interface ReactionGroup<V, D extends keyof V = keyof V> {
  readonly joins: readonly D[]
  connect(got: Pick<V, D>): void
}

export function defineReactions<V>() {
  return <D extends keyof V>(group: ReactionGroup<V, D>): ReactionGroup<V, D> => group
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a list holds parts of different names and needs
export type AnyPart<V> = Part<V, any, any>
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyReactions<V> = ReactionGroup<V, any>

export class PartsError extends Error {
  override name = 'PartsError'
}

/**
 * The start order: every part after the parts it needs, otherwise as listed. Throws PartsError
 * naming the problem for a duplicate name, a need that is neither given nor a part, or a cycle.
 */
export function startOrder<V>(parts: readonly AnyPart<V>[], given: readonly (keyof V)[]): AnyPart<V>[] {
  const byName = new Map<keyof V, AnyPart<V>>()
  for (const part of parts) {
    if (byName.has(part.name) || given.includes(part.name)) throw new PartsError(`two parts are named ${String(part.name)}`)
    byName.set(part.name, part)
  }
  for (const part of parts) {
    for (const need of part.needs) {
      if (!byName.has(need) && !given.includes(need)) throw new PartsError(`part ${String(part.name)} needs ${String(need)}, which is neither a part nor given`)
    }
  }
  const ordered: AnyPart<V>[] = []
  const placed = new Set<keyof V>(given)
  while (ordered.length < parts.length) {
    const next = parts.find((part) => !placed.has(part.name) && part.needs.every((need: keyof V) => placed.has(need)))
    if (next === undefined) {
      const stuck = parts.filter((part) => !placed.has(part.name)).map((part) => String(part.name))
      throw new PartsError(`the needs of these parts go round in a circle: ${stuck.join(', ')}`)
    }
    ordered.push(next)
    placed.add(next.name)
  }
  return ordered
}

/**
 * Starts `parts` from the `given` values, connecting each reaction group once the parts it joins
 * are up; every part started is added to `started` with its stop, so `started.undo()` stops them
 * all in reverse, whether the start completes or a part throws (the caller undoes on a throw).
 */
export async function startParts<V>(given: Partial<V>, parts: readonly AnyPart<V>[], reactions: readonly AnyReactions<V>[], started: StartedParts): Promise<V> {
  const values: Partial<V> = { ...given }
  // Every part is given the record of all values up so far; its type shows it only what it needs.
  const got = values as never
  const up = new Set<keyof V>(Object.keys(given) as (keyof V)[])
  const waiting = new Set(reactions)
  const connectReady = () => {
    for (const group of waiting) {
      if (!group.joins.every((name: keyof V) => up.has(name))) continue
      waiting.delete(group)
      if (group.joins.every((name: keyof V) => values[name] !== undefined)) group.connect(got)
    }
  }
  connectReady()
  for (const part of startOrder(parts, [...up])) {
    const value = await part.start(got)
    values[part.name as keyof V] = value
    up.add(part.name)
    const stop = part.stop
    started.add(String(part.name), stop === undefined ? undefined : () => stop.call(part, value, got))
    connectReady()
  }
  return values as V
}
