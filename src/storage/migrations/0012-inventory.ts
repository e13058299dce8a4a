import type { Migration } from './index.js'

/**
 * The spool inventory and its ledger (docs/inventory.md), and the marker that
 * makes a finished job's deduction happen once.
 *
 * - spools.material_id has no cascade: deleting a material a spool holds is
 *   refused by the material store (409 material_in_use), never a silent loss
 *   of stock.
 * - A spool is loaded (printer_id and slot) or not (both null): the check
 *   says so, and the partial unique index makes "one spool per printer slot" a
 *   fact of the store. Deleting a printer unloads its spools: the foreign key
 *   nulls printer_id, and the trigger nulls slot with it (a foreign key can
 *   only null its own column, and the check would refuse half an unload).
 * - spool_ledger: every change of remaining_g, as asked (delta_g) and as done
 *   (applied_g: remaining_g never goes below 0; shortfall_g what could not be
 *   taken). One deduction per job run and spool is a unique index:
 *   `job_attempt` is the job's dispatch attempt, since a failed job requeued
 *   under the same id prints (and consumes) again.
 * - print_jobs.inventory_deducted_at / _attempt: the run whose grams were
 *   deducted (also when there was nothing to deduct, so the job is not looked
 *   at again). Jobs that ended before this version are marked: there was no
 *   inventory to deduct from. The partial index holds exactly the ended runs
 *   still to deduct, for the catch-up after a crash.
 */
export const inventory: Migration = {
  version: 12,
  name: 'inventory',
  up: `
    create table spools (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      material_id uuid not null references materials (id),
      label text,
      initial_g double precision not null check (initial_g > 0),
      remaining_g double precision not null check (remaining_g >= 0),
      location text,
      printer_id uuid references printers (id) on delete set null,
      slot integer check (slot between 0 and 63),
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check ((printer_id is null) = (slot is null))
    );
    create unique index spools_one_per_slot on spools (printer_id, slot) where printer_id is not null;
    create index spools_by_org on spools (organization_id, created_at, id);
    create index spools_by_material on spools (material_id);

    create function spools_unload_with_printer() returns trigger language plpgsql as $$
    begin
      if new.printer_id is null then
        new.slot := null;
      end if;
      return new;
    end
    $$;
    create trigger spools_unload_with_printer before update of printer_id on spools
      for each row execute function spools_unload_with_printer();

    create table spool_ledger (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      spool_id uuid not null references spools (id) on delete cascade,
      delta_g double precision not null check (delta_g <> 0),
      applied_g double precision not null,
      shortfall_g double precision not null default 0 check (shortfall_g >= 0),
      reason text not null,
      job_id bigint,
      job_attempt integer,
      created_at timestamptz not null default now(),
      check ((job_id is null) = (job_attempt is null))
    );
    create index spool_ledger_by_spool on spool_ledger (spool_id, created_at desc, id desc);
    create unique index spool_ledger_one_per_job_run on spool_ledger (spool_id, job_id, job_attempt) where job_id is not null;

    alter table print_jobs
      add column inventory_deducted_at timestamptz,
      add column inventory_deducted_attempt integer;
    update print_jobs set inventory_deducted_at = now(), inventory_deducted_attempt = attempts where ended_at_ms is not null;
    create index print_jobs_inventory_pending on print_jobs (id)
      where ended_at_ms is not null and status in ('awaiting_verification', 'succeeded', 'failed', 'cancelled')
        and inventory_deducted_attempt is distinct from attempts;
  `,
}
