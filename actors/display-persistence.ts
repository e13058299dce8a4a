/**
 * What the display actors need from the durable store (docs/operations.md:
 * PostgreSQL holds the domain state; the actor is a cache plus the single
 * writer). src/displays implements it over PostgreSQL.
 */
import type { Static } from '@sinclair/typebox'
import type { DisplayCredential } from '../protocol/display-mqtt.js'
import type { AssignRequestSchema } from '../protocol/node-calls.js'
import type { Fence } from './shard-directory.js'
import { sameIdentity, type ActivationIdentity, type ActivationStatus } from '../machines/display-activation.js'

export interface ReceiptSession {
  id: string
  generation: number
  sequence: number
}

/** A display's binding and activation target, as stored. */
export interface StoredActivation {
  displayId: string
  organizationId: string
  bindingEpoch: number
  credentialId: string
  /** The binding's current generation (0 before the first assignment). */
  generation: number
  desired: ActivationIdentity | null
  /** The compiled bytes of the desired revision (what the envelope carries). */
  payload: { data: string; byteLength: number } | null
  applied: ActivationIdentity | null
  errorCode: string | null
  publishError: string | null
  publishAttempts: number
  session: ReceiptSession | null
  updatedAt: Date
}

/** The activation status a stored target is in (what hydration resumes and the API shows). */
export function storedStatus(s: StoredActivation): ActivationStatus {
  if (s.desired === null) return 'none'
  if (s.errorCode !== null) return 'rejected'
  return sameIdentity(s.applied, s.desired) ? 'device_applied' : 'sync_pending'
}

/** An assignment as the display's actor takes it (the schema a forwarded one is checked against). */
export type AssignRequest = Static<typeof AssignRequestSchema>

export interface ActivationProgress {
  applied: ActivationIdentity | null
  errorCode: string | null
  publishError: string | null
  publishAttempts: number
  session: ReceiptSession | null
}

/**
 * The writes of a display's actor carry its shard's fence (docs/operations.md):
 * a token older than the newest rejects with ShardUnavailable 'fenced' and
 * nothing is written. Omitted: unfenced (tests, the local directory).
 */
export interface DisplayPersistence {
  load(displayId: string): Promise<StoredActivation | undefined>
  /**
   * Checks the fences and the capability, then writes the next generation;
   * throws the coded refusal (display_not_found, signal_profile_revision_not_found,
   * display_binding_epoch_conflict, signal_profile_activation_conflict,
   * signal_profile_capability_missing / _insufficient).
   */
  assign(displayId: string, request: AssignRequest, fence?: Fence): Promise<StoredActivation>
  /** Writes what receipts and publications changed; the write time, or undefined when the binding or generation moved on (nothing written). */
  saveProgress(displayId: string, bindingEpoch: number, generation: number, progress: ActivationProgress, fence?: Fence): Promise<Date | undefined>
  /**
   * A new binding epoch and credential; the old credential is revoked and
   * the target cleared. `grant` runs before the commit: if the broker cannot
   * take the new credential, nothing changes.
   */
  rebind(displayId: string, organizationId: string, grant: (credential: DisplayCredential) => Promise<void>, fence?: Fence): Promise<{ previous: StoredActivation; current: StoredActivation; password: string; username: string }>
  /** Displays with a desired activation (what a restarted node publishes again). */
  targets(): Promise<string[]>
}
