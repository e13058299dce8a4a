import type { Migration } from './index.js'

/**
 * Event data stored as json, not jsonb (bench/ingest). The log only ever
 * hands an event's data back whole, never queries inside it, and building
 * a jsonb value (parsing every number into a numeric, sorting every
 * object's keys) was about a third of PostgreSQL's work per stored event;
 * json is checked and kept as sent, keys in the bridge's order, and is
 * smaller on disk for flat telemetry.
 *
 * New rows carry `payload`; rows stored before keep `data` until the
 * retention sweep deletes them, and reads take whichever is set. Nothing
 * here rewrites the table: adding a nullable column, dropping a NOT NULL and
 * adding a NOT VALID check are catalog changes, so a large log migrates at
 * once instead of being locked while every row is converted. During a
 * rolling upgrade, nodes of the previous version read `data` only: events
 * stored by upgraded nodes show no data there until they are upgraded too.
 */
export const eventPayloadJson: Migration = {
  version: 17,
  name: 'event-payload-json',
  up: `
    alter table printer_events add column payload json;
    alter table printer_events alter column data drop not null;
    alter table printer_events add constraint printer_events_has_data check (payload is not null or data is not null) not valid;
  `,
}
