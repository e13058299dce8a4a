/**
 * docs/displays.md (signal profiles and status displays), display
 * registration included. Bodies are strict: an unknown field is
 * 400 MQTT_DISPLAY_REQUEST_INVALID (the routes' invalidRequestCode).
 */
import { Type, type Static } from '@sinclair/typebox'
import { IdentitySchema, SignalProfileCapabilitySchema } from '../display-mqtt.js'
import { DraftSchema } from '../signal-profile/draft.js'

const Uuid = Type.String({ format: 'uuid' })
const DateTime = Type.String({ format: 'date-time' })
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' })
const Revision = Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1, description: 'The draftRevision you read.' })
const strict = { additionalProperties: false } as const

/** Decided here: a display drives at most 256 pixels (one printer each). */
export const maxPixels = 256

export const IdParams = Type.Object({ id: Uuid }, strict)
export const RevisionParams = Type.Object({ revisionId: Uuid }, strict)

export const CapabilityRequirementsSchema = Type.Object(
  {
    decodedBytes: Type.Integer(),
    maxPhases: Type.Integer(),
    usesWhite: Type.Boolean(),
    usesCct: Type.Boolean(),
  },
  { ...strict, title: 'CapabilityRequirements', description: 'What a controller must advertise to run the bytes (read from the bytes).' },
)

export const SignalProfileSummarySchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    draftRevision: Type.Integer({ description: 'Rises by one on every draft save, rename and archive change.' }),
    latestPublishedRevision: Type.Union([Type.Integer(), Type.Null()], { description: 'The number of the newest published revision; null before the first publish.' }),
    latestPublishedRevisionId: Type.Union([Uuid, Type.Null()], { description: 'Its id (what an assignment names).' }),
    archived: Type.Boolean(),
    updatedAt: DateTime,
  },
  { ...strict, title: 'SignalProfileSummary' },
)
export type SignalProfileSummary = Static<typeof SignalProfileSummarySchema>

export const SignalProfileDetailSchema = Type.Object(
  { ...SignalProfileSummarySchema.properties, draft: DraftSchema },
  { ...strict, title: 'SignalProfileDetail' },
)
export type SignalProfileDetail = Static<typeof SignalProfileDetailSchema>

export const SignalProfileRevisionSchema = Type.Object(
  {
    id: Uuid,
    profileId: Uuid,
    revision: Type.Integer({ description: '1, 2, ... per profile.' }),
    authoringSnapshot: DraftSchema,
    compilerVersion: Type.String(),
    byteLength: Type.Integer(),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    data: Type.String({ description: 'The compiled bytes, base64 (standard, padded).' }),
    capabilityRequirements: CapabilityRequirementsSchema,
    publishedBy: Type.String({ description: 'The user id of the admin who published, or api_key:<id> for an API key.' }),
    publishedAt: DateTime,
  },
  { ...strict, title: 'SignalProfileRevision' },
)
export type SignalProfileRevision = Static<typeof SignalProfileRevisionSchema>

export const CreateProfileBody = Type.Object({ name: Name }, strict)
export const CompileBody = Type.Object({ draft: DraftSchema }, strict)
export const CompileResultSchema = Type.Object(
  {
    byteLength: Type.Integer(),
    sha256: Type.String(),
    data: Type.String(),
    capabilityRequirements: CapabilityRequirementsSchema,
  },
  { ...strict, title: 'CompiledSignalProfile' },
)
export const PatchProfileBody = Type.Object(
  { name: Type.Optional(Name), archived: Type.Optional(Type.Boolean()), expectedRevision: Revision },
  { ...strict, description: 'At least one of name and archived.' },
)
export const PutDraftBody = Type.Object({ draft: DraftSchema, expectedRevision: Revision }, strict)
export const PublishBody = Type.Object({ expectedRevision: Revision }, strict)

export const activationStatuses = ['sync_pending', 'device_applied', 'rejected'] as const
export const DesiredActivationSchema = Type.Object(
  {
    displayId: Uuid,
    bindingEpoch: Type.Integer(),
    desired: IdentitySchema,
    applied: Type.Union([IdentitySchema, Type.Null()], { description: 'Null until a device receipt matches; set only from receipts.' }),
    status: Type.Union(activationStatuses.map((s) => Type.Literal(s))),
    errorCode: Type.Union([Type.String(), Type.Null()], {
      description: "The device's rejection code, or publish_failed once 20 publications failed (publishing then waits for the retry route).",
    }),
    updatedAt: DateTime,
  },
  { ...strict, title: 'DesiredSignalProfileActivation' },
)
export type DesiredActivation = Static<typeof DesiredActivationSchema>

export const AssignBody = Type.Object(
  {
    profileRevisionId: Uuid,
    expectedBindingEpoch: Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }),
    expectedActivationGeneration: Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1, description: '0 before the first assignment in this binding.' }),
  },
  strict,
)
export const EmptyBody = Type.Object({}, strict)

const Pixels = Type.Array(Uuid, {
  maxItems: maxPixels,
  uniqueItems: true,
  description: 'Printer ids of this organization, in pixel order (pixel 1 first).',
})

export const CreateDisplayBody = Type.Object({ name: Name, pixels: Pixels }, strict)
export const PatchDisplayBody = Type.Object({ name: Type.Optional(Name), pixels: Type.Optional(Pixels) }, { ...strict, description: 'At least one field.' })

export const DisplayTopicsSchema = Type.Object(
  {
    base: Type.String(),
    profileConfig: Type.String(),
    statusFeed: Type.String(),
    receipts: Type.String(),
    capabilities: Type.String(),
    health: Type.String(),
    resync: Type.String(),
  },
  { ...strict, description: "This binding's MQTT topics (docs/displays.md)." },
)

export const DisplaySchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    pixels: Type.Array(Uuid),
    bindingEpoch: Type.Integer(),
    credentialId: Uuid,
    username: Type.String({ description: 'The MQTT user name of the current credential.' }),
    capabilities: Type.Union([SignalProfileCapabilitySchema, Type.Null()], {
      description: 'The signal_profile capability the controller advertised in this binding; null when it has not (assignments are refused).',
    }),
    capabilitiesReportedAt: Type.Union([DateTime, Type.Null()]),
    activationGeneration: Type.Integer({ description: 'The current activation generation of this binding (0 before the first).' }),
    topics: DisplayTopicsSchema,
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { ...strict, title: 'Display' },
)
export type DisplayView = Static<typeof DisplaySchema>

export const DisplayWithCredentialSchema = Type.Object(
  {
    ...DisplaySchema.properties,
    credential: Type.Object(
      { credentialId: Uuid, username: Type.String(), password: Type.String({ description: 'Shown only here: store it on the display.' }) },
      strict,
    ),
  },
  { ...strict, title: 'DisplayWithCredential' },
)
