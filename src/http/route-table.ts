/**
 * The access table of every route (one documented table mapping
 * every route to the scope an API key needs). Rendered from the route table
 * itself, so it cannot drift: `printfarm routes` prints it, the README holds
 * a copy that a test compares with this output.
 */
import type { Route, RouteSchemas } from './route.js'

function caller(route: Route<RouteSchemas, unknown>): [string, string] {
  const auth = route.auth
  switch (auth.kind) {
    case 'public':
      return ['anyone', '—']
    case 'user':
      return ['signed-in person', 'not accepted']
    case 'organization':
      return [auth.admin === true ? 'organization admin' : 'organization member', auth.scope === null ? 'not accepted' : scopeList(auth.scope)]
  }
}

export function renderRouteTable(routes: readonly Route<RouteSchemas, unknown>[]): string {
  const rows = routes.map((route) => {
    const [kind, scope] = caller(route)
    const who = route.access ?? kind
    return `| \`${route.method} ${route.path}\` | ${who} | ${scope} |`
  })
  return ['| route | who may call it (session) | API key scope |', '|---|---|---|', ...rows].join('\n')
}

function scopeList(scope: string | readonly string[]): string {
  return (typeof scope === 'string' ? [scope] : scope).map((s) => `\`${s}\``).join(' or ')
}
