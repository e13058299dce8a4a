import type { Migration } from './index.js'

/**
 * API keys (docs/authentication.md), their usage log, and the auth codes that
 * pair a bridge. Keys are stored as SHA-256 hashes with a short public prefix
 * that makes the lookup an index probe; codes likewise as hashes.
 */
export const apiKeys: Migration = {
  version: 3,
  name: 'api-keys',
  up: `
    create table api_keys (
      id uuid primary key default gen_random_uuid(),
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null check (length(name) between 1 and 200),
      prefix text not null unique,
      secret_hash bytea not null,
      scopes text[] not null,
      enabled boolean not null default true,
      expires_at timestamptz,
      created_at timestamptz not null default now(),
      created_by uuid references users (id) on delete set null,
      last_used_at timestamptz
    );
    create index api_keys_organization on api_keys (organization_id, created_at);

    create table api_key_usage (
      id bigint generated always as identity primary key,
      api_key_id uuid not null references api_keys (id) on delete cascade,
      used_at timestamptz not null,
      method text not null,
      route text not null,
      status integer not null,
      remote_address text not null,
      request_id text not null
    );
    create index api_key_usage_by_key on api_key_usage (api_key_id, id desc);

    create table auth_codes (
      id uuid primary key default gen_random_uuid(),
      code_hash bytea not null unique,
      status text not null check (status in ('pending', 'verified', 'used')),
      created_at timestamptz not null default now(),
      expires_at timestamptz not null,
      requested_from text not null,
      organization_id uuid references organizations (id) on delete cascade,
      verified_at timestamptz,
      verified_by uuid references users (id) on delete set null,
      used_at timestamptz,
      api_key_id uuid references api_keys (id) on delete set null
    );
    create index auth_codes_expiry on auth_codes (expires_at);
  `,
}
