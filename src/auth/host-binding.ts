/**
 * A paired bridge's key speaks for one host (docs/print-jobs.md): the first
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
 *
 * A paired key acts only on its own host's printers (least privilege: a
 * bridge key copied off one host reaches no other): its printer-affecting
 * writes, and the printers' own credentials it reads, are limited to
 * printers whose host is the key's bound host (`checkPrinter`, `checkJob`);
 * a paired key not yet bound has no printers. The ready gate's verdict and
 * an operator's start confirmation are an operator's, never a bridge key's
 * (`refuseBridgeKey`: 403 operator_only).
 *
 * A bridge application that signed in through OAuth instead is bound the same
 * way, per grant: an admin's consent to host:pair or print:launch makes the
 * grant a bridge's (its tokens carry `bridge_grant`), the first host one of
 * its tokens names binds the grant (oauth_host_bindings), and every token of
 * it — refreshed, or narrowed to fewer scopes — keeps to that host. Another
 * sign-in is another grant, and another bridge.
 */
import type { Sql } from 'postgres'
import { ServiceError } from '../../protocol/errors.js'
import type { Principal } from '../http/route.js'

/** Keys remembered per node; past this the memory starts again (one query per key again). */
const rememberedKeys = 10_000

/** What a principal is as a bridge: not a paired key (undefined), or a paired key and the host it is bound to (null: none yet). */
export type BridgeBinding = undefined | { host: string | null }

/** The bridge credential behind a principal: a paired-key candidate, an OAuth bridge grant, or none. */
type Bridge = { kind: 'key'; id: string } | { kind: 'grant'; id: string; organizationId: string } | undefined

function bridgeOf(principal: Principal): Bridge {
  if (principal.kind === 'api_key') return { kind: 'key', id: principal.keyId }
  if (principal.kind === 'oauth' && principal.bridgeGrant !== null) return { kind: 'grant', id: principal.bridgeGrant, organizationId: principal.organizationId }
  return undefined
}

export class HostBindings {
  readonly #sql: Sql
  /** `key:id` / `grant:id` → the host it is bound to; null for a key that is not paired. */
  readonly #known = new Map<string, string | null>()
  /** keyId → false for a key an admin created (never paired; a key is paired only at its creation). */
  readonly #paired = new Map<string, boolean>()

  constructor(sql: Sql) {
    this.#sql = sql
  }

  /** Binds a paired key or a bridge's OAuth grant to `hostId` on first use; refuses one bound to another host. */
  async check(principal: Principal, hostId: string): Promise<void> {
    const bridge = bridgeOf(principal)
    if (bridge === undefined) return
    const name = `${bridge.kind}:${bridge.id}`
    let bound = this.#known.get(name)
    if (bound === undefined) {
      bound = bridge.kind === 'key' ? await this.#bindKey(bridge.id, hostId) : await this.#bindGrant(bridge.id, bridge.organizationId, hostId)
      this.#remember(name, bound)
    }
    if (bound !== null && bound !== hostId) {
      const what = bridge.kind === 'key' ? 'paired bridge key' : "bridge's sign-in (OAuth grant)"
      const again = bridge.kind === 'key' ? 'pair the other bridge separately' : 'sign the other bridge in separately'
      throw new ServiceError('api_key_host_mismatch', `this ${what} speaks for host ${JSON.stringify(bound)}, not ${JSON.stringify(hostId.slice(0, 200))}; ${again}`)
    }
  }

  async #bindKey(keyId: string, hostId: string): Promise<string | null> {
    const [row] = await this.#sql<{ bound_host_id: string }[]>`
      update api_keys k set bound_host_id = coalesce(k.bound_host_id, ${hostId})
      where k.id = ${keyId} and k.paired_at is not null
      returning k.bound_host_id`
    return row === undefined ? null : row.bound_host_id
  }

  /** First writer wins, as for keys: two nodes binding one grant at once agree on one host. */
  async #bindGrant(grantId: string, organizationId: string, hostId: string): Promise<string> {
    const [inserted] = await this.#sql<{ host_id: string }[]>`
      insert into oauth_host_bindings (grant_id, organization_id, host_id) values (${grantId}, ${organizationId}, ${hostId})
      on conflict (grant_id) do nothing
      returning host_id`
    if (inserted !== undefined) return inserted.host_id
    // A statement of its own: it sees the binding another node committed while this insert waited on it.
    const [existing] = await this.#sql<{ host_id: string }[]>`select host_id from oauth_host_bindings where grant_id = ${grantId}`
    return existing!.host_id
  }

  #remember(name: string, host: string | null): void {
    if (this.#known.size >= rememberedKeys) this.#known.clear()
    this.#known.set(name, host)
  }

  /** Whether the principal is a bridge (a paired key, or a bridge's OAuth grant), and the host it is bound to. */
  async bindingOf(principal: Principal): Promise<BridgeBinding> {
    const bridge = bridgeOf(principal)
    if (bridge === undefined) return undefined
    const name = `${bridge.kind}:${bridge.id}`
    const bound = this.#known.get(name)
    if (bound !== undefined && bound !== null) return { host: bound }
    if (bridge.kind === 'grant') {
      const [row] = await this.#sql<{ host_id: string }[]>`select host_id from oauth_host_bindings where grant_id = ${bridge.id}`
      if (row !== undefined) this.#remember(name, row.host_id)
      return { host: row?.host_id ?? null }
    }
    if (this.#paired.get(bridge.id) === false) return undefined
    const [row] = await this.#sql<{ paired: boolean; bound_host_id: string | null }[]>`
      select paired_at is not null as paired, bound_host_id from api_keys where id = ${bridge.id}`
    if (row === undefined || !row.paired) {
      if (this.#paired.size >= rememberedKeys) this.#paired.clear()
      this.#paired.set(bridge.id, false)
      return undefined
    }
    if (row.bound_host_id !== null) this.#remember(name, row.bound_host_id)
    return { host: row.bound_host_id }
  }

  /** Refuses a bridge (paired key or bridge grant) acting on a printer that is not on its bound host (a printer of another organization is the route's own 404). */
  async checkPrinter(principal: Principal, organizationId: string, printerId: string): Promise<void> {
    const binding = await this.bindingOf(principal)
    if (binding === undefined) return
    const [printer] = await this.#sql<{ host_id: string | null }[]>`select host_id from printers where id = ${printerId} and organization_id = ${organizationId}`
    if (printer === undefined) return
    refuseOtherHost(binding, printer.host_id, `printer ${printerId}`)
  }

  /** Refuses a paired key changing a job that is not on a printer of its bound host (a job on no printer is no bridge's). */
  async checkJob(principal: Principal, organizationId: string, jobId: number): Promise<void> {
    const binding = await this.bindingOf(principal)
    if (binding === undefined) return
    const [job] = await this.#sql<{ host_id: string | null; printer_id: string | null }[]>`
      select p.host_id, j.printer_id from print_jobs j left join printers p on p.id = j.printer_id where j.id = ${jobId} and j.organization_id = ${organizationId}`
    if (job === undefined) return
    if (job.printer_id === null) throw new ServiceError('api_key_host_mismatch', `job ${jobId} is on no printer; a paired bridge key changes only jobs on its own host's printers`)
    refuseOtherHost(binding, job.host_id, `job ${jobId}'s printer`)
  }

  /** Refuses a paired bridge key: `what` is an operator's decision. */
  async refuseBridgeKey(principal: Principal, what: string): Promise<void> {
    if ((await this.bindingOf(principal)) === undefined) return
    throw new ServiceError('operator_only', `${what} is an operator's decision: a bridge's credential (a paired key, or a bridge application's sign-in) cannot make it; use a member's sign-in or an API key an admin created`)
  }
}

function refuseOtherHost(binding: { host: string | null }, printerHost: string | null, what: string): void {
  if (binding.host === null) {
    throw new ServiceError('api_key_host_mismatch', `this bridge's credential has not spoken for a host yet (its first poll or event binds it), so it acts on no printer`)
  }
  if (printerHost !== binding.host) {
    throw new ServiceError('api_key_host_mismatch', `${what} is not on host ${JSON.stringify(binding.host)}, the host this bridge's credential speaks for`)
  }
}
