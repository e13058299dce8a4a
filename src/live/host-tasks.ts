/**
 * The `host:<hostId>` topic's events (docs/print-jobs.md): the printer tasks of
 * a bridge's host as they change, the live side of
 * GET /v1/hosts/{hostId}/printer-tasks (whose answer is the topic's snapshot).
 *
 * The dispatcher names the task that changed, after the commit, on the node
 * that made the change; the Redis relay hands the same notice to every other
 * node, and each node reads the task back from the store itself, and only if
 * one of its sockets follows that host. Unlike printer changes, no task
 * crosses Redis: the changes of one task are made on several nodes (assigned
 * through one, claimed through another, started where the bridge's event
 * landed, expired by whichever node swept), so a relayed copy could arrive
 * after a later local one and leave a bridge with an older state. Reads of
 * one task run one at a time on a node, and notices arriving meanwhile
 * coalesce into one more read, so a node's frames of a task follow the
 * store's order. A node where nobody follows the host reads nothing.
 */
import { ServiceError } from '../../protocol/errors.js'
import type { Dispatcher } from '../jobs/dispatch.js'
import type { Logger } from '../observability/log.js'
import type { LiveHub } from './hub.js'

/** The dispatcher as the host topic uses it. */
export type TaskSource = Pick<Dispatcher, 'hostTasks' | 'task' | 'onTaskChange'>

/** A task of this host changed (what crosses nodes: each reads the task itself). */
export interface TaskTouched {
  organizationId: string
  hostId: string
  taskId: string
}

const hostTopic = (hostId: string): string => `host:${hostId}`

export class HostTaskFeed {
  readonly #hub: LiveHub
  readonly #tasks: Pick<TaskSource, 'task'>
  readonly #logger: Logger
  /**
   * The task and host pairs being read, and those changed again meanwhile. Keyed by both: a
   * task is announced to the host of its assignment and, once its printer moved mid-print, its
   * commands to the printer's new host. Task ids are uuids (fixed length, unique across
   * organizations), so `${taskId} ${hostId}` is unambiguous.
   */
  readonly #reading = new Set<string>()
  readonly #again = new Set<string>()

  constructor(hub: LiveHub, tasks: Pick<TaskSource, 'task'>, logger: Logger) {
    this.#hub = hub
    this.#tasks = tasks
    this.#logger = logger
  }

  changed(touched: TaskTouched): void {
    // A subscription that starts after this check reads its snapshot after the commit: nothing is lost.
    if (!this.#hub.follows(touched.organizationId, hostTopic(touched.hostId))) return
    const key = `${touched.taskId} ${touched.hostId}`
    if (this.#reading.has(key)) {
      this.#again.add(key)
      return
    }
    this.#reading.add(key)
    void this.#read(touched, key)
  }

  async #read({ organizationId, hostId, taskId }: TaskTouched, key: string): Promise<void> {
    try {
      do {
        this.#again.delete(key)
        try {
          this.#hub.taskChanged(organizationId, hostId, await this.#tasks.task(organizationId, taskId))
        } catch (error) {
          // Gone with its job: nothing left to show. Any other failure: the bridge's poll still
          // lists the task, and a notice that came meanwhile is read again below.
          if (!(error instanceof ServiceError && error.code === 'printer_task_not_found')) this.#logger.warn('reading a printer task for the live feed failed', { taskId, error })
        }
      } while (this.#again.has(key))
    } finally {
      this.#reading.delete(key)
    }
  }
}
