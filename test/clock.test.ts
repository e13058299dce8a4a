/**
 * One clock (docs/development.md, "Time"): a node's time comes from the Clock it is started with
 * (actors/clock.ts), so a test can set it and expiries are tested without waiting. This test reads
 * every module of src/ for the ways in around it: `Date.now()`, `new Date()`, the global
 * `setTimeout`/`setInterval`, and SQL's `now()` (schema defaults in migrations aside: a row's creation
 * stamp decides nothing).
 *
 * The modules below still read the wall clock; the list may only shrink. A module that stops reading
 * it must leave the list (the second test says so), and no other module may start.
 */
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const root = fileURLToPath(new URL('..', import.meta.url))

const stillOnTheWallClock = new Set([
  'src/async/deadline.ts',
  'src/auth/accounts.ts',
  'src/cluster/forwarder.ts',
  'src/cluster/redis-shard-directory.ts',
  'src/displays/broker-credentials.ts',
  'src/displays/mqtt-gateway.ts',
  'src/files/s3-file-store.ts',
  'src/http/dispatch.ts',
  'src/mqtt/dynamic-security.ts',
  'src/observability/log.ts',
  'src/observability/metrics.ts',
  'src/printers/event-store.ts',
  'src/printers/reachability.ts',
  'src/simulators/bridge-sim.ts',
  'src/simulators/display-sim-cli.ts',
  'src/simulators/display-sim-connection.ts',
  'src/simulators/display-sim.ts',
  'src/storage/migrate.ts',
  'src/storage/pg-socket.ts',
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

const wallClock = /Date\.now\(\)|new Date\(\)|(?<![.\w#])(setTimeout|setInterval)\(/

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
  return wallClock.test(code(file)) || templateTexts(file).some((text) => /(?<![.\w])now\(\)/.test(text))
}

const modules = sources('src').map((file) => relative(root, join(root, file)).split('\\').join('/'))

t.test('one clock - no module of src/ outside the list reads the wall clock', async (t) => {
  const reading = modules.filter(readsWallClock)
  t.same(reading.filter((file) => !stillOnTheWallClock.has(file)), [], 'take the time from the node\'s Clock (a `now` given to the module), not from the wall')
})

t.test('one clock - every module on the list still reads it (one that stopped leaves the list)', async (t) => {
  t.same([...stillOnTheWallClock].filter((file) => !modules.includes(file) || !readsWallClock(file)), [])
})
