/**
 * The status-display MQTT contract (docs/displays.md: topics,
 * registration). Pure: topic names, the profile/config envelope, the
 * profile/status receipt, the capabilities report and the status feed.
 *
 * Base topic: svc/v1/{organizationId}/display/{displayId}/b/{bindingEpoch}
 *
 * | topic                                         | direction          | delivery                      |
 * |-----------------------------------------------|--------------------|-------------------------------|
 * | {base}/profile/config                         | service → display  | retained, QoS 1               |
 * | {base}/status/feed                            | service → display  | retained, QoS 1 (decided here)|
 * | {base}/credential/{credentialId}/profile/status | display → service | QoS 1, not retained          |
 * | {base}/credential/{credentialId}/capabilities | display → service  | QoS 1, not retained           |
 * | {base}/credential/{credentialId}/health       | display → service  | QoS 0/1, not retained         |
 * | {base}/credential/{credentialId}/resync       | display → service  | QoS 0/1, not retained         |
 *
 * Decided here: the fields' nesting: a receipt
 * carries the envelope fields at the top level and the profile fields in a
 * `profile` object; identities are `{activation_generation,
 * profile_revision_id, sha256}`. `refresh_requested` may be set at either
 * level; either asks for a fresh envelope. A device error code is a bounded
 * token (one of the listed codes, or a newer firmware's own, 1-64 of a-z 0-9 _; docs/displays.md),
 * so a firmware with a new code is still heard.
 */
import { Type, type Static } from '@sinclair/typebox'
import { displayStatuses } from './display-status.js'
import { maxDecodedBytes, minDecodedBytes } from './signal-profile/compiler.js'
import { maxPhases } from './signal-profile/draft.js'

export const topicRoot = 'svc/v1'
export const profileSyncVersion = 1
export const feedVersion = 1
/** docs/operations.md. */
export const maxEnvelopeBytes = 4096
export const maxReceiptBytes = 2048
/** A capabilities report, a health message or a resync request; decided here. */
export const maxDeviceMessageBytes = 2048
export const maxEnvelopeLifetimeMs = 7 * 24 * 3600_000
/** What the service sets (docs/operations.md). */
export const envelopeLifetimeMs = 3 * 24 * 3600_000

export interface DisplayAddress {
  organizationId: string
  displayId: string
  bindingEpoch: number
}

export const baseTopic = (a: DisplayAddress): string => `${topicRoot}/${a.organizationId}/display/${a.displayId}/b/${a.bindingEpoch}`
export const configTopic = (a: DisplayAddress): string => `${baseTopic(a)}/profile/config`
export const feedTopic = (a: DisplayAddress): string => `${baseTopic(a)}/status/feed`
export const credentialTopic = (a: DisplayAddress, credentialId: string, kind: DeviceTopicKind): string => `${baseTopic(a)}/credential/${credentialId}/${deviceTopicSuffix[kind]}`

export const deviceTopicKinds = ['receipt', 'capabilities', 'health', 'resync'] as const
export type DeviceTopicKind = (typeof deviceTopicKinds)[number]
const deviceTopicSuffix: Record<DeviceTopicKind, string> = { receipt: 'profile/status', capabilities: 'capabilities', health: 'health', resync: 'resync' }

/** A display credential as a broker must know it: whose binding it serves, and its login. */
export interface DisplayCredential extends DisplayAddress {
  credentialId: string
  username: string
  password: string
}

/**
 * docs/authentication.md for one credential: it may subscribe to filters inside its
 * display's base topic of its binding, and publish only to its own four
 * credential-bound topics. Every broker the service manages applies this.
 */
export function displayTopicAccess(a: DisplayAddress, credentialId: string): { subscribe: string; publish: string[] } {
  return { subscribe: `${baseTopic(a)}/#`, publish: deviceTopicKinds.map((kind) => credentialTopic(a, credentialId, kind)) }
}

/** What the service subscribes to: every display's credential-bound topics. */
export const deviceTopicsFilter = `${topicRoot}/+/display/+/b/+/credential/#`

const uuid = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
const deviceTopicPattern = new RegExp(`^${topicRoot}/(${uuid})/display/(${uuid})/b/([1-9][0-9]{0,9})/credential/(${uuid})/(profile/status|capabilities|health|resync)$`)

export interface DeviceTopic extends DisplayAddress {
  credentialId: string
  kind: DeviceTopicKind
}

/** Parses a display → service topic; undefined for anything else (the service ignores it). */
export function parseDeviceTopic(topic: string): DeviceTopic | undefined {
  const m = deviceTopicPattern.exec(topic)
  if (m === null) return undefined
  const epoch = Number(m[3])
  if (!Number.isSafeInteger(epoch)) return undefined
  const kind = deviceTopicKinds.find((k) => deviceTopicSuffix[k] === m[5])!
  return { organizationId: m[1]!, displayId: m[2]!, bindingEpoch: epoch, credentialId: m[4]!, kind }
}

const Uuid = Type.String({ format: 'uuid', pattern: `^${uuid}$` })
const Timestamp = Type.String({ format: 'date-time', maxLength: 40 })
const Sha256 = Type.String({ pattern: '^[0-9a-f]{64}$' })

export const IdentitySchema = Type.Object(
  {
    activation_generation: Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }),
    profile_revision_id: Uuid,
    sha256: Sha256,
  },
  { additionalProperties: false, title: 'ActivationIdentity' },
)
export type Identity = Static<typeof IdentitySchema>

/** Identity equality (generation, revision id and sha256, exactly); null equals nothing. */
export const sameIdentity = (a: Identity | null, b: Identity | null): boolean =>
  a !== null && b !== null && a.activation_generation === b.activation_generation && a.profile_revision_id === b.profile_revision_id && a.sha256 === b.sha256.toLowerCase()

export const EnvelopeSchema = Type.Object(
  {
    profile_sync_version: Type.Literal(profileSyncVersion),
    organization_id: Uuid,
    display_id: Uuid,
    binding_epoch: Type.Integer({ minimum: 1 }),
    activation_generation: Type.Integer({ minimum: 1 }),
    profile_revision_id: Uuid,
    format_version: Type.Literal(1),
    byte_length: Type.Integer({ minimum: minDecodedBytes, maximum: maxDecodedBytes }),
    sha256: Sha256,
    created_at: Timestamp,
    expires_at: Timestamp,
    data: Type.String({ maxLength: 1000, pattern: '^[A-Za-z0-9+/]*={0,2}$' }),
  },
  { additionalProperties: false, title: 'ProfileConfigEnvelope' },
)
export type Envelope = Static<typeof EnvelopeSchema>

export const deviceErrorCodes = [
  'profile_fence_recovery_required',
  'stale_activation',
  'activation_conflict',
  'hash_mismatch',
  'unsupported_profile_format',
  'profile_too_large',
  'invalid_program',
  'unsupported_white_output',
  'profile_persist_failed',
  'completion_cache_busy',
] as const
export type DeviceErrorCode = (typeof deviceErrorCodes)[number]

const NullableIdentity = Type.Union([IdentitySchema, Type.Null()])
export const ReceiptSchema = Type.Object(
  {
    organization_id: Uuid,
    display_id: Uuid,
    binding_epoch: Type.Integer({ minimum: 1 }),
    credential_id: Uuid,
    session_id: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$' }),
    session_generation: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    status_sequence: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    observed_at: Timestamp,
    refresh_requested: Type.Boolean(),
    profile: Type.Object(
      {
        active: NullableIdentity,
        attempted: NullableIdentity,
        highest_admitted: NullableIdentity,
        result: Type.Union([Type.Literal('applied'), Type.Literal('rejected'), Type.Literal('deferred'), Type.Literal('announced')]),
        refresh_requested: Type.Boolean(),
        error_code: Type.Union([Type.String({ pattern: '^[a-z0-9_]{1,64}$' }), Type.Null()]),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, title: 'ProfileStatusReceipt' },
)
export type ReceiptMessage = Static<typeof ReceiptSchema>

export const SignalProfileCapabilitySchema = Type.Object(
  {
    format_version: Type.Integer({ minimum: 1, maximum: 255 }),
    max_decoded_bytes: Type.Integer({ minimum: minDecodedBytes, maximum: maxDecodedBytes }),
    max_phases: Type.Integer({ minimum: 0, maximum: maxPhases }),
    supports_white_output: Type.Boolean(),
    supports_cct: Type.Boolean(),
  },
  { additionalProperties: false, title: 'SignalProfileCapability' },
)
export type SignalProfileCapability = Static<typeof SignalProfileCapabilitySchema>

/**
 * The controller's capabilities report. Only `signal_profile` is read (and
 * checked strictly); other fields describe the controller (firmware, pixel
 * count ...) and are kept as sent, within the message bound.
 */
export const CapabilitiesReportSchema = Type.Object(
  { signal_profile: Type.Optional(SignalProfileCapabilitySchema) },
  { additionalProperties: true, title: 'CapabilitiesReport' },
)

/** A resync request: the device lost its state and wants the feed and configuration again. */
export const ResyncSchema = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 200 })) }, { additionalProperties: true })

/**
 * The status feed (format decided here; docs/displays.md): the display
 * status of the printer on each pixel, in pixel order, with an expiry. A
 * device that passes expires_at without a newer feed (or sees published_at
 * in the future beyond its tolerance) applies its stale mode.
 */
export const FeedSchema = Type.Object(
  {
    feed_version: Type.Literal(feedVersion),
    organization_id: Uuid,
    display_id: Uuid,
    binding_epoch: Type.Integer({ minimum: 1 }),
    sequence: Type.Integer({ minimum: 1 }),
    published_at: Timestamp,
    expires_at: Timestamp,
    pixels: Type.Array(Type.Union(displayStatuses.map((s) => Type.Literal(s))), { maxItems: 256 }),
  },
  { additionalProperties: false, title: 'DisplayStatusFeed' },
)
export type Feed = Static<typeof FeedSchema>

/** How long a feed message stays valid, and how often an unchanged feed is refreshed (decided here). */
export const feedLifetimeMs = 90_000
export const feedRefreshMs = 30_000

/** Byte length of a string as UTF-8, without Node's Buffer (protocol/ stays pure). */
export function utf8Length(text: string): number {
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      n += 4
      i++
    } else n += 3
  }
  return n
}

/** The retained profile/config message for one activation, stamped `now` (a republish stamps anew). */
export function buildEnvelope(address: DisplayAddress, identity: Identity, payload: { data: string; byteLength: number }, now: number): Envelope {
  return {
    profile_sync_version: profileSyncVersion,
    organization_id: address.organizationId,
    display_id: address.displayId,
    binding_epoch: address.bindingEpoch,
    activation_generation: identity.activation_generation,
    profile_revision_id: identity.profile_revision_id,
    format_version: 1,
    byte_length: payload.byteLength,
    sha256: identity.sha256,
    created_at: new Date(now).toISOString(),
    expires_at: new Date(now + envelopeLifetimeMs).toISOString(),
    data: payload.data,
  }
}
