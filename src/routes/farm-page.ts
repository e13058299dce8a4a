/**
 * The live farm page: `GET /` and its script `GET /farm.js`, from
 * `public/`. Read once at start (a page of a few kilobytes), served with a
 * content security policy that allows only this origin's script and the
 * live feed's WebSocket, so nothing injected could run or phone elsewhere.
 */
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'
import { publicFile } from './public-files.js'

/** What the farm page routes use of the node: nothing (they serve two files read at start). */
export type FarmPageContext = Pick<Services, never>

const html = publicFile('farm.html')
const script = publicFile('farm.js')
const security = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self' ws: wss:; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
}

export const farmPageRoute = defineRoute({
  method: 'GET',
  path: '/',
  operationId: 'farmPage',
  summary: "The live farm page: sign in, then every printer of the organization as a tile that updates live.",
  tags: ['live'],
  auth: { kind: 'public', reason: 'a static page; it signs in through POST /v1/auth/login and reads nothing without a token' },
  schemas: {},
  responses: { 200: { description: 'HTML.', contentType: 'text/html' } },
  handler: () => ({ raw: html, contentType: 'text/html; charset=utf-8', headers: security }),
})

export const farmScriptRoute = defineRoute({
  method: 'GET',
  path: '/farm.js',
  operationId: 'farmPageScript',
  summary: "The live farm page's script.",
  tags: ['live'],
  auth: { kind: 'public', reason: 'the static script of the live farm page' },
  schemas: {},
  responses: { 200: { description: 'JavaScript.', contentType: 'text/javascript' } },
  handler: () => ({ raw: script, contentType: 'text/javascript; charset=utf-8', headers: security }),
})

export const farmPageRoutes: readonly Route<RouteSchemas, FarmPageContext>[] = [farmPageRoute, farmScriptRoute]
