/**
 * A SIGKILL of the server between a claim and the start: after the restart
 * the task is still claimed by the same claim, it is not offered again, the
 * bridge's retried claim answers the same claim, and its job:start links
 * the job once.
 */
import t from 'tap'
import { bridgeScopes } from '../../../protocol/scopes.js'
import { childServiceEnv, startChildService } from '../../helpers/child-service.js'
import { addPrinter, batch, item, openFarm, postBatch } from '../../helpers/bridge.js'
import { bambuThreeMf, createModel, upload } from '../../helpers/files.js'
import { request } from '../../helpers/http.js'
import { tempDir, tempSchema, usingRealPostgres } from '../../helpers/service.js'

const dataDir = tempDir(t)
const env = childServiceEnv(dataDir, usingRealPostgres() ? tempSchema(t) : undefined)

t.test('dispatch crash - a SIGKILL between claim and start: still claimed, not re-offered, the start links once', async (t) => {
  const first = await startChildService(t, { env })
  const farm = await openFarm(first.url)
  const key = await request(first.url, '/v1/api-keys', { method: 'POST', headers: farm.admin, body: { name: 'bridge', scopes: [...bridgeScopes] } })
  const launch = { 'x-api-key': key.json.key as string }
  const modelId = await createModel(first.url, farm.admin)
  const fileId = (await upload(first.url, farm.admin, modelId, { name: 'plate.3mf', bytes: bambuThreeMf() })).json.id
  const printer = await addPrinter(farm, 'host-a', { enabled: true })
  const post = (url: string, seqn: number, type: string, data: Record<string, unknown> = {}) =>
    postBatch({ ...farm, url, bridge: launch }, batch(printer, [item(seqn, { type, data, eventId: `ev-${seqn}` })]))
  t.equal((await post(first.url, 0, 'heartbeat')).status, 200)
  const job = await request(first.url, '/v1/print-jobs/create', { method: 'POST', headers: farm.admin, body: { name: 'crash', model_file_id: fileId } })
  const assigned = await request(first.url, `/v1/print-jobs/${job.json.id}/assign`, { method: 'POST', headers: farm.admin, body: { printer_id: printer } })
  t.equal(assigned.status, 200)
  const taskId: string = assigned.json.task.id
  const claimed = await request(first.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  t.equal(claimed.status, 200)
  await first.kill()

  const second = await startChildService(t, { env })
  const admin = (await openFarm(second.url)).admin
  const tasks = (await request(second.url, '/v1/hosts/host-a/printer-tasks', { headers: launch })).json.tasks
  t.equal(tasks.length, 1, 'one task, not a second offer')
  t.match(tasks[0], { id: taskId, state: 'claimed', claim_generation: claimed.json.claim_generation })
  const retried = await request(second.url, `/v1/printer-tasks/${taskId}/claim`, { method: 'POST', headers: launch, body: { hostId: 'host-a', assignmentEpoch: 1 } })
  t.equal(retried.json.claim_generation, claimed.json.claim_generation, 'the retried claim is the same claim')
  t.equal(retried.json.printer_task_access_token, claimed.json.printer_task_access_token)
  const start = { jobId: job.json.id, printerTaskId: taskId, claimGeneration: claimed.json.claim_generation }
  const started = await post(second.url, 1, 'job:start', start)
  t.equal(started.json.events[0].outcome, 'applied')
  const again = await post(second.url, 2, 'job:start', start)
  t.equal(again.json.events[0].reason, 'job_already_started')
  const read = await request(second.url, `/v1/print-jobs/${job.json.id}`, { headers: admin })
  t.match(read.json, { status: 'printing', attempts: 1, printer_task_id: taskId })
  const listed = await request(second.url, '/v1/print-jobs', { method: 'POST', headers: admin, body: { printer_id: printer } })
  t.equal(listed.json.total, 1, 'the start opened no other job')
  await second.stop()
})
