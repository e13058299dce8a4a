/**
 * How the areas of a node follow each other: every subscription from one area to another, listed
 * here and nowhere else, so the node's data flow reads as a list (docs/development.md, "Layout").
 * Each entry says when it fires and what follows; `connect` makes the subscription. Each list is
 * connected as soon as the parts it joins are up (`nodeReactions`, src/startup/parts.ts): the
 * core's once the queue exists and before its passes and the job sweeps start, the live feed's once
 * the feed exists, and the relay's when Redis joins the nodes.
 */
import type { DisplayNode } from '../displays/index.js'
import type { JobNode } from '../jobs/index.js'
import type { LiveFeed } from '../live/index.js'
import type { LiveChange } from '../live/hub.js'
import type { RedisRelay } from '../live/redis-relay.js'
import type { PrinterNode } from '../printers/runtime.js'
import type { QueueNode } from '../queue/index.js'
import { defineReactions, type AnyReactions } from '../startup/parts.js'
import type { NodeParts } from './parts.js'

export interface Reaction {
  readonly when: string
  readonly then: string
  connect(): void
}

/** Below the live feed: the job sweeps and the queue follow the printers and the tasks. */
export function coreReactions(printerNode: PrinterNode, jobs: JobNode, queue: QueueNode): Reaction[] {
  return [
    { when: "a printer's state changes on this node", then: 'the jobs it runs follow (status, progress, the end of a run)', connect: () => jobs.watch(printerNode.runtime) },
    { when: 'a task is offered, claimed, started, finished, expired or fenced', then: 'the queue of its organization looks again', connect: () => jobs.dispatcher.onTaskChange((organizationId) => queue.taskChanged(organizationId)) },
  ]
}

/** The live feed, the queue and the displays of this node. */
export function liveReactions(feed: LiveFeed, queue: QueueNode, displays: DisplayNode): Reaction[] {
  return [
    {
      when: "a display's activation or state changes on this node",
      then: 'the displays topic of its organization hears it (when anyone follows it)',
      connect: () =>
        displays.onLiveChange(
          (organizationId, display) => feed.hub.displayChanged(organizationId, display),
          (organizationId) => feed.hub.follows(organizationId, 'displays'),
        ),
    },
    { when: 'a printer of this node changes', then: 'the queue looks again if what it reads of the printer changed', connect: () => feed.onLocalChange((change) => queueFollows(queue, change)) },
    { when: 'a printer of this node is removed', then: 'the queue forgets it', connect: () => feed.onLocalRemoval((removal) => queue.printerRemoved(removal.printerId)) },
    { when: 'a queue pass ends on this node', then: 'the queue topic of its organization is sent again', connect: () => queue.onPassed((organizationId) => feed.queueChanged(organizationId)) },
  ]
}

/** Between nodes, through Redis: what one node sees, the others hear. */
export function relayReactions(relay: RedisRelay, feed: LiveFeed, queue: QueueNode, displays: DisplayNode): Reaction[] {
  return [
    { when: 'a printer of this node changes', then: 'the other nodes hear it', connect: () => feed.onLocalChange((change) => relay.publish(change)) },
    { when: 'a printer of this node is removed', then: 'the other nodes hear it', connect: () => feed.onLocalRemoval((removal) => relay.publishRemoval(removal)) },
    { when: 'a task changes on this node', then: 'every node reads it back for the host topics its bridges follow', connect: () => feed.onLocalTaskChange((touched) => relay.publishTask(touched)) },
    { when: 'another node says a task changed', then: "this node's host topics read it back", connect: () => relay.onTaskReceived((touched) => feed.taskChanged(touched)) },
    { when: "a display's state changes on this node", then: 'the other nodes hear it', connect: () => displays.onLiveChange((organizationId, display) => relay.publishDisplay(organizationId, display)) },
    { when: "another node's printer changes", then: "this node's displays that show it update their status feed", connect: () => relay.onReceived((change) => displays.feed.printerChanged(change.printer.id)) },
    { when: "another node's printer changes", then: 'the queue looks again if what it reads of the printer changed', connect: () => relay.onReceived((change) => queueFollows(queue, change)) },
    { when: 'this node is asked to wake a queue it does not own', then: "the queue's owner hears the wake", connect: () => queue.onRemoteWake((organizationId) => relay.publishQueueWake(organizationId)) },
    { when: 'another node passes on a wake', then: 'the queue wakes here if this node owns it', connect: () => relay.onQueueWake((organizationId) => queue.wakeFromPeer(organizationId)) },
    { when: 'a queue pass ends on this node', then: "every node's queue topic is sent again", connect: () => queue.onPassed((organizationId) => relay.publishQueueChanged(organizationId)) },
    { when: 'another node says a queue pass ended', then: "this node's queue topic is sent again", connect: () => relay.onQueueChanged((organizationId) => feed.queueChanged(organizationId)) },
  ]
}

export function connect(reactions: readonly Reaction[]): void {
  for (const reaction of reactions) reaction.connect()
}

const joining = defineReactions<NodeParts>()

/** The lists above, each with the parts it joins. */
export const nodeReactions: readonly AnyReactions<NodeParts>[] = [
  joining({ joins: ['printers', 'jobs', 'queue'], connect: ({ printers, jobs, queue }) => connect(coreReactions(printers, jobs, queue)) }),
  joining({ joins: ['live', 'queue', 'displays'], connect: ({ live, queue, displays }) => connect(liveReactions(live, queue, displays)) }),
  // Without Redis there is no relay, and a list joining an absent part is not connected.
  joining({ joins: ['relay', 'live', 'queue', 'displays'], connect: ({ relay, live, queue, displays }) => connect(relayReactions(relay!, live, queue, displays)) }),
]

/**
 * A change without events (configuration, presence) may be one the queue reads but the live view
 * does not show (enabled): the queue wakes. A change with events goes through the queue's own test
 * of what it reads of the printer.
 */
function queueFollows(queue: QueueNode, change: LiveChange): void {
  if (change.events.length === 0 && change.jobs.length === 0) queue.wake(change.organizationId)
  else queue.printerChanged(change.organizationId, change.printer)
}
