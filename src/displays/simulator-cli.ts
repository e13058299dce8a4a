/**
 * `printfarm display-sim`: one simulated status display on a real broker,
 * printing what it receives and sends (one JSON line each) until SIGINT.
 */
import { parseArgs } from 'node:util'
import { DisplaySimulator, FileFenceStore, MemoryFenceStore } from './simulator.js'

export const displaySimUsage = `usage: printfarm display-sim --url mqtt://host:port --organization <id> --display <id> --epoch <n>
                            --credential <credentialId> --username <name> --password <secret> [--fence <file>] [--no-capability]
`

export async function runDisplaySim(argv: readonly string[]): Promise<number> {
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
    process.stderr.write(`printfarm display-sim: ${(error as Error).message}\n${displaySimUsage}`)
    return 2
  }
  const required = ['url', 'organization', 'display', 'epoch', 'credential', 'username', 'password'] as const
  const missing = required.filter((k) => values[k] === undefined)
  const epoch = Number(values.epoch)
  if (missing.length > 0 || !Number.isInteger(epoch) || epoch < 1) {
    process.stderr.write(`printfarm display-sim: ${missing.length > 0 ? `missing --${missing.join(', --')}` : '--epoch must be an integer >= 1'}\n${displaySimUsage}`)
    return 2
  }
  const print = (kind: string, body: unknown) => process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), kind, body })}\n`)
  const sim = await DisplaySimulator.connect({
    url: values.url!,
    organizationId: values.organization!,
    displayId: values.display!,
    bindingEpoch: epoch,
    credentialId: values.credential!,
    username: values.username!,
    password: values.password!,
    fenceStore: values.fence === undefined ? new MemoryFenceStore() : new FileFenceStore(values.fence),
    ...(values['no-capability'] === true ? { capability: null } : {}),
  })
  let seen = { receipts: 0, envelopes: 0, feed: 0 }
  const report = () => {
    for (const r of sim.receipts.slice(seen.receipts)) print('receipt', r)
    for (const e of sim.envelopes.slice(seen.envelopes)) print('envelope', { ...e, data: `${e.data.slice(0, 16)}…` })
    if (sim.feed !== null && sim.feed.sequence !== seen.feed) print('feed', sim.feed)
    seen = { receipts: sim.receipts.length, envelopes: sim.envelopes.length, feed: sim.feed?.sequence ?? 0 }
  }
  report()
  const timer = setInterval(report, 200)
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
    sim.client.once('close', resolve)
  })
  clearInterval(timer)
  report()
  await sim.close()
  return 0
}
