import type { Migration } from './index.js'

/**
 * api_keys.paired_at: when a pairing code was exchanged for the key. A paired
 * key speaks for one host for good (docs/authentication.md); that used to be
 * read from the pairing code's row, which the public POST /v1/auth-codes
 * deletes a day after the code expired, and the key then acted for any host.
 * Keys paired before this migration take the time their code was used; a
 * key whose code is gone but that was bound to a host (only paired keys
 * were ever bound) counts as paired from its creation.
 */
export const pairedKeys: Migration = {
  version: 18,
  name: 'paired-keys',
  up: `
    alter table api_keys add column paired_at timestamptz;
    update api_keys k set paired_at = c.used_at from auth_codes c where c.api_key_id = k.id;
    update api_keys set paired_at = created_at where paired_at is null and bound_host_id is not null;
  `,
}
