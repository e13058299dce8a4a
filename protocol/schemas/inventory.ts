/**
 * The spool inventory (docs/inventory.md): spools of a material, where they
 * are (a shelf, or a printer's filament slot), how many grams they hold, and
 * the ledger of every change to that.
 *
 * Decisions where the design is silent:
 * - `initial_g` (> 0, at most 100,000) is what the spool held when it was
 *   added; `remaining_g` defaults to it and may be given lower (0 to
 *   `initial_g`: a spool half used already). After that only the ledger moves
 *   `remaining_g`: an adjustment, or a finished job's deduction. It never goes
 *   below 0; a positive adjustment may take it above `initial_g` (the scale
 *   said so: the ledger keeps the reason).
 * - `slot` is the printer's filament slot, 0-63: for an AMS, unit × 4 + tray,
 *   the same number as `position` in POST /v1/printers/{id}/filaments/assign.
 *   `printer_id` and `slot` go together: both to load, both null to unload.
 *   Loading into a slot another spool holds is refused (409
 *   spool_slot_taken, naming that spool): unload it first, so no spool's
 *   whereabouts change without the operator saying so.
 * - `material` is the spool's material as stored now (for display).
 * - The list is sorted by material name, then label, then age.
 * - A ledger entry's `delta_g` is what was asked (negative: taken),
 *   `applied_g` what `remaining_g` actually changed by, `shortfall_g` the
 *   grams asked for that the spool did not have (≥ 0). Newest first.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid', maxLength: 36 })
const Time = Type.String({ format: 'date-time' })
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])
const maxGrams = 100_000

const fields = {
  label: Type.String({ minLength: 1, maxLength: 200, description: 'What is written on the spool, or a number of your own.' }),
  location: Type.String({ minLength: 1, maxLength: 200, description: 'Where it is kept when not in a printer (shelf, dry box…).' }),
  initial_g: Type.Number({ exclusiveMinimum: 0, maximum: maxGrams, description: 'Grams of filament on the spool when it was added (without the spool itself).' }),
  remaining_g: Type.Number({ minimum: 0, maximum: maxGrams, description: 'Grams left; at most initial_g. Default: initial_g.' }),
  printer_id: Type.String({ format: 'uuid', maxLength: 36, description: 'The printer the spool is loaded in; send slot with it.' }),
  slot: Type.Integer({ minimum: 0, maximum: 63, description: "The printer's filament slot: for an AMS, unit × 4 + tray (position in filaments/assign)." }),
}

export const CreateSpoolBody = Type.Object(
  {
    material_id: Uuid,
    initial_g: fields.initial_g,
    remaining_g: Type.Optional(fields.remaining_g),
    label: Type.Optional(fields.label),
    location: Type.Optional(fields.location),
    printer_id: Type.Optional(fields.printer_id),
    slot: Type.Optional(fields.slot),
  },
  { ...strict, title: 'CreateSpool' },
)
export type CreateSpoolBody = Static<typeof CreateSpoolBody>

export const UpdateSpoolBody = Type.Object(
  {
    label: Type.Optional(Nullable(fields.label)),
    location: Type.Optional(Nullable(fields.location)),
    material_id: Type.Optional(Uuid),
    printer_id: Type.Optional(Nullable(fields.printer_id)),
    slot: Type.Optional(Nullable(fields.slot)),
  },
  { ...strict, minProperties: 1, title: 'UpdateSpool' },
)
export type UpdateSpoolBody = Static<typeof UpdateSpoolBody>

export const SpoolSchema = Type.Object(
  {
    id: Uuid,
    material_id: Uuid,
    material: Type.Object({ name: Type.String(), type: Type.String(), color_hex: Nullable(Type.String()) }, strict),
    label: Nullable(Type.String()),
    initial_g: Type.Number(),
    remaining_g: Type.Number(),
    location: Nullable(Type.String()),
    printer_id: Nullable(Uuid),
    slot: Nullable(Type.Integer()),
    created_at: Time,
    updated_at: Time,
  },
  { ...strict, title: 'Spool' },
)
export type Spool = Static<typeof SpoolSchema>

export const SpoolParams = Type.Object({ id: Uuid }, strict)

const OrganizationField = Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." }))
const Limit = Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 100 }))
const Offset = Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }))

export const SpoolListQuery = Type.Object(
  {
    material_id: Type.Optional(Uuid),
    printer_id: Type.Optional(Uuid),
    loaded: Type.Optional(Type.Boolean({ description: 'true: only spools loaded in a printer; false: only those that are not.' })),
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'Part of the label or location, case-insensitive.' })),
    limit: Limit,
    offset: Offset,
    organizationId: OrganizationField,
  },
  strict,
)
export type SpoolListQuery = Static<typeof SpoolListQuery>

export const SpoolListSchema = Type.Object(
  { spools: Type.Array(SpoolSchema), total: Type.Integer({ minimum: 0 }), limit: Type.Integer(), offset: Type.Integer() },
  { ...strict, title: 'SpoolList' },
)

export const AdjustmentBody = Type.Object(
  {
    delta_g: Type.Number({ minimum: -maxGrams, maximum: maxGrams, description: 'Grams to add (positive) or take (negative); not 0.' }),
    reason: Type.String({ minLength: 1, maxLength: 200, description: 'Why: "weighed", "failed print cleared by hand", "dried, lost moisture"…' }),
  },
  { ...strict, title: 'SpoolAdjustment' },
)
export type AdjustmentBody = Static<typeof AdjustmentBody>

export const LedgerEntrySchema = Type.Object(
  {
    id: Uuid,
    spool_id: Uuid,
    delta_g: Type.Number({ description: 'Grams asked for: positive added, negative taken.' }),
    applied_g: Type.Number({ description: 'What remaining_g changed by (remaining_g never goes below 0).' }),
    shortfall_g: Type.Number({ minimum: 0, description: 'Grams asked for that the spool did not have.' }),
    reason: Type.String(),
    job_id: Nullable(Type.Integer({ description: 'The print job whose deduction this is.' })),
    created_at: Time,
  },
  { ...strict, title: 'SpoolLedgerEntry' },
)
export type LedgerEntry = Static<typeof LedgerEntrySchema>

export const AdjustmentResultSchema = Type.Object({ entry: LedgerEntrySchema, spool: SpoolSchema }, { ...strict, title: 'SpoolAdjustmentResult' })
export type AdjustmentResult = Static<typeof AdjustmentResultSchema>

export const LedgerQuery = Type.Object({ limit: Limit, offset: Offset, organizationId: OrganizationField }, strict)
export type LedgerQuery = Static<typeof LedgerQuery>

export const LedgerSchema = Type.Object(
  { entries: Type.Array(LedgerEntrySchema), total: Type.Integer({ minimum: 0 }), limit: Type.Integer(), offset: Type.Integer() },
  { ...strict, title: 'SpoolLedger' },
)
