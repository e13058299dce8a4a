import type { Migration } from './index.js'

/**
 * Models and their files (docs/files.md).
 *
 * - files.file_path is the storage key `{orgId}/{modelId}/{name}/{name}`;
 *   unique, so two rows can never claim one object.
 * - file_name_versions hands out version numbers: one row per sanitized name
 *   in a model, bumped in the same statement that reads it, so concurrent
 *   uploads of one name get different versions and a version once given
 *   (even to a deleted or purged file) is never given again.
 * - A soft-deleted file keeps its row (deleted_at); purged_at is set when the
 *   grace sweep removed its bytes, and the row stays as a tombstone.
 * - file_commands are the durable receipts of reprocess requests: at most one
 *   queued or running per file and kind (a partial unique index), so a second
 *   request returns the same command and a restart finds what was pending.
 * - makes (docs/inventory.md) and print_jobs.model_file_id exist now so the
 *   model-files filters `has_makes`, `printing` and `queued` read real tables;
 *   the routes that write them come with makes and print jobs.
 */
export const modelsFiles: Migration = {
  version: 9,
  name: 'models-files',
  up: `
    create table models (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      source text,
      designer text,
      images jsonb not null default '[]'::jsonb,
      source_url text,
      source_id text,
      metadata jsonb not null default '{}'::jsonb,
      created_by uuid,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      deleted_at timestamptz
    );
    create index models_by_name on models (organization_id, lower(name), id) where deleted_at is null;

    create table files (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      model_id uuid not null references models (id) on delete cascade,
      filename text not null,
      final_name text not null,
      file_path text not null unique,
      file_type text not null,
      file_size bigint not null check (file_size >= 0),
      sha256 text not null,
      metadata jsonb not null default '{}'::jsonb,
      project_filaments jsonb not null default '[]'::jsonb,
      active_plate_number integer,
      filament_labels jsonb not null default '{}'::jsonb,
      created_by uuid,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      deleted_at timestamptz,
      purged_at timestamptz
    );
    create index files_by_model on files (model_id, created_at, id);
    create index files_deleted on files (deleted_at) where deleted_at is not null and purged_at is null;

    create table file_name_versions (
      model_id uuid not null references models (id) on delete cascade,
      name text not null,
      last_minor integer not null,
      primary key (model_id, name)
    );

    create table file_commands (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      file_id uuid not null references files (id) on delete cascade,
      kind text not null check (kind in ('reprocess')),
      status text not null check (status in ('queued', 'running', 'succeeded', 'failed')),
      error text,
      created_at timestamptz not null default now(),
      started_at timestamptz,
      finished_at timestamptz
    );
    create unique index file_commands_pending on file_commands (file_id, kind) where status in ('queued', 'running');
    create index file_commands_by_org on file_commands (organization_id, status);

    create table makes (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      model_file_id uuid not null references files (id) on delete cascade,
      name text not null,
      materials jsonb not null default '[]'::jsonb,
      sku_id uuid,
      quantity_to_print integer not null default 1 check (quantity_to_print >= 1),
      is_default boolean not null default false,
      revision integer not null default 1,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index makes_by_file on makes (model_file_id);

    alter table print_jobs add column model_file_id uuid references files (id) on delete set null;
    create index print_jobs_by_file on print_jobs (model_file_id) where model_file_id is not null;
  `,
}
