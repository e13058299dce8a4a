import type { Migration } from './index.js'

/**
 * The smart queue: when a printer was last given a job (the least recently
 * used compatible printer wins a job), and the tasks an organization offered
 * recently (the start stagger counts them; the store keeps the count true
 * across restarts and queue moves between nodes).
 */
export const queue: Migration = {
  version: 13,
  name: 'queue',
  up: `
    alter table printers add column last_assigned_at timestamptz;
    create index printer_tasks_by_offer_time on printer_tasks (organization_id, offered_at);
    create index print_jobs_waiting on print_jobs (organization_id) where status in ('queued', 'dispatching');
  `,
}
