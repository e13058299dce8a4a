/**
 * An MCP client as an agent runs it: the official client SDK over streamable HTTP, with an OAuth
 * provider that does the whole flow itself (protected-resource discovery, registration, PKCE,
 * resource, token) and approves through the consent page's handoff path as the given person.
 */
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type OAuthClientProvider, type OAuthDiscoveryState } from '@modelcontextprotocol/client'
import { approve } from './oauth.js'
import { until } from './poll.js'
import { testAdmin } from './service.js'

type Provider = OAuthClientProvider
type Stored<K extends keyof Provider> = Provider[K] extends (...args: never[]) => infer R ? Awaited<R> : never

export class TestAuthProvider implements OAuthClientProvider {
  readonly baseUrl: string
  readonly person: { email: string; password: string }
  readonly scope: string | undefined
  /** The organization the person picks on the consent page (else their first). */
  readonly organizationId: string | undefined
  readonly redirectUrl = 'http://127.0.0.1:45199/callback'
  /** The callback parameters of the last approval (code, state, iss). */
  callback: URLSearchParams | undefined
  /** Authorization URLs the client sent the "browser" to. */
  readonly authorizations: URL[] = []
  #client: Stored<'clientInformation'> = undefined
  #tokens: Stored<'tokens'> = undefined
  #verifier = ''
  #discovery: OAuthDiscoveryState | undefined = undefined

  constructor(baseUrl: string, options: { person?: { email: string; password: string }; scope?: string; organizationId?: string } = {}) {
    this.baseUrl = baseUrl
    this.person = options.person ?? testAdmin
    this.scope = options.scope
    this.organizationId = options.organizationId
  }

  get clientMetadata() {
    return {
      redirect_uris: [this.redirectUrl],
      client_name: 'MCP test agent',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      ...(this.scope === undefined ? {} : { scope: this.scope }),
    }
  }

  clientInformation() {
    return this.#client
  }
  saveClientInformation(info: NonNullable<Stored<'clientInformation'>>) {
    this.#client = info
  }
  tokens() {
    return this.#tokens
  }
  saveTokens(tokens: NonNullable<Stored<'tokens'>>) {
    this.#tokens = tokens
  }
  get accessToken(): string | undefined {
    return (this.#tokens as { access_token?: string } | undefined)?.access_token
  }
  setAccessToken(token: string): void {
    this.#tokens = { ...(this.#tokens as object), access_token: token, token_type: 'Bearer' } as NonNullable<Stored<'tokens'>>
  }
  saveCodeVerifier(verifier: string) {
    this.#verifier = verifier
  }
  codeVerifier() {
    return this.#verifier
  }
  // Kept like the verifier, so the SDK can check that the authorization server answering the
  // redirect is the one discovered before it (the callback leg's issuer binding).
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.#discovery = state
  }
  discoveryState() {
    return this.#discovery
  }

  /** The person approves on the consent page (the handoff path), and the browser lands on the redirect URI. */
  async redirectToAuthorization(url: URL): Promise<void> {
    this.authorizations.push(url)
    const approval = await approve(this.baseUrl, url, { email: this.person.email, password: this.person.password, ...(this.organizationId === undefined ? {} : { organizationId: this.organizationId }) })
    if (approval.location === undefined) throw new Error(`the approval did not redirect: ${approval.status} ${approval.body}`)
    this.callback = approval.location.searchParams
  }
}

/** Connects, running the OAuth flow when the server asks for it (401), as a real agent host does. */
export async function connectAgent(baseUrl: string, provider: TestAuthProvider, era: 'legacy' | 'modern' = 'legacy'): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const endpoint = new URL(`${baseUrl}/v1/mcp`)
  const make = () => new StreamableHTTPClientTransport(endpoint, { authProvider: provider })
  const options = era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}
  let client = new Client({ name: 'printfarm-test-agent', version: '1.0.0' }, options as never)
  let transport = make()
  try {
    await client.connect(transport)
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || provider.callback === undefined) throw error
    await transport.finishAuth(provider.callback)
    client = new Client({ name: 'printfarm-test-agent', version: '1.0.0' }, options as never)
    transport = make()
    await client.connect(transport)
  }
  return { client, transport }
}

/** Waits until `ok` holds (the stream delivers on its own time); fails the test naming what never came. */
export async function waitFor(ok: () => boolean, what: string): Promise<void> {
  if (!(await until(async () => ok(), (v) => v))) throw new Error(`never: ${what}`)
}

/** A resource's JSON, as read. */
export function jsonOf(read: { contents: ({ text: string } | { blob: string })[] }): any {
  const first = read.contents[0]
  return first !== undefined && 'text' in first ? JSON.parse(first.text) : undefined
}

/** Notifications the client heard, by URI. */
export function heard(client: Client): Map<string, number> {
  const counts = new Map<string, number>()
  client.setNotificationHandler('notifications/resources/updated', (notification) => {
    const uri = notification.params.uri
    counts.set(uri, (counts.get(uri) ?? 0) + 1)
  })
  return counts
}
