import type { Migration } from './index.js'

/**
 * Printers: their connection configuration and their host
 * assignment. Credentials are stored sealed (src/secrets); a
 * serial number is unique within an organization (it is the upsert key).
 */
export const printers: Migration = {
  version: 4,
  name: 'printers',
  up: `
    create table printers (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      ip_address text not null,
      serial_number text,
      model text,
      access_token_sealed text,
      api_key_sealed text,
      enabled boolean not null default false,
      host_id text,
      assignment_epoch integer not null default 0 check (assignment_epoch >= 0),
      discovery_method text,
      discovered_at timestamptz,
      printer_type text not null default 'bambu'
        check (printer_type in ('bambu', 'prusa_connect', 'octoprint', 'klipper', 'snapmaker', 'flashforge')),
      port integer check (port between 1 and 65535),
      communication_protocol text check (communication_protocol in ('mqtt', 'http', 'websocket', 'serial')),
      capabilities jsonb not null default '{}'::jsonb,
      secure boolean not null default true,
      timeout_ms integer not null default 30000,
      reconnect_interval_ms integer not null default 5000,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create unique index printers_serial on printers (organization_id, serial_number) where serial_number is not null;
    create index printers_host on printers (organization_id, host_id);
  `,
}
