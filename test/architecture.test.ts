/**
 * The layout is the architecture (STYLE practice 1; docs/development.md):
 * src → actors → machines → protocol, pure at the bottom. This test reads the
 * import statements of every module and fails on an import that points the
 * wrong way or brings I/O into a pure layer; and it reads every file of
 * machines/ and protocol/ for the globals that bring time, randomness,
 * timers or I/O in without an import (STYLE practice 2).
 */
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const root = fileURLToPath(new URL('..', import.meta.url))

function sources(dir: string): string[] {
  const full = join(root, dir)
  let entries: string[]
  try {
    entries = readdirSync(full)
  } catch {
    return []
  }
  return entries.flatMap((name) => {
    const path = join(full, name)
    if (statSync(path).isDirectory()) return sources(relative(root, path))
    return name.endsWith('.ts') ? [path] : []
  })
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const found: string[] = []
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g)) found.push(m[1]!)
  for (const m of text.matchAll(/(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g)) found.push(m[1]!)
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]!)
  return found
}

/** The top-level folder a relative import lands in. */
function layerOf(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined
  const target = relative(root, join(file, '..', specifier))
  return target.split(/[\\/]/)[0]
}

const layers = ['protocol', 'machines', 'actors', 'src'] as const
const mayImport: Record<(typeof layers)[number], readonly string[]> = {
  protocol: ['protocol'],
  machines: ['machines', 'protocol'],
  actors: ['actors', 'machines', 'protocol'],
  src: ['src', 'actors', 'machines', 'protocol'],
}
/** Packages a layer may use; anything else (and every node: built-in) is I/O. */
const purePackages: Record<'protocol' | 'machines', readonly string[]> = {
  protocol: ['@sinclair/typebox', 'ajv', 'ajv-formats', 'fast-xml-parser'],
  machines: ['xstate', '@sinclair/typebox'],
}
/** I/O clients only src/ may touch (ioredis joins actors/ with the Redis shard directory). */
const ioPackages = ['uWebSockets.js', 'postgres', 'mqtt', 'aedes', '@electric-sql/pglite', '@electric-sql/pglite-socket', 'ioredis']

for (const layer of layers) {
  t.test(`architecture - ${layer}/ imports only inward`, async (t) => {
    const files = sources(layer)
    let checked = 0
    for (const file of files) {
      for (const specifier of importsOf(file)) {
        checked++
        const target = layerOf(file, specifier)
        const where = `${relative(root, file)} imports '${specifier}'`
        if (target !== undefined) {
          t.ok(mayImport[layer].includes(target), where)
          continue
        }
        if (layer === 'protocol' || layer === 'machines') {
          t.ok(purePackages[layer].some((p) => specifier === p || specifier.startsWith(p + '/')), `${where}: pure layer`)
        } else if (layer === 'actors') {
          t.notOk(ioPackages.includes(specifier) && specifier !== 'ioredis', `${where}: I/O belongs in src/`)
        }
      }
    }
    if (files.length === 0) t.pass(`${layer}/ has no modules yet`)
    else t.ok(checked > 0, `${files.length} files read`)
  })
}

t.test('architecture - the rule itself catches a wrong-way import', async (t) => {
  t.equal(layerOf(join(root, 'protocol', 'x.ts'), '../src/node/service.js'), 'src')
  t.notOk(mayImport.protocol.includes('src'))
  t.ok(importsOf(join(root, 'src', 'node', 'routes.ts')).includes('../routes/system.js'), 'the import reader finds a known import')
})

/**
 * Impure globals, found in the syntax tree rather than the text, so a comment
 * or an error message that names one ("no Date.now() here") is not a use.
 * `new Date(ms)` is a pure conversion and allowed; `new Date()` reads the
 * clock. A pure SHA-256 in protocol/ is fine; `crypto.` (Node's or the web's)
 * is not.
 */
const impureCalls = new Set(['setTimeout', 'setInterval', 'setImmediate', 'require', 'fetch'])
const impureMembers = new Set(['Date.now', 'performance.now', 'Math.random'])
const impureObjects = new Set(['process', 'crypto'])

interface Impurity {
  token: string
  line: number
}

function impuritiesIn(fileName: string, text: string): Impurity[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: Impurity[] = []
  const add = (node: ts.Node, token: string) => found.push({ token, line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1 })
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && impureCalls.has(node.expression.text)) {
      add(node, `${node.expression.text}(`)
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && (node.arguments?.length ?? 0) === 0) {
      add(node, 'new Date(')
    } else if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const object = node.expression.text
      const member = `${object}.${node.name.text}`
      // Date.now as a value (a default clock) reads the clock as surely as a call.
      if (impureMembers.has(member)) add(node, ts.isCallExpression(node.parent) && node.parent.expression === node ? `${member}(` : member)
      else if (impureObjects.has(object)) add(node, `${object}.`)
      else if (object === 'globalThis' && (impureObjects.has(node.name.text) || impureCalls.has(node.name.text))) add(node, member)
    } else if (ts.isElementAccessExpression(node) && ts.isIdentifier(node.expression) && impureObjects.has(node.expression.text)) {
      add(node, `${node.expression.text}[`)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

const pureLayers = ['machines', 'protocol'] as const

for (const layer of pureLayers) {
  t.test(`architecture - every file of ${layer}/ is free of impure globals (time, randomness, timers, I/O)`, async (t) => {
    const scanned = sources(layer)
    // Listed a second way, so a file the walker misses (a new subfolder) fails here instead of going unchecked.
    const present = readdirSync(join(root, layer), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => join(root, layer, name))
    t.ok(present.length > 0, `${layer}/ has .ts files`)
    t.strictSame(
      present.filter((file) => !scanned.includes(file)).map((file) => relative(root, file)),
      [],
      `all ${present.length} .ts files of ${layer}/ and its subfolders are scanned`,
    )
    for (const file of scanned) {
      const name = relative(root, file)
      const found = impuritiesIn(name, readFileSync(file, 'utf8'))
      if (found.length === 0) t.pass(`${name}: no impure global`)
      for (const { token, line } of found) t.fail(`${name}:${line} uses ${token}`)
    }
  })
}

t.test('architecture - the purity scan reaches protocol/ subfolders', async (t) => {
  const scanned = sources('protocol').map((file) => relative(root, file).split(/[\\/]/).slice(0, 2).join('/'))
  t.ok(scanned.includes('protocol/schemas'), 'protocol/schemas is scanned')
  t.ok(scanned.includes('protocol/signal-profile'), 'protocol/signal-profile is scanned')
})

t.test('architecture - the purity scan catches each planted impure global, with its line', async (t) => {
  const planted = [
    'export const a = Date.now()',
    'export const b = new Date()',
    'export const c = performance.now()',
    'setTimeout(() => undefined, 10)',
    'setInterval(() => undefined, 10)',
    'export const f = Math.random()',
    'export const g = process.env.HOME',
    "export const h = require('node:fs')",
    "void fetch('http://example.com')",
    'export const j = crypto.randomUUID()',
    'export const k = globalThis.crypto',
    'export const clock: () => number = Date.now',
    'export const l = new Date',
  ].join('\n')
  t.strictSame(impuritiesIn('planted.ts', planted), [
    { token: 'Date.now(', line: 1 },
    { token: 'new Date(', line: 2 },
    { token: 'performance.now(', line: 3 },
    { token: 'setTimeout(', line: 4 },
    { token: 'setInterval(', line: 5 },
    { token: 'Math.random(', line: 6 },
    { token: 'process.', line: 7 },
    { token: 'require(', line: 8 },
    { token: 'fetch(', line: 9 },
    { token: 'crypto.', line: 10 },
    { token: 'globalThis.crypto', line: 11 },
    { token: 'Date.now', line: 12 },
    { token: 'new Date(', line: 13 },
  ])
  const clean = [
    '// no Date.now() or setTimeout( here: time comes from the injected clock',
    "export const message = 'process.env and crypto.subtle are not read here'",
    'export const at = (ms: number) => new Date(ms).toISOString()',
    'export const wait = (clock: { setTimeout(fn: () => void): void }) => clock.setTimeout(() => undefined)',
  ].join('\n')
  t.strictSame(impuritiesIn('clean.ts', clean), [], 'comments, strings, new Date(ms) and injected timers are not flagged')
})

t.test('architecture - src/ holds only the entry point at its root; everything else lives in the folder of its concern', async (t) => {
  const loose = readdirSync(join(root, 'src')).filter((name) => name.endsWith('.ts'))
  t.strictSame(loose, ['cli.ts'], 'only src/cli.ts (the node is in src/node, HTTP in src/http, simulators in src/simulators)')
})
