/**
 * The live farm page end to end in headless Chromium (Debian's package,
 * driven by playwright-core; nothing is downloaded): sign in, see the
 * printers, post a batch as a bridge, see the tile change. A screenshot is
 * left in test-artifacts/ for people to look at.
 */
import t from 'tap'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser } from 'playwright-core'
import { request } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'

const executablePath = '/usr/bin/chromium'
const artifacts = fileURLToPath(new URL('../../../test-artifacts/', import.meta.url))

t.test('farm page - the page and its script are served with a strict content security policy', async (t) => {
  const svc = await startTestService(t)
  const page = await request(svc.url, '/')
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /text\/html/)
  t.match(page.headers['content-security-policy'], /script-src 'self'/)
  t.match(page.text, /<script src="\/farm\.js"/)
  const script = await request(svc.url, '/farm.js')
  t.match(script.headers['content-type'], /text\/javascript/)
  t.match(script.text, /\/v1\/live/)
})

t.test('farm page - sign in, see the farm, post a batch, see the tile change', { skip: existsSync(executablePath) ? false : `needs ${executablePath} (apt-get install chromium)` }, async (t) => {
  const svc = await startTestService(t)
  const farm = await openFarm(svc.url)
  const printer = await addPrinter(farm, 'host-a', { name: 'X1C Bay 7' })
  const idle = await addPrinter(farm, 'host-a', { name: 'P1S Bay 8' })
  await postBatch(farm, batch(idle, [item(0, { type: 'heartbeat' })]))

  const browser: Browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } })
  const problems: string[] = []
  page.on('pageerror', (error) => problems.push(error.message))
  await page.goto(svc.url + '/')
  await page.fill('#email', testAdmin.email)
  await page.fill('#password', testAdmin.password)
  await page.click('button[type=submit]')

  const tile = page.locator(`[data-printer-id="${printer}"]`)
  await tile.waitFor({ timeout: 15_000 })
  t.equal(await tile.locator('.name').textContent(), 'X1C Bay 7')
  t.equal(await tile.getAttribute('data-status'), 'UNKNOWN', 'never reported yet')
  t.equal(await page.locator(`[data-printer-id="${idle}"]`).getAttribute('data-status'), 'WAITING')
  await page.locator('#conn.live').waitFor({ timeout: 15_000 })

  await postBatch(farm, batch(printer, [item(0, { type: 'job:start', data: { name: 'bracket.3mf' } }), item(1, { type: 'job:update', data: { progress: 42 } })]))
  await page.locator(`[data-printer-id="${printer}"][data-status="RUNNING"]`).waitFor({ timeout: 15_000 })
  t.match(await tile.locator('.job').textContent(), /bracket\.3mf · 42%/)
  await postBatch(farm, batch(printer, [item(2, { type: 'printer:error', data: { code: 'HMS_0300', message: 'Nozzle clog' } })]))
  await page.locator(`[data-printer-id="${printer}"][data-status="ERROR"]`).waitFor({ timeout: 15_000 })
  t.match(await tile.locator('.error').textContent(), /HMS_0300: Nozzle clog/)

  mkdirSync(artifacts, { recursive: true })
  await page.screenshot({ path: join(artifacts, 'farm-page.png'), fullPage: true })
  await page.setViewportSize({ width: 390, height: 844 })
  await page.screenshot({ path: join(artifacts, 'farm-page-phone.png'), fullPage: true })
  t.same(problems, [], 'no script errors')
})
