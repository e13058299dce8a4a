import type { Migration } from './index.js'

/**
 * Makes, SKUs and batches (docs/inventory.md).
 *
 * - makes (created with the model files) gain one default per file as a
 *   partial unique index (a concurrent second default cannot slip in) and a
 *   reference to the SKU they were made for, checked at commit (the save
 *   writes the make, then attaches it to the SKU, and an unknown SKU undoes
 *   the whole save).
 * - skus: the organization's product codes; sku_makes is the composition (how
 *   many of each make one unit needs). A make a SKU uses cannot be deleted
 *   (restrict), so an order never meets a composition with a hole in it.
 * - batches: one order of a SKU. Its jobs carry batch_id; the batch keeps what
 *   was ordered (the composition may change later) and the idempotency key that
 *   makes a retried order answer the first batch instead of printing twice.
 */
export const makesSkus: Migration = {
  version: 14,
  name: 'makes-skus',
  up: `
    create unique index makes_one_default on makes (model_file_id) where is_default;
    create index makes_by_org on makes (organization_id, created_at desc);

    create table skus (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      sku text not null,
      name text not null,
      description text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (organization_id, sku)
    );

    create table sku_makes (
      sku_id uuid not null references skus (id) on delete cascade,
      make_id uuid not null references makes (id) on delete restrict,
      quantity integer not null check (quantity between 1 and 1000),
      position integer not null,
      primary key (sku_id, make_id)
    );
    create index sku_makes_by_make on sku_makes (make_id);

    alter table makes add constraint makes_sku_fk foreign key (sku_id) references skus (id) on delete set null deferrable initially deferred;

    create table batches (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      sku_id uuid references skus (id) on delete set null,
      sku text not null,
      quantity integer not null check (quantity >= 1),
      jobs_ordered integer not null,
      composition jsonb not null,
      idempotency_key text,
      created_by text,
      created_at timestamptz not null default now()
    );
    create unique index batches_idempotency_key on batches (organization_id, idempotency_key) where idempotency_key is not null;
    create index batches_by_sku on batches (organization_id, sku_id, created_at desc);
  `,
}
