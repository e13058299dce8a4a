import type { Migration } from './index.js'

/**
 * Accounts (docs/authentication.md): organizations, users, their memberships with a
 * role, the ES256 keys that sign access tokens, and refresh tokens — stored as
 * SHA-256 hashes, chained in families so that reuse of a rotated token can
 * revoke every token descended from the same login.
 */
export const accounts: Migration = {
  version: 2,
  name: 'accounts',
  up: `
    create table organizations (
      id uuid primary key default gen_random_uuid(),
      name text not null check (length(name) between 1 and 200),
      created_at timestamptz not null default now()
    );

    create table users (
      id uuid primary key default gen_random_uuid(),
      email text not null check (length(email) between 3 and 320),
      -- Lower-cased for lookups and uniqueness; email keeps what the user typed.
      email_key text not null unique,
      password_hash text not null,
      created_at timestamptz not null default now()
    );

    create table memberships (
      organization_id uuid not null references organizations (id) on delete cascade,
      user_id uuid not null references users (id) on delete cascade,
      role text not null check (role in ('admin', 'member')),
      created_at timestamptz not null default now(),
      primary key (organization_id, user_id)
    );
    create index memberships_user on memberships (user_id);

    create table signing_keys (
      kid text primary key,
      algorithm text not null,
      private_jwk jsonb not null,
      public_jwk jsonb not null,
      created_at timestamptz not null default now(),
      retired_at timestamptz
    );

    create table refresh_tokens (
      id uuid primary key default gen_random_uuid(),
      family_id uuid not null,
      user_id uuid not null references users (id) on delete cascade,
      token_hash bytea not null unique,
      created_at timestamptz not null default now(),
      expires_at timestamptz not null,
      rotated_at timestamptz,
      revoked_at timestamptz
    );
    create index refresh_tokens_family on refresh_tokens (family_id);
  `,
}
