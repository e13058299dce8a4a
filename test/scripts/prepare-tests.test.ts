/**
 * Tests run under tsx alone: `npm install` builds tap with the plugins package.json names
 * (scripts/prepare-tests.mjs), so even the first run of a fresh clone does not load tap's default
 * ts-node loader on top of tsx in every test process and child service (it doubled CI's time).
 */
import t from 'tap'

t.test('test processes - tsx is the only TypeScript loader in this process\'s arguments', async (t) => {
  const loaders = process.execArgv.filter((arg) => /@tapjs[\\/]typescript|ts-node|tsimp/.test(arg))
  t.same(loaders, [], `execArgv: ${process.execArgv.join(' ')}`)
  t.ok(process.execArgv.some((arg) => arg.includes('tsx')), 'tsx is loaded')
})
