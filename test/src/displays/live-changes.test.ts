/**
 * Display changes for the live feed: a change is read back from the store only when a listener
 * wants its organization's changes (a dashboard on this node follows them, or other nodes are told
 * of every change); changes arriving while one is read coalesce into one more read.
 */
import t from 'tap'
import { DisplayLiveChanges } from '../../../src/displays/live-changes.js'
import type { DisplayStore } from '../../../src/displays/display-store.js'
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
