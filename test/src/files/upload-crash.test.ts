/**
 * An upload cut by a SIGKILL of the server: after the restart there is no
 * record and no object, the model's audit finds nothing orphaned, the cut
 * upload's temporary is kept while it could belong to a live upload, and
 * the start-up sweep removes it once it is a day old.
 */
import t from 'tap'
import { once } from 'node:events'
import { existsSync, readdirSync, utimesSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { childServiceEnv, startChildService } from '../../helpers/child-service.js'
import { openFarm } from '../../helpers/bridge.js'
import { waitFor } from '../../helpers/poll.js'
import { createModel } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { tempDir, tempSchema, usingRealPostgres } from '../../helpers/service.js'

const dataDir = tempDir(t)
const env = childServiceEnv(dataDir, usingRealPostgres() ? tempSchema(t) : undefined)
const tmp = join(dataDir, 'files', '.tmp')

t.test('upload crash - a SIGKILL mid-upload leaves no record and no object; the temporary goes once stale', async (t) => {
  const first = await startChildService(t, { env })
  const farm = await openFarm(first.url)
  const modelId = await createModel(first.url, farm.admin)
  const boundary = 'crash-boundary'
  const socket = connect(first.port, '127.0.0.1')
  await once(socket, 'connect')
  socket.on('error', () => undefined)
  socket.write(
    `POST /v1/models/${modelId}/files HTTP/1.1\r\nhost: x\r\nauthorization: ${farm.admin['authorization']}\r\nx-organization-id: ${farm.orgId}\r\n` +
      `content-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${64 * 1024 * 1024}\r\n\r\n` +
      `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="cut.gcode"\r\n\r\n`,
  )
  socket.write(Buffer.alloc(1024 * 1024, 0x3b))
  await waitFor(() => existsSync(tmp) && readdirSync(tmp).length > 0, 'the upload to start writing', 30_000)
  await first.kill()
  socket.destroy()

  const second = await startChildService(t, { env })
  const farm2 = await openFarm(second.url)
  const audit = await request(second.url, `/v1/models/${modelId}/files/audit`, { headers: farm2.admin })
  t.same(audit.json.summary, { total_database_files: 0, total_storage_files: 0, total_orphaned_files: 0 }, 'no record, no object')
  const left = readdirSync(tmp)
  t.equal(left.length, 1, "the cut upload's temporary is kept while it is young")
  await second.stop()

  const dayAgo = new Date(Date.now() - 2 * 86_400_000)
  utimesSync(join(tmp, left[0]!), dayAgo, dayAgo)
  const third = await startChildService(t, { env })
  await waitFor(() => readdirSync(tmp).length === 0, 'the start-up sweep to remove the stale temporary', 30_000)
  t.same(readdirSync(tmp), [])
  await third.stop()
})
