import type { Migration } from './index.js'

/**
 * What the authorization server hands out and must recognise later, each
 * secret kept only as its SHA-256 (256 random bits: a fast hash is safe and a
 * lookup stays an index probe):
 * - handoffs: a signed-in person's consent, bound to client, redirect URI,
 *   scopes, resource and code challenge; single use, minutes long;
 * - authorization codes: bound the same way, single use, OAUTH_CODE_TTL_S;
 *   a code used twice revokes what it was exchanged for (RFC 6749 §4.1.2);
 * - refresh tokens: families that rotate; a rotated token presented again
 *   revokes its family and the access tokens it issued;
 * - revoked access tokens: their `jti` until they would have expired;
 * - assertion ids already exchanged (RFC 7523 §3 replay protection);
 * - agent identities: an agent's claim, confirmed by a person for one
 *   organization and a set of scopes.
 * `resource` '' means the API itself.
 */
export const oauthGrants: Migration = {
  version: 16,
  name: 'oauth-grants',
  up: `
    create table oauth_handoffs (
      handoff_hash bytea primary key,
      user_id uuid not null references users (id) on delete cascade,
      organization_id uuid not null references organizations (id) on delete cascade,
      client_id text not null references oauth_clients (client_id) on delete cascade,
      redirect_uri text not null,
      scopes text[] not null,
      resource text not null,
      code_challenge text,
      expires_at timestamptz not null,
      used_at timestamptz,
      created_at timestamptz not null default now()
    );
    create index oauth_handoffs_expiry on oauth_handoffs (expires_at);

    create table oauth_codes (
      code_hash bytea primary key,
      client_id text not null references oauth_clients (client_id) on delete cascade,
      user_id uuid not null references users (id) on delete cascade,
      organization_id uuid not null references organizations (id) on delete cascade,
      redirect_uri text not null,
      scopes text[] not null,
      resource text not null,
      code_challenge text,
      expires_at timestamptz not null,
      used_at timestamptz,
      family_id uuid,
      access_jti uuid,
      access_expires_at timestamptz,
      created_at timestamptz not null default now()
    );
    create index oauth_codes_expiry on oauth_codes (expires_at);

    create table oauth_refresh_tokens (
      id uuid primary key,
      family_id uuid not null,
      token_hash bytea not null unique,
      client_id text not null references oauth_clients (client_id) on delete cascade,
      user_id uuid not null references users (id) on delete cascade,
      organization_id uuid not null references organizations (id) on delete cascade,
      scopes text[] not null,
      resource text not null,
      access_jti uuid,
      access_expires_at timestamptz,
      expires_at timestamptz not null,
      rotated_at timestamptz,
      revoked_at timestamptz,
      created_at timestamptz not null default now()
    );
    create index oauth_refresh_tokens_family on oauth_refresh_tokens (family_id);
    create index oauth_refresh_tokens_expiry on oauth_refresh_tokens (expires_at);

    create table oauth_revoked_tokens (
      jti uuid primary key,
      expires_at timestamptz not null
    );

    create table oauth_assertion_ids (
      jti text primary key,
      expires_at timestamptz not null
    );

    create table agent_identities (
      id uuid primary key,
      agent_id text not null unique,
      type text not null,
      login_hint text,
      claim_hash bytea not null unique,
      claim_expires_at timestamptz not null,
      email text,
      status text not null default 'pending' check (status in ('pending', 'confirmed', 'delivered')),
      user_id uuid references users (id) on delete cascade,
      organization_id uuid references organizations (id) on delete cascade,
      scopes text[],
      confirmed_at timestamptz,
      delivered_at timestamptz,
      revoked_at timestamptz,
      created_from text,
      created_at timestamptz not null default now(),
      check (status = 'pending' or (user_id is not null and organization_id is not null and scopes is not null))
    );
  `,
}
