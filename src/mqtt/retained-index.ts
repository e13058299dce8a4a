/**
 * The embedded broker's store (aedes-persistence's in-memory one) with its
 * retained messages also indexed by topic. On every subscription aedes asks
 * the store for the retained messages matching each filter, and the stock
 * store answers by testing every retained topic against the filter: with a
 * retained configuration per status display, each display's subscription
 * cost grew with the number of displays, and a farm's displays connecting
 * together cost the square of their number (bench/displays: 1,000 displays
 * spent 8 s of the broker's CPU only subscribing). A display subscribes to
 * exact topics (no wildcards), which the index answers with one lookup;
 * a filter with `+` or `#` still goes through the stock scan.
 */
import { createRequire } from 'node:module'
import type { Readable } from 'node:stream'

interface RetainedPacket {
  topic: string
  payload: Buffer
}

interface StockStore {
  storeRetained(packet: RetainedPacket): Promise<void>
  createRetainedStream(pattern: string): Iterable<RetainedPacket> | Readable
  createRetainedStreamCombi(patterns: string[]): Iterable<RetainedPacket> | Readable
}

type StockStoreClass = new (options: object) => StockStore

const require = createRequire(import.meta.url)
// Deep imports: the package exports only a factory of its callback store around the async one.
const AsyncPersistence = require('aedes-persistence/asyncPersistence.js') as StockStoreClass
const { CallBackPersistence } = require('aedes-persistence/callBackPersistence.js') as { CallBackPersistence: new (factory: (options: object) => StockStore, options: object) => object }

const hasWildcard = (filter: string): boolean => filter.includes('+') || filter.includes('#')

function* exactly(retained: ReadonlyMap<string, RetainedPacket>, topics: readonly string[]): Generator<RetainedPacket> {
  for (const topic of topics) {
    const packet = retained.get(topic)
    if (packet !== undefined) yield packet
  }
}

class IndexedRetainedStore extends AsyncPersistence {
  readonly #byTopic = new Map<string, RetainedPacket>()

  override async storeRetained(packet: RetainedPacket): Promise<void> {
    await super.storeRetained(packet)
    if (packet.payload.length === 0) this.#byTopic.delete(packet.topic)
    else this.#byTopic.set(packet.topic, { ...packet })
  }

  override createRetainedStream(pattern: string): Iterable<RetainedPacket> | Readable {
    return hasWildcard(pattern) ? super.createRetainedStream(pattern) : exactly(this.#byTopic, [pattern])
  }

  override createRetainedStreamCombi(patterns: string[]): Iterable<RetainedPacket> | Readable {
    return patterns.some(hasWildcard) ? super.createRetainedStreamCombi(patterns) : exactly(this.#byTopic, [...new Set(patterns)])
  }
}

/** The persistence for `Aedes.createBroker({ persistence })`. */
export function indexedMemoryPersistence(): object {
  return new CallBackPersistence((options) => new IndexedRetainedStore(options), {})
}
