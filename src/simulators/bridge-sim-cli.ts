/**
 * `printfarm bridge-sim`: the reference bridge (src/simulators/bridge-sim.ts) for
 * one host, against a running service, until SIGINT or SIGTERM. Each thing
 * it does is one JSON line on stdout; problems go to stderr. Exit 0 when
 * stopped, 1 when the service refuses it at the start (a bad key, a key
 * without printers:read), 2 on bad arguments.
 */
import { parseArgs } from 'node:util'
import { processIo, type CommandIo } from '../commands/command-io.js'
import { BridgeSimulator, Refused } from './bridge-sim.js'

export const bridgeSimUsage = `usage: printfarm bridge-sim --url http://host:port --key <api key> --host <hostId>
                           [--print-ms 2000] [--progress-steps 2] [--poll-ms 1000] [--heartbeat-ms 20000]
The key needs printers:read, printers:write, files:read and print:launch (a paired bridge's key has them).
`

/** Where the command writes and what stops it (src/commands/command-io.ts). */
export type BridgeSimIo = CommandIo

export async function runBridgeSim(argv: readonly string[], io: BridgeSimIo = processIo): Promise<number> {
  let values
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        url: { type: 'string' },
        key: { type: 'string' },
        host: { type: 'string' },
        'print-ms': { type: 'string' },
        'progress-steps': { type: 'string' },
        'poll-ms': { type: 'string' },
        'heartbeat-ms': { type: 'string' },
      },
      strict: true,
    }).values
  } catch (error) {
    io.err(`printfarm bridge-sim: ${(error as Error).message}\n${bridgeSimUsage}`)
    return 2
  }
  const problems: string[] = []
  if (values.url === undefined || !/^https?:\/\//.test(values.url)) problems.push('--url must be an http(s) URL of the service')
  if (values.key === undefined || values.key === '') problems.push('--key is required')
  if (values.host === undefined || values.host === '' || values.host.length > 200) problems.push('--host is required (1-200 characters)')
  const number = (name: 'print-ms' | 'progress-steps' | 'poll-ms' | 'heartbeat-ms', min: number, max: number): number | undefined => {
    const raw = values[name]
    if (raw === undefined) return undefined
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min || n > max) problems.push(`--${name} must be an integer from ${min} to ${max}`)
    return n
  }
  const printMs = number('print-ms', 0, 86_400_000)
  const progressSteps = number('progress-steps', 0, 1_000)
  const pollMs = number('poll-ms', 50, 3_600_000)
  const heartbeatMs = number('heartbeat-ms', 1_000, 3_600_000)
  if (problems.length > 0) {
    io.err(`printfarm bridge-sim: ${problems.join('; ')}\n${bridgeSimUsage}`)
    return 2
  }
  const sim = new BridgeSimulator({
    url: values.url!,
    apiKey: values.key!,
    hostId: values.host!,
    ...(printMs === undefined ? {} : { printMs }),
    ...(progressSteps === undefined ? {} : { progressSteps }),
    ...(pollMs === undefined ? {} : { pollMs }),
    ...(heartbeatMs === undefined ? {} : { heartbeatMs }),
    onLog: (entry) => io.out(JSON.stringify(entry) + '\n'),
    clock: io.clock,
  })
  try {
    await sim.start()
  } catch (error) {
    if (error instanceof Refused) {
      io.err(`printfarm bridge-sim: the service refused the bridge (${error.message}): check the key and its scopes\n`)
      return 1
    }
    throw error
  }
  if (sim.printerIds.length === 0) io.err(`printfarm bridge-sim: no printer is assigned to host ${values.host}; waiting for tasks anyway\n`)
  await io.stopRequested()
  await sim.stop()
  return 0
}
