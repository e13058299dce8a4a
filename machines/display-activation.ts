/**
 * One status display's signal-profile activation (docs/displays.md: activation
 * statuses and receipts). Pure: the runtime persists the
 * desired activation before publishing (`persistDesired`), publishes, and
 * feeds back publication outcomes and device receipts.
 *
 * States: `none` (nothing assigned in this binding), `sync_pending`,
 * `device_applied`, `rejected`. "Errored" is sync_pending with `publishError`
 * set after 20 failed publications: publishing stops until RETRY.
 *
 * Receipt rules, as decided here:
 * - Accepted only from the current credential. A receipt of the current
 *   session needs a higher status_sequence; a receipt of another session is
 *   accepted only with a higher session_generation (the device reconnected),
 *   which then becomes the current session. Everything else is ignored.
 * - `applied` moves to device_applied only when active = highest_admitted =
 *   attempted = desired, exactly (identity = generation, revision id, sha256).
 *   An applied receipt for an older identity records what is active but never
 *   satisfies the newer desired activation.
 * - `rejected` of the desired identity moves to rejected with its error code;
 *   a rejection whose active equals its attempted is contradictory and ignored
 *   (a rejection never represents an applied candidate).
 * - `deferred` keeps sync_pending (the device will decide later).
 * - `announced` (attempted null, after a reconnect) records the active
 *   identity; when active = highest_admitted = desired it confirms
 *   device_applied, since it is the device's own report of its durable state.
 * - `refresh_requested` asks the runtime to republish the same activation
 *   with new timestamps, whatever else the receipt says.
 */
import { assign, enqueueActions, setup } from 'xstate'
import { sameIdentity } from '../protocol/display-mqtt.js'

export const maxPublishAttempts = 20

export interface ActivationIdentity {
  activation_generation: number
  profile_revision_id: string
  sha256: string
}

export interface Receipt {
  credential_id: string
  session_id: string
  session_generation: number
  status_sequence: number
  refresh_requested: boolean
  profile: {
    active: ActivationIdentity | null
    attempted: ActivationIdentity | null
    highest_admitted: ActivationIdentity | null
    result: 'applied' | 'rejected' | 'deferred' | 'announced'
    error_code: string | null
  }
}

export interface ActivationContext {
  displayId: string
  bindingEpoch: number
  credentialId: string
  desired: ActivationIdentity | null
  applied: ActivationIdentity | null
  errorCode: string | null
  publishError: string | null
  publishAttempts: number
  session: { id: string; generation: number; sequence: number } | null
}

export type ActivationInput = Partial<Omit<ActivationContext, 'displayId' | 'bindingEpoch' | 'credentialId'>> & Pick<ActivationContext, 'displayId' | 'bindingEpoch' | 'credentialId'> & { status?: ActivationStatus }

export type ActivationStatus = 'none' | 'sync_pending' | 'device_applied' | 'rejected'

export type ActivationEvent =
  | { type: 'ASSIGN'; identity: ActivationIdentity }
  | { type: 'PUBLISHED' }
  | { type: 'PUBLISH_FAILED'; error: string }
  | { type: 'RETRY' }
  | { type: 'RECEIPT'; receipt: Receipt }
  | { type: 'REBIND'; bindingEpoch: number; credentialId: string }

export { sameIdentity }

export type ReceiptVerdict =
  | { accepted: false; reason: 'other_credential' | 'old_sequence' | 'old_session' | 'contradictory' }
  | { accepted: true; session: NonNullable<ActivationContext['session']>; move: 'applied' | 'rejected' | 'none'; applied: ActivationIdentity | null | undefined; refresh: boolean }

/** The receipt rules, as a pure function of the context and the receipt. */
export function judgeReceipt(context: ActivationContext, receipt: Receipt): ReceiptVerdict {
  if (receipt.credential_id !== context.credentialId) return { accepted: false, reason: 'other_credential' }
  const current = context.session
  if (current !== null) {
    if (receipt.session_id === current.id) {
      if (receipt.status_sequence <= current.sequence) return { accepted: false, reason: 'old_sequence' }
    } else if (receipt.session_generation <= current.generation) {
      return { accepted: false, reason: 'old_session' }
    }
  }
  const session = { id: receipt.session_id, generation: receipt.session_generation, sequence: receipt.status_sequence }
  const { active, attempted, highest_admitted: admitted, result } = receipt.profile
  const refresh = receipt.refresh_requested
  switch (result) {
    case 'applied': {
      if (!sameIdentity(active, attempted) || !sameIdentity(admitted, attempted)) return { accepted: false, reason: 'contradictory' }
      return { accepted: true, session, move: sameIdentity(attempted, context.desired) ? 'applied' : 'none', applied: active, refresh }
    }
    case 'rejected': {
      if (attempted !== null && sameIdentity(active, attempted)) return { accepted: false, reason: 'contradictory' }
      // What is active is not news to a rejection: only applied and announced results record it.
      return { accepted: true, session, move: sameIdentity(attempted, context.desired) ? 'rejected' : 'none', applied: undefined, refresh }
    }
    case 'announced': {
      const confirms = sameIdentity(active, context.desired) && sameIdentity(admitted, context.desired)
      return { accepted: true, session, move: confirms ? 'applied' : 'none', applied: active, refresh }
    }
    default:
      return { accepted: true, session, move: 'none', applied: undefined, refresh }
  }
}

export const displayActivationMachine = setup({
  types: { context: {} as ActivationContext, events: {} as ActivationEvent, input: {} as ActivationInput },
  actions: {
    /** The runtime's effect: write the desired activation durably, then publish it. */
    persistDesired: (_args, _params: { displayId: string; bindingEpoch: number; identity: ActivationIdentity }) => undefined,
    /** The runtime's effect: publish the same activation again with new timestamps. */
    republish: (_args, _params: { displayId: string }) => undefined,
    setDesired: assign(({ event }) => (event.type === 'ASSIGN' ? { desired: event.identity, errorCode: null, publishError: null, publishAttempts: 0 } : {})),
    countFailure: assign(({ context, event }) => {
      if (event.type !== 'PUBLISH_FAILED') return {}
      const attempts = context.publishAttempts + 1
      return { publishAttempts: attempts, publishError: attempts >= maxPublishAttempts ? event.error : null }
    }),
    published: assign({ publishAttempts: 0 }),
    clearErrors: assign({ errorCode: null, publishError: null, publishAttempts: 0 }),
    rebind: assign(({ event }) =>
      event.type === 'REBIND' ? { bindingEpoch: event.bindingEpoch, credentialId: event.credentialId, desired: null, applied: null, errorCode: null, publishError: null, publishAttempts: 0, session: null } : {},
    ),
  },
  guards: {
    newerGeneration: ({ context, event }) => event.type === 'ASSIGN' && (context.desired === null || event.identity.activation_generation > context.desired.activation_generation),
    hasError: ({ context }) => context.publishError !== null || context.errorCode !== null,
  },
}).createMachine({
  id: 'displayActivation',
  context: ({ input }) => ({
    displayId: input.displayId,
    bindingEpoch: input.bindingEpoch,
    credentialId: input.credentialId,
    desired: input.desired ?? null,
    applied: input.applied ?? null,
    errorCode: input.errorCode ?? null,
    publishError: input.publishError ?? null,
    publishAttempts: input.publishAttempts ?? 0,
    session: input.session ?? null,
  }),
  initial: 'hydrated',
  on: {
    ASSIGN: {
      guard: 'newerGeneration',
      target: '.sync_pending',
      actions: [
        'setDesired',
        {
          type: 'persistDesired',
          params: ({ context }) => ({ displayId: context.displayId, bindingEpoch: context.bindingEpoch, identity: context.desired! }),
        },
      ],
    },
    REBIND: { target: '.none', actions: 'rebind' },
    RECEIPT: {
      actions: enqueueActions(({ context, event, enqueue }) => {
        const verdict = judgeReceipt(context, event.receipt)
        if (!verdict.accepted) return
        enqueue.assign({
          session: verdict.session,
          ...(verdict.applied === undefined ? {} : { applied: verdict.applied }),
          // A device that has the desired identity applied cannot then reject it: that receipt is stale news.
          ...(verdict.move === 'rejected' && !sameIdentity(context.applied, context.desired) ? { errorCode: event.receipt.profile.error_code ?? 'rejected' } : {}),
          ...(verdict.move === 'applied' ? { errorCode: null } : {}),
        })
        if (verdict.refresh && context.desired !== null) enqueue({ type: 'republish', params: { displayId: context.displayId } })
      }),
    },
  },
  states: {
    hydrated: {
      always: [
        { guard: ({ context }) => context.desired === null, target: 'none' },
        { guard: ({ context }) => context.errorCode !== null, target: 'rejected' },
        { guard: ({ context }) => sameIdentity(context.applied, context.desired), target: 'device_applied' },
        { target: 'sync_pending' },
      ],
    },
    none: {},
    sync_pending: {
      on: {
        PUBLISHED: { actions: 'published' },
        PUBLISH_FAILED: { actions: 'countFailure' },
        RETRY: { guard: 'hasError', target: 'sync_pending', reenter: true, actions: ['clearErrors', { type: 'republish', params: ({ context }) => ({ displayId: context.displayId }) }] },
      },
      always: [
        { guard: ({ context }) => context.errorCode !== null, target: 'rejected' },
        { guard: ({ context }) => sameIdentity(context.applied, context.desired) && context.session !== null, target: 'device_applied' },
      ],
    },
    // A later receipt can say the desired identity is no longer active (a rebooted device announcing an empty slot).
    device_applied: {
      always: { guard: ({ context }) => !sameIdentity(context.applied, context.desired), target: 'sync_pending' },
    },
    rejected: {
      on: { RETRY: { target: 'sync_pending', actions: ['clearErrors', { type: 'republish', params: ({ context }) => ({ displayId: context.displayId }) }] } },
    },
  },
})
