/**
 * Models and their files (docs/files.md). A model is what a farm prints (a design); its files
 * are the sliced or unsliced versions of it.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - `name` is required on create (1-200 characters); `sourceUrl` and
 *   `sourceId` keep the spelling they are sent with.
 * - `metadata` is free-form, at most 64 keys and 32 KiB as JSON; its `tags`
 *   (at most 64 strings of 1-64 characters) are what the list's `tag` filter
 *   matches. PATCH merges `metadata` keys; a key set to null is removed.
 * - Times are RFC 3339 strings.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const Nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) => Type.Union([schema, Type.Null()], options)
const Time = Type.String({ format: 'date-time' })
/** Read as JSON text, so its bound is checked by the handler (metadataLimitBytes), not by the schema. */
export const metadataLimitBytes = 32 * 1024

const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 64, description: 'Free tags; the list filters match them exactly.' })
const ModelMetadata = Type.Object(
  { tags: Type.Optional(Tags) },
  { additionalProperties: true, maxProperties: 64, description: `Free-form, at most 64 keys and ${metadataLimitBytes / 1024} KiB as JSON; \`tags\` is an array of strings.` },
)

const modelFields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  source: Type.String({ maxLength: 200, description: 'Where the design comes from (a marketplace, "internal"…).' }),
  designer: Type.String({ maxLength: 200 }),
  images: Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { maxItems: 50, description: 'Image URLs.' }),
  sourceUrl: Type.String({ format: 'uri', maxLength: 2048, pattern: '^https?://' }),
  sourceId: Type.String({ minLength: 1, maxLength: 200, description: "The design's id at its source." }),
}

export const CreateModelBody = Type.Object(
  {
    name: modelFields.name,
    source: Type.Optional(modelFields.source),
    designer: Type.Optional(modelFields.designer),
    images: Type.Optional(modelFields.images),
    sourceUrl: Type.Optional(modelFields.sourceUrl),
    sourceId: Type.Optional(modelFields.sourceId),
    metadata: Type.Optional(ModelMetadata),
  },
  { ...strict, title: 'CreateModel' },
)
export type CreateModelBody = Static<typeof CreateModelBody>

export const UpdateModelBody = Type.Object(
  {
    name: Type.Optional(modelFields.name),
    source: Type.Optional(Nullable(modelFields.source)),
    designer: Type.Optional(Nullable(modelFields.designer)),
    images: Type.Optional(modelFields.images),
    sourceUrl: Type.Optional(Nullable(modelFields.sourceUrl)),
    sourceId: Type.Optional(Nullable(modelFields.sourceId)),
    metadata: Type.Optional(
      Type.Object({}, { additionalProperties: true, maxProperties: 64, description: 'Merged into the stored metadata; a key set to null is removed.' }),
    ),
  },
  { ...strict, minProperties: 1, title: 'UpdateModel' },
)
export type UpdateModelBody = Static<typeof UpdateModelBody>

export const ModelSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    source: Nullable(Type.String()),
    designer: Nullable(Type.String()),
    images: Type.Array(Type.String()),
    sourceUrl: Nullable(Type.String()),
    sourceId: Nullable(Type.String()),
    metadata: Type.Object({}, { additionalProperties: true }),
    file_count: Type.Integer({ minimum: 0, description: 'Active (not deleted) files.' }),
    created_by: Nullable(Uuid, { description: 'The user who created it; null when an API key did.' }),
    created_at: Time,
    updated_at: Time,
  },
  { ...strict, title: 'Model' },
)
export type ModelRecord = Static<typeof ModelSchema>

export const ModelParams = Type.Object({ modelId: Uuid }, strict)
export const ModelListQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'Part of the name or designer, case-insensitive.' })),
    tag: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Models whose metadata.tags holds this tag.' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })),
  },
  strict,
)
export type ModelListQuery = Static<typeof ModelListQuery>
export const ModelListSchema = Type.Object(
  { models: Type.Array(ModelSchema), total: Type.Integer({ minimum: 0 }), limit: Type.Integer(), offset: Type.Integer() },
  { ...strict, title: 'ModelList' },
)

const ProjectFilamentSchema = Type.Object(
  {
    id: Type.String({ description: "The slicer's filament slot, 1-based." }),
    type: Type.String(),
    color_hex: Type.String({ description: '#RRGGBB' }),
    color_rgba: Type.String({ description: 'RRGGBBAA hex' }),
    used_m: Type.Number({ description: 'Metres.' }),
    used_g: Type.Number({ description: 'Grams.' }),
    label: Type.Optional(Type.String({ description: 'The operator\'s label for this filament (PATCH …/filament-labels).' })),
  },
  strict,
)

export const FileSchema = Type.Object(
  {
    id: Uuid,
    created_at: Nullable(Time),
    created_by: Nullable(Type.String(), { description: 'The user who uploaded it; null when an API key did.' }),
    filename: Type.String({ description: 'The name it was uploaded with.' }),
    file_path: Type.String({ description: 'Its storage path: {orgId}/{modelId}/{finalFileName}/{finalFileName}.' }),
    file_type: Type.String({ description: 'MIME type, by content: model/3mf, application/gcode, model/stl, else as declared.' }),
    file_size: Type.Integer({ minimum: 0, description: 'Bytes.' }),
    sha256: Type.String({ description: 'Lower-case hex SHA-256 of the bytes (also the ETag of its content).' }),
    model_id: Uuid,
    metadata: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'What the slicer wrote: slicer, slicer_version, printer_model, printer_model_id, nozzle_diameter, bed_type, estimated_seconds, ' +
          'weight_g, plates, tags, and processing {status: succeeded|failed, error?} (docs/files.md).',
      },
    ),
    activePlateNumber: Type.Optional(Nullable(Type.Integer())),
    project_filaments: Type.Optional(Type.Array(ProjectFilamentSchema)),
    filament_labels: Type.Object({}, { additionalProperties: Type.String(), description: 'Labels by project filament id.' }),
    deleted_at: Nullable(Time),
  },
  { ...strict, title: 'File' },
)
export type FileRecord = Static<typeof FileSchema>

export const FileParams = Type.Object({ fileId: Uuid }, strict)
/** docs/files.md: routes that read content also take these (a printer task fetching its file; checked with print jobs). */
export const FileContentQuery = Type.Object(
  {
    print_job_id: Type.Optional(Type.String({ maxLength: 200 })),
    printer_task_id: Type.Optional(Uuid),
    claim_generation: Type.Optional(Uuid),
    printer_task_access_token: Type.Optional(Uuid),
    expires: Type.Optional(Type.String({ maxLength: 12, pattern: '^[0-9]{1,12}$', description: 'Signed download URLs: Unix seconds.' })),
    signature: Type.Optional(Type.String({ maxLength: 43, pattern: '^[A-Za-z0-9_-]{43}$', description: 'Signed download URLs: the signature.' })),
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })),
  },
  strict,
)
export type FileContentQuery = Static<typeof FileContentQuery>

export const UploadForm = Type.Object(
  {
    file: Type.String({ format: 'binary', description: 'The file (one part named file).' }),
    tags: Type.Optional(Type.String({ maxLength: 4096, description: 'Comma-separated tags, stored as metadata.tags.' })),
  },
  { title: 'UploadForm' },
)

export const DownloadUrlSchema = Type.Object(
  {
    download_url: Type.String({ description: 'Readable with no other credential until it expires (15 minutes).' }),
    expires_at: Time,
  },
  strict,
)
export const SuccessSchema = Type.Object({ success: Type.Boolean() }, strict)
