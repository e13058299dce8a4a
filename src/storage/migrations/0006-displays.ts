import type { Migration } from './index.js'

/**
 * Signal profiles, their immutable revisions, status displays, their MQTT
 * credentials and each display's desired activation (docs/displays.md).
 *
 * - signal_profiles: the editable draft; draft_revision rises on every
 *   change (optimistic concurrency; docs/displays.md).
 * - signal_profile_revisions: published, never updated. draft_revision
 *   records which draft was compiled, so publishing the same draft twice
 *   returns the first revision instead of a duplicate.
 * - displays: the binding (epoch), the advertised capability of this
 *   binding and the activation target, on one row: the activation is
 *   written with a condition on binding_epoch and generation, so a stale
 *   writer changes nothing.
 * - display_credentials: one per binding; the password is stored as its
 *   SHA-256 (a 256-bit random secret needs no slow hash); revoked_at is set
 *   when a rebind replaces it.
 */
export const displays: Migration = {
  version: 6,
  name: 'displays',
  up: `
    create table signal_profiles (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      draft jsonb not null,
      draft_revision integer not null default 1,
      archived boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index signal_profiles_org on signal_profiles (organization_id, created_at);

    create table signal_profile_revisions (
      id uuid primary key,
      profile_id uuid not null references signal_profiles (id) on delete cascade,
      organization_id uuid not null,
      revision integer not null,
      draft_revision integer not null,
      authoring_snapshot jsonb not null,
      compiler_version text not null,
      byte_length integer not null,
      sha256 text not null,
      data text not null,
      capability_requirements jsonb not null,
      published_by text not null,
      published_at timestamptz not null default now(),
      unique (profile_id, revision)
    );
    create index signal_profile_revisions_org on signal_profile_revisions (organization_id);

    create table displays (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      pixels uuid[] not null,
      binding_epoch integer not null default 1,
      capabilities jsonb,
      capabilities_at timestamptz,
      activation_generation integer not null default 0,
      desired_revision_id uuid references signal_profile_revisions (id),
      desired_sha256 text,
      applied jsonb,
      error_code text,
      publish_error text,
      publish_attempts integer not null default 0,
      receipt_session jsonb,
      activation_updated_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index displays_org on displays (organization_id, created_at);
    create index displays_targets on displays (organization_id) where desired_revision_id is not null;

    create table display_credentials (
      id uuid primary key,
      display_id uuid not null references displays (id) on delete cascade,
      binding_epoch integer not null,
      username text not null unique,
      secret_hash bytea not null,
      created_at timestamptz not null default now(),
      revoked_at timestamptz
    );
    create index display_credentials_display on display_credentials (display_id) where revoked_at is null;
  `,
}
