import type { Migration } from './index.js'

/**
 * oauth_host_bindings: the host a bridge application's sign-in speaks for.
 * A grant holding host:pair or print:launch is a bridge's; the first host one
 * of its tokens names is kept here (first writer wins), and every token of the
 * grant is held to it (docs/authentication.md). Dropped with the organization,
 * and swept once nothing of the grant can still be used.
 */
export const oauthHostBindings: Migration = {
  version: 19,
  name: 'oauth-host-bindings',
  up: `
    create table oauth_host_bindings (
      grant_id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      host_id text not null,
      bound_at timestamptz not null default now()
    );
  `,
}
