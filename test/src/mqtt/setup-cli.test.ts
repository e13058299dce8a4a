import t from 'tap'
import { loginOf, runMosquittoSetup } from '../../../src/mqtt/setup-cli.js'

t.test('mosquitto-setup reads the login of an MQTT URL, percent-decoded, and says what is missing', async (t) => {
  t.same(loginOf('mqtt://printfarm:p%40ss%2Fword@127.0.0.1:1883', '--service-url'), { url: 'mqtt://printfarm:p%40ss%2Fword@127.0.0.1:1883', username: 'printfarm', password: 'p@ss/word' })
  t.match(loginOf('mqtt://127.0.0.1:1883', '--service-url'), /--service-url must carry a user name and a password/)
  t.match(loginOf('http://a:b@host', '--admin-url'), /--admin-url must be an mqtt:\/\/ URL/)
  t.match(loginOf('not a url', '--admin-url'), /--admin-url is not a URL/)
})

t.test('mosquitto-setup with missing or bad arguments exits 2 before connecting anywhere', async (t) => {
  const written: string[] = []
  const write = process.stderr.write.bind(process.stderr)
  process.stderr.write = ((chunk: string) => {
    written.push(String(chunk))
    return true
  }) as typeof process.stderr.write
  t.teardown(() => {
    process.stderr.write = write
  })
  t.equal(await runMosquittoSetup([], {}), 2)
  t.equal(await runMosquittoSetup(['--admin-url', 'mqtt://admin:pw@127.0.0.1:1'], {}), 2)
  t.equal(await runMosquittoSetup(['--admin-url', 'mqtt://admin:pw@127.0.0.1:1'], { MQTT_URL: 'mqtt://127.0.0.1:1' }), 2)
  t.equal(await runMosquittoSetup(['--bogus'], {}), 2)
  t.match(written.join(''), /missing --admin-url[\s\S]*missing --service-url \(or MQTT_URL\)[\s\S]*must carry a user name and a password[\s\S]*Unknown option/)
})
