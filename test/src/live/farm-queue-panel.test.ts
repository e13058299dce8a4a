/**
 * The live farm page's queue panel end to end in headless Chromium (Debian's
 * package, driven by playwright-core), over the real HTTP API and the `queue`
 * topic of the WebSocket feed: jobs that no printer can take are listed in
 * queue order with why they wait, a job created while the page is open
 * appears, and the line of the job the queue dispatches says so once its
 * printer is loaded with the material; past the first 100 jobs it says how
 * many more wait. Screenshots (a wall screen and a phone, with a short and a
 * long queue) are left in test-artifacts/ beside the farm page's.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'
import { addPrinter, batch, item, openFarm, postBatch, type Farm } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { startTestService, testAdmin } from '../../helpers/service.js'

const executablePath = '/usr/bin/chromium'
const needsChromium = { skip: existsSync(executablePath) ? false : `needs ${executablePath} (apt-get install chromium)` }
const artifacts = fileURLToPath(new URL('../../../test-artifacts', import.meta.url))
const waitMs = 15_000

// What the functions run inside the page use of the browser: the test's TypeScript has no DOM library.
interface PageElement {
  textContent: string | null
  hidden: boolean
  dataset: Record<string, string | undefined>
  querySelector(selector: string): PageElement | null
}
declare const document: { activeElement: { blur(): void } | null; querySelector(selector: string): PageElement | null; querySelectorAll(selector: string): Iterable<PageElement> }

interface Line {
  id: string
  status: string
  index: string
  name: string
  priority: string | null
  why: string
}

/** The queue panel's lines in the order the page shows them. */
function linesInPage(page: Page): Promise<Line[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll('#queue-list li')].map((e) => ({
      id: e.dataset['jobId'] ?? '',
      status: e.dataset['status'] ?? '',
      index: e.querySelector('.index')?.textContent ?? '',
      name: e.querySelector('.name')?.textContent ?? '',
      priority: e.querySelector('.priority')?.textContent ?? null,
      why: e.querySelector('.why')?.textContent ?? '',
    })),
  )
}

/** Waits (bounded) until the panel shows `count` lines. */
async function untilCount(page: Page, count: number): Promise<Line[]> {
  await page.waitForFunction((count) => [...document.querySelectorAll('#queue-list li')].length === count, count, { timeout: waitMs })
  return linesInPage(page)
}

/** Waits (bounded) until every line from the `from`-th (0-based) on says why it waits matching `pattern`. */
async function untilWhy(page: Page, pattern: RegExp, from = 0, to?: number): Promise<Line[]> {
  await page.waitForFunction(
    ([source, from, to]) => {
      const lines = [...document.querySelectorAll('#queue-list .why')].slice(from, to ?? undefined)
      return lines.length > 0 && lines.every((e) => new RegExp(source).test(e.textContent ?? ''))
    },
    [pattern.source, from, to ?? null] as const,
    { timeout: waitMs },
  )
  return linesInPage(page)
}

t.test('queue panel - the waiting jobs in order, each with why it waits, live', needsChromium, async (t) => {
  const svc = await startTestService(t)
  const farm = await openFarm(svc.url)
  const modelId = await createModel(svc.url, farm.admin)
  // Its plate prints with PLA #FFFFFF.
  const fileId: string = (await upload(svc.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id
  const seqns = new Map<string, number>()
  const report = async (printer: string, type: string, data: Record<string, unknown>) => {
    const seqn = (seqns.get(printer) ?? -1) + 1
    seqns.set(printer, seqn)
    const res = await postBatch(farm, batch(printer, [item(seqn, { type, data, eventId: `ev-${randomUUID()}`, timestamp: Date.now() })]))
    if (res.status !== 200 || res.json.failed !== 0) throw new Error(`batch: ${res.status} ${res.text}`)
  }
  const createJob = async (name: string, priority = 0): Promise<string> => {
    const res = await request(svc.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name, model_file_id: fileId, priority } })
    if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
    return String(res.json.id)
  }

  // A P1S (the file's model) loaded with black PETG: it can take none of the jobs. An MK4 never reports.
  const printer = await addPrinter(farm, 'host-a', { name: 'P1S Bay 1', enabled: true, model: 'Bambu Lab P1S' })
  await addPrinter(farm, 'host-b', { name: 'MK4 Bay 2', enabled: true, printer_type: 'prusa_connect', model: 'MK4' })
  await report(printer, 'printer:amsUpdate', { slots: [{ position: 0, materialType: 'PETG', color: '000000FF' }] })

  const browser: Browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1920, height: 1080 } })
  const problems: string[] = []
  page.on('pageerror', (error) => problems.push(error.message))
  await page.goto(svc.url + '/')
  await page.fill('#email', testAdmin.email)
  await page.fill('#password', testAdmin.password)
  await page.click('button[type=submit]')
  await page.locator('#conn.live').waitFor({ timeout: waitMs })

  await t.test('empty - an empty queue says so', async (t) => {
    await page.locator('#queue-empty').waitFor({ state: 'visible', timeout: waitMs })
    t.equal(await page.locator('#queue-empty').textContent(), 'Nothing waiting')
    t.equal(await page.locator('#queue-list li').count(), 0)
    t.equal(await page.locator('#queue-more').textContent(), '')
  })

  const bracket = await createJob('Bracket')
  const hinge = await createJob('Hinge')
  const rush = await createJob('Rush order', 5)

  await t.test('order - jobs no printer can take are listed in queue order with the summary of why they wait', async (t) => {
    const lines = await untilCount(page, 3)
    t.same(lines.map((l) => l.id), [rush, bracket, hinge], 'the higher priority first, then by age')
    t.same(lines.map((l) => l.index), ['1', '2', '3'])
    t.same(lines.map((l) => l.name), ['Rush order', 'Bracket', 'Hinge'])
    t.same(lines.map((l) => l.priority), ['priority 5', null, null], 'a priority only when it is not 0')
    t.same(lines.map((l) => l.status), ['queued', 'queued', 'queued'])
    for (const l of lines) t.match(l.why, /^no printer can take it: .*without its material/, `${l.name}: why it waits`)
    t.match(lines[0]!.why, /\b1\soffline\b/, 'every reason is counted')
    t.equal(await page.locator('#queue-count').textContent(), '3 waiting')
    t.equal(await page.locator('#queue-empty').isHidden(), true)
  })

  let latch = ''
  await t.test('live - a job created while the page is open appears at its place without a reload', async (t) => {
    latch = await createJob('Latch')
    const lines = await untilCount(page, 4)
    t.same(lines.map((l) => l.id), [rush, bracket, hinge, latch])
    t.equal(lines[3]!.index, '4')
    t.match(lines[3]!.why, /without its material/)
    t.equal(await page.locator('#queue-count').textContent(), '4 waiting')
  })

  await t.test('live - loading the material lets the queue dispatch the first job: its line says so and names the printer', async (t) => {
    await report(printer, 'printer:amsUpdate', { slots: [{ position: 0, materialType: 'PLA', color: 'FFFFFFFF' }] })
    const lines = await untilWhy(page, /offered to its printer/, 0, 1)
    t.equal(lines[0]!.id, rush)
    t.equal(lines[0]!.status, 'dispatching')
    t.equal(lines[0]!.why, 'offered to its printer · P1S Bay 1', "the printer's name from the printers topic")
    t.same(lines.slice(1).map((l) => l.id), [bracket, hinge, latch])
    const later = await untilWhy(page, /^no printer can take it: .*\b1\sbusy\b/, 1)
    t.same(later.slice(1).map((l) => l.status), ['queued', 'queued', 'queued'], 'the others wait for the printer it took')
  })

  await t.test('live - a renamed printer is renamed in the queue line too', async (t) => {
    const renamed = await request(svc.url, `/v1/printer-config/${printer}`, { method: 'PATCH', headers: farm.admin, body: { name: 'P1S Bay 1 (left)' } })
    t.equal(renamed.status, 200)
    const lines = await untilWhy(page, /P1S Bay 1 \(left\)$/, 0, 1)
    t.equal(lines[0]!.why, 'offered to its printer · P1S Bay 1 (left)')
  })

  mkdirSync(artifacts, { recursive: true })
  await page.mouse.move(0, 0)
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: join(artifacts, 'farm-queue-panel.png') })
  await page.setViewportSize({ width: 390, height: 844 })
  await page.screenshot({ path: join(artifacts, 'farm-queue-panel-phone.png'), fullPage: true })
  await page.setViewportSize({ width: 1920, height: 1080 })

  await t.test('more - past the head of the queue the panel says how many more wait', async (t) => {
    for (let i = 0; i < 10; i++) await Promise.all(Array.from({ length: 10 }, (_, j) => createJob(`Batch part ${i * 10 + j + 1}`)))
    await page.waitForFunction(() => document.querySelector('#queue-more')?.textContent === '4 more', undefined, { timeout: waitMs })
    t.equal(await page.locator('#queue-list li').count(), 100, 'the head of the queue: its first 100 jobs')
    t.equal(await page.locator('#queue-count').textContent(), '104 waiting')
    await page.screenshot({ path: join(artifacts, 'farm-queue-panel-long.png') })
    await page.setViewportSize({ width: 390, height: 844 })
    await page.screenshot({ path: join(artifacts, 'farm-queue-panel-long-phone.png'), fullPage: true })
  })

  t.same(problems, [], 'no script errors')
})
