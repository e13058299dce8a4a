import type { Migration } from './index.js'

/**
 * The printer read model and its event history.
 *
 * - printer_events.applied: false for a late event (its seqn was at or below
 *   the highest applied one when it arrived): stored so the history is whole,
 *   never applied. Older rows were all applied or stored as late without a
 *   mark; they read as applied. Adding a column with a constant default does
 *   not rewrite the table.
 * - No new index: the history reads the primary key (printer, epoch, seqn);
 *   an index more would cost every insert on the hot path.
 */
export const printerReadModel: Migration = {
  version: 8,
  name: 'printer-read-model',
  up: `
    alter table printer_events add column applied boolean not null default true;
  `,
}
