/**
 * Display changes for the live feed: a change is read back from the store only when a listener
 * wants its organization's changes (a dashboard on this node follows them, or other nodes are told
 * of every change); changes arriving while one is read coalesce into one more read.
 */
import t from 'tap'
import { DisplayLiveChanges } from '../../../src/displays/live-changes.js'
import type { DisplayStore } from '../../../src/displays/display-store.js'
import type { StoredActivation } from '../../../actors/display-persistence.js'
import { captureLogger } from '../../helpers/service.js'

const { logger } = captureLogger()

/** A store that counts reads and answers each when told to. */
function countingStore() {
  const reads: { organizationId: string; id: string; answer: () => void }[] = []
  const store = {
    live: (organizationId: string, id: string) =>
      new Promise((resolve) => reads.push({ organizationId, id, answer: () => resolve([{ id, name: 'Rack' }]) })),
  } as unknown as DisplayStore
  return { store, reads }
}
const settle = () => new Promise((r) => setImmediate(r))

t.test('nobody wants the organization: no read', async (t) => {
  const { store, reads } = countingStore()
  const changes = new DisplayLiveChanges(store, logger)
  const heard: string[] = []
  changes.onChange((_org, display) => heard.push(display.id), () => false)
  changes.changed('org-a', 'd1')
  await settle()
  t.equal(reads.length, 0, 'the store is not read')
  t.same(heard, [])
})

t.test('one listener of two wants it: one read, both hear it', async (t) => {
  const { store, reads } = countingStore()
  const changes = new DisplayLiveChanges(store, logger)
  const local: string[] = []
  const relayed: string[] = []
  changes.onChange((_org, display) => local.push(display.id), (org) => org === 'org-b')
  changes.onChange((_org, display) => relayed.push(display.id), () => false)
  changes.changed('org-a', 'd1')
  changes.changed('org-b', 'd2')
  await settle()
  t.same(reads.map((r) => r.id), ['d2'], 'only the wanted organization is read')
  reads[0]!.answer()
  await settle()
  t.same(local, ['d2'])
  t.same(relayed, ['d2'], 'what is read goes to every listener')
})

t.test('changes during a read coalesce into one more read', async (t) => {
  const { store, reads } = countingStore()
  const changes = new DisplayLiveChanges(store, logger)
  const heard: string[] = []
  changes.onChange((_org, display) => heard.push(display.id))
  changes.changed('org-a', 'd1')
  changes.changed('org-a', 'd1')
  changes.changed('org-a', 'd1')
  await settle()
  t.equal(reads.length, 1, 'one read in flight')
  reads[0]!.answer()
  await settle()
  t.equal(reads.length, 2, 'then one more for the changes that came meanwhile')
  reads[1]!.answer()
  await settle()
  t.same(heard, ['d1', 'd1'])
})

/** A stored activation of display d1 in org-a: `publishError` and `publishAttempts` vary, the rest is fixed. */
function stored(publishError: string | null, publishAttempts = 1): StoredActivation {
  const identity = { activation_generation: 1, profile_revision_id: 'r1', sha256: 'aa' }
  return { displayId: 'd1', organizationId: 'org-a', bindingEpoch: 1, credentialId: 'c1', generation: 1, desired: identity, payload: null, applied: identity, errorCode: null, publishError, publishAttempts, session: null, updatedAt: new Date(0) }
}

t.test('a runtime change is read back only when it changes what a dashboard shows', async (t) => {
  const { store, reads } = countingStore()
  const changes = new DisplayLiveChanges(store, logger)
  changes.onChange(() => undefined)
  changes.storedChanged(stored(null))
  await settle()
  reads.splice(0).forEach((r) => r.answer())
  await settle()
  changes.storedChanged(stored(null, 2))
  await settle()
  t.equal(reads.length, 0, 'a publication attempt alone is not shown, so not read')
  changes.storedChanged(stored('broker unreachable', 3))
  await settle()
  t.equal(reads.length, 1, 'a publication error is')
})

t.test('a change made while nobody listened is read for a later listener, also when it matches what was shown before', async (t) => {
  const { store, reads } = countingStore()
  const changes = new DisplayLiveChanges(store, logger)
  let following = true
  changes.onChange(() => undefined, () => following)
  changes.storedChanged(stored(null))
  await settle()
  reads.splice(0).forEach((r) => r.answer())
  await settle()
  following = false
  changes.storedChanged(stored('broker unreachable'))
  await settle()
  t.equal(reads.length, 0, 'nobody to tell: not read')
  // A dashboard subscribes now: its snapshot shows the error. The error then clears, which is what
  // was shown before the error: that is news to this dashboard.
  following = true
  changes.storedChanged(stored(null, 2))
  await settle()
  t.equal(reads.length, 1, 'read and told')
})
