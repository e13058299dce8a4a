import type { Migration } from './index.js'

/**
 * The database's own identity: an installation id that every node sharing
 * this database reads, so logs and metrics from several nodes can be tied to
 * one deployment.
 */
export const serviceMeta: Migration = {
  version: 1,
  name: 'service-meta',
  up: `
    create table service_meta (
      key text primary key,
      value text not null,
      updated_at timestamptz not null default now()
    );
    insert into service_meta (key, value) values ('installation_id', gen_random_uuid()::text);
  `,
}
