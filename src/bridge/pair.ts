/**
 * `printfarm bridge pair`: the bridge asks the service for a short code, shows it, and waits until
 * an admin of the organization confirms it; the service then hands over the bridge's key, exactly
 * once, and the bridge keeps it in its state folder (docs/bridge.md, "Pairing").
 */
import { AuthCodeCreatedSchema, PairedApiKeySchema } from '../../protocol/schemas/api-keys.js'
import type { CommandIo } from '../commands/command-io.js'
import { ServiceRefused, ServiceUnavailable, type ServiceClient } from './service-client.js'
import type { BridgeStateDir } from './state-dir.js'

export interface PairOptions {
  client: ServiceClient
  state: BridgeStateDir
  io: CommandIo
  /** One JSON line per step on stdout instead of sentences. */
  json: boolean
  /** Between two asks whether the code was confirmed. */
  pollMs?: number
}

/** Exit codes: 0 paired, 1 not paired (the message says why). */
export async function pair(o: PairOptions): Promise<number> {
  const { client, state, io } = o
  // A damaged key file is what pairing again mends: it is replaced, not a reason to refuse.
  let before: { id: string } | undefined
  try {
    before = state.key()
  } catch {
    before = { id: 'unreadable' }
  }
  let created
  try {
    created = await client.json('POST', '/v1/auth-codes', AuthCodeCreatedSchema, {})
  } catch (error) {
    io.err(`printfarm bridge pair: ${refusal(error, client.url)}\n`)
    return 1
  }
  if (o.json) io.out(`${JSON.stringify({ code: created.code, expires_at: created.expires_at })}\n`)
  else io.out(`pairing code: ${created.code}\n`)
  io.err(
    `An admin of the organization confirms it before ${created.expires_at}: signed in, POST ${client.url}/v1/auth-codes/verify {"code": "${created.code}"}.` +
      `${before === undefined ? '' : ` This bridge is paired already (key ${before.id}); the new key replaces it.`} Waiting…\n`,
  )
  const stopped = io.stopRequested().then(() => 'stopped' as const)
  const expiresAt = Date.parse(created.expires_at)
  let unreachableSaid = false
  for (;;) {
    const outcome = await Promise.race([exchange(client, created.code), stopped])
    if (outcome === 'stopped') {
      io.err('printfarm bridge pair: stopped before the code was confirmed; not paired\n')
      return 1
    }
    if (outcome.kind === 'paired') {
      const { key } = outcome
      const stored = { key: key.key, id: key.id, organization_id: key.organization_id, scopes: key.scopes, url: client.url, paired_at: new Date(io.clock.now()).toISOString() }
      state.saveKey(stored)
      if (o.json) io.out(`${JSON.stringify({ paired: true, key_id: key.id, organization_id: key.organization_id, state_dir: state.path })}\n`)
      else io.out(`paired: key ${key.id} of organization ${key.organization_id}, kept in ${state.path}\n`)
      return 0
    }
    if (outcome.kind === 'final') {
      io.err(`printfarm bridge pair: ${outcome.message}\n`)
      return 1
    }
    if (outcome.kind === 'unreachable') {
      if (io.clock.now() > expiresAt) {
        io.err(`printfarm bridge pair: the service could not be reached until the code expired (${outcome.message}); run printfarm bridge pair again\n`)
        return 1
      }
      if (!unreachableSaid) io.err(`printfarm bridge pair: ${outcome.message}; still trying\n`)
      unreachableSaid = true
    }
    const waitMs = outcome.kind === 'wait' ? outcome.ms : (o.pollMs ?? 2_000)
    await Promise.race([new Promise<void>((resolve) => io.clock.setTimeout(resolve, waitMs)), stopped])
  }
}

type Exchange =
  | { kind: 'paired'; key: { key: string; id: string; organization_id: string; scopes: string[] } }
  | { kind: 'pending' }
  | { kind: 'wait'; ms: number }
  | { kind: 'unreachable'; message: string }
  | { kind: 'final'; message: string }

async function exchange(client: ServiceClient, code: string): Promise<Exchange> {
  try {
    return { kind: 'paired', key: await client.json('GET', `/v1/auth-codes/verify/${encodeURIComponent(code)}`, PairedApiKeySchema) }
  } catch (error) {
    if (error instanceof ServiceUnavailable) return { kind: 'unreachable', message: error.message }
    if (!(error instanceof ServiceRefused)) return { kind: 'final', message: (error as Error).message }
    switch (error.code) {
      case 'auth_code_pending':
        return { kind: 'pending' }
      case 'auth_code_expired':
        return { kind: 'final', message: 'the code expired before an admin confirmed it; run printfarm bridge pair again' }
      case 'auth_code_used':
        return { kind: 'final', message: 'the code was exchanged by someone else; nothing was stored here. Revoke that key (GET /v1/api-keys lists them) and pair again' }
      case 'auth_code_not_found':
        return { kind: 'final', message: 'the service does not know this code any more; run printfarm bridge pair again' }
    }
    if (error.status === 429) return { kind: 'wait', ms: (error.retryAfterSeconds ?? 5) * 1000 }
    return { kind: 'final', message: error.message }
  }
}

function refusal(error: unknown, url: string): string {
  if (error instanceof ServiceUnavailable) return `cannot reach the service at ${url}: ${error.message}`
  if (error instanceof ServiceRefused && error.status === 429) return `the service refuses more pairing codes from this address for now; try again in ${error.retryAfterSeconds ?? 60} s`
  return (error as Error).message
}
