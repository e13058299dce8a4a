/**
 * The delivery worker on a simulated clock (docs/displays.md, "Delivery
 * behavior"): what is published when, with a transport and a store that
 * record every call. The same runtime runs over PostgreSQL and the broker in
 * test/src/displays.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { backoffMs, DisplayRuntime, newActivationIntervalMs, republishIntervalMs, type ProfileTransport } from '../../actors/display-runtime.js'
import type { ActivationProgress, AssignRequest, DisplayPersistence, StoredActivation } from '../../actors/display-persistence.js'
import type { DisplayAddress, DisplayCredential, Envelope, ReceiptMessage } from '../../protocol/display-mqtt.js'
import { maxPublishAttempts } from '../../machines/display-activation.js'
import { ServiceError } from '../../protocol/errors.js'
import { SimulatedClock } from '../helpers/clock.js'

const revisionA = { id: randomUUID(), sha256: 'a'.repeat(64), data: 'AQA=', byteLength: 38 }
const revisionB = { id: randomUUID(), sha256: 'b'.repeat(64), data: 'AgA=', byteLength: 38 }

/** The store's rules (conditional writes on binding epoch and generation), in memory. */
class FakeStore implements DisplayPersistence {
  rows = new Map<string, StoredActivation>()
  writes = 0
  revisions = new Map<string, typeof revisionA>([revisionA, revisionB].map((r) => [r.id, r]))

  add(organizationId: string): StoredActivation {
    const row: StoredActivation = {
      displayId: randomUUID(),
      organizationId,
      bindingEpoch: 1,
      credentialId: randomUUID(),
      generation: 0,
      desired: null,
      payload: null,
      applied: null,
      errorCode: null,
      publishError: null,
      publishAttempts: 0,
      session: null,
      updatedAt: new Date(0),
    }
    this.rows.set(row.displayId, row)
    return row
  }
  async load(id: string) {
    const row = this.rows.get(id)
    return row && structuredClone(row)
  }
  async assign(id: string, r: AssignRequest) {
    const row = this.rows.get(id)
    if (row === undefined || row.organizationId !== r.organizationId) throw new ServiceError('display_not_found', 'no display')
    if (row.bindingEpoch !== r.expectedBindingEpoch) throw new ServiceError('display_binding_epoch_conflict', 'epoch')
    if (row.generation !== r.expectedActivationGeneration) throw new ServiceError('signal_profile_activation_conflict', 'generation')
    const revision = this.revisions.get(r.revisionId)!
    row.generation++
    row.desired = { activation_generation: row.generation, profile_revision_id: revision.id, sha256: revision.sha256 }
    row.payload = { data: revision.data, byteLength: revision.byteLength }
    Object.assign(row, { errorCode: null, publishError: null, publishAttempts: 0 })
    this.writes++
    return structuredClone(row)
  }
  async saveProgress(id: string, epoch: number, generation: number, p: ActivationProgress) {
    const row = this.rows.get(id)
    if (row === undefined || row.bindingEpoch !== epoch || row.generation !== generation) return undefined
    Object.assign(row, structuredClone(p), { updatedAt: new Date(++this.writes) })
    return row.updatedAt
  }
  async rebind(id: string, organizationId: string, grant: (credential: DisplayCredential) => Promise<void>) {
    const row = this.rows.get(id)!
    if (row.organizationId !== organizationId) throw new ServiceError('display_not_found', 'no display')
    const previous = structuredClone(row)
    const credentialId = randomUUID()
    // As in the store: the broker takes the credential before the change commits.
    await grant({ organizationId, displayId: id, bindingEpoch: row.bindingEpoch + 1, credentialId, username: `display-${credentialId}`, password: 'p' })
    Object.assign(row, { bindingEpoch: row.bindingEpoch + 1, credentialId, generation: 0, desired: null, payload: null, applied: null, errorCode: null, publishError: null, publishAttempts: 0, session: null })
    return { previous, current: structuredClone(row), username: 'u', password: 'p' }
  }
  async targets() {
    return [...this.rows.values()].filter((r) => r.desired !== null).map((r) => r.displayId)
  }
}

class FakeTransport implements ProfileTransport {
  published: { at: number; address: DisplayAddress; envelope: Envelope }[] = []
  attempts = 0
  failing = false
  cleared: DisplayAddress[] = []
  revoked: string[] = []
  granted: DisplayCredential[] = []
  grantFailing = false
  readonly clock: SimulatedClock
  constructor(clock: SimulatedClock) {
    this.clock = clock
  }
  async publishConfig(address: DisplayAddress, payload: string) {
    this.attempts++
    if (this.failing) throw new Error('broker down')
    this.published.push({ at: this.clock.time, address, envelope: JSON.parse(payload) })
  }
  async clearConfig(address: DisplayAddress) {
    this.cleared.push(address)
  }
  async revokeCredential(id: string) {
    this.revoked.push(id)
  }
  async grantCredential(credential: DisplayCredential) {
    if (this.grantFailing) throw new Error('broker refused the credential')
    this.granted.push(credential)
  }
}

function setup() {
  const clock = new SimulatedClock()
  const store = new FakeStore()
  const transport = new FakeTransport(clock)
  const runtime = new DisplayRuntime({ persistence: store, transport, clock })
  const org = randomUUID()
  const display = store.add(org)
  const assign = (revision: { id: string }, generation: number) =>
    runtime.assign(display.displayId, { organizationId: org, revisionId: revision.id, expectedBindingEpoch: store.rows.get(display.displayId)!.bindingEpoch, expectedActivationGeneration: generation })
  return { clock, store, transport, runtime, org, display, assign }
}

function receipt(row: StoredActivation, session: { id: string; generation: number }, sequence: number, result: ReceiptMessage['profile']['result'], identity = row.desired, extra: Partial<ReceiptMessage['profile']> = {}): ReceiptMessage {
  return {
    organization_id: row.organizationId,
    display_id: row.displayId,
    binding_epoch: row.bindingEpoch,
    credential_id: row.credentialId,
    session_id: session.id,
    session_generation: session.generation,
    status_sequence: sequence,
    observed_at: new Date(0).toISOString(),
    refresh_requested: false,
    profile: {
      active: result === 'applied' ? identity : null,
      attempted: result === 'announced' ? null : identity,
      highest_admitted: result === 'applied' ? identity : null,
      result,
      refresh_requested: false,
      error_code: result === 'rejected' ? 'invalid_program' : null,
      ...extra,
    },
  }
}

const topicOf = (row: StoredActivation) => ({ organizationId: row.organizationId, displayId: row.displayId, bindingEpoch: row.bindingEpoch, credentialId: row.credentialId, kind: 'receipt' as const })

t.test('the desired activation is stored before it is published', async (t) => {
  const { store, transport, assign, clock, display } = setup()
  let storedFirst = false
  const publish = transport.publishConfig.bind(transport)
  transport.publishConfig = async (address, payload) => {
    storedFirst = store.rows.get(display.displayId)!.desired?.activation_generation === JSON.parse(payload).activation_generation
    return publish(address, payload)
  }
  await assign(revisionA, 0)
  await clock.advance(0)
  t.equal(transport.published.length, 1)
  t.ok(storedFirst, 'the store had generation 1 when the envelope went out')
})

t.test('assignments within one second coalesce: the newest goes out when the second ends, the ones between never do', async (t) => {
  const { transport, assign, clock } = setup()
  await assign(revisionA, 0)
  await clock.advance(100)
  await assign(revisionB, 1)
  await clock.advance(100)
  await assign(revisionA, 2)
  await clock.advance(2_000)
  t.same(
    transport.published.map((p) => [p.at, p.envelope.activation_generation]),
    [
      [0, 1],
      [newActivationIntervalMs, 3],
    ],
  )
  t.equal(transport.published[1]!.envelope.profile_revision_id, revisionA.id, 'a rollback to older bytes is a new, higher generation')
})

t.test('while no receipt arrives the same activation is republished every 45 s with fresh timestamps; an applied receipt stops it', async (t) => {
  const { transport, assign, clock, runtime, store, display } = setup()
  await assign(revisionA, 0)
  await clock.advance(republishIntervalMs * 2 + 10)
  t.same(transport.published.map((p) => p.at), [0, republishIntervalMs, republishIntervalMs * 2])
  t.same(new Set(transport.published.map((p) => p.envelope.activation_generation)), new Set([1]), 'same identity')
  t.equal(new Set(transport.published.map((p) => p.envelope.created_at)).size, 3, 'new created_at each time')
  const first = transport.published[0]!.envelope
  t.equal(Date.parse(first.expires_at) - Date.parse(first.created_at), 3 * 24 * 3600_000, 'expires three days after created')
  const row = store.rows.get(display.displayId)!
  t.equal(await runtime.receipt(topicOf(row), receipt(row, { id: 's1', generation: 1 }, 1, 'applied')), 'accepted')
  t.equal(runtime.peek(display.displayId)?.status, 'device_applied')
  await clock.advance(republishIntervalMs * 3)
  t.equal(transport.published.length, 3, 'nothing more once applied')
})

t.test('publication failures back off 1, 2, 4 ... 60 s, and the 20th failure records the error and stops until retry', async (t) => {
  const { transport, assign, clock, runtime, store, display, org } = setup()
  transport.failing = true
  const times: number[] = []
  const publish = transport.publishConfig.bind(transport)
  transport.publishConfig = (a, p) => {
    times.push(clock.time)
    return publish(a, p)
  }
  await assign(revisionA, 0)
  await clock.advance(60 * 60_000)
  t.equal(transport.attempts, maxPublishAttempts, 'exactly 20 attempts')
  const gaps = times.slice(1).map((at, i) => at - times[i]!)
  t.same(gaps, Array.from({ length: maxPublishAttempts - 1 }, (_, i) => backoffMs(i + 1)))
  t.same(gaps.slice(0, 7), [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000], 'doubling to the 60 s ceiling')
  const row = store.rows.get(display.displayId)!
  t.match(row.publishError, /broker down/)
  t.equal(row.publishAttempts, maxPublishAttempts, 'the count is stored (a restart does not start over)')
  t.equal(clock.pending, 0, 'no timer left: publishing has stopped')

  transport.failing = false
  const retried = await runtime.retry(display.displayId, org)
  t.equal(retried.publishError, null)
  await clock.advance(0)
  t.equal(transport.published.length, 1, 'retry publishes again')
  await t.rejects(runtime.retry(display.displayId, org), { code: 'signal_profile_target_healthy' }, 'a second retry finds nothing wrong')
})

t.test('a rejection stops republishing; retry resumes it', async (t) => {
  const { transport, assign, clock, runtime, store, display, org } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const row = store.rows.get(display.displayId)!
  t.equal(await runtime.receipt(topicOf(row), receipt(row, { id: 's1', generation: 1 }, 1, 'rejected')), 'accepted')
  t.equal(store.rows.get(display.displayId)!.errorCode, 'invalid_program')
  await clock.advance(republishIntervalMs * 2)
  t.equal(transport.published.length, 1, 'no republish of a rejected activation')
  await runtime.retry(display.displayId, org)
  await clock.advance(0)
  t.equal(transport.published.length, 2)
  t.equal(runtime.peek(display.displayId)?.status, 'sync_pending')
})

t.test('replayed, out-of-order and older-session receipts change nothing', async (t) => {
  const { assign, clock, runtime, store, display } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const row = () => store.rows.get(display.displayId)!
  const session = { id: 's2', generation: 2 }
  t.equal(await runtime.receipt(topicOf(row()), receipt(row(), session, 5, 'deferred', row().desired, { error_code: 'completion_cache_busy' })), 'accepted')
  const writes = store.writes
  t.equal(await runtime.receipt(topicOf(row()), receipt(row(), session, 5, 'applied')), 'ignored', 'same sequence replayed')
  t.equal(await runtime.receipt(topicOf(row()), receipt(row(), session, 4, 'applied')), 'ignored', 'older sequence')
  t.equal(await runtime.receipt(topicOf(row()), receipt(row(), { id: 's1', generation: 1 }, 99, 'applied')), 'ignored', 'older session')
  t.equal(store.writes, writes, 'nothing written for ignored receipts')
  t.equal(runtime.peek(display.displayId)?.status, 'sync_pending')
  const other = { ...topicOf(row()), credentialId: randomUUID() }
  t.equal(await runtime.receipt(other, { ...receipt(row(), session, 6, 'applied'), credential_id: other.credentialId }), 'ignored', 'another credential')
  t.equal(await runtime.receipt(topicOf(row()), receipt(row(), session, 6, 'applied')), 'accepted')
  t.equal(runtime.peek(display.displayId)?.status, 'device_applied')
})

t.test('an applied receipt for an older generation never satisfies the newer desired activation', async (t) => {
  const { assign, clock, runtime, store, display } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const old = store.rows.get(display.displayId)!.desired
  await assign(revisionB, 1)
  await clock.advance(2_000)
  const row = store.rows.get(display.displayId)!
  t.equal(await runtime.receipt(topicOf(row), receipt(row, { id: 's', generation: 1 }, 1, 'applied', old)), 'accepted')
  t.same(store.rows.get(display.displayId)!.applied, old, 'recorded as what is active')
  t.equal(runtime.peek(display.displayId)?.status, 'sync_pending')
})

t.test('a refresh request republishes the same activation with new timestamps', async (t) => {
  const { transport, assign, clock, runtime, store, display } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const row = store.rows.get(display.displayId)!
  await runtime.receipt(topicOf(row), { ...receipt(row, { id: 's', generation: 1 }, 1, 'deferred'), refresh_requested: true })
  await clock.advance(newActivationIntervalMs)
  t.equal(transport.published.length, 2)
  t.equal(transport.published[1]!.envelope.activation_generation, 1)
  t.not(transport.published[1]!.envelope.created_at, transport.published[0]!.envelope.created_at)
})

t.test('a rebind in the middle of delivery stops the old binding: old configuration cleared, old credential revoked, its receipts ignored', async (t) => {
  const { transport, assign, clock, runtime, store, display, org } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const before = structuredClone(store.rows.get(display.displayId)!)
  await runtime.rebind(display.displayId, org)
  t.equal(transport.cleared.length, 1)
  t.same([transport.cleared[0]!.displayId, transport.cleared[0]!.bindingEpoch], [display.displayId, 1], 'the old binding\'s retained configuration')
  t.same(transport.revoked, [before.credentialId])
  await clock.advance(republishIntervalMs * 2)
  t.equal(transport.published.length, 1, 'no republish for the ended binding')
  t.equal(await runtime.receipt(topicOf(before), receipt(before, { id: 's', generation: 1 }, 1, 'applied')), 'ignored')
  t.equal(runtime.peek(display.displayId)?.status, 'none')
  await t.rejects(assign(revisionA, 1), { code: 'signal_profile_activation_conflict' }, 'the new binding starts at generation 0')
  await assign(revisionA, 0)
  await clock.advance(newActivationIntervalMs)
  t.equal(transport.published.at(-1)!.address.bindingEpoch, 2)
})

t.test('a rebind the broker cannot take changes nothing: same binding and credential, nothing revoked or cleared, delivery goes on', async (t) => {
  const { transport, assign, clock, runtime, store, display, org } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const before = structuredClone(store.rows.get(display.displayId)!)
  transport.grantFailing = true
  await t.rejects(runtime.rebind(display.displayId, org), /refused/)
  t.same(store.rows.get(display.displayId)!.credentialId, before.credentialId)
  t.same([transport.revoked, transport.cleared], [[], []])
  t.equal(runtime.peek(display.displayId)?.status, 'sync_pending')
  await clock.advance(republishIntervalMs)
  t.equal(transport.published.length, 2, 'the 45 s republish of the same binding goes on')
  t.equal(transport.published[1]!.address.bindingEpoch, 1)
  transport.grantFailing = false
  await runtime.rebind(display.displayId, org)
  t.same(transport.granted.map((c) => c.bindingEpoch), [2], 'the retried rebind grants the new binding\'s credential')
  t.same(transport.revoked, [before.credentialId])
})

t.test('a restarted runtime publishes every stored target again from the store, but not one stopped by publication failures', async (t) => {
  const { store, clock, assign, display, org } = setup()
  await assign(revisionA, 0)
  const stopped = store.add(org)
  Object.assign(stopped, { generation: 1, desired: { activation_generation: 1, profile_revision_id: revisionB.id, sha256: revisionB.sha256 }, payload: { data: revisionB.data, byteLength: 38 }, publishError: 'broker down', publishAttempts: 20 })
  const transport = new FakeTransport(clock)
  const restarted = new DisplayRuntime({ persistence: store, transport, clock })
  t.equal(await restarted.start(), 1)
  await clock.advance(0)
  t.same(transport.published.map((p) => p.address.displayId), [display.displayId])
})

t.test('a device_applied target that a rebooted device reports empty goes back to sync_pending and the 45 s republish resumes', async (t) => {
  const { transport, assign, clock, runtime, store, display } = setup()
  await assign(revisionA, 0)
  await clock.advance(0)
  const row = () => store.rows.get(display.displayId)!
  await runtime.receipt(topicOf(row()), receipt(row(), { id: 'boot-1', generation: 1 }, 1, 'applied'))
  t.equal(runtime.peek(display.displayId)?.status, 'device_applied')
  await clock.advance(republishIntervalMs * 2)
  t.equal(transport.published.length, 1)
  const empty = receipt(row(), { id: 'boot-2', generation: 2 }, 1, 'announced', null, { highest_admitted: row().desired })
  t.equal(await runtime.receipt(topicOf(row()), empty), 'accepted')
  t.equal(runtime.peek(display.displayId)?.status, 'sync_pending', 'nothing active on the device now')
  await clock.advance(republishIntervalMs)
  t.equal(transport.published.length, 2, 'republished 45 s later')
})
