import type { Migration } from './index.js'

/**
 * OAuth clients (SPEC part 4 group D): applications an organization lets its
 * people sign in to the farm with. The secret of a confidential client is
 * kept only as a SHA-256 hash (it is 256 random bits: a fast hash is safe and
 * the lookup stays an index probe on client_id).
 */
export const oauthClients: Migration = {
  version: 15,
  name: 'oauth-clients',
  up: `
    create table oauth_clients (
      id uuid primary key,
      client_id text not null unique,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      description text,
      redirect_uris jsonb not null,
      scopes text[] not null,
      is_public boolean not null,
      is_enabled boolean not null default true,
      secret_hash bytea,
      created_by uuid,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check (is_public = (secret_hash is null))
    );
    create index oauth_clients_by_org on oauth_clients (organization_id, created_at);
  `,
}
