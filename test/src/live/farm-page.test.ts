/**
 * The live farm page end to end in headless Chromium (Debian's package,
 * driven by playwright-core; nothing is downloaded), over the real HTTP API
 * and WebSocket: sign in, see a farm of a dozen printers in every state, post
 * batches as a bridge and configure printers as an admin, and see the tiles
 * follow without a reload. Screenshots (a wall screen and a phone) are left
 * in test-artifacts/ for people to look at.
 */
import t from 'tap'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'
import { request } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'
import { addPrinter, batch, item, openFarm, postBatch, type Farm } from '../../helpers/bridge.js'

const executablePath = '/usr/bin/chromium'
const needsChromium = { skip: existsSync(executablePath) ? false : `needs ${executablePath} (apt-get install chromium)` }

// What the functions run inside the page (waitForFunction, evaluate) use of the browser: the
// test's TypeScript has no DOM library.
interface PageElement {
  textContent: string | null
  title: string
  hidden: boolean
  className: string
  dataset: Record<string, string | undefined>
  scrollHeight: number
  clientHeight: number
  querySelector(selector: string): PageElement | null
}
declare const document: { activeElement: { blur(): void } | null; querySelector(selector: string): PageElement | null; querySelectorAll(selector: string): Iterable<PageElement> }
declare const sessionStorage: { getItem(key: string): string | null }
declare function getComputedStyle(element: unknown): { backgroundColor: string }
const artifacts = fileURLToPath(new URL('../../../test-artifacts', import.meta.url))
const statusOrder = ['FILAMENT_RUNOUT', 'ERROR', 'COMPLETE', 'OFFLINE', 'PAUSED', 'RUNNING', 'WAITING', 'IDLE', 'UNKNOWN']
const longError =
  'Nozzle temperature malfunction: the hotend thermistor reads out of range (open circuit). Check the thermistor cable and its connector on the toolhead board before resuming the print.'

/** A bridge per host: each printer's seqn counts on from its last batch; events carry the bridge's clock, now. */
function bridgeOf(farm: Farm) {
  const hosts = new Map<string, string>()
  const seqns = new Map<string, number>()
  return {
    async add(name: string, host: string, fields: Record<string, unknown> = {}): Promise<string> {
      const id = await addPrinter(farm, host, { name, ...fields })
      hosts.set(id, host)
      return id
    },
    async report(id: string, ...events: [type: string, data?: Record<string, unknown>][]): Promise<void> {
      let seqn = seqns.get(id) ?? 0
      const items = events.map(([type, data]) => item(seqn++, { type, data: data ?? {}, hostId: hosts.get(id)!, timestamp: Date.now() }))
      seqns.set(id, seqn)
      const res = await postBatch(farm, batch(id, items))
      if (res.status !== 200 || res.json.failed !== 0) throw new Error(`batch: ${res.status} ${res.text}`)
    },
  }
}

/** The tiles in the order the grid shows them, as the page has them. */
function tilesInPage(page: Page): Promise<{ id: string; status: string; name: string; timeLeft: string; hidden: boolean }[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll('#grid .tile')].map((e) => ({
      id: e.dataset['printerId'] ?? '',
      status: e.dataset['status'] ?? '',
      name: e.querySelector('.name')?.textContent ?? '',
      timeLeft: e.querySelector('.time-left')?.textContent ?? '',
      hidden: e.hidden,
    })),
  )
}

t.test('farm page - the page and its script are served with a strict content security policy', async (t) => {
  const svc = await startTestService(t)
  const page = await request(svc.url, '/')
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /text\/html/)
  t.match(page.headers['content-security-policy'], /script-src 'self'/)
  t.match(page.text, /<script src="\/farm\.js"/)
  t.notMatch(page.text, /<script>|\son[a-z]+=/i, 'no inline script or handler')
  const script = await request(svc.url, '/farm.js')
  t.match(script.headers['content-type'], /text\/javascript/)
  t.match(script.text, /\/v1\/live/)
  t.notMatch(script.text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/, 'text goes in through textContent only')
})

t.test('farm page - a wall screen of printers that follows the farm live', needsChromium, async (t) => {
  const svc = await startTestService(t)
  const farm = await openFarm(svc.url)
  const bridge = bridgeOf(farm)

  // A dozen printers in every state before the page opens.
  const printing = await bridge.add('X1C Bay 1', 'host-a', { model: 'X1C' })
  const paused = await bridge.add('P1S Bay 2', 'host-a', { model: 'P1S' })
  const failing = await bridge.add('X1C Bay 3', 'host-a', { model: 'X1C' })
  const done = await bridge.add('A1 Bay 4', 'host-a', { model: 'A1' })
  const offline = await bridge.add('MK4 Bay 5', 'host-b', { printer_type: 'prusa_connect', model: 'MK4' })
  const never = await bridge.add('Ender Bay 6', 'host-b', { printer_type: 'octoprint', model: 'Ender-3 V2' })
  const serviced = await bridge.add('P1S Bay 7', 'host-a', { model: 'P1S' })
  const voron = await bridge.add('Voron Bay 8', 'host-b', { printer_type: 'klipper', model: 'Voron 2.4' })
  const runout = await bridge.add('X1C Bay 9', 'host-a', { model: 'X1C' })
  const ready = await bridge.add('A1 Bay 10', 'host-a', { model: 'A1' })
  const crashed = await bridge.add('Ender Bay 11', 'host-b', { printer_type: 'octoprint' })
  const almost = await bridge.add('X1C Bay 12', 'host-a', { model: 'X1C' })
  const temps = { nozzle: { actual: 219.6, target: 220 }, bed: { actual: 55, target: 55 } }
  await bridge.report(paused, ['printer:statusUpdate', { status: 'printing', temperatures: temps, progress: 64, remaining_seconds: 2700, layer: 120, total_layers: 190, file_name: 'vase_spiral.3mf' }], ['status', { status: 'PAUSE' }])
  await bridge.report(failing, ['printer:statusUpdate', { status: 'printing', temperatures: temps, progress: 18, remaining_seconds: 9000, file_name: 'enclosure_lid.3mf' }])
  await bridge.report(done, ['job:start', { name: 'hinge_v2.3mf' }], ['job:finish', {}])
  await bridge.report(offline, ['heartbeat'], ['client:disconnect'])
  await bridge.report(serviced, ['heartbeat'])
  t.equal((await request(svc.url, `/v1/printers/${serviced}/maintenance`, { method: 'PATCH', headers: farm.admin, body: { maintenance: true } })).status, 200)
  await bridge.report(voron, [
    'printer:statusUpdate',
    { status: 'printing', temperatures: { nozzle: { actual: 245, target: 245 }, bed: { actual: 100.4, target: 100 }, chamber: { actual: 48, target: null } }, progress: 12, remaining_seconds: 4980, layer: 30, total_layers: 400, file_name: 'abs_duct.gcode' },
  ])
  await bridge.report(runout, ['printer:statusUpdate', { status: 'printing', temperatures: temps, progress: 51, remaining_seconds: 3300, file_name: 'spool_holder.3mf' }], ['printer:filamentStateChanged', { runout: true }])
  await bridge.report(ready, ['heartbeat'])
  await bridge.report(crashed, ['printer:statusUpdate', { status: 'Offline after error' }])
  await bridge.report(almost, ['printer:statusUpdate', { status: 'RUNNING', temperatures: temps, progress: 99, remaining_seconds: 45, layer: 249, total_layers: 250, file_name: 'clip.3mf' }])

  const browser: Browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1920, height: 1080 } })
  const problems: string[] = []
  page.on('pageerror', (error) => problems.push(error.message))
  // Every request the page makes is answered (its icon included: no /favicon.ico 404).
  page.on('response', (response) => void (response.status() >= 400 && problems.push(`${response.status()} ${response.url()}`)))
  await page.goto(svc.url + '/')
  await page.fill('#email', testAdmin.email)
  await page.fill('#password', testAdmin.password)
  await page.click('button[type=submit]')
  const tile = (id: string) => page.locator(`[data-printer-id="${id}"]`)
  const inStatus = (id: string, status: string) => page.locator(`[data-printer-id="${id}"][data-status="${status}"]`).waitFor({ timeout: 15_000 })
  await tile(printing).waitFor({ timeout: 15_000 })
  await page.locator('#conn.live').waitFor({ timeout: 15_000 })

  await t.test('tiles - each printer shows its status, its own word when it says something else, and its host and type', async (t) => {
    t.equal(await tile(printing).locator('.name').textContent(), 'X1C Bay 1')
    t.equal(await tile(printing).getAttribute('data-status'), 'UNKNOWN', 'never reported yet')
    t.equal(await tile(ready).getAttribute('data-status'), 'WAITING')
    t.equal(await tile(ready).locator('.status').textContent(), 'Ready')
    for (const [id, status] of [[paused, 'PAUSED'], [done, 'COMPLETE'], [failing, 'RUNNING'], [offline, 'OFFLINE'], [never, 'UNKNOWN'], [serviced, 'IDLE'], [voron, 'RUNNING'], [runout, 'FILAMENT_RUNOUT'], [crashed, 'ERROR'], [almost, 'RUNNING']] as const) {
      t.equal(await tile(id).getAttribute('data-status'), status, `${status} tile`)
    }
    t.equal(await tile(crashed).locator('.word').textContent(), 'Offline after error', "the printer's word when it means more than the label")
    t.equal(await tile(almost).locator('.word').textContent(), '', 'RUNNING under "Printing" says nothing new')
    t.equal(await tile(serviced).locator('.flag').textContent(), 'Maintenance')
    t.equal(await tile(done).locator('.flag').textContent(), 'Verify plate', 'a finished plate waits for an operator (the ready gate)')
    t.equal(await tile(voron).locator('.meta').textContent(), 'host-b · Klipper · Voron 2.4')
    t.match(await tile(voron).locator('.temps').textContent(), /Chamber\s48°C/, 'the chamber when it is reported, without a target')
    t.equal(await tile(almost).locator('.time-left').textContent(), '45s left')
    t.equal(await tile(paused).locator('.time-left').textContent(), '45m left')
    await page.waitForFunction(() => /^12 printers/.test(document.querySelector('#summary')?.textContent ?? ''), undefined, { timeout: 15_000 })
    t.match(await page.locator('#summary').textContent(), /1 out of filament.*1 in error.*1 complete.*1 offline.*1 paused.*3 printing.*1 ready.*1 idle.*2 unknown/)
  })

  await t.test('tiles - a job and a status report show the job, progress, layers, time left and temperatures live', async (t) => {
    await bridge.report(printing, ['job:start', { name: 'bracket.3mf' }], ['job:update', { progress: 42 }])
    await inStatus(printing, 'RUNNING')
    t.equal(await tile(printing).locator('.job').textContent(), 'bracket.3mf')
    t.equal(await tile(printing).locator('.pct').textContent(), '42%')
    await bridge.report(printing, [
      'printer:statusUpdate',
      { status: 'printing', temperatures: { nozzle: { actual: 215.3, target: 220 }, bed: { actual: 59.8, target: 60 } }, progress: 37, remaining_seconds: 4980, layer: 42, total_layers: 180, file_name: 'bracket.3mf' },
    ])
    await page.waitForFunction((id) => /215\/220°C/.test(document.querySelector(`[data-printer-id="${id}"] .temps`)?.textContent ?? ''), printing, { timeout: 15_000 })
    t.match(await tile(printing).locator('.temps').textContent(), /^Nozzle\s215\/220°C · Bed\s60\/60°C$/)
    t.equal(await tile(printing).locator('.time-left').textContent(), '1h 23m left')
    t.equal(await tile(printing).locator('.layer').textContent(), 'layer 42/180')
    t.equal(await tile(printing).locator('.pct').textContent(), '37%')
    t.equal(await tile(printing).locator('.word').textContent(), '', '"printing" is what the label says')
    t.equal(await tile(printing).locator('.meta').textContent(), 'host-a · Bambu · X1C')
  })

  await t.test('tiles - filament slots are swatches of the AMS colour, an unknown colour an outline', async (t) => {
    await bridge.report(printing, [
      'printer:amsUpdate',
      { slots: [{ position: 0, materialType: 'PLA', color: 'FF0000FF', remaining: 80 }, { position: 1, materialType: 'PETG' }, { position: 2, materialType: 'PLA', color: '00AE42FF', remaining: 35 }, { position: 3, materialType: 'TPU', color: 'FFFFFFFF', remaining: 100 }] },
    ])
    const slot0 = tile(printing).locator('.swatch[data-slot="0"]')
    await slot0.waitFor({ timeout: 15_000 })
    t.equal(await slot0.evaluate((e) => getComputedStyle(e).backgroundColor), 'rgb(255, 0, 0)')
    t.equal(await slot0.getAttribute('title'), 'Slot 1: PLA · 80% left', 'type and remaining on hover')
    t.match(await tile(printing).locator('.swatch[data-slot="1"]').getAttribute('class'), /unknown/, 'a slot without a colour is an outline')
    t.equal(await tile(printing).locator('.swatch').count(), 4)
  })

  await t.test('tiles - an error shows code and message, truncated, in full on hover and on Enter, Space or a tap', async (t) => {
    await bridge.report(failing, ['printer:error', { code: 'HMS_0300_0100_0001_0001', message: longError }])
    await inStatus(failing, 'ERROR')
    const error = tile(failing).locator('.error')
    t.equal(await error.textContent(), `HMS_0300_0100_0001_0001: ${longError}`)
    t.equal(await error.getAttribute('title'), `HMS_0300_0100_0001_0001: ${longError}`, 'the full text on hover')
    const clipped = () => error.evaluate((e: PageElement) => e.scrollHeight > e.clientHeight + 1)
    t.equal(await clipped(), true, 'truncated on the tile')
    await tile(failing).focus()
    await page.keyboard.press('Enter')
    t.match(await tile(failing).getAttribute('class'), /expanded/, 'Enter expands it')
    t.equal(await clipped(), false, 'and the whole message shows')
    await page.keyboard.press(' ')
    t.notMatch(await tile(failing).getAttribute('class'), /expanded/, 'Space folds it again')
    t.equal(await clipped(), true)
    await tile(failing).click()
    t.equal(await clipped(), false, 'a tap expands it too')
    await tile(failing).click()
  })

  await t.test('tiles - printers are renamed, created and deleted while the page is open', async (t) => {
    const renamed = await request(svc.url, `/v1/printer-config/${printing}`, { method: 'PATCH', headers: farm.admin, body: { name: 'X1C Bay 1 (left)' } })
    t.equal(renamed.status, 200)
    await page.waitForFunction((id) => document.querySelector(`[data-printer-id="${id}"] .name`)?.textContent === 'X1C Bay 1 (left)', printing, { timeout: 15_000 })
    await bridge.report(printing, ['printer:deltaUpdate', { progress: 38 }])
    await page.waitForFunction((id) => document.querySelector(`[data-printer-id="${id}"] .pct`)?.textContent === '38%', printing, { timeout: 15_000 })
    t.equal(await tile(printing).locator('.name').textContent(), 'X1C Bay 1 (left)', 'the renamed printer keeps its new name after its next event')

    const newcomer = await bridge.add('A1 Bay 13', 'host-b', { printer_type: 'klipper' })
    await tile(newcomer).waitFor({ timeout: 15_000 })
    t.equal(await tile(newcomer).locator('.name').textContent(), 'A1 Bay 13', 'a printer created while the page is open appears')
    t.equal(await tile(newcomer).getAttribute('data-status'), 'UNKNOWN')
    const gone = await bridge.add('Retired', 'host-b')
    await tile(gone).waitFor({ timeout: 15_000 })
    t.equal((await request(svc.url, `/v1/printer-config/${gone}`, { method: 'DELETE', headers: farm.admin })).status, 200)
    await tile(gone).waitFor({ state: 'detached', timeout: 15_000 })
    await page.waitForFunction(() => /^13 printers/.test(document.querySelector('#summary')?.textContent ?? ''), undefined, { timeout: 15_000 })
    t.pass('the tile and its count go with the printer')
  })

  await t.test('controls - the status filter hides the others; sorting by name, status and time left orders the tiles; the choice persists', async (t) => {
    await page.selectOption('#filter', 'RUNNING')
    await tile(never).waitFor({ state: 'hidden', timeout: 15_000 })
    const filtered = await tilesInPage(page)
    t.same(filtered.filter((x) => !x.hidden).map((x) => x.status), ['RUNNING', 'RUNNING', 'RUNNING'], 'only the printing ones show')
    t.ok(filtered.filter((x) => x.hidden).every((x) => x.status !== 'RUNNING'), 'every hidden one is not printing')
    await page.locator('#summary button[data-status="RUNNING"]').click()
    await tile(never).waitFor({ state: 'visible', timeout: 15_000 })
    t.equal(await page.locator('#filter').inputValue(), 'ALL', 'its count in the summary toggles the filter back')

    await page.selectOption('#sort', 'time')
    await page.waitForFunction((id) => document.querySelector('#grid .tile')?.dataset['printerId'] === id, almost, { timeout: 15_000 })
    const byTime = await tilesInPage(page)
    t.same(byTime.slice(0, 3).map((x) => x.id), [almost, paused, runout], 'by time left: the soonest done first')
    t.same(byTime.slice(3, 6).map((x) => x.id).sort(), [failing, printing, voron].sort())
    t.same(byTime.slice(3, 6).map((x) => x.timeLeft), ['1h 23m left', '1h 23m left', '2h 30m left'])

    await page.selectOption('#sort', 'name')
    await page.waitForFunction(() => document.querySelector('#grid .tile .name')?.textContent === 'A1 Bay 4', undefined, { timeout: 15_000 })
    const names = (await tilesInPage(page)).map((x) => x.name)
    t.same(names, [...names].sort((a, b) => a.localeCompare(b, undefined, { numeric: true })), 'by name, numbers in order (Bay 4 before Bay 10)')

    await page.selectOption('#sort', 'status')
    await page.waitForFunction(() => document.querySelector('#grid .tile')?.dataset['status'] === 'FILAMENT_RUNOUT', undefined, { timeout: 15_000 })
    const statuses = (await tilesInPage(page)).map((x) => x.status)
    t.same(statuses, [...statuses].sort((a, b) => statusOrder.indexOf(a) - statusOrder.indexOf(b)), 'by status: runout and errors first, unknown last')
    t.same(await page.evaluate(() => [sessionStorage.getItem('printfarm.sort'), sessionStorage.getItem('printfarm.filter')]), ['status', 'ALL'])
  })

  mkdirSync(artifacts, { recursive: true })
  await page.mouse.move(0, 0)
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: join(artifacts, 'farm-page.png') })

  await t.test('controls - after a reload the page signs in from the session and keeps the sort', async (t) => {
    await page.reload()
    await page.locator('#conn.live').waitFor({ timeout: 15_000 })
    await page.waitForFunction(() => document.querySelector('#grid .tile')?.dataset['status'] === 'FILAMENT_RUNOUT', undefined, { timeout: 15_000 })
    t.equal(await page.locator('#sort').inputValue(), 'status')
    t.equal(await page.locator('#grid .tile').count(), 13)
  })

  await page.setViewportSize({ width: 390, height: 844 })
  await page.screenshot({ path: join(artifacts, 'farm-page-phone.png'), fullPage: true })
  t.same(problems, [], 'no script errors, and no request of the page refused')
})
