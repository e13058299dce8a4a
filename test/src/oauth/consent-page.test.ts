/**
 * The OAuth sign-in and consent page and the AI-agent claim page driven by a person in headless Chromium
 * (Debian's package, driven by playwright-core; nothing is downloaded), against a real client library
 * (oauth4webapi) and a real redirect URI (a small HTTP server on loopback that records what the browser
 * brings back): Allow gives a code that the client exchanges for a token that opens the API; Deny sends
 * access_denied with the state; a wrong password says so on the page and goes nowhere; a person in two
 * organizations chooses one and the token is for that one; the claim page confirms an agent, which then
 * collects its token with the claim grant. Screenshots (consent page on a desktop and a phone, claim
 * page) are left in /tmp/oauth-screens/ for people to look at.
 */
import t from 'tap'
import { existsSync, mkdirSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { join } from 'node:path'
import * as oauth from 'oauth4webapi'
import { chromium, type Browser, type Page } from 'playwright-core'
import { request, signIn } from '../../helpers/http.js'
import { authorizationUrl, discover, insecure, registerClient, startOAuthService } from '../../helpers/oauth.js'
import { testAdmin, type TestContext } from '../../helpers/service.js'
import { clientScopes } from '../../../protocol/scopes.js'

const executablePath = '/usr/bin/chromium'
const needsChromium = { skip: existsSync(executablePath) ? false : `needs ${executablePath} (apt-get install chromium)` }
const screens = '/tmp/oauth-screens'
const wait = { timeout: 15_000 }
const claimGrant = 'urn:printfarm:agent-auth:grant-type:claim'
interface Callback {
  /** The redirect URI to register: http://127.0.0.1:<port>/callback. */
  redirectUri: string
  /** Every request the browser made to the callback path, as absolute URLs, in order (not its favicon). */
  received: URL[]
}

/** The application's side of the redirect: records what arrives and answers a tiny page. */
async function startCallback(t: TestContext): Promise<Callback> {
  const received: URL[] = []
  const server: Server = createServer((req: IncomingMessage, res) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`)
    if (url.pathname !== '/callback') return void res.writeHead(404).end()
    received.push(url)
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
    res.end('<!doctype html><html lang="en"><title>Test app</title><p>Back in Test app.</p></html>')
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return { redirectUri: `http://127.0.0.1:${port}/callback`, received }
}

async function launch(t: TestContext): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  return browser
}

/** Script errors and content security policy violations the page reports. */
function watchProblems(page: Page): string[] {
  const problems: string[] = []
  page.on('pageerror', (error) => problems.push(error.message))
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) problems.push(message.text())
  })
  return problems
}

/** The claims of a JWT, read without checking it (the service checked it when it opened the API). */
function jwtPayload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>
}

t.test('consent page - a person signs in and allows, denies, mistypes, or chooses an organization', needsChromium, async (t) => {
  const svc = await startOAuthService(t)
  const url = svc.url
  const as = await discover(url)
  const callback = await startCallback(t)
  const client = await registerClient(as, { redirect_uris: [callback.redirectUri], client_name: 'Bench Monitor', client_uri: 'https://bench-monitor.example.com', token_endpoint_auth_method: 'none' })
  const scope = 'printers:read print-jobs:read'
  const browser = await launch(t)
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  const problems = watchProblems(page)
  const onCallback = (u: URL) => u.origin + u.pathname === callback.redirectUri
  const exchange = async (params: URLSearchParams, verifier: string) =>
    oauth.processAuthorizationCodeResponse(as, client, await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, callback.redirectUri, verifier, insecure))
  const signInOnPage = async (password: string = testAdmin.password) => {
    await page.fill('input[name=email]', testAdmin.email)
    await page.fill('input[name=password]', password)
  }
  mkdirSync(screens, { recursive: true })

  await t.test('allow - the page names the application and what it asks; Allow brings a code the client exchanges for a token that opens the API', async (t) => {
    const auth = await authorizationUrl(as, client, callback.redirectUri, { scope })
    await page.goto(auth.url.href)
    t.equal(await page.locator('h1').textContent(), 'Bench Monitor wants to use your print farm', 'the client name from its registration')
    t.match(await page.locator('main').textContent(), /https:\/\/bench-monitor\.example\.com/, 'its site')
    const asks = await page.locator('main ul li').allTextContents()
    t.same(asks, ['See your printers, their state and temperatures printers:read', 'See print jobs and the queue print-jobs:read'], 'each scope in words, the scope beside it')
    t.match(await page.locator('main').textContent(), /Registered by the application itself: its name and site are its own words, not checked\./, 'a registered client is not vouched for')
    t.match(await page.locator('main').textContent(), /Afterwards you go back to 127\.0\.0\.1:\d+\./, 'where the browser goes back to')
    t.equal(await page.locator('#organization-field').getAttribute('hidden'), '', 'the organization field is marked hidden until sign-in')
    t.ok(await page.locator('#organization-field').isHidden(), 'and is not shown')
    t.equal(await page.locator('#error').textContent(), '', 'no error before anything happened')
    await page.screenshot({ path: join(screens, 'consent-desktop.png'), fullPage: true })
    await page.setViewportSize({ width: 390, height: 844 })
    await page.screenshot({ path: join(screens, 'consent-phone.png'), fullPage: true })
    await page.setViewportSize({ width: 1280, height: 800 })

    const before = callback.received.length
    await signInOnPage()
    await page.getByRole('button', { name: 'Allow' }).click()
    await page.waitForURL(onCallback, wait)
    t.equal(callback.received.length, before + 1, 'the browser came back to the redirect URI once')
    const landed = callback.received.at(-1)!
    t.equal(await page.locator('p').textContent(), 'Back in Test app.', "the application's page shows")
    const params = oauth.validateAuthResponse(as, client, landed, auth.state)
    t.match(params.get('code'), /^pfoc_/, 'a code, with the state and iss the library checked')
    t.equal(landed.searchParams.get('iss'), url, 'iss names the issuer (RFC 9207)')

    const tokens = await exchange(params, auth.verifier)
    t.equal(tokens.scope, scope, 'the scopes the page showed')
    const printers = await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })
    t.equal(printers.status, 200, 'the token opens GET /v1/printers')
  })

  await t.test('deny - Deny sends the browser back with access_denied and the state, and no code', async (t) => {
    const auth = await authorizationUrl(as, client, callback.redirectUri, { scope })
    await page.goto(auth.url.href)
    const before = callback.received.length
    await page.getByRole('button', { name: 'Deny' }).click()
    await page.waitForURL(onCallback, wait)
    t.equal(callback.received.length, before + 1, 'the browser came back to the redirect URI once')
    const landed = callback.received.at(-1)!
    t.equal(landed.searchParams.get('error'), 'access_denied', 'error=access_denied')
    t.equal(landed.searchParams.get('state'), auth.state, 'the state of this request')
    t.equal(landed.searchParams.get('code'), null, 'no code')
    try {
      oauth.validateAuthResponse(as, client, landed, auth.state)
      t.fail('the library took a denial for a code')
    } catch (e) {
      t.ok(e instanceof oauth.AuthorizationResponseError, 'the library reads it as an authorization error')
      t.equal((e as oauth.AuthorizationResponseError).error, 'access_denied', 'as access_denied')
    }
  })

  await t.test('wrong password - the page says so in its alert and stays; the right password then allows', async (t) => {
    const auth = await authorizationUrl(as, client, callback.redirectUri, { scope })
    await page.goto(auth.url.href)
    const before = callback.received.length
    await signInOnPage('not-the-password')
    await page.getByRole('button', { name: 'Allow' }).click()
    const alert = page.getByRole('alert')
    await alert.filter({ hasText: /\S/ }).waitFor(wait)
    t.match(await alert.textContent(), /email or password is wrong/, 'the reason, in the alert')
    await page.getByRole('button', { name: 'Allow' }).and(page.locator(':enabled')).waitFor(wait)
    t.equal(page.url(), auth.url.href, 'still on the consent page')
    t.equal(callback.received.length, before, 'nothing went to the redirect URI')
    t.equal(await page.inputValue('input[name=password]'), '', 'the password is cleared for another try')
    t.equal(await page.inputValue('input[name=email]'), testAdmin.email, 'the email is kept')
    await page.screenshot({ path: join(screens, 'consent-wrong-password.png'), fullPage: true })

    await page.fill('input[name=password]', testAdmin.password)
    await page.getByRole('button', { name: 'Allow' }).click()
    await page.waitForURL(onCallback, wait)
    const params = oauth.validateAuthResponse(as, client, callback.received.at(-1)!, auth.state)
    t.match(params.get('code'), /^pfoc_/, 'the second try gets a code')
  })

  await t.test('several organizations - Allow shows the organization choice; the token is for the one chosen', async (t) => {
    const admin = await signIn(url, testAdmin.email, testAdmin.password)
    const first = (await request(url, '/v1/me', { headers: admin.auth })).json.organizations[0] as { id: string; name: string }
    const created = await request(url, '/v1/organizations', { method: 'POST', headers: admin.auth, body: { name: 'Second Workshop' } })
    t.equal(created.status, 201, 'a second organization, the admin its admin', { body: created.text })
    const second = created.json.id as string

    const auth = await authorizationUrl(as, client, callback.redirectUri, { scope })
    await page.goto(auth.url.href)
    const before = callback.received.length
    await signInOnPage()
    const select = page.locator('select[name=organization]')
    t.equal(await select.locator('option').count(), 0, 'nothing to choose before signing in')
    await page.getByRole('button', { name: 'Allow' }).click()
    await page.locator('#note').filter({ hasText: /several organizations/ }).waitFor(wait)
    t.ok(await select.isVisible(), 'the organization select shows')
    t.equal(await page.locator('#organization-field').getAttribute('hidden'), null, 'no longer marked hidden')
    t.same(
      await select.locator('option').evaluateAll((options) => options.map((o) => [(o as unknown as { value: string }).value, o.textContent])),
      [
        ['', 'Choose an organization'],
        [first.id, first.name],
        [second, 'Second Workshop'],
      ],
      'both organizations, by name, none chosen for the person',
    )
    t.equal(await page.locator('#note').textContent(), 'You belong to several organizations: choose the one to allow it in, then Allow.', 'the page says what to do')
    t.equal(await page.getByRole('alert').textContent(), '', 'as a note, not an error')
    await page.getByRole('button', { name: 'Allow' }).click()
    await page.getByRole('alert').filter({ hasText: 'Choose an organization first.' }).waitFor(wait)
    t.pass('Allow without a choice asks for one instead of picking')
    t.equal(callback.received.length, before, 'no code before the choice')
    await page.screenshot({ path: join(screens, 'consent-organizations.png'), fullPage: true })

    await select.selectOption(second)
    await page.getByRole('button', { name: 'Allow' }).click()
    await page.waitForURL(onCallback, wait)
    const params = oauth.validateAuthResponse(as, client, callback.received.at(-1)!, auth.state)
    const tokens = await exchange(params, auth.verifier)
    t.equal(jwtPayload(tokens.access_token)['organization_id'], second, 'the token is for the organization chosen')
    t.not(second, first.id, 'not the first, default one')
    const printers = await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })
    t.equal(printers.status, 200, 'and opens the API there')
  })

  t.same(problems, [], 'no script errors or blocked resources')
})

t.test('claim page - a person confirms an AI agent, which then collects its token with the claim grant', needsChromium, async (t) => {
  const svc = await startOAuthService(t)
  const url = svc.url
  const as = await discover(url)
  const started = await request(url, '/agent/identity', { method: 'POST', body: { type: 'claude-code', login_hint: 'ops@example.com' } })
  t.equal(started.status, 201, 'an agent starts a claim', { body: started.text })
  const claim = started.json as { agent_id: string; claim_token: string; claim_url: string }
  const agent: oauth.Client = { client_id: claim.agent_id }
  const collect = async () =>
    oauth.processGenericTokenEndpointResponse(as, agent, await oauth.genericTokenEndpointRequest(as, agent, oauth.None(), claimGrant, new URLSearchParams({ claim_token: claim.claim_token }), insecure))

  const browser = await launch(t)
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  const problems = watchProblems(page)
  mkdirSync(screens, { recursive: true })

  t.equal(new URL(claim.claim_url).hash, `#claim_token=${claim.claim_token}`, 'the claim token rides in the fragment')
  await page.goto(claim.claim_url)
  const summary = page.locator('#summary')
  await page.locator('form#claim').waitFor({ state: 'visible', ...wait })
  t.match(await summary.textContent(), /^A claude-code agent \(for ops@example\.com\) asks to act for you\./, 'the agent type and its login hint')
  const ticked = await page.locator('input[name=scope]:checked').evaluateAll((boxes) => boxes.map((b) => (b as unknown as { value: string }).value))
  t.same(ticked, clientScopes.filter((s) => s.endsWith(':read')), 'the read scopes are ticked by default')
  t.ok(await page.locator('#organization-field').isHidden(), 'no organization to choose before sign-in')
  await page.screenshot({ path: join(screens, 'claim-desktop.png'), fullPage: true })
  await page.setViewportSize({ width: 390, height: 844 })
  await page.screenshot({ path: join(screens, 'claim-phone.png'), fullPage: true })
  await page.setViewportSize({ width: 1280, height: 800 })

  try {
    await collect()
    t.fail('tokens before anyone confirmed')
  } catch (e) {
    t.equal((e as oauth.ResponseBodyError).error, 'authorization_pending', 'the agent waits while the page is open')
  }

  await page.fill('input[name=email]', testAdmin.email)
  await page.fill('input[name=password]', testAdmin.password)
  await page.getByRole('button', { name: 'Confirm' }).click()
  await page.locator('#note').filter({ hasText: /you are signed in as/ }).waitFor(wait)
  t.equal(await page.locator('#note').textContent(), `The agent said it acts for ops@example.com; you are signed in as ${testAdmin.email}.`, 'a login hint that is not you is pointed out before confirming')
  await page.getByRole('button', { name: 'Confirm' }).click()
  await page.locator('#heading').filter({ hasText: 'Agent confirmed' }).waitFor(wait)
  t.match(await summary.textContent(), /^It may now act for you in My farm \(/, 'the page says where and with what it is confirmed')
  t.ok(await page.locator('form#claim').isHidden(), 'the form is gone')
  await page.screenshot({ path: join(screens, 'claim-confirmed.png'), fullPage: true })

  const tokens = await collect()
  t.type(tokens.access_token, 'string', 'the claim grant answers an access token')
  t.same(tokens.scope?.split(' ').sort(), [...ticked].sort(), 'for the scopes ticked')
  const printers = await request(url, '/v1/printers', { headers: { authorization: `Bearer ${tokens.access_token}` } })
  t.equal(printers.status, 200, 'the token opens GET /v1/printers')
  t.same(problems, [], 'no script errors or blocked resources')
})
