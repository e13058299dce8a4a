/** Test-only routes mounted next to the real ones (StartOptions.extraRoutes). */
import { defineRoute, type Route, type RouteSchemas } from '../../src/http/route.js'
import type { Services } from '../../src/routes/route-context.js'

export interface Gate {
  readonly route: Route<RouteSchemas, Services>
  /** Resolves once a request is inside the handler. */
  readonly entered: Promise<void>
  /** Lets the waiting handler answer 200 {done: true}. */
  release(): void
}

/** A GET route whose handler waits, inside, until the test releases it: no sleeps needed. */
export function gatedRoute(path: string): Gate {
  let enter: () => void = () => undefined
  let open: () => void = () => undefined
  const entered = new Promise<void>((resolve) => {
    enter = resolve
  })
  const gate = new Promise<void>((resolve) => {
    open = resolve
  })
  const route = defineRoute({
    method: 'GET',
    path,
    operationId: `gated${path.replace(/[^A-Za-z0-9]/g, '')}`,
    summary: 'waits until released',
    tags: ['test'],
    auth: { kind: 'public', reason: 'test' },
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: async () => {
      enter()
      await gate
      return { body: { done: true } }
    },
  })
  return { route, entered, release: () => open() }
}

/** An organization route that needs `scope` and answers with the principal it was given. */
export function whoamiRoute(scope: string, path = '/test/whoami'): Route<RouteSchemas, Services> {
  return defineRoute({
    method: 'GET',
    path,
    operationId: `whoami${path.replace(/[^A-Za-z0-9]/g, '')}`,
    summary: 'echoes the principal',
    tags: ['test'],
    auth: { kind: 'organization', scope },
    schemas: {},
    responses: { 200: { description: 'Any answer (test route).' } },
    handler: (req) => {
      const p = req.principal
      return { body: p.kind === 'api_key' ? { kind: p.kind, keyId: p.keyId, organizationId: p.organizationId, scopes: [...p.scopes].sort() } : p }
    },
  })
}
