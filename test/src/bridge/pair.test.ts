/**
 * `printfarm bridge pair` and `status` against a running service, as an operator runs them: the
 * code shown, an admin confirming it, the key kept owner-only, the host id kept, and each way a
 * pairing cannot finish said in words.
 */
import t from 'tap'
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runBridge } from '../../../src/bridge/cli.js'
import { systemClock } from '../../../actors/clock.js'
import type { CommandIo } from '../../../src/commands/command-io.js'
import { ForwardClock } from '../../helpers/clock.js'
import { request, signIn } from '../../helpers/http.js'
import { waitFor } from '../../helpers/poll.js'
import { startTestService, tempDir, testAdmin } from '../../helpers/service.js'
import { spawnCli } from '../../helpers/child-service.js'

const clock = new ForwardClock()
const svc = await startTestService(t, {}, { clock })
const admin = await signIn(svc.url, testAdmin.email, testAdmin.password)

/** A command's io: what it printed, and a stop the test may ask for. */
function commandIo() {
  const out: string[] = []
  const err: string[] = []
  let stop!: () => void
  const stopped = new Promise<void>((resolve) => (stop = resolve))
  const io: CommandIo = { out: (s) => void out.push(s), err: (s) => void err.push(s), stopRequested: () => stopped, clock: systemClock }
  return { io, stop, out: () => out.join(''), err: () => err.join('') }
}

const codeIn = (text: string) => /pairing code: (\S+)/.exec(text)?.[1]

t.test('bridge pair - shows a code, waits for an admin to confirm it, and keeps a working key readable by its owner only', async (t) => {
  const stateDir = join(tempDir(t), 'state')
  const run = commandIo()
  const exited = runBridge(['pair', '--url', svc.url, '--state-dir', stateDir], run.io, {})
  await waitFor(() => codeIn(run.out()) !== undefined, 'the code to be shown', 10_000)
  const code = codeIn(run.out())!
  t.match(code, /^[0-9A-Z]{5}-[0-9A-Z]{5}$/)
  t.match(run.err(), /An admin of the organization confirms it/)
  const verified = await request(svc.url, '/v1/auth-codes/verify', { method: 'POST', headers: admin.auth, body: { code } })
  t.equal(verified.status, 200, verified.text)
  t.equal(await exited, 0, run.err())
  t.match(run.out(), /paired: key [0-9a-f-]{36} of organization [0-9a-f-]{36}, kept in /)

  t.equal(statSync(stateDir).mode & 0o777, 0o700, 'the state folder is the bridge user\'s alone')
  t.equal(statSync(join(stateDir, 'key.json')).mode & 0o777, 0o600, 'the key is readable by its owner only')
  const status = commandIo()
  t.equal(await runBridge(['status', '--state-dir', stateDir, '--json'], status.io, {}), 0, status.err())
  const fields = JSON.parse(status.out()) as { host_id: string; url: string; key_id: string; scopes: string[] }
  t.equal(fields.url, svc.url, 'the service is remembered: later commands need no --url')
  t.ok(fields.scopes.includes('print:launch'), 'a bridge key')
  const again = commandIo()
  await runBridge(['status', '--state-dir', stateDir, '--json'], again.io, {})
  t.equal((JSON.parse(again.out()) as { host_id: string }).host_id, fields.host_id, 'the host id is made once and kept')

  const key = (JSON.parse(readFileSync(join(stateDir, 'key.json'), 'utf8')) as { key: string }).key
  const printers = await request(svc.url, '/v1/printer-config', { headers: { 'x-api-key': key } })
  t.equal(printers.status, 200, `the kept key works: ${printers.text}`)
})

t.test('bridge pair - --json prints the code and the outcome as JSON lines', async (t) => {
  const stateDir = tempDir(t)
  const run = commandIo()
  const exited = runBridge(['pair', '--json'], run.io, { BRIDGE_URL: svc.url, BRIDGE_STATE_DIR: stateDir })
  await waitFor(() => run.out().includes('\n'), 'the first line', 10_000)
  const first = JSON.parse(run.out().split('\n')[0]!) as { code: string; expires_at: string }
  t.match(first, { code: /^[0-9A-Z]{5}-[0-9A-Z]{5}$/, expires_at: /^\d{4}-/ })
  await request(svc.url, '/v1/auth-codes/verify', { method: 'POST', headers: admin.auth, body: { code: first.code } })
  t.equal(await exited, 0)
  t.match(JSON.parse(run.out().split('\n')[1]!), { paired: true, state_dir: stateDir })
})

t.test('bridge pair - a code nobody confirms in time: exit 1, says to pair again, keeps no key', async (t) => {
  const stateDir = tempDir(t)
  const run = commandIo()
  const exited = runBridge(['pair', '--url', svc.url, '--state-dir', stateDir], run.io, {})
  await waitFor(() => codeIn(run.out()) !== undefined, 'the code to be shown', 10_000)
  // The service's clock passes the code's ten minutes.
  clock.forward(11 * 60_000)
  t.equal(await exited, 1)
  t.match(run.err(), /the code expired before an admin confirmed it; run printfarm bridge pair again/)
  const status = commandIo()
  t.equal(await runBridge(['status', '--state-dir', stateDir], status.io, {}), 1)
  t.match(status.err(), /not paired .*run printfarm bridge pair --url URL/)
})

t.test('bridge pair - stopped while waiting: exit 1, not paired', async (t) => {
  const run = commandIo()
  const exited = runBridge(['pair', '--url', svc.url, '--state-dir', tempDir(t)], run.io, {})
  await waitFor(() => codeIn(run.out()) !== undefined, 'the code to be shown', 10_000)
  run.stop()
  t.equal(await exited, 1)
  t.match(run.err(), /stopped before the code was confirmed; not paired/)
})

t.test('bridge pair - a service that does not answer, and bad usage, say what to fix', async (t) => {
  const { freePort } = await import('../../helpers/child-service.js')
  const down = commandIo()
  t.equal(await runBridge(['pair', '--url', `http://127.0.0.1:${await freePort()}`, '--state-dir', tempDir(t)], down.io, {}), 1)
  t.match(down.err(), /cannot reach the service at http:\/\/127\.0\.0\.1:\d+: .*connection refused/)

  const usage = async (argv: string[], env: NodeJS.ProcessEnv, message: RegExp) => {
    const run = commandIo()
    t.equal(await runBridge(argv, run.io, env), 2, argv.join(' '))
    t.match(run.err(), message)
    t.match(run.err(), /usage: printfarm bridge/)
  }
  await usage([], {}, /name a command/)
  await usage(['fly'], {}, /unknown command 'fly'/)
  await usage(['pair'], {}, /pair needs the service's URL \(--url or BRIDGE_URL\)/)
  await usage(['pair', '--url', 'ftp://farm'], {}, /--url \(BRIDGE_URL\) must be an http:\/\/ or https:\/\/ URL/)
  await usage(['status', '--host-id', 'a b'], {}, /--host-id \(BRIDGE_HOST_ID\) is 1 to 200/)
  await usage(['status', '--nope'], {}, /Unknown option '--nope'/)
})

t.test('bridge pair - as a process: it keeps running while it waits for the admin, then exits 0 paired', async (t) => {
  const stateDir = tempDir(t)
  const child = spawnCli(t, ['bridge', 'pair', '--url', svc.url, '--state-dir', stateDir], {})
  await waitFor(() => codeIn(child.stdout()) !== undefined, 'the code to be shown', 30_000)
  // Two polls later it is still waiting, not ended by an empty event loop.
  await new Promise((resolve) => setTimeout(resolve, 4_500))
  t.equal(child.exitCode(), null, `still running: ${child.stdout()}${child.stderr()}`)
  const verified = await request(svc.url, '/v1/auth-codes/verify', { method: 'POST', headers: admin.auth, body: { code: codeIn(child.stdout())! } })
  t.equal(verified.status, 200, verified.text)
  t.same(await child.exited, { code: 0, signal: null }, child.stderr())
  t.match(child.stdout(), /paired: key /)
})

t.test('bridge pair - a damaged key file does not stop pairing again: the new key replaces it', async (t) => {
  const stateDir = tempDir(t)
  writeFileSync(join(stateDir, 'key.json'), '{"key": "half')
  const broken = commandIo()
  t.equal(await runBridge(['status', '--state-dir', stateDir], broken.io, {}), 1)
  t.match(broken.err(), /key\.json is not JSON: pair again \(printfarm bridge pair\)/)
  const run = commandIo()
  const exited = runBridge(['pair', '--url', svc.url, '--state-dir', stateDir], run.io, {})
  await waitFor(() => codeIn(run.out()) !== undefined, 'the code to be shown', 10_000)
  t.match(run.err(), /the new key replaces it/)
  await request(svc.url, '/v1/auth-codes/verify', { method: 'POST', headers: admin.auth, body: { code: codeIn(run.out())! } })
  t.equal(await exited, 0, run.err())
  const status = commandIo()
  t.equal(await runBridge(['status', '--state-dir', stateDir], status.io, {}), 0, status.err())
})
