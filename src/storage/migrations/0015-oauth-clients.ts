import type { Migration } from './index.js'

/**
 * OAuth clients: those an organization manages (docs/authentication.md) and
 * those that registered themselves (RFC 7591, `source = 'registration'`, no
 * organization: the person signing in chooses it). The secret of a
 * confidential client is kept only as a SHA-256 hash (it is 256 random bits:
 * a fast hash is safe and the lookup stays an index probe on client_id).
 * RFC 7591 metadata the service does not act on (contacts, tos_uri, …) is
 * kept as sent in `metadata`.
 */
export const oauthClients: Migration = {
  version: 15,
  name: 'oauth-clients',
  up: `
    create table oauth_clients (
      id uuid primary key,
      client_id text not null unique,
      source text not null check (source in ('organization', 'registration')),
      organization_id uuid references organizations (id) on delete cascade,
      name text,
      description text,
      redirect_uris jsonb not null,
      scopes text[] not null,
      grant_types text[] not null default '{authorization_code,refresh_token}',
      response_types text[] not null default '{code}',
      is_public boolean not null,
      is_enabled boolean not null default true,
      secret_hash bytea,
      client_uri text,
      logo_uri text,
      metadata jsonb not null default '{}'::jsonb,
      registered_from text,
      created_by uuid,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check (is_public = (secret_hash is null)),
      check (source = 'registration' or (organization_id is not null and name is not null))
    );
    create index oauth_clients_by_org on oauth_clients (organization_id, created_at) where organization_id is not null;
  `,
}
