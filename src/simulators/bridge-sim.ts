/**
 * A reference bridge (`printfarm bridge-sim`; docs/print-jobs.md): one host
 * with its printers, driven against a running service exactly as a real
 * bridge should drive it. It polls the host's printer tasks, claims an
 * offered one for an idle printer, downloads the file with the claim's
 * parameters and checks its SHA-256, reports the start as a job:start naming the task, "prints"
 * (progress events over a simulated duration) and reports the finish; it
 * carries out cancel, pause and resume commands once per command id.
 *
 * The rules that make a print happen once, which a real bridge must keep too:
 * - every request is retried until it gets an answer (a lost connection or a
 *   5xx is no answer), and an event is retried as the same event (same
 *   eventId and seqn), so the service dedupes it;
 * - a printer's events go one request at a time, in seqn order;
 * - the print starts only once the service has accepted the job:start
 *   (applied, or duplicate of an accepted one); a refused start is not
 *   printed.
 *
 * Printers moved to or from its host (an admin's host assignment) are
 * followed: every few polls it reads its host's printers again, takes up a
 * printer newly assigned to it (at its new epoch, from the seqn the service
 * holds) and lets go of an idle one assigned elsewhere.
 *
 * Each thing it does is one log entry (`onLog`); the CLI writes them as JSON
 * lines, and tests count prints from them.
 */
import { createHash, randomUUID } from 'node:crypto'
import type { Clock } from '../../actors/clock.js'

export interface BridgeSimOptions {
  /** The service's base URL, e.g. http://127.0.0.1:8080. */
  url: string
  /** Further nodes of the same service: a request that gets no answer is sent to the next one. */
  otherUrls?: string[]
  /** How long one request may take before it counts as no answer (default 30,000 ms). */
  requestTimeoutMs?: number
  /** An API key with the bridge scopes (printers:read, printers:write, files:read, print:launch). */
  apiKey: string
  hostId: string
  /** Simulated print time per job (default 2,000 ms). */
  printMs?: number
  /** job:update events during a print (default 2). */
  progressSteps?: number
  /** Between polls of the host's tasks (default 1,000 ms). */
  pollMs?: number
  /** A heartbeat for each idle printer this often (default 20,000 ms), so printers stay online. */
  heartbeatMs?: number
  /** First wait before retrying a request without an answer (doubles to 2 s). */
  retryMs?: number
  onLog?: (entry: BridgeLogEntry) => void
  /** The time its events carry, and its waits. */
  clock: Clock
}

export interface BridgeLogEntry {
  at: string
  host: string
  printer?: string
  job?: number
  task?: string
  event: 'ready' | 'released' | 'claimed' | 'claim_refused' | 'downloaded' | 'download_failed' | 'started' | 'start_refused' | 'progress' | 'finished' | 'command' | 'no_answer'
  detail?: string
}

interface SimPrinter {
  id: string
  epoch: number
  seqn: number
  /** Events go one at a time, in order. */
  chain: Promise<unknown>
  /** The task it is working on (claimed or printing), if any. */
  busy: { taskId: string; jobId: number; printing: boolean; paused: boolean; cancelled: boolean } | undefined
  lastEventAt: number
}

interface TaskView {
  id: string
  job_id: number
  printer_id: string
  assignment_epoch: number
  state: string
  file_sha256: string | null
  file_name: string | null
  commands: { id: string; kind: 'cancel' | 'pause' | 'resume' }[]
}

class NoAnswer extends Error {}

/** Polls between two readings of the host's printers (a moved printer is followed within this many polls). */
const refreshEvery = 5

export class BridgeSimulator {
  readonly #o: Required<Omit<BridgeSimOptions, 'onLog'>> & { onLog: (entry: BridgeLogEntry) => void }
  readonly #printers = new Map<string, SimPrinter>()
  readonly #doneCommands = new Set<string>()
  #stopped = false
  #loop: Promise<void> | undefined
  readonly #prints = new Set<Promise<void>>()

  constructor(options: BridgeSimOptions) {
    this.#o = {
      printMs: 2_000,
      progressSteps: 2,
      pollMs: 1_000,
      heartbeatMs: 20_000,
      retryMs: 100,
      requestTimeoutMs: 30_000,
      otherUrls: [],
      onLog: () => undefined,
      ...options,
      url: options.url.replace(/\/+$/, ''),
    }
    this.#urls = [this.#o.url, ...this.#o.otherUrls.map((u) => u.replace(/\/+$/, ''))]
  }

  /** The nodes in the order tried; the one that answered last is first. */
  #urls: string[]
  #node = 0

  /** Reads the host's printers (and where each one's seqn stands), then runs until stop(). */
  async start(): Promise<void> {
    await this.#refresh()
    this.#loop = this.#run()
  }

  /** Takes up the printers assigned to this host (new ones, or at a new epoch) and lets go of idle ones assigned elsewhere. */
  async #refresh(): Promise<void> {
    const config = await this.#call<{ printers: { id: string; assignment_epoch: number; host_id: string | null }[] }>('GET', `/v1/printer-config?host_id=${encodeURIComponent(this.#o.hostId)}&include_incomplete=true`)
    const mine = new Map(config.printers.filter((p) => p.host_id === this.#o.hostId).map((p) => [p.id, p]))
    for (const [id, printer] of this.#printers) {
      if (printer.busy !== undefined) continue
      const now = mine.get(id)
      if (now === undefined || now.assignment_epoch !== printer.epoch) {
        this.#printers.delete(id)
        this.#log({ event: 'released', printer: id, detail: now === undefined ? 'assigned to another host' : `now at epoch ${now.assignment_epoch}` })
      }
    }
    const taken: SimPrinter[] = []
    for (const p of mine.values()) {
      if (this.#printers.has(p.id)) continue
      const state = await this.#call<{ printer: { last_seqn: number | null } }>('GET', `/v1/printers/${p.id}`)
      const printer: SimPrinter = { id: p.id, epoch: p.assignment_epoch, seqn: state.printer.last_seqn ?? -1, chain: Promise.resolve(), busy: undefined, lastEventAt: 0 }
      this.#printers.set(p.id, printer)
      taken.push(printer)
      this.#log({ event: 'ready', printer: p.id, detail: `epoch ${p.assignment_epoch}, next seqn ${(state.printer.last_seqn ?? -1) + 1}` })
    }
    await Promise.all(taken.map((p) => this.#event(p, 'heartbeat', {})))
  }

  get printerIds(): string[] {
    return [...this.#printers.keys()]
  }

  async stop(): Promise<void> {
    this.#stopped = true
    await this.#loop
    await Promise.allSettled([...this.#prints])
  }

  async #run(): Promise<void> {
    for (let round = 1; !this.#stopped; round++) {
      try {
        if (round % refreshEvery === 0) await this.#refresh()
        await this.#pollOnce()
        await this.#heartbeats()
      } catch (error) {
        if (!(error instanceof NoAnswer)) this.#log({ event: 'no_answer', detail: String(error) })
      }
      await this.#delay(this.#o.pollMs)
    }
  }

  async #pollOnce(): Promise<void> {
    const { tasks } = await this.#call<{ tasks: TaskView[] }>('GET', `/v1/hosts/${encodeURIComponent(this.#o.hostId)}/printer-tasks`)
    for (const task of tasks) {
      const printer = this.#printers.get(task.printer_id)
      if (printer === undefined || task.assignment_epoch !== printer.epoch) continue
      for (const command of task.commands) if (printer.busy?.taskId === task.id) this.#command(printer, command)
      if ((task.state === 'offered' || task.state === 'claimed') && printer.busy === undefined) {
        printer.busy = { taskId: task.id, jobId: task.job_id, printing: false, paused: false, cancelled: false }
        const run = this.#take(printer, task).finally(() => this.#prints.delete(run))
        this.#prints.add(run)
      }
    }
  }

  /** Claim, download, start, print, finish: one task on one printer. */
  async #take(printer: SimPrinter, task: TaskView): Promise<void> {
    const busy = printer.busy!
    try {
      const claim = await this.#call<{ claim_generation: string; printer_task_access_token: string; download_url: string | null; task: TaskView & { file_id: string | null } }>('POST', `/v1/printer-tasks/${task.id}/claim`, {
        hostId: this.#o.hostId,
        assignmentEpoch: printer.epoch,
      }).catch((error: unknown) => {
        if (error instanceof Refused) {
          this.#log({ event: 'claim_refused', printer: printer.id, task: task.id, job: task.job_id, detail: error.message })
          return undefined
        }
        throw error
      })
      if (claim === undefined) return
      this.#log({ event: 'claimed', printer: printer.id, task: task.id, job: task.job_id, detail: claim.claim_generation })
      if (claim.task.file_id !== null) {
        // The task-bound read (the claim's four parameters) rather than download_url: it needs no
        // PUBLIC_BASE_URL to be right, and the service checks it against the live claim.
        const query = new URLSearchParams({
          print_job_id: String(task.job_id),
          printer_task_id: task.id,
          claim_generation: claim.claim_generation,
          printer_task_access_token: claim.printer_task_access_token,
        })
        if (!(await this.#download(`${this.#o.url}/v1/files/${claim.task.file_id}?${query}`, claim.task.file_sha256, printer, task))) return
      }
      const start = await this.#event(printer, 'job:start', { jobId: task.job_id, printerTaskId: task.id, claimGeneration: claim.claim_generation, name: task.file_name })
      if (start.outcome !== 'applied' && start.outcome !== 'duplicate') {
        this.#log({ event: 'start_refused', printer: printer.id, task: task.id, job: task.job_id, detail: `${start.outcome} ${start.reason ?? ''}`.trim() })
        return
      }
      busy.printing = true
      this.#log({ event: 'started', printer: printer.id, task: task.id, job: task.job_id })
      const steps = Math.max(0, this.#o.progressSteps)
      for (let step = 1; step <= steps && !busy.cancelled; step++) {
        await this.#printFor(busy, this.#o.printMs / (steps + 1))
        if (busy.cancelled) break
        const progress = Math.round((step / (steps + 1)) * 100)
        await this.#event(printer, 'job:update', { progress })
        this.#log({ event: 'progress', printer: printer.id, job: task.job_id, detail: `${progress}%` })
      }
      if (!busy.cancelled) await this.#printFor(busy, this.#o.printMs / (steps + 1))
      const result = busy.cancelled ? 'cancelled' : 'success'
      await this.#event(printer, 'job:finish', { result })
      this.#log({ event: 'finished', printer: printer.id, task: task.id, job: task.job_id, detail: result })
    } finally {
      printer.busy = undefined
    }
  }

  async #download(url: string, sha256: string | null, printer: SimPrinter, task: TaskView): Promise<boolean> {
    for (let wait = this.#o.retryMs; ; wait = Math.min(2_000, wait * 2)) {
      const deadline = this.#deadline(60_000)
      try {
        const res = await fetch(url, { headers: { 'x-api-key': this.#o.apiKey }, signal: deadline.signal })
        if (res.status === 200) {
          const bytes = Buffer.from(await res.arrayBuffer())
          const digest = createHash('sha256').update(bytes).digest('hex')
          if (sha256 !== null && digest !== sha256) {
            this.#log({ event: 'download_failed', printer: printer.id, task: task.id, job: task.job_id, detail: 'sha256 differs' })
            return false
          }
          this.#log({ event: 'downloaded', printer: printer.id, task: task.id, job: task.job_id, detail: `${bytes.length} bytes` })
          return true
        }
        await res.arrayBuffer().catch(() => undefined)
        if (res.status < 500) {
          this.#log({ event: 'download_failed', printer: printer.id, task: task.id, job: task.job_id, detail: `HTTP ${res.status}` })
          return false
        }
      } catch {
        // No answer: the same download again.
      } finally {
        deadline.clear()
      }
      if (this.#stopped) return false
      await this.#delay(wait)
    }
  }

  /** Waits `ms` of printing time; a pause stops the time, a cancel ends it. */
  async #printFor(busy: NonNullable<SimPrinter['busy']>, ms: number): Promise<void> {
    let left = ms
    while (left > 0 && !busy.cancelled) {
      const step = Math.min(left, 50)
      await this.#delay(step)
      if (!busy.paused) left -= step
    }
  }

  /** Carries out a command once per id (the service lists it until the matching event arrives). */
  #command(printer: SimPrinter, command: { id: string; kind: 'cancel' | 'pause' | 'resume' }): void {
    if (this.#doneCommands.has(command.id)) return
    this.#doneCommands.add(command.id)
    const busy = printer.busy!
    this.#log({ event: 'command', printer: printer.id, task: busy.taskId, job: busy.jobId, detail: command.kind })
    if (command.kind === 'cancel') busy.cancelled = true
    else if (command.kind === 'pause' && !busy.paused) {
      busy.paused = true
      void this.#event(printer, 'job:pause', {}).catch(() => undefined)
    } else if (command.kind === 'resume' && busy.paused) {
      busy.paused = false
      void this.#event(printer, 'job:unpause', {}).catch(() => undefined)
    }
  }

  async #heartbeats(): Promise<void> {
    const now = this.#o.clock.now()
    await Promise.all(
      [...this.#printers.values()].filter((p) => p.busy === undefined && now - p.lastEventAt >= this.#o.heartbeatMs).map((p) => this.#event(p, 'heartbeat', {})),
    )
  }

  /** One event of a printer, in its turn, retried as the same event until answered. */
  #event(printer: SimPrinter, type: string, data: Record<string, unknown>): Promise<{ outcome: string; reason?: string }> {
    const next = printer.chain.then(async () => {
      printer.seqn++
      const event = { eventId: randomUUID(), type, timestamp: this.#o.clock.now(), seqn: printer.seqn, hostId: this.#o.hostId, assignmentEpoch: printer.epoch, deliveryAttempt: 1, data }
      for (let attempt = 1, wait = this.#o.retryMs; ; attempt++, wait = Math.min(2_000, wait * 2)) {
        try {
          const answer = await this.#once<{ events: { outcome: string; reason?: string }[] }>('POST', '/v1/printer-events/batch', {
            printerId: printer.id,
            hostId: this.#o.hostId,
            assignmentEpoch: printer.epoch,
            timestamp: this.#o.clock.now(),
            events: [{ ...event, deliveryAttempt: attempt }],
          })
          printer.lastEventAt = this.#o.clock.now()
          return answer.events[0]!
        } catch (error) {
          if (!(error instanceof NoAnswer)) throw error
        }
        await this.#delay(wait)
      }
    })
    printer.chain = next.catch(() => undefined)
    return next
  }

  /** A request retried until it is answered: 2xx → body, 4xx → Refused, no answer or 5xx → again. */
  async #call<T>(method: string, path: string, body?: unknown): Promise<T> {
    for (let wait = this.#o.retryMs; ; wait = Math.min(2_000, wait * 2)) {
      try {
        return await this.#once<T>(method, path, body)
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error
        // No answer from this node (down, frozen, shutting down): the next one, if there is one.
        this.#node = (this.#node + 1) % this.#urls.length
      }
      if (this.#stopped) throw new NoAnswer('stopped')
      await this.#delay(wait)
    }
  }

  async #once<T>(method: string, path: string, body?: unknown): Promise<T> {
    const deadline = this.#deadline(this.#o.requestTimeoutMs)
    let res: Response
    let text: string
    try {
      res = await fetch(`${this.#urls[this.#node]}${path}`, {
        method,
        headers: { 'x-api-key': this.#o.apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? null : JSON.stringify(body),
        signal: deadline.signal,
      })
      text = await res.text().catch(() => '')
    } catch (error) {
      throw new NoAnswer(String(error))
    } finally {
      deadline.clear()
    }
    if (res.status >= 500) throw new NoAnswer(`HTTP ${res.status}`)
    const json = text === '' ? undefined : (JSON.parse(text) as unknown)
    if (res.status >= 400) throw new Refused(res.status, json)
    return json as T
  }

  /** A signal aborted once `ms` pass on the simulator's clock (a request and the reading of its answer). */
  #deadline(ms: number): { signal: AbortSignal; clear(): void } {
    const abort = new AbortController()
    const timer = this.#o.clock.setTimeout(() => abort.abort(new Error(`no answer within ${ms} ms`)), ms)
    return { signal: abort.signal, clear: () => this.#o.clock.clearTimeout(timer) }
  }

  #delay(ms: number): Promise<void> {
    return new Promise((resolve) => this.#o.clock.setTimeout(resolve, ms))
  }

  #log(entry: Omit<BridgeLogEntry, 'at' | 'host'>): void {
    this.#o.onLog({ at: new Date(this.#o.clock.now()).toISOString(), host: this.#o.hostId, ...entry })
  }
}

/** A 4xx answer: the request was understood and refused; retrying it changes nothing. */
export class Refused extends Error {
  readonly status: number
  readonly body: unknown

  constructor(status: number, body: unknown) {
    const code = (body as { error?: unknown } | undefined)?.error
    super(`HTTP ${status}${typeof code === 'string' ? ` ${code}` : ''}`)
    this.status = status
    this.body = body
  }
}
