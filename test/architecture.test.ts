/**
 * The layout is the architecture (DESIGN section 2, STYLE practice 1):
 * src → actors → machines → protocol, pure at the bottom. This test reads the
 * import statements of every module and fails on an import that points the
 * wrong way or brings I/O into a pure layer.
 */
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

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
  protocol: ['@sinclair/typebox', 'ajv', 'ajv-formats'],
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
  t.equal(layerOf(join(root, 'protocol', 'x.ts'), '../src/service.js'), 'src')
  t.notOk(mayImport.protocol.includes('src'))
  t.ok(importsOf(join(root, 'src', 'service.ts')).includes('./routes/system.js'), 'the import reader finds a known import')
})
