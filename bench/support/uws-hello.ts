/** The limit for the HTTP floor: a bare uWS server answering the same bytes with no service logic. */
import uWS from 'uWebSockets.js'

const port = Number(process.argv[2])
const body = JSON.stringify({ status: 'ok', uptimeSeconds: 0, version: '0.0.0' })
uWS
  .App()
  .get('/*', (res) => {
    res.cork(() => {
      res.writeHeader('content-type', 'application/json; charset=utf-8').end(body)
    })
  })
  .listen('127.0.0.1', port, (socket) => {
    if (!socket) {
      process.stderr.write(`uws-hello: cannot listen on ${port}\n`)
      process.exit(1)
    }
  })
process.on('SIGTERM', () => process.exit(0))
