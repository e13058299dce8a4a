/**
 * xstate's pure `transition(machine, snapshot, event)` for the machines that are stepped as reducers
 * (a display's activation, a print job's status), without its cost per call: xstate builds a new
 * inert actor for every call, and the actor's constructor computes the machine's whole initial
 * snapshot (context factory included) only to throw it away. That was about 9% of the service's CPU
 * in bench/displays.
 *
 * Here each machine gets one inert scope, made on first use and kept: the same scope xstate builds
 * (an unstarted actor, no-op defer/emit/stop), with the action collector swapped in per call. This
 * is sound for machines that neither spawn nor invoke children (nothing is ever registered in the
 * scope's system) — the ones stepped here; a machine that does must use xstate's own `transition`.
 */
import { createActor, type ActionExecutor, type AnyActorScope, type AnyStateMachine, type EventFromLogic, type SnapshotFrom } from 'xstate'

interface KeptScope {
  scope: AnyActorScope
  /** The actions of the transition being computed. */
  collected: Parameters<ActionExecutor>[0][]
}

const scopes = new WeakMap<AnyStateMachine, KeptScope>()

function scopeOf(machine: AnyStateMachine): KeptScope {
  let kept = scopes.get(machine)
  if (kept === undefined) {
    const self = createActor(machine)
    const made: KeptScope = {
      collected: [],
      scope: {
        self,
        id: '',
        sessionId: '',
        logger: () => undefined,
        defer: () => undefined,
        emit: () => undefined,
        stopChild: () => undefined,
        system: self.system,
        actionExecutor: (action) => void made.collected.push(action),
      },
    }
    kept = made
    scopes.set(machine, kept)
  }
  return kept
}

/** The next snapshot and the actions to execute, as xstate's `transition` gives them. */
export function pureTransition<M extends AnyStateMachine>(
  machine: M,
  snapshot: SnapshotFrom<M>,
  event: EventFromLogic<M>,
): [SnapshotFrom<M>, Parameters<ActionExecutor>[0][]] {
  const kept = scopeOf(machine)
  const previous = kept.collected
  const collected: Parameters<ActionExecutor>[0][] = []
  kept.collected = collected
  try {
    return [machine.transition(snapshot, event, kept.scope) as SnapshotFrom<M>, collected]
  } finally {
    // A transition computed inside an action of another (never the case today) leaves the outer one's list intact.
    kept.collected = previous
  }
}
