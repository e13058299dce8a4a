import t from 'tap'
import { initialTransition, transition } from 'xstate'
import { displayActivationMachine, judgeReceipt, maxPublishAttempts, type ActivationEvent, type ActivationIdentity, type ActivationInput, type Receipt } from '../../machines/display-activation.js'

const id = (generation: number, revision = `rev-${generation}`): ActivationIdentity => ({ activation_generation: generation, profile_revision_id: revision, sha256: `${generation}`.padStart(64, 'a') })
const input: ActivationInput = { displayId: 'd1', bindingEpoch: 1, credentialId: 'c1' }

function run(events: ActivationEvent[], from: ActivationInput = input) {
  let [snap, actions] = initialTransition(displayActivationMachine, from)
  const all = [...actions]
  for (const e of events) {
    ;[snap, actions] = transition(displayActivationMachine, snap, e)
    all.push(...actions)
  }
  return { snap, actions: all, last: actions }
}

let sequence = 0
function receipt(result: Receipt['profile']['result'], o: Partial<Receipt['profile']> & { session?: string; generation?: number; sequence?: number; credential?: string; refresh?: boolean } = {}): ActivationEvent {
  return {
    type: 'RECEIPT',
    receipt: {
      credential_id: o.credential ?? 'c1',
      session_id: o.session ?? 's1',
      session_generation: o.generation ?? 1,
      status_sequence: o.sequence ?? ++sequence,
      refresh_requested: o.refresh ?? false,
      profile: { active: o.active ?? null, attempted: o.attempted ?? null, highest_admitted: o.highest_admitted ?? null, result, error_code: o.error_code ?? null },
    },
  }
}
const applied = (identity: ActivationIdentity, o: Parameters<typeof receipt>[1] = {}) => receipt('applied', { active: identity, attempted: identity, highest_admitted: identity, ...o })

t.test('activation - an assignment persists the desired identity (before any publish) and waits for the device', async (t) => {
  const { snap, last } = run([{ type: 'ASSIGN', identity: id(1) }])
  t.equal(snap.value, 'sync_pending')
  t.same(last.find((a) => a.type === 'persistDesired')?.params, { displayId: 'd1', bindingEpoch: 1, identity: id(1) })
  t.same(run([{ type: 'ASSIGN', identity: id(1) }, { type: 'PUBLISHED' }]).snap.value, 'sync_pending', 'a broker acknowledgment is not an application')
})

t.test('activation - generations only rise: an older or equal one is not assigned', async (t) => {
  const { snap } = run([{ type: 'ASSIGN', identity: id(5) }, { type: 'ASSIGN', identity: id(5, 'other') }, { type: 'ASSIGN', identity: id(3) }])
  t.same(snap.context.desired, id(5))
})

t.test('activation - applied needs active = highest_admitted = attempted = desired, exactly', async (t) => {
  t.equal(run([{ type: 'ASSIGN', identity: id(2) }, applied(id(2))]).snap.value, 'device_applied')
  t.equal(run([{ type: 'ASSIGN', identity: id(2) }, receipt('applied', { active: id(1), attempted: id(2), highest_admitted: id(2) })]).snap.value, 'sync_pending', 'active differs: contradictory, ignored')
  t.equal(run([{ type: 'ASSIGN', identity: id(2) }, receipt('applied', { active: id(2), attempted: id(2), highest_admitted: id(1) })]).snap.value, 'sync_pending', 'fence behind')
  const other = { ...id(2), sha256: 'b'.repeat(64) }
  t.equal(run([{ type: 'ASSIGN', identity: id(2) }, applied(other)]).snap.value, 'sync_pending', 'same generation, other bytes: not the desired identity')
})

t.test('activation - an older receipt never satisfies a newer desired activation, but records what is active', async (t) => {
  const { snap } = run([{ type: 'ASSIGN', identity: id(1) }, { type: 'ASSIGN', identity: id(2) }, applied(id(1))])
  t.equal(snap.value, 'sync_pending')
  t.same(snap.context.applied, id(1))
  t.equal(transition(displayActivationMachine, snap, applied(id(2)))[0].value, 'device_applied')
})

t.test('activation - receipts from another credential, an old session or an old sequence are ignored', async (t) => {
  const base: ActivationEvent[] = [{ type: 'ASSIGN', identity: id(1) }, receipt('deferred', { session: 's1', generation: 1, sequence: 10 })]
  t.equal(run([...base, applied(id(1), { credential: 'c-old', sequence: 11 })]).snap.value, 'sync_pending', 'a revoked credential')
  t.equal(run([...base, applied(id(1), { session: 's1', sequence: 10 })]).snap.value, 'sync_pending', 'a replayed sequence')
  t.equal(run([...base, applied(id(1), { session: 's1', sequence: 9 })]).snap.value, 'sync_pending', 'an out-of-order older one')
  t.equal(run([...base, applied(id(1), { session: 's0', generation: 0, sequence: 99 })]).snap.value, 'sync_pending', 'an older session')
  const reconnected = run([...base, applied(id(1), { session: 's2', generation: 2, sequence: 1 })])
  t.equal(reconnected.snap.value, 'device_applied', 'a newer session is accepted, even from sequence 1')
  t.match(reconnected.snap.context.session, { id: 's2', generation: 2, sequence: 1 })
  t.match(judgeReceipt(reconnected.snap.context, (applied(id(1), { session: 's1', generation: 1, sequence: 50 }) as { receipt: Receipt }).receipt), { accepted: false, reason: 'old_session' })
})

t.test('activation - a rejection of the desired identity moves to rejected with its code; RETRY goes back to sync_pending', async (t) => {
  const { snap } = run([{ type: 'ASSIGN', identity: id(1) }, receipt('rejected', { attempted: id(1), active: null, highest_admitted: null, error_code: 'HASH_MISMATCH' })])
  t.equal(snap.value, 'rejected')
  t.equal(snap.context.errorCode, 'HASH_MISMATCH')
  const [retried, actions] = transition(displayActivationMachine, snap, { type: 'RETRY' })
  t.equal(retried.value, 'sync_pending')
  t.equal(retried.context.errorCode, null)
  t.ok(actions.some((a) => a.type === 'republish'), 'publishing resumes')
  const contradictory = run([{ type: 'ASSIGN', identity: id(1) }, receipt('rejected', { attempted: id(1), active: id(1), highest_admitted: id(1), error_code: 'X' })])
  t.equal(contradictory.snap.value, 'sync_pending', 'a rejection never represents an applied candidate')
  const older = run([{ type: 'ASSIGN', identity: id(1) }, { type: 'ASSIGN', identity: id(2) }, receipt('rejected', { attempted: id(1), error_code: 'X' })])
  t.equal(older.snap.value, 'sync_pending', "an older candidate's rejection says nothing of the desired one")
})

t.test('activation - 20 failed publications record the error and stop; RETRY resumes; RETRY on a healthy target is not possible', async (t) => {
  const failures: ActivationEvent[] = Array.from({ length: maxPublishAttempts }, () => ({ type: 'PUBLISH_FAILED', error: 'broker down' }))
  const almost = run([{ type: 'ASSIGN', identity: id(1) }, ...failures.slice(1)])
  t.equal(almost.snap.context.publishError, null, '19 failures: still trying')
  const stopped = run([{ type: 'ASSIGN', identity: id(1) }, ...failures])
  t.match(stopped.snap.context, { publishError: 'broker down', publishAttempts: 20 })
  t.equal(stopped.snap.value, 'sync_pending', 'errored stays sync_pending')
  const [retried] = transition(displayActivationMachine, stopped.snap, { type: 'RETRY' })
  t.match(retried.context, { publishError: null, publishAttempts: 0 })
  const healthy = run([{ type: 'ASSIGN', identity: id(1) }])
  t.notOk(healthy.snap.can({ type: 'RETRY' }), 'the runtime answers 409 signal_profile_target_healthy')
  t.notOk(run([{ type: 'ASSIGN', identity: id(1) }, applied(id(1))]).snap.can({ type: 'RETRY' }))
})

t.test('activation - deferred keeps waiting; announced confirms only what is durably active', async (t) => {
  t.equal(run([{ type: 'ASSIGN', identity: id(1) }, receipt('deferred', { attempted: id(1) })]).snap.value, 'sync_pending')
  t.equal(run([{ type: 'ASSIGN', identity: id(1) }, receipt('announced', { active: id(1), highest_admitted: id(1) })]).snap.value, 'device_applied')
  t.equal(run([{ type: 'ASSIGN', identity: id(2) }, receipt('announced', { active: id(1), highest_admitted: id(1) })]).snap.value, 'sync_pending')
})

t.test('activation - refresh_requested asks for the same activation again', async (t) => {
  const { last, snap } = run([{ type: 'ASSIGN', identity: id(1) }, receipt('deferred', { attempted: id(1), refresh: true })])
  t.ok(last.some((a) => a.type === 'republish'))
  t.same(snap.context.desired, id(1))
  const ignored = run([{ type: 'ASSIGN', identity: id(1) }, receipt('deferred', { refresh: true, credential: 'other' })])
  t.notOk(ignored.last.some((a) => a.type === 'republish'), 'not from a receipt that is ignored')
})

t.test('activation - a rebind starts over: new epoch and credential, nothing desired, old receipts ignored', async (t) => {
  const { snap } = run([{ type: 'ASSIGN', identity: id(3) }, applied(id(3)), { type: 'REBIND', bindingEpoch: 2, credentialId: 'c2' }, applied(id(3), { credential: 'c1' })])
  t.equal(snap.value, 'none')
  t.match(snap.context, { bindingEpoch: 2, credentialId: 'c2', desired: null, applied: null, session: null })
  t.equal(transition(displayActivationMachine, snap, { type: 'ASSIGN', identity: id(1) })[0].value, 'sync_pending', 'generations start again in the new binding')
})

t.test('activation - hydration puts a stored activation back in its state', async (t) => {
  t.equal(run([], { ...input, desired: id(1), applied: id(1) }).snap.value, 'device_applied')
  t.equal(run([], { ...input, desired: id(2), applied: id(1) }).snap.value, 'sync_pending')
  t.equal(run([], { ...input, desired: id(2), errorCode: 'X' }).snap.value, 'rejected')
  t.equal(run([], input).snap.value, 'none')
})
