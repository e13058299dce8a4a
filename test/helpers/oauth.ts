/**
 * OAuth test helpers: a service whose PUBLIC_BASE_URL (its issuer) is the
 * address it really listens on, a client library view of it, and the
 * approval a person gives on the consent page done over HTTP (sign in,
 * session handoff, authorize with the handoff).
 */
import { createServer } from 'node:net'
import * as oauth from 'oauth4webapi'
import type { Test } from 'tap'
import { request, signIn } from './http.js'
import { startTestService, testAdmin, type TestContext, type TestService } from './service.js'
import type { StartOptions } from '../../src/node/service.js'

/** A port free right now (the service binds it a moment later). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** A service whose issuer is its own address, so discovery documents point where it listens. */
export async function startOAuthService(t: TestContext, env: Record<string, string | undefined> = {}, options: StartOptions = {}): Promise<TestService> {
  const port = await freePort()
  return startTestService(t, { PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, ...env }, options)
}

/** The service is loopback http: the client library is told that is fine in tests. */
export const insecure = { [oauth.allowInsecureRequests]: true } as const

export async function discover(url: string): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(url)
  const response = await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure })
  return oauth.processDiscoveryResponse(issuer, response)
}

export async function registerClient(as: oauth.AuthorizationServer, metadata: Record<string, unknown>): Promise<oauth.Client & { client_secret?: string }> {
  const response = await oauth.dynamicClientRegistrationRequest(as, metadata as Partial<oauth.Client>, insecure)
  return (await oauth.processDynamicClientRegistrationResponse(response)) as oauth.Client & { client_secret?: string }
}

export interface AuthorizationRequest {
  url: URL
  verifier: string
  state: string
}

/** The authorization URL a client sends a browser to (PKCE S256, state, optional resource and scope). */
export async function authorizationUrl(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  redirectUri: string,
  options: { scope?: string; resource?: string; pkce?: boolean } = {},
): Promise<AuthorizationRequest> {
  const verifier = oauth.generateRandomCodeVerifier()
  const state = oauth.generateRandomState()
  const url = new URL(as.authorization_endpoint!)
  url.searchParams.set('response_type', 'code')
  url.searchParams.set('client_id', client.client_id)
  url.searchParams.set('redirect_uri', redirectUri)
  url.searchParams.set('state', state)
  if (options.pkce !== false) {
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier))
    url.searchParams.set('code_challenge_method', 'S256')
  }
  if (options.scope !== undefined) url.searchParams.set('scope', options.scope)
  if (options.resource !== undefined) url.searchParams.set('resource', options.resource)
  return { url, verifier, state }
}

export interface Approval {
  status: number
  location: URL | undefined
  body: string
}

/** The request the consent page carries (its JSON data block), as the page's script reads it. */
export async function consentRequest(auth: URL): Promise<{ status: number; request: any; html: string }> {
  const response = await fetch(auth, { redirect: 'manual', headers: { accept: 'text/html' } })
  const html = await response.text()
  const match = /<script type="application\/json" id="consent-request">([^<]*)<\/script>/.exec(html)
  return { status: response.status, request: match === null ? undefined : JSON.parse(match[1]!), html }
}

/**
 * What the consent page does when a person allows: read the request from the page, sign in, ask for a
 * handoff bound to it, come back to authorize with it. Answers where authorize sends the browser.
 */
export async function approve(
  baseUrl: string,
  auth: URL,
  options: { email?: string; password?: string; organizationId?: string; handoff?: Record<string, unknown>; authorizeExtra?: Record<string, string> } = {},
): Promise<Approval> {
  const page = await consentRequest(auth)
  if (page.request === undefined) return { status: page.status, location: undefined, body: page.html }
  const consent = page.request
  const session = await signIn(baseUrl, options.email ?? testAdmin.email, options.password ?? testAdmin.password)
  const handoff = await request(baseUrl, '/v1/oauth/session-handoff', {
    method: 'POST',
    headers: { ...session.auth, ...(options.organizationId === undefined ? {} : { 'x-organization-id': options.organizationId }) },
    body: {
      clientId: consent.client.client_id,
      redirectUri: consent.redirect_uri,
      scopes: consent.scopes,
      resource: consent.resource,
      ...(consent.code_challenge === null ? {} : { codeChallenge: consent.code_challenge }),
      ...options.handoff,
    },
  })
  if (handoff.status !== 200) return { status: handoff.status, location: undefined, body: handoff.text }
  const next = new URL(auth)
  next.searchParams.set('handoff', handoff.json.handoff)
  for (const [key, value] of Object.entries(options.authorizeExtra ?? {})) next.searchParams.set(key, value)
  return follow(next)
}

/** GET without following a redirect: the status and where it points. */
export async function follow(url: URL, headers: Record<string, string> = {}): Promise<Approval> {
  const response = await fetch(url, { redirect: 'manual', headers })
  const location = response.headers.get('location')
  return { status: response.status, location: location === null ? undefined : new URL(location), body: await response.text() }
}

/** Asserts that `attempt` ends with the RFC 6749 error `error`, with an error_description. */
export async function rfcError(t: Test, attempt: Promise<unknown>, error: string, what: string): Promise<void> {
  try {
    await attempt
    t.fail(`${what}: accepted`)
  } catch (e) {
    t.ok(e instanceof oauth.ResponseBodyError, `${what}: an RFC 6749 error body`, { error: String(e) })
    t.equal((e as oauth.ResponseBodyError).error, error, `${what}: ${error}`)
    t.ok(((e as oauth.ResponseBodyError).error_description ?? '').length > 0, `${what}: error_description`)
  }
}
