/**
 * `npm start` runs the built service without recompiling when the build is
 * current: the second start of a fresh clone costs no compile.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))
const ensureBuild = fileURLToPath(new URL('../../scripts/ensure-build.mjs', import.meta.url))

t.test('npm start - a build that is current is not compiled again', async (t) => {
  // The first run builds only if a source changed since the last build (a developer's tree).
  const first = spawnSync(process.execPath, [ensureBuild], { cwd: root, encoding: 'utf8', timeout: 170_000 })
  t.equal(first.status, 0, first.stderr)
  const second = spawnSync(process.execPath, [ensureBuild], { cwd: root, encoding: 'utf8', timeout: 30_000 })
  t.equal(second.status, 0)
  t.equal(second.stderr, '', 'nothing built, nothing said')
})

t.test('npm start - package.json starts the built service through the build check, with a young generation sized for requests in flight', async (t) => {
  const { createRequire } = await import('node:module')
  const pkg = createRequire(import.meta.url)('../../package.json') as { scripts: Record<string, string> }
  t.equal(pkg.scripts['start'], 'node scripts/ensure-build.mjs && node --max-semi-space-size=64 dist/src/cli.js serve')
  t.equal(pkg.scripts['prepare'], 'node scripts/ensure-build.mjs --if-possible && node scripts/prepare-tests.mjs', 'npm install / npm ci build once, and build tap with its configured plugins')
})
