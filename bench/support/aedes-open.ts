/**
 * The limit of bench/displays: a bare aedes broker (the embedded broker's
 * engine, no authentication, no service logic) in its own process.
 * argv: port. Answers nothing over HTTP; the bench connects over MQTT.
 */
import { createServer } from 'node:net'
import { Aedes } from 'aedes'

const port = Number(process.argv[2])
const broker = await Aedes.createBroker()
const server = createServer((socket) => {
  socket.setNoDelay(true)
  broker.handle(socket)
})
server.listen(port, '127.0.0.1', () => process.stderr.write(`aedes-open listening on ${port}\n`))
process.on('SIGTERM', () => {
  server.close()
  broker.close(() => process.exit(0))
})
