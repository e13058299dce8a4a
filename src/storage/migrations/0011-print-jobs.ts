import type { Migration } from './index.js'

/**
 * Print jobs, printer tasks and the ready gate (docs/print-jobs.md).
 *
 * - print_jobs gains the lifecycle `status` (machines/print-job.ts) beside the
 *   printer's own view of the job (`state`, written by the bridge's events):
 *   an API job and a job first seen in bridge events are one kind of row, one
 *   id sequence. Jobs stored before this version were never verified by
 *   anyone; they take the verdict their printer gave (finished → succeeded),
 *   so no printer starts out waiting for a verification nobody can give.
 * - printer_tasks: one offer of a job to a printer's host, fenced by the
 *   assignment epoch. The partial unique indexes are the exactly-once rules
 *   themselves: at most one live task per job, and at most one per printer.
 * - printers.ready: false from a job's end until an operator verifies the
 *   plate (or holds it out of the queue, ready_source 'operator_override').
 * - print_jobs.idempotency_key: a create retried with the same Idempotency-Key
 *   header answers the job the first one made (a lost answer never queues a
 *   second print).
 * - api_keys.bound_host_id: a paired bridge key speaks for the first host it
 *   names, and only for it.
 */
export const printJobs: Migration = {
  version: 11,
  name: 'print-jobs',
  up: `
    alter table print_jobs
      add column status text not null default 'queued'
        check (status in ('queued', 'dispatching', 'printing', 'paused', 'awaiting_verification', 'succeeded', 'failed', 'cancelled')),
      add column make_id uuid references makes (id) on delete set null,
      add column sku_id uuid,
      add column batch_id uuid,
      add column priority integer not null default 0,
      add column position integer,
      add column print_options jsonb not null default '{}'::jsonb,
      add column required_materials jsonb not null default '[]'::jsonb,
      add column plate integer not null default 1,
      add column printer_task_id uuid,
      add column attempts integer not null default 0,
      add column bridge_result text,
      add column failure_reason text,
      add column verification text,
      add column part_verifications jsonb,
      add column verified_at timestamptz,
      add column created_by text,
      add column idempotency_key text;
    update print_jobs set status = case state
      when 'printing' then 'printing' when 'paused' then 'paused' when 'finished' then 'succeeded'
      when 'failed' then 'failed' when 'cancelled' then 'cancelled' else 'queued' end;
    create index print_jobs_by_status on print_jobs (organization_id, status, priority desc, position, id);
    create index print_jobs_by_batch on print_jobs (batch_id) where batch_id is not null;
    create index print_jobs_by_org on print_jobs (organization_id, id desc);
    create unique index print_jobs_idempotency_key on print_jobs (organization_id, idempotency_key) where idempotency_key is not null;

    create table printer_tasks (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      job_id bigint not null references print_jobs (id) on delete cascade,
      printer_id uuid not null references printers (id) on delete cascade,
      host_id text not null,
      assignment_epoch integer not null,
      file_id uuid references files (id) on delete set null,
      plate integer not null default 1,
      ams_mapping jsonb not null default '[]'::jsonb,
      state text not null check (state in ('offered', 'claimed', 'started', 'finished', 'cancelled', 'expired', 'unconfirmed')),
      claim_generation uuid,
      commands jsonb not null default '[]'::jsonb,
      offered_at timestamptz not null default now(),
      offer_expires_at timestamptz not null,
      claimed_at timestamptz,
      start_deadline_at timestamptz,
      started_at timestamptz,
      ended_at timestamptz,
      end_reason text,
      updated_at timestamptz not null default now()
    );
    create unique index printer_tasks_one_live_per_job on printer_tasks (job_id) where state in ('offered', 'claimed', 'unconfirmed', 'started');
    create unique index printer_tasks_one_live_per_printer on printer_tasks (printer_id) where state in ('offered', 'claimed', 'unconfirmed', 'started');
    create index printer_tasks_by_host on printer_tasks (organization_id, host_id) where state in ('offered', 'claimed', 'started');
    create index printer_tasks_due on printer_tasks (offer_expires_at) where state = 'offered';
    create index printer_tasks_start_due on printer_tasks (start_deadline_at) where state = 'claimed';

    alter table printers
      add column ready boolean not null default true,
      add column ready_source text,
      add column ready_updated_at timestamptz;

    alter table api_keys add column bound_host_id text;
  `,
}
