import t from 'tap'
import { initialTransition, transition } from 'xstate'
import { displayActivationMachine, type ActivationEvent, type ActivationIdentity } from '../../machines/display-activation.js'
import { hostAssignmentMachine } from '../../machines/host-assignment.js'
import { nextJobStatus } from '../../machines/print-job.js'
import { pureTransition } from '../../machines/transition.js'

const id = (generation: number): ActivationIdentity => ({ activation_generation: generation, profile_revision_id: `rev-${generation}`, sha256: `${generation}`.padStart(64, 'a') })
let sequence = 0
const receipt = (result: 'applied' | 'rejected' | 'deferred', identity: ActivationIdentity, refresh = false): ActivationEvent => ({
  type: 'RECEIPT',
  receipt: {
    credential_id: 'c1',
    session_id: 's1',
    session_generation: 1,
    status_sequence: ++sequence,
    refresh_requested: refresh,
    profile: { active: result === 'applied' ? identity : null, attempted: identity, highest_admitted: result === 'applied' ? identity : null, result, error_code: result === 'rejected' ? 'HASH_MISMATCH' : null },
  },
})

t.test('kept-scope transition - every step equals xstate transition: state, context and actions', async (t) => {
  const events: ActivationEvent[] = [
    { type: 'ASSIGN', identity: id(1) },
    { type: 'PUBLISH_FAILED', error: 'broker down' },
    { type: 'PUBLISHED' },
    receipt('deferred', id(1), true),
    receipt('rejected', id(1)),
    { type: 'RETRY' },
    { type: 'ASSIGN', identity: id(2) },
    receipt('applied', id(2)),
    { type: 'REBIND', bindingEpoch: 2, credentialId: 'c2' },
  ]
  let [ours] = initialTransition(displayActivationMachine, { displayId: 'd1', bindingEpoch: 1, credentialId: 'c1' })
  let theirs = ours
  for (const event of events) {
    const [nextOurs, ourActions] = pureTransition(displayActivationMachine, ours, event)
    const [nextTheirs, theirActions] = transition(displayActivationMachine, theirs, event)
    t.equal(nextOurs.value, nextTheirs.value, `${event.type}: state`)
    t.same(nextOurs.context, nextTheirs.context, `${event.type}: context`)
    t.same(
      ourActions.map((a) => [a.type, a.params]),
      theirActions.map((a) => [a.type, a.params]),
      `${event.type}: actions (${theirActions.map((a) => a.type).join(', ') || 'none'})`,
    )
    ours = nextOurs
    theirs = nextTheirs
  }
  t.equal(ours.value, 'none', 'the sequence went through to the rebind')
})

t.test('kept-scope transition - each call answers only its own actions', async (t) => {
  const [start] = initialTransition(hostAssignmentMachine, { printerId: 'p1' })
  const [, first] = pureTransition(hostAssignmentMachine, start, { type: 'ASSIGN', hostId: 'host-a' })
  const [, second] = pureTransition(hostAssignmentMachine, start, { type: 'ASSIGN', hostId: 'host-a' })
  const [, reference] = transition(hostAssignmentMachine, start, { type: 'ASSIGN', hostId: 'host-a' })
  t.ok(reference.length > 0, 'the assignment has actions to compare')
  t.same(first.map((a) => a.type), reference.map((a) => a.type))
  t.same(second.map((a) => a.type), reference.map((a) => a.type), 'the second call does not carry the first one\'s actions')
})

t.test('kept-scope transition - print job statuses step as the machine says, refusals included', async (t) => {
  t.equal(nextJobStatus('queued', { type: 'DISPATCH' } as never), 'dispatching')
  t.equal(nextJobStatus('succeeded', { type: 'DISPATCH' } as never), undefined)
})
