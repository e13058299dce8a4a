/**
 * Materials (docs/inventory.md): the filaments a farm prints with, as jobs
 * require them and spools hold them.
 *
 * Decisions where the design is silent:
 * - `name` (1-200) and `type` (1-32, as slicers write it: PLA, PETG, PETG-CF,
 *   ABS, TPU 95A…) are required; everything else is optional.
 * - `color_hex` is `#RRGGBB`, stored upper-case (`#ff8000` reads back
 *   `#FF8000`); alpha is not a property of a material.
 * - `diameter_mm` defaults to 1.75 (1.0-3.5); density 0.5-3.0 g/cm³; nozzle
 *   temperatures 0-500 °C with min ≤ max (the service's bounds); cost per kg from
 *   0 (at most 100,000, a bound on input) in the organization's currency.
 * - The list is sorted by name; `type` filters exactly (case-insensitive),
 *   `search` matches part of the name or vendor.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'

const strict = { additionalProperties: false } as const
const Uuid = Type.String({ format: 'uuid' })
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  type: Type.String({ minLength: 1, maxLength: 32, pattern: '^[A-Za-z0-9][A-Za-z0-9 +._-]*$', description: 'As slicers write it: PLA, PETG, PETG-CF, TPU 95A…' }),
  color_hex: Type.String({ pattern: '^#[0-9A-Fa-f]{6}$', maxLength: 7, description: '#RRGGBB' }),
  vendor: Type.String({ minLength: 1, maxLength: 200 }),
  diameter_mm: Type.Number({ minimum: 1, maximum: 3.5 }),
  density_g_cm3: Type.Number({ minimum: 0.5, maximum: 3 }),
  nozzle_temp_min_c: Type.Integer({ minimum: 0, maximum: 500 }),
  nozzle_temp_max_c: Type.Integer({ minimum: 0, maximum: 500 }),
  cost_per_kg: Type.Number({ minimum: 0, maximum: 100_000 }),
}

export const CreateMaterialBody = Type.Object(
  {
    name: fields.name,
    type: fields.type,
    color_hex: Type.Optional(fields.color_hex),
    vendor: Type.Optional(fields.vendor),
    diameter_mm: Type.Optional(fields.diameter_mm),
    density_g_cm3: Type.Optional(fields.density_g_cm3),
    nozzle_temp_min_c: Type.Optional(fields.nozzle_temp_min_c),
    nozzle_temp_max_c: Type.Optional(fields.nozzle_temp_max_c),
    cost_per_kg: Type.Optional(fields.cost_per_kg),
  },
  { ...strict, title: 'CreateMaterial' },
)
export type CreateMaterialBody = Static<typeof CreateMaterialBody>

export const UpdateMaterialBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    type: Type.Optional(fields.type),
    color_hex: Type.Optional(Nullable(fields.color_hex)),
    vendor: Type.Optional(Nullable(fields.vendor)),
    diameter_mm: Type.Optional(fields.diameter_mm),
    density_g_cm3: Type.Optional(Nullable(fields.density_g_cm3)),
    nozzle_temp_min_c: Type.Optional(Nullable(fields.nozzle_temp_min_c)),
    nozzle_temp_max_c: Type.Optional(Nullable(fields.nozzle_temp_max_c)),
    cost_per_kg: Type.Optional(Nullable(fields.cost_per_kg)),
  },
  { ...strict, minProperties: 1, title: 'UpdateMaterial' },
)
export type UpdateMaterialBody = Static<typeof UpdateMaterialBody>

export const MaterialSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    type: Type.String(),
    color_hex: Nullable(Type.String()),
    vendor: Nullable(Type.String()),
    diameter_mm: Type.Number(),
    density_g_cm3: Nullable(Type.Number()),
    nozzle_temp_min_c: Nullable(Type.Integer()),
    nozzle_temp_max_c: Nullable(Type.Integer()),
    cost_per_kg: Nullable(Type.Number()),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { ...strict, title: 'Material' },
)
export type Material = Static<typeof MaterialSchema>

export const MaterialParams = Type.Object({ materialId: Uuid }, strict)
export const MaterialListQuery = Type.Object(
  {
    type: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'Part of the name or vendor, case-insensitive.' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 100 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })),
  },
  strict,
)
export type MaterialListQuery = Static<typeof MaterialListQuery>
export const MaterialListSchema = Type.Object(
  { materials: Type.Array(MaterialSchema), total: Type.Integer({ minimum: 0 }), limit: Type.Integer(), offset: Type.Integer() },
  { ...strict, title: 'MaterialList' },
)
