/**
 * The limit for the live feed: a bare uWS server whose WebSockets subscribe
 * to one topic, and which publishes a frame of the same size as the
 * service's `printers` events, `rate` times a second, stamped with the
 * publish time. No service logic: what uWS publish alone costs.
 * argv: port, frame template (JSON with MARKER), rate per second. GET /start starts publishing.
 */
import uWS from 'uWebSockets.js'

const [portArg, template, rateArg] = process.argv.slice(2)
const port = Number(portArg)
const rate = Number(rateArg)
const app = uWS.App()
app.ws('/v1/live', {
  open: (ws) => {
    ws.subscribe('printers')
  },
  message: () => undefined,
})
app.get('/healthz', (res) => {
  res.end('ok')
})
app.get('/start', (res) => {
  start()
  res.end('started')
})
app.listen('127.0.0.1', port, (socket) => {
  if (!socket) {
    process.stderr.write(`uws-publish: cannot listen on ${port}\n`)
    process.exit(1)
  }
})
let timer: ReturnType<typeof setInterval> | undefined
function start(): void {
  if (timer) return
  // Paced by elapsed time, checked every 10 ms: the same pacing as the bench's bridges.
  const started = performance.now()
  let sent = 0
  timer = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * rate)
    for (; sent < due; sent++) app.publish('printers', template!.replace('MARKER', String(performance.timeOrigin + performance.now())), false)
  }, 10)
}
process.on('SIGTERM', () => {
  if (timer) clearInterval(timer)
  process.exit(0)
})
