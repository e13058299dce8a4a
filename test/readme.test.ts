/**
 * The README and docs/ stay true to the code: the generated tables are what
 * the code renders, the configuration and command tables list exactly what
 * the code reads and runs, relative links lead somewhere, and no user-facing
 * text sends a reader to documents the repository does not have.
 *
 * `UPDATE_DOCS=1 npx tap test/readme.test.ts` rewrites the two generated
 * blocks (the access table in README.md, the error table in docs/errors.md)
 * before checking them.
 */
import t from 'tap'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { errorCodes, type ErrorCodeInfo } from '../protocol/errors.js'
import { configVariables } from '../src/node/config.js'
import { buildOpenApiDocument } from '../src/http/openapi.js'
import { renderRouteTable } from '../src/http/route-table.js'
import { allRoutes } from '../src/node/service.js'
import { apiVersion } from '../src/node/version.js'

const root = fileURLToPath(new URL('..', import.meta.url))
const readmePath = join(root, 'README.md')
const docsDir = join(root, 'docs')
const errorsPath = join(docsDir, 'errors.md')

/** Replaces what lies between `<!-- name:start -->` and `<!-- name:end -->`. */
function replaceBlock(text: string, name: string, content: string): string {
  const pattern = new RegExp(`(<!-- ${name}:start -->\\n)[\\s\\S]*?(<!-- ${name}:end -->)`)
  return text.replace(pattern, (_all, start: string, end: string) => `${start}${content}\n${end}`)
}

function block(text: string, name: string): string | undefined {
  const match = new RegExp(`<!-- ${name}:start -->\\n([\\s\\S]*?)\\n?<!-- ${name}:end -->`).exec(text)
  return match?.[1]
}

/** The error table of docs/errors.md, rendered from the registry. */
function renderErrorTable(): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|')
  const rows = Object.entries(errorCodes).map(([code, info]) => {
    const retry = (info as ErrorCodeInfo).retryable === true ? 'yes, after `Retry-After`' : 'no'
    return `| \`${code}\` | ${info.status} | ${retry} | ${cell(info.description)} |`
  })
  return ['| error | HTTP | retry the same request | meaning |', '|---|---|---|---|', ...rows].join('\n')
}

if (process.env['UPDATE_DOCS'] === '1') {
  writeFileSync(readmePath, replaceBlock(readFileSync(readmePath, 'utf8'), 'routes', renderRouteTable(allRoutes())))
  writeFileSync(errorsPath, replaceBlock(readFileSync(errorsPath, 'utf8'), 'errors', renderErrorTable()))
}

const readme = readFileSync(readmePath, 'utf8')
const docFiles = readdirSync(docsDir)
  .filter((name) => name.endsWith('.md'))
  .map((name) => join(docsDir, name))
const userFacing = [readmePath, ...docFiles]

/** The text of a `## title` section, up to the next `## ` heading. */
function section(text: string, title: string): string {
  const start = text.indexOf(`\n## ${title}\n`)
  if (start < 0) return ''
  const end = text.indexOf('\n## ', start + 1)
  return text.slice(start, end < 0 ? undefined : end)
}

t.test('readme - the access table equals `printfarm routes`', async (t) => {
  const routes = block(readme, 'routes')
  t.ok(routes, 'the README has the routes block')
  t.equal(routes, renderRouteTable(allRoutes()), 'regenerate with: UPDATE_DOCS=1 npx tap test/readme.test.ts')
})

t.test('readme - the quick start is the one CI runs: npm install && npm start, then npm test', async (t) => {
  t.match(readme, /npm install && npm start/)
  t.match(readme, /\nnpm test\n/)
})

t.test('readme - the configuration table lists exactly the variables the service reads', async (t) => {
  const table = section(readme, 'Configuration')
  t.ok(table, 'the README has a Configuration section')
  const documented = [...table.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]!)
  t.same([...new Set(documented)].length, documented.length, 'no variable is listed twice')
  const read = new Set<string>(configVariables)
  for (const name of configVariables) t.ok(documented.includes(name), `${name} is in the configuration table`)
  for (const name of documented) t.ok(read.has(name), `${name} in the table is a variable the service reads (src/node/config.ts configVariables)`)
})

/** A command's name: its leading lower-case words (`admin reset-password EMAIL` → `admin reset-password`). */
function commandName(signature: string): string {
  const words: string[] = []
  for (const word of signature.trim().split(/\s+/)) {
    if (!/^[a-z][a-z-]*$/.test(word)) break
    words.push(word)
  }
  return words.join(' ')
}

t.test('readme - the command-line table and the CLI usage text name the same commands', async (t) => {
  const cli = readFileSync(join(root, 'src', 'cli.ts'), 'utf8')
  const usage = /const usage = `([\s\S]*?)`/.exec(cli)?.[1]
  t.ok(usage, 'src/cli.ts has its usage text')
  const commandLines = (usage ?? '').split('commands:\n')[1]?.split('\n').filter((line) => /^ {2}\S/.test(line)) ?? []
  const inCli = commandLines.map((line) => commandName(line.split(/\s{2,}/)[1] ?? ''))
  t.ok(inCli.length > 0, 'the usage text lists commands')

  const table = section(readme, 'Command line')
  t.ok(table, 'the README has a Command line section')
  const inReadme = [...table.matchAll(/^\| `printfarm ([^`]+)` \|/gm)].map((m) => commandName(m[1]!))
  for (const name of inCli) t.ok(inReadme.includes(name), `\`printfarm ${name}\` (CLI usage) is in the README's command table`)
  for (const name of inReadme) t.ok(inCli.includes(name), `\`printfarm ${name}\` (README) is in the CLI usage text`)
})

t.test('docs - the error table equals the registry in protocol/errors.ts', async (t) => {
  const text = readFileSync(errorsPath, 'utf8')
  const table = block(text, 'errors')
  t.ok(table, 'docs/errors.md has the errors block')
  t.equal(table, renderErrorTable(), 'regenerate with: UPDATE_DOCS=1 npx tap test/readme.test.ts')
})

t.test('docs - the interface version is the one /openapi.json reports', async (t) => {
  t.match(readme, `\`${apiVersion}\``, 'README names the interface version')
  t.match(readFileSync(join(docsDir, 'README.md'), 'utf8'), `\`${apiVersion}\``, 'docs/README.md names the interface version')
})

/**
 * References to documents and trackers a user of the repository does not
 * have: the interface specification and design notes kept beside it, and
 * issue numbers.
 */
const privateReferences: readonly [RegExp, string][] = [
  [/\bSPEC\b/, 'SPEC'],
  [/\bDESIGN\b/, 'DESIGN'],
  [/\bthe spec(ification)?\b/i, '"the spec"'],
  [/\bissues?\s+#?\d+/i, 'an issue number'],
]

function privateReferencesIn(text: string): string[] {
  const found: string[] = []
  for (const [pattern, what] of privateReferences) {
    const match = pattern.exec(text)
    if (match) found.push(`${what}: "…${text.slice(Math.max(0, match.index - 40), match.index + 40).replace(/\s+/g, ' ')}…"`)
  }
  return found
}

t.test('docs - README, docs/ and the OpenAPI document do not refer to documents users do not have', async (t) => {
  for (const file of userFacing) {
    t.same(privateReferencesIn(readFileSync(file, 'utf8')), [], relative(root, file))
  }
  const openApi = JSON.stringify(buildOpenApiDocument(allRoutes(), { publicBaseUrl: 'http://localhost' }))
  t.same(privateReferencesIn(openApi), [], 'the OpenAPI document (descriptions, summaries, x-auth reasons)')
})

/** The .ts files of the repository's code and tests (not node_modules, not the build). */
function codeFiles(): string[] {
  const out: string[] = []
  for (const top of ['src', 'protocol', 'machines', 'actors', 'bench', 'test']) {
    for (const entry of readdirSync(join(root, top), { recursive: true, encoding: 'utf8' })) {
      if (entry.endsWith('.ts')) out.push(join(root, top, entry))
    }
  }
  return out
}

t.test('code - comments and test titles cite docs/, RFCs or rule ids, never documents users do not have', async (t) => {
  const self = fileURLToPath(import.meta.url)
  const offending: string[] = []
  for (const file of codeFiles()) {
    if (file === self) continue
    const found = privateReferencesIn(readFileSync(file, 'utf8'))
    if (found.length > 0) offending.push(`${relative(root, file)}: ${found.join('; ')}`)
  }
  t.same(offending, [], 'no SPEC, DESIGN, "the spec" or issue numbers in code or tests')
})

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2 … */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const match of withoutFences(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = match[1]!
      .replace(/`/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

/** Markdown without fenced code blocks (a `#` line there is not a heading). */
function withoutFences(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '')
}

/** Markdown without fenced code blocks and inline code, where brackets and parentheses are not links. */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '')
}

t.test('docs - relative links in README and docs/ lead to files and headings that exist', async (t) => {
  for (const file of userFacing) {
    const text = readFileSync(file, 'utf8')
    const links = [...withoutCode(text).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!)
    for (const link of links) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue // http:, https:, mailto:
      const [path, anchor] = link.split('#') as [string, string | undefined]
      const target = path === '' ? file : resolve(dirname(file), path)
      const where = `${relative(root, file)} → ${link}`
      if (!existsSync(target)) {
        t.fail(`${where}: no such file`)
        continue
      }
      if (anchor !== undefined && target.endsWith('.md')) {
        t.ok(anchorsOf(readFileSync(target, 'utf8')).has(anchor), `${where}: the heading exists`)
      } else {
        t.pass(where)
      }
    }
  }
})
