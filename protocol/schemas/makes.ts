/**
 * Makes, SKUs and batches (docs/makes.md): what a farm
 * sells. A make is a model file with a material chosen for each of its project
 * filaments and the number of prints one unit takes; a SKU is a product code
 * made of makes; ordering a SKU creates one batch of print jobs.
 *
 * Decisions made here (documented in the OpenAPI descriptions):
 * - A make's `materials` name each filament of the file at most once
 *   (`filament_index`, 0-based into the file's project_filaments); filaments
 *   not named take what the slicer recorded. At most 64 entries, as labels.
 * - `quantity_to_print` is 1-1000; a make's name 1-200 characters.
 * - The save answers 201 when it created the make and 200 when it updated it.
 *   An update must send `expected_revision` (the revision it read); the stored
 *   make then takes the next revision.
 * - A SKU code is 1-64 characters of letters, digits and `-_.` (it sits in
 *   paths), unique per organization, compared as sent (case-sensitive). Name
 *   1-200, description at most 2,000; 1-50 makes, each once, quantity 1-1000.
 * - An order is 1-1000 units and at most 10,000 jobs in all (400 above).
 * - Saving a make with a new or changed `sku_id` adds it to that SKU
 *   (quantity 1) unless the SKU already has it; a SKU created with makes that
 *   belong to no SKU yet becomes theirs (their revision moves). A make's
 *   `sku_id` is the SKU it was made for; a make may serve several SKUs.
 * - Batch progress counts the batch's jobs: `printed` succeeded, `failed` and
 *   `cancelled` ended without a part, `remaining` not ended yet (queued to
 *   awaiting verification), `missing` = ordered − printed − remaining (parts
 *   nobody is printing any more: requeue them or order again).
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { FileSchema } from './models.js'
import { PrintJobSchema } from './print-jobs.js'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const Time = Type.String({ format: 'date-time' })
const Nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) => Type.Union([schema, Type.Null()], options)
const OrganizationField = Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." }))

/** The paging fields of a list query (`limit` 1-200 with its default, `offset` from 0) and the organization check. */
const paging = (defaultLimit: number) => ({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: defaultLimit })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
  organizationId: OrganizationField,
})

/** A page of a list: `{<items>: [...], total, limit, offset}`. */
const pageOf = <K extends string, T extends TSchema>(items: K, schema: T, title: string) =>
  Type.Object({ [items]: Type.Array(schema), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() } as { [P in K]: ReturnType<typeof Type.Array<T>> } & Record<'total' | 'limit' | 'offset', ReturnType<typeof Type.Integer>>, { ...strict, title })

/** Jobs one order may create in all (units × make quantity × quantity_to_print, summed). */
export const maxJobsPerOrder = 10_000

export const MakeMaterialSchema = Type.Object(
  {
    filament_index: Type.Integer({ minimum: 0, maximum: 63, description: "0-based index into the file's project_filaments." }),
    material_id: Uuid,
  },
  strict,
)

export const SaveMakeBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    materials: Type.Array(MakeMaterialSchema, { maxItems: 64, description: 'The material for each project filament that should not print as sliced; each filament_index once.' }),
    make_id: Type.Optional(Type.String({ format: 'uuid', description: 'Update this make (send expected_revision with it); without it a make is created.' })),
    expected_revision: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'The revision the update is based on; another one answers 409 make_revision_conflict.' })),
    sku_id: Type.Optional(Nullable(Uuid, { description: 'The SKU this make is for; when new or changed, that SKU gets the make (quantity 1) unless it has it already.' })),
    quantity_to_print: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 1, description: 'Prints one unit of the make takes.' })),
    is_default: Type.Optional(Type.Boolean({ default: false, description: "The file's default make (the file's other default stops being one)." })),
    organizationId: OrganizationField,
  },
  { ...strict, title: 'SaveMake' },
)
export type SaveMakeBody = Static<typeof SaveMakeBody>

export const MakeSchema = Type.Object(
  {
    id: Uuid,
    model_file_id: Uuid,
    name: Type.String(),
    materials: Type.Array(MakeMaterialSchema),
    sku_id: Nullable(Uuid),
    quantity_to_print: Type.Integer(),
    is_default: Type.Boolean(),
    revision: Type.Integer({ description: 'Starts at 1; each saved update adds one.' }),
    created_at: Time,
    updated_at: Time,
  },
  { ...strict, title: 'Make' },
)
export type Make = Static<typeof MakeSchema>

export const MakeParams = Type.Object({ makeId: Uuid }, strict)

export const MakeListQuery = Type.Object(
  {
    model_file_id: Type.Optional(Uuid),
    sku_id: Type.Optional(Uuid),
    ...paging(100),
  },
  strict,
)
export type MakeListQuery = Static<typeof MakeListQuery>

export const MakeListSchema = pageOf('makes', MakeSchema, 'MakeList')

const SkuCode = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$', description: 'The product code: letters, digits, dot, dash, underscore.' })

export const SkuMakeSchema = Type.Object({ make_id: Uuid, quantity: Type.Integer({ minimum: 1, maximum: 1000, description: 'Makes one unit of the SKU needs.' }) }, strict)

export const CreateSkuBody = Type.Object(
  {
    sku: SkuCode,
    name: Type.String({ minLength: 1, maxLength: 200 }),
    description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    makes: Type.Array(SkuMakeSchema, { minItems: 1, maxItems: 50, description: 'Each make once.' }),
    organizationId: OrganizationField,
  },
  { ...strict, title: 'CreateSku' },
)
export type CreateSkuBody = Static<typeof CreateSkuBody>

export const UpdateSkuBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    makes: Type.Optional(Type.Array(SkuMakeSchema, { minItems: 1, maxItems: 50, description: 'The whole new composition; each make once. Batches already ordered keep theirs.' })),
    organizationId: OrganizationField,
  },
  { ...strict, minProperties: 1, title: 'UpdateSku' },
)
export type UpdateSkuBody = Static<typeof UpdateSkuBody>

export const SkuSchema = Type.Object(
  {
    id: Uuid,
    sku: Type.String(),
    name: Type.String(),
    description: Nullable(Type.String()),
    makes: Type.Array(SkuMakeSchema),
    created_at: Time,
    updated_at: Time,
  },
  { ...strict, title: 'Sku' },
)
export type Sku = Static<typeof SkuSchema>

export const SkuParams = Type.Object({ sku: SkuCode }, strict)

export const SkuListQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ maxLength: 120, description: 'Part of the code or the name, case-insensitive.' })),
    ...paging(100),
  },
  strict,
)
export type SkuListQuery = Static<typeof SkuListQuery>

export const SkuListSchema = pageOf('skus', SkuSchema, 'SkuList')

export const OrderSkuBody = Type.Object(
  {
    quantity: Type.Integer({ minimum: 1, maximum: 1000, description: 'Units of the SKU to print.' }),
    priority: Type.Optional(Type.Integer({ minimum: -100, maximum: 100, default: 0, description: "The batch's jobs' queue priority (higher first)." })),
    organizationId: OrganizationField,
  },
  { ...strict, title: 'OrderSku' },
)
export type OrderSkuBody = Static<typeof OrderSkuBody>

export const BatchProgressSchema = Type.Object(
  {
    ordered: Type.Integer({ description: 'Parts the order needs: units × make quantity × quantity_to_print, summed.' }),
    printed: Type.Integer({ description: 'Jobs that succeeded.' }),
    failed: Type.Integer({ description: 'Jobs that failed (a requeued failure counts here and its copy in remaining).' }),
    cancelled: Type.Integer(),
    remaining: Type.Integer({ description: 'Jobs not ended yet: queued, dispatching, printing, paused, awaiting verification.' }),
    missing: Type.Integer({ description: 'ordered − printed − remaining, at least 0: parts nobody prints any more (requeue them or order again).' }),
    complete: Type.Boolean({ description: 'Every ordered part printed.' }),
  },
  strict,
)

export const BatchSchema = Type.Object(
  {
    id: Uuid,
    sku_id: Nullable(Uuid),
    sku: Type.String({ description: 'The code as ordered.' }),
    quantity: Type.Integer(),
    composition: Type.Array(Type.Object({ make_id: Uuid, quantity: Type.Integer(), quantity_to_print: Type.Integer(), jobs: Type.Integer() }, strict), {
      description: 'The makes as they were when ordered, and the jobs each gave.',
    }),
    progress: BatchProgressSchema,
    created_at: Time,
  },
  { ...strict, title: 'Batch' },
)
export type Batch = Static<typeof BatchSchema>

export const BatchParams = Type.Object({ batchId: Uuid }, strict)

export const BatchListQuery = Type.Object(
  {
    sku: Type.Optional(SkuCode),
    ...paging(50),
  },
  strict,
)
export type BatchListQuery = Static<typeof BatchListQuery>

export const BatchListSchema = pageOf('batches', BatchSchema, 'BatchList')

export const OrderSchema = Type.Object(
  {
    batch_id: Uuid,
    batch: BatchSchema,
    jobs: Type.Array(PrintJobSchema, { description: 'Every job of the batch, in creation order.' }),
  },
  { ...strict, title: 'SkuOrder' },
)
export type Order = Static<typeof OrderSchema>

export const ModelFileOverviewSchema = Type.Object(
  {
    file: FileSchema,
    counts: Type.Object(
      {
        printing: Type.Integer({ description: 'Jobs of the file printing or paused.' }),
        queued: Type.Integer({ description: 'Jobs of the file waiting: queued or being dispatched.' }),
        batches: Type.Integer({ description: 'Batches with a job of the file.' }),
        makes: Type.Integer(),
      },
      strict,
    ),
    filaments: Type.Array(
      Type.Object(
        {
          index: Type.Integer({ description: '0-based, as a make\'s filament_index.' }),
          id: Type.String(),
          type: Nullable(Type.String()),
          color_hex: Nullable(Type.String()),
          used_g: Nullable(Type.Number()),
          label: Nullable(Type.String()),
        },
        strict,
      ),
      { description: "The file's project filaments with their labels." },
    ),
    skus: Type.Array(Type.Object({ id: Uuid, sku: Type.String(), name: Type.String() }, strict), {
      description: 'SKUs with a make of this file (empty for an API key or OAuth token without makes:read).',
    }),
    capabilities: Type.Object(
      { can_print: Type.Boolean(), can_edit_labels: Type.Boolean(), can_reprocess: Type.Boolean(), can_delete: Type.Boolean(), can_restore: Type.Boolean() },
      { ...strict, description: 'What the caller may do with the file now (a deleted file: only restore, unless purged).' },
    ),
  },
  { ...strict, title: 'ModelFileOverview' },
)
export type ModelFileOverview = Static<typeof ModelFileOverviewSchema>
