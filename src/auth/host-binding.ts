/**
 * A paired bridge's key speaks for one host (DESIGN section 14): the first
 * hostId it names (in events, the task poll or a claim) binds it, and any
 * other host is refused with 403 api_key_host_mismatch, so a key copied off
 * one bridge cannot drive another host's printers or claim its tasks. Keys
 * an admin creates are not bound (one key may serve a whole farm's tooling).
 *
 * A key is paired when a pairing code was exchanged for it (its own
 * `paired_at`, set in the exchange's transaction and kept with the key, so
 * the pairing code's row can be swept without unbinding it). Binding is
 * first-writer-wins in the store (`coalesce`), so two nodes binding the
 * same key at once agree on one host. Once known, a key's binding never
 * changes, so each node remembers it: the hot path of event ingestion pays
 * one query per key per process, not per batch.
 */
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { Principal } from '../http/route.js'

/** Keys remembered per node; past this the memory starts again (one query per key again). */
const rememberedKeys = 10_000

export class HostBindings {
  readonly #sql: Sql
  /** keyId → the host it is bound to; null for a key that is not paired. */
  readonly #known = new Map<string, string | null>()

  constructor(sql: Sql) {
    this.#sql = sql
  }

  /** Binds a paired key to `hostId` on first use; refuses a paired key bound to another host. */
  async check(principal: Principal, hostId: string): Promise<void> {
    if (principal.kind !== 'api_key') return
    let bound = this.#known.get(principal.keyId)
    if (bound === undefined) {
      const [row] = await this.#sql<{ bound_host_id: string }[]>`
        update api_keys k set bound_host_id = coalesce(k.bound_host_id, ${hostId})
        where k.id = ${principal.keyId} and k.paired_at is not null
        returning k.bound_host_id`
      bound = row === undefined ? null : row.bound_host_id
      if (this.#known.size >= rememberedKeys) this.#known.clear()
      this.#known.set(principal.keyId, bound)
    }
    if (bound !== null && bound !== hostId) {
      throw new ServiceError('api_key_host_mismatch', `this paired bridge key speaks for host ${JSON.stringify(bound)}, not ${JSON.stringify(hostId.slice(0, 200))}; pair the other bridge separately`)
    }
  }
}
