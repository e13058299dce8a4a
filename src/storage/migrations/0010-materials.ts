import type { Migration } from './index.js'

/**
 * Materials (docs/inventory.md): the organization's catalogue of filaments
 * that jobs require and spools hold. A material a make uses cannot be deleted
 * (checked by the store against makes.materials); spools will reference it
 * with a foreign key when inventory comes.
 */
export const materials: Migration = {
  version: 10,
  name: 'materials',
  up: `
    create table materials (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      type text not null,
      color_hex text check (color_hex ~ '^#[0-9A-F]{6}$'),
      vendor text,
      diameter_mm double precision not null default 1.75,
      density_g_cm3 double precision,
      nozzle_temp_min_c integer,
      nozzle_temp_max_c integer,
      cost_per_kg double precision,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check (nozzle_temp_min_c is null or nozzle_temp_max_c is null or nozzle_temp_min_c <= nozzle_temp_max_c)
    );
    create index materials_by_name on materials (organization_id, lower(name), id);
  `,
}
