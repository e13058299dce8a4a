/** The README stays true: its access table is the one the route definitions render. */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { renderRouteTable } from '../src/route-table.js'
import { allRoutes } from '../src/service.js'

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')

t.test('readme - the access table equals `printfarm routes`', async (t) => {
  const block = /<!-- routes:start -->\n([\s\S]*?)\n<!-- routes:end -->/.exec(readme)
  t.ok(block, 'the README has the routes block')
  t.equal(block?.[1], renderRouteTable(allRoutes()), 'regenerate with: npx printfarm routes')
})

t.test('readme - the quick start is the one CI runs: npm install && npm start, then npm test', async (t) => {
  t.match(readme, /npm install && npm start/)
  t.match(readme, /\nnpm test\n/)
})
