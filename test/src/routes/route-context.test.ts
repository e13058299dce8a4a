/**
 * A route handler gets its own area's slice of the node, not the whole of it
 * (src/routes/route-context.ts): each route module exports its `XContext` type,
 * a Pick of Services, and no parameter in src/routes or src/mcp is typed with
 * the whole Services. The compiler then refuses a handler that reaches outside
 * its area; this test keeps a new handler or helper from widening its slice
 * back to everything. It reads the sources with the TypeScript parser, so a
 * type split over lines or inside a union is seen too.
 */
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const root = fileURLToPath(new URL('../../..', import.meta.url))

/** The modules whose functions take a part of the node; route-context.ts itself declares the whole. */
function modules(): { name: string; text: string }[] {
  return ['src/routes', 'src/mcp'].flatMap((dir) =>
    readdirSync(join(root, dir))
      .filter((name) => name.endsWith('.ts') && name !== 'route-context.ts')
      .map((name) => ({ name: `${dir}/${name}`, text: readFileSync(join(root, dir, name), 'utf8') })),
  )
}

/** True when the type names Services other than as the fields a Pick takes from it. */
function reachesWhole(type: ts.Node): boolean {
  if (ts.isTypeReferenceNode(type)) {
    const name = type.typeName.getText()
    if (name === 'Services') return true
    if (name === 'Pick') return (type.typeArguments ?? []).slice(1).some(reachesWhole)
  }
  return ts.forEachChild(type, (child) => (reachesWhole(child) ? true : undefined)) ?? false
}

/** Each parameter typed with the whole Services, as `file:line: parameter`. */
function wholeServicesParameters(name: string, text: string): string[] {
  const source = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true)
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isParameter(node) && node.type !== undefined && reachesWhole(node.type)) {
      found.push(`${name}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText()}`)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

t.test('route context - a handler or helper typed with the whole Services is found (the check is not blind)', async (t) => {
  const sample = [
    "handler: async (req, svc: Services) => ({ body: await svc.db.sql`select 1` }),",
    'function helper(svc: Services | undefined): void {}',
    'const limit = (services: Readonly<Services>) => 1',
    "function fine(svc: Pick<Services, 'db'>, other: MaterialsContext): void {}",
  ].join('\n')
  t.same(
    wholeServicesParameters('sample.ts', sample).map((f) => f.replace(/^sample\.ts:\d+: /, '')),
    ['svc: Services', 'svc: Services | undefined', 'services: Readonly<Services>'],
    'a Pick of Services and a slice type pass',
  )
})

t.test('route context - no route handler or helper takes the whole Services: each takes its slice', async (t) => {
  const found = modules().flatMap(({ name, text }) => wholeServicesParameters(name, text))
  t.same(found, [], "type these by the module's XContext (a Pick of Services) or a narrower Pick")
})

t.test('route context - every module that defines routes exports its slice as an XContext type', async (t) => {
  const routeModules = modules().filter(({ text }) => text.includes('defineRoute('))
  t.ok(routeModules.length > 20, 'the route modules are found')
  const without = routeModules.filter(({ text }) => !/^export type [A-Z]\w*Context = /m.test(text)).map(({ name }) => name)
  t.same(without, [], 'each declares `export type XContext = Pick<Services, …>`, the fields its handlers use')
})
