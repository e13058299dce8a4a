/**
 * `printfarm display-sim`: one simulated status display on a real broker,
 * printing what it receives and sends (one JSON line each on stdout) until
 * SIGINT. Like a device it outlives the broker: a lost connection is logged
 * on stderr and retried with backoff, and the display announces itself again
 * when it is back. It exits 1 only when the broker refuses its login, and 2
 * on bad arguments.
 */
import { parseArgs } from 'node:util'
import { processIo, type CommandIo } from '../commands/command-io.js'
import { BrokerRefusedLogin, deviceReconnect, DisplaySimulator, FileFenceStore, MemoryFenceStore, type ConnectionEvent } from './display-sim.js'

export const displaySimUsage = `usage: printfarm display-sim --url mqtt://host:port --organization <id> --display <id> --epoch <n>
                            --credential <credentialId> --username <name> --password <secret> [--fence <file>] [--no-capability]
`

/** Where the command writes and what stops it (src/commands/command-io.ts). */
export type DisplaySimIo = CommandIo

const brokerProtocols = ['mqtt:', 'mqtts:', 'tcp:', 'ssl:', 'ws:', 'wss:']

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`

function connectionLine(event: ConnectionEvent, broker: string): string {
  switch (event.type) {
    case 'lost':
      return `connection to ${broker} lost (${event.reason}); reconnecting in ${seconds(event.retryInMs)}`
    case 'retrying':
      return `cannot connect to ${broker} (${event.reason}); next attempt in ${seconds(event.retryInMs)}`
    case 'resumed':
      return `reconnected to ${broker} after ${seconds(event.offlineMs)}; session ${event.sessionGeneration}: capabilities reported, subscribed, announced`
    case 'failed':
      return `${event.reason}; giving up`
  }
}

export async function runDisplaySim(argv: readonly string[], io: DisplaySimIo = processIo): Promise<number> {
  let values
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        url: { type: 'string' },
        organization: { type: 'string' },
        display: { type: 'string' },
        epoch: { type: 'string' },
        credential: { type: 'string' },
        username: { type: 'string' },
        password: { type: 'string' },
        fence: { type: 'string' },
        'no-capability': { type: 'boolean' },
      },
      strict: true,
    }).values
  } catch (error) {
    io.err(`printfarm display-sim: ${(error as Error).message}\n${displaySimUsage}`)
    return 2
  }
  const required = ['url', 'organization', 'display', 'epoch', 'credential', 'username', 'password'] as const
  const missing = required.filter((k) => values[k] === undefined)
  const epoch = Number(values.epoch)
  if (missing.length > 0 || !Number.isInteger(epoch) || epoch < 1) {
    io.err(`printfarm display-sim: ${missing.length > 0 ? `missing --${missing.join(', --')}` : '--epoch must be an integer >= 1'}\n${displaySimUsage}`)
    return 2
  }
  let broker: string
  try {
    const url = new URL(values.url!)
    if (!brokerProtocols.includes(url.protocol)) throw new Error(`the protocol must be one of ${brokerProtocols.join(' ')}`)
    broker = `${url.protocol}//${url.host}`
  } catch (error) {
    io.err(`printfarm display-sim: --url ${values.url} is not a broker URL: ${(error as Error).message}\n${displaySimUsage}`)
    return 2
  }
  const log = (line: string) => io.err(`printfarm display-sim: ${line}\n`)
  const print = (kind: string, body: unknown) => io.out(`${JSON.stringify({ at: new Date(io.clock.now()).toISOString(), kind, body })}\n`)
  let failed: ((reason: string) => void) | undefined
  const failure = new Promise<string>((resolve) => (failed = resolve))
  let sim: DisplaySimulator
  try {
    sim = await DisplaySimulator.connect({
      url: values.url!,
      organizationId: values.organization!,
      displayId: values.display!,
      bindingEpoch: epoch,
      credentialId: values.credential!,
      username: values.username!,
      password: values.password!,
      fenceStore: values.fence === undefined ? new MemoryFenceStore() : new FileFenceStore(values.fence),
      ...(values['no-capability'] === true ? { capability: null } : {}),
      reconnect: deviceReconnect,
      clock: io.clock,
      onConnection: (event) => {
        log(connectionLine(event, broker))
        if (event.type === 'failed') failed?.(event.reason)
      },
    })
  } catch (error) {
    if (!(error instanceof BrokerRefusedLogin)) throw error
    log(`${error.message}; check --username and --password (a rebind replaces the credential)`)
    return 1
  }
  log(`connected to ${broker} as display ${sim.options.displayId}; session ${sim.sessionGeneration}: capabilities reported, subscribed, announced`)
  let seen = { receipts: 0, envelopes: 0, feed: 0 }
  const report = () => {
    for (const r of sim.receipts.slice(seen.receipts)) print('receipt', r)
    for (const e of sim.envelopes.slice(seen.envelopes)) print('envelope', { ...e, data: `${e.data.slice(0, 16)}…` })
    if (sim.feed !== null && sim.feed.sequence !== seen.feed) print('feed', sim.feed)
    seen = { receipts: sim.receipts.length, envelopes: sim.envelopes.length, feed: sim.feed?.sequence ?? 0 }
  }
  report()
  const timer = io.clock.setInterval(report, 200)
  const outcome = await Promise.race([io.stopRequested().then(() => undefined), failure])
  io.clock.clearInterval(timer)
  report()
  await sim.close()
  return outcome === undefined ? 0 : 1
}
