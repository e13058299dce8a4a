/**
 * `printfarm bridge`: the program that runs next to a farm's printers (docs/bridge.md). Settings
 * come from flags or the environment (BRIDGE_URL, BRIDGE_STATE_DIR, BRIDGE_HOST_ID) and are checked
 * before anything is done. Exit codes: 0 done, 1 the command could not do its work (the message
 * says why), 2 bad usage.
 */
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { processIo, type CommandIo } from '../commands/command-io.js'
import { pair } from './pair.js'
import { ServiceClient } from './service-client.js'
import { BridgeStateDir } from './state-dir.js'

export const bridgeUsage = `usage: printfarm bridge <command> [options]

commands:
  pair     get a pairing code from the service, show it, and wait until an admin confirms it
           (the key is kept in the state folder, readable by its owner only)
  status   what this bridge is: its host id, the service and key it is paired with

options:
  --url URL          the service (BRIDGE_URL); pair needs it, later commands read it from the pairing
  --state-dir DIR    where the bridge keeps its key and state (BRIDGE_STATE_DIR;
                     default $XDG_STATE_HOME/printfarm-bridge or ~/.local/state/printfarm-bridge)
  --host-id ID       this bridge's host id (BRIDGE_HOST_ID; default: made once from the machine's name)
  --json             one JSON line per result instead of sentences
`

export interface BridgeSettings {
  url: string | undefined
  stateDir: string
  hostId: string | undefined
  json: boolean
}

/** The settings from flags over environment over defaults, or the problems with them. */
export function readBridgeSettings(argv: readonly string[], env: NodeJS.ProcessEnv): { command: string; settings: BridgeSettings } | { problems: string[] } {
  let parsed
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { url: { type: 'string' }, 'state-dir': { type: 'string' }, 'host-id': { type: 'string' }, json: { type: 'boolean' } },
      allowPositionals: true,
      strict: true,
    })
  } catch (error) {
    return { problems: [(error as Error).message] }
  }
  const { values, positionals } = parsed
  const problems: string[] = []
  const command = positionals[0]
  if (command === undefined) problems.push('name a command')
  else if (command !== 'pair' && command !== 'status') problems.push(`unknown command '${command}'`)
  if (positionals.length > 1) problems.push(`unexpected argument '${positionals[1]}'`)
  const url = values.url ?? nonEmpty(env['BRIDGE_URL'])
  if (url !== undefined && !isHttpUrl(url)) problems.push(`--url (BRIDGE_URL) must be an http:// or https:// URL of the service, not '${url}'`)
  const hostId = values['host-id'] ?? nonEmpty(env['BRIDGE_HOST_ID'])
  if (hostId !== undefined && (hostId.length > 200 || !/^[\w.:-]+$/.test(hostId))) problems.push('--host-id (BRIDGE_HOST_ID) is 1 to 200 letters, digits, and . _ : -')
  const stateDir = resolve(values['state-dir'] ?? nonEmpty(env['BRIDGE_STATE_DIR']) ?? join(nonEmpty(env['XDG_STATE_HOME']) ?? join(homedir(), '.local', 'state'), 'printfarm-bridge'))
  if (problems.length > 0) return { problems }
  return { command: command!, settings: { url, stateDir, hostId, json: values.json === true } }
}

export async function runBridge(argv: readonly string[], io: CommandIo = processIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const read = readBridgeSettings(argv, env)
  if ('problems' in read) {
    io.err(`printfarm bridge: ${read.problems.join('; ')}\n\n${bridgeUsage}`)
    return 2
  }
  const { command, settings } = read
  const state = new BridgeStateDir(settings.stateDir)
  try {
    if (command === 'pair') {
      if (settings.url === undefined) {
        io.err(`printfarm bridge: pair needs the service's URL (--url or BRIDGE_URL)\n\n${bridgeUsage}`)
        return 2
      }
      state.ensure()
      return await pair({ client: new ServiceClient({ url: settings.url, timers: io.clock }), state, io, json: settings.json })
    }
    return status(state, settings, io)
  } catch (error) {
    io.err(`printfarm bridge ${command}: ${(error as Error).message}\n`)
    return 1
  }
}

/** What the bridge is paired with; 1 when it is not paired yet. */
function status(state: BridgeStateDir, settings: BridgeSettings, io: CommandIo): number {
  const key = state.key()
  if (key === undefined) {
    io.err(`printfarm bridge status: not paired (no key in ${state.path}); run printfarm bridge pair --url URL\n`)
    return 1
  }
  const hostId = state.hostId(settings.hostId)
  const fields = { state_dir: state.path, host_id: hostId, url: key.url, key_id: key.id, organization_id: key.organization_id, paired_at: key.paired_at, scopes: key.scopes }
  if (settings.json) io.out(`${JSON.stringify(fields)}\n`)
  else {
    io.out(`host ${hostId}, paired with ${key.url} on ${key.paired_at}\n`)
    io.out(`key ${key.id} of organization ${key.organization_id} (${key.scopes.join(' ')}), kept in ${state.path}\n`)
  }
  return 0
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.search === '' && url.hash === ''
  } catch {
    return false
  }
}
