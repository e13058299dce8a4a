/**
 * The embedded run's subset is chosen in one place (test/embedded-subset.json):
 * every entry names test files that exist and says why it is left out, and
 * tap, given the same exclusion scripts/test-embedded.mjs builds, lists none
 * of them while keeping every other test file; and every route group still
 * runs there at least once.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { allRoutes } from '../../src/node/routes.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const { leftOut } = JSON.parse(readFileSync(join(root, 'test', 'embedded-subset.json'), 'utf8')) as { leftOut: { path: string; why: string }[] }

t.test('embedded subset - every entry exists and says why', async (t) => {
  for (const entry of leftOut) {
    const plain = entry.path.replace(/\/\*\*$/, '')
    t.ok(existsSync(join(root, plain)), `${entry.path} exists`)
    t.ok(entry.why.length > 10, `${entry.path} says why`)
  }
})

t.test('embedded subset - tap lists every test file but those, and none of those', async (t) => {
  const all = readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.test.ts')).map((f) => `test/${f}`)
  const exclude = `{${leftOut.map((e) => e.path).join(',')}}`
  const listed = execFileSync(process.execPath, [join(root, 'node_modules', '.bin', 'tap'), 'list', `--exclude=${exclude}`], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.endsWith('.test.ts'))
  const left = (file: string) => leftOut.some((e) => (e.path.endsWith('/**') ? file.startsWith(e.path.slice(0, -2)) : file === e.path))
  t.same(listed.filter(left), [], 'nothing left out is listed')
  t.same(all.filter((f) => !left(f)).sort(), [...listed].sort(), 'everything else is')
})

t.test('embedded subset - every route group (OpenAPI tag) is called by a test file the embedded run keeps', async (t) => {
  const left = (file: string) => leftOut.some((e) => (e.path.endsWith('/**') ? file.startsWith(e.path.slice(0, -2)) : file === e.path))
  const kept = readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `test/${f}`)
    .filter((f) => !left(f))
  const text = kept.map((f) => readFileSync(join(root, f), 'utf8')).join('\n')
  const groups = new Map<string, string[]>()
  for (const route of allRoutes()) for (const tag of route.tags ?? []) groups.set(tag, [...(groups.get(tag) ?? []), route.path])
  // A path is named by its fixed part (up to its first parameter).
  const missing = [...groups].filter(([, paths]) => !paths.some((path) => text.includes(path.split('{')[0]!.replace(/\/$/, '')))).map(([tag]) => tag)
  t.same(missing, [], 'a group none of whose paths an embedded test file names')
})
