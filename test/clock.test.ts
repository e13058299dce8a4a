/**
 * One clock (docs/development.md, "Time"): a node's time comes from the Clock it is started with
 * (actors/clock.ts), so a test can set it and expiries are tested without waiting. This test reads
 * every module of src/ for the ways in around it: `Date.now()`, `new Date()`, the global
 * `setTimeout`/`setInterval`, and SQL's `now()` (a column's `default now()` aside: a row's creation
 * stamp decides nothing), and `AbortSignal.timeout`. No module reads the wall clock; only the
 * programs' entry points choose the system clock (`systemClock`) and hand it down.
 * `performance.now()` is not the time of day: it measures durations (metrics, and the shard leases,
 * which Redis counts in real time, src/cluster/redis-shard-directory.ts).
 */
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const root = fileURLToPath(new URL('..', import.meta.url))

/** Where a program starts, and so where its clock is chosen: everything below is given it. */
const choosesTheSystemClock = new Set([
  // A node: startService's clock unless the caller gives one (tests give theirs).
  'src/node/service.ts',
  // The commands that run without a node: migrate, admin, mosquitto-setup.
  'src/cli.ts',
  'src/auth/admin-cli.ts',
  'src/mqtt/setup-cli.ts',
  // A long-running command's process (the bridge, the simulators): its streams, signals and clock (a test passes its own).
  'src/commands/command-io.ts',
])

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(join(root, path)).isDirectory()) return path.endsWith('migrations') ? [] : sources(path)
    return name.endsWith('.ts') ? [path] : []
  })
}

/** The code of a module without its comments (a comment may name what it does not do). */
function code(file: string): string {
  return readFileSync(join(root, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:'"`])\/\/.*$/gm, '$1')
}

const wallClock = /Date\.now\(\)|new Date\(\)|(?<![.\w#])(setTimeout|setInterval)\(|AbortSignal\.timeout\(/

/** The literal text of every template (where the queries are): SQL's now() is looked for there, not in code, where `now()` calls a clock given to it. */
function templateTexts(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true)
  const texts: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isNoSubstitutionTemplateLiteral(node)) texts.push(node.text)
    else if (ts.isTemplateExpression(node)) texts.push(node.head.text, ...node.templateSpans.map((span) => span.literal.text))
    ts.forEachChild(node, visit)
  }
  visit(source)
  return texts
}

function readsWallClock(file: string): boolean {
  return wallClock.test(code(file)) || templateTexts(file).some((text) => /(?<![.\w])(?<!default )now\(\)/.test(text))
}

const modules = sources('src').map((file) => relative(root, join(root, file)).split('\\').join('/'))

t.test('one clock - no module of src/ reads the wall clock', async (t) => {
  t.same(modules.filter(readsWallClock), [], "take the time from the node's Clock (a `clock` or `now` given to the module), not from the wall")
})

t.test('one clock - only an entry point chooses the system clock', async (t) => {
  const choosing = modules.filter((file) => /\bsystemClock\b/.test(code(file)))
  t.same(choosing.filter((file) => !choosesTheSystemClock.has(file)), [], 'take the clock as a parameter; the program that starts chooses it')
  t.same([...choosesTheSystemClock].filter((file) => !choosing.includes(file)), [], 'an entry point that no longer chooses the clock leaves the list')
})

t.test('one clock - the check sees each way in', async (t) => {
  const reads = (text: string) => wallClock.test(text)
  t.ok(reads('const at = Date.now()'))
  t.ok(reads('stamp(new Date())'))
  t.ok(reads('setTimeout(fn, 10)'))
  t.notOk(reads('this.#clock.setTimeout(fn, 10)'))
  t.ok(reads('signal: AbortSignal.timeout(5_000)'))
  t.notOk(reads('new Date(now())'))
})
