/**
 * Versioned schema migrations, applied in order under an advisory lock
 * (src/storage/migrate.ts). A migration is never edited once it has landed:
 * add a new one. SQL lives in TypeScript modules so the build carries it.
 */
import { serviceMeta } from './0001-service-meta.js'
import { accounts } from './0002-accounts.js'
import { apiKeys } from './0003-api-keys.js'
import { printers } from './0004-printers.js'
import { printerEvents } from './0005-printer-events.js'
import { displays } from './0006-displays.js'
import { shardTokens } from './0007-shard-tokens.js'
import { printerReadModel } from './0008-printer-read-model.js'
import { modelsFiles } from './0009-models-files.js'
import { materials } from './0010-materials.js'
import { printJobs } from './0011-print-jobs.js'
import { inventory } from './0012-inventory.js'
import { queue } from './0013-queue.js'
import { makesSkus } from './0014-makes-skus.js'
import { oauthClients } from './0015-oauth-clients.js'
import { oauthGrants } from './0016-oauth-grants.js'
import { eventPayloadJson } from './0017-event-payload-json.js'
import { pairedKeys } from './0018-paired-keys.js'
import { oauthHostBindings } from './0019-oauth-host-bindings.js'

export interface Migration {
  readonly version: number
  readonly name: string
  readonly up: string
}

export const migrations: readonly Migration[] = [serviceMeta, accounts, apiKeys, printers, printerEvents, displays, shardTokens, printerReadModel, modelsFiles, materials, printJobs, inventory, queue, makesSkus, oauthClients, oauthGrants, eventPayloadJson, pairedKeys, oauthHostBindings]
