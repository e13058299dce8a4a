/**
 * The model-files read model (docs/files.md): the
 * files of one model as a list with views, filters and filter options, their
 * counts, filament labels, and reprocessing with durable receipts.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - `filter_options` (only on the first page, offset 0) count the model's
 *   files in the chosen view before the list's own filters narrow them: the
 *   numbers say what each option would find, as a faceted search shows them.
 * - `filters` match every listed condition (a file printing AND missing a
 *   label); `tags`, `printer_profiles`, `file_types` match any listed value.
 * - Sorted by upload time, newest first, then id.
 * - Live operations list queued and running commands, and failed ones no
 *   later run of the same file has resolved.
 */
import { Type, type Static } from '@sinclair/typebox'
import { FileSchema } from './models.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const Time = Type.String({ format: 'date-time' })

export const modelFileFilters = ['printing', 'queued', 'has_makes', 'missing_label'] as const
export type ModelFileFilter = (typeof modelFileFilters)[number]

const commaList = (maxLength: number, description: string) => Type.String({ maxLength, description: `${description} Comma-separated; matches any.` })

export const ModelFileListQuery = Type.Object(
  {
    modelId: Uuid,
    view: Type.Union([Type.Literal('active'), Type.Literal('deleted')], { description: 'active: files in use; deleted: soft-deleted files (tombstones included).' }),
    search: Type.Optional(Type.String({ maxLength: 120, description: 'Part of the original file name, case-insensitive.' })),
    filters: Type.Optional(
      Type.String({
        maxLength: 80,
        pattern: '^\\s*(printing|queued|has_makes|missing_label)?\\s*(,\\s*(printing|queued|has_makes|missing_label)?\\s*)*$',
        description: 'Comma-separated, all must hold: printing, queued (a job of the file is printing / queued), has_makes, missing_label (a project filament without a label).',
      }),
    ),
    tags: Type.Optional(commaList(4096, 'Values of metadata.tags.')),
    printer_profiles: Type.Optional(commaList(4096, 'Values of metadata.printer_model.')),
    file_types: Type.Optional(commaList(4096, 'MIME types.')),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 100 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })),
  },
  strict,
)
export type ModelFileListQuery = Static<typeof ModelFileListQuery>

const OptionCounts = Type.Array(Type.Object({ value: Type.String(), count: Type.Integer({ minimum: 0 }) }, strict))
export const ModelFileListSchema = Type.Object(
  {
    files: Type.Array(FileSchema),
    total: Type.Integer({ minimum: 0 }),
    limit: Type.Integer(),
    offset: Type.Integer(),
    filter_options: Type.Optional(
      Type.Object(
        {
          tags: OptionCounts,
          printer_profiles: OptionCounts,
          file_types: OptionCounts,
          filters: Type.Object({ printing: Type.Integer(), queued: Type.Integer(), has_makes: Type.Integer(), missing_label: Type.Integer() }, strict),
        },
        { ...strict, description: 'Only on the first page (offset 0): the options of the view with the number of files each would find.' },
      ),
    ),
  },
  { ...strict, title: 'ModelFileList' },
)
export type ModelFileList = Static<typeof ModelFileListSchema>

export const ModelFileCountsQuery = Type.Object({ modelId: Uuid, organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })) }, strict)
export const ModelFileCountsSchema = Type.Object({ active: Type.Integer({ minimum: 0 }), deleted: Type.Integer({ minimum: 0 }) }, { ...strict, title: 'ModelFileCounts' })

export const FilamentLabelsBody = Type.Object(
  {
    labels: Type.Record(Type.String({ minLength: 1, maxLength: 16 }), Type.String({ maxLength: 120 }), {
      maxProperties: 64,
      description: 'Labels by project filament id; "" clears one. Merged into the stored labels.',
    }),
  },
  { ...strict, title: 'FilamentLabels' },
)
export type FilamentLabelsBody = Static<typeof FilamentLabelsBody>

export const commandStatuses = ['queued', 'running', 'succeeded', 'failed'] as const
export const CommandStatusSchema = Type.Union(commandStatuses.map((s) => Type.Literal(s)))
export const ReprocessAcceptedSchema = Type.Object({ command_id: Uuid, file_id: Uuid, status: CommandStatusSchema }, { ...strict, title: 'ReprocessAccepted' })
export const ReprocessReceiptSchema = Type.Object(
  {
    command_id: Uuid,
    file_id: Uuid,
    status: CommandStatusSchema,
    error: Type.Union([Type.String(), Type.Null()]),
    created_at: Time,
    finished_at: Type.Union([Time, Type.Null()]),
  },
  { ...strict, title: 'ReprocessReceipt' },
)
export type ReprocessReceipt = Static<typeof ReprocessReceiptSchema>
export const ReceiptParams = Type.Object({ fileId: Uuid, commandId: Uuid }, strict)

export const LiveOperationsSchema = Type.Object(
  {
    operations: Type.Array(
      Type.Object(
        {
          command_id: Type.Union([Uuid, Type.Null()], { description: 'The reprocess command; null for the upload\'s own reading of the file (kind upload).' }),
          file_id: Uuid,
          model_id: Uuid,
          kind: Type.Union([Type.Literal('reprocess'), Type.Literal('upload')], {
            description: 'reprocess: a reprocess command; upload: the file\'s metadata could not be read when it was uploaded (status failed) and nothing has reprocessed it since.',
          }),
          status: CommandStatusSchema,
          error: Type.Union([Type.String(), Type.Null()]),
          created_at: Time,
        },
        strict,
      ),
    ),
  },
  { ...strict, title: 'LiveOperations' },
)
export type LiveOperations = Static<typeof LiveOperationsSchema>

/** Parses a comma list: trimmed, empties dropped, duplicates once. */
export function commaValues(list: string | undefined): string[] {
  return list === undefined ? [] : [...new Set(list.split(',').map((v) => v.trim()).filter((v) => v !== ''))]
}
