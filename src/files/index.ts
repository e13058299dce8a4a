/**
 * Models and files on this node: the FileStore chosen by the configuration
 * (the file system under DATA_DIR/files, or S3 with FILES_S3_ENDPOINT) and
 * the stores, uploads and download signer built on it.
 */
import type { Clock } from '../../actors/clock.js'
import { join } from 'node:path'
import type { Config } from '../node/config.js'
import type { Logger } from '../observability/log.js'
import type { MetricsRegistry } from '../observability/metrics.js'
import type { SealedBox } from '../secrets/sealed-box.js'
import type { Database } from '../storage/database.js'
import { DownloadSigner } from './download-urls.js'
import { FileRecords } from './file-records.js'
import type { FileStore } from './file-store.js'
import { FsFileStore } from './fs-file-store.js'
import { ModelStore } from '../models/model-store.js'
import { S3FileStore } from './s3-file-store.js'
import { Uploads } from './uploads.js'
import { FileAudit } from './file-audit.js'
import { ModelFileReads } from './model-file-reads.js'
import { Reprocessor } from './reprocess.js'

export interface FileNode {
  readonly store: FileStore
  readonly models: ModelStore
  readonly records: FileRecords
  readonly uploads: Uploads
  readonly downloads: DownloadSigner
  readonly reads: ModelFileReads
  readonly reprocessor: Reprocessor
  readonly audit: FileAudit
  /** Starts the reprocess worker and the hourly sweep of deleted files past their grace period. */
  start(): void
  close(): Promise<void>
}

const sweepEveryMs = 60 * 60_000
const staleTemporaryMs = 24 * 60 * 60_000

export function createFileNode(config: Config, db: Database, box: SealedBox, logger: Logger, metrics: MetricsRegistry, clock: Clock): FileNode {
  const store: FileStore = config.filesS3 === undefined ? new FsFileStore(join(config.dataDir, 'files')) : new S3FileStore(config.filesS3, clock)
  const models = new ModelStore(db.sql, () => clock.now())
  const now = () => clock.now()
  const records = new FileRecords(db.sql, now)
  const reprocessor = new Reprocessor(db.sql, store, logger, clock)
  const audit = new FileAudit(db.sql, store, models, logger, now)
  let sweep: unknown
  const purge = (): void => {
    audit.purgeExpired(config.fileDeleteGraceDays, clock.now()).then(
      (purged) => purged > 0 && logger.info('deleted files past their grace period purged', { purged }),
      (error: unknown) => logger.warn('the purge of deleted files failed; retried in an hour', { error }),
    )
    // Temporaries of uploads a crash cut off. A day old at least: on a shared mount another node's
    // upload may be writing one right now, and no upload takes a day.
    if (store instanceof FsFileStore) {
      store.removeStaleTemporaries(staleTemporaryMs, clock.now()).then(
        (removed) => removed > 0 && logger.info('temporaries of interrupted uploads removed', { removed }),
        (error: unknown) => logger.warn('removing stale upload temporaries failed; retried in an hour', { error }),
      )
    }
  }
  return {
    store,
    models,
    records,
    uploads: new Uploads({ store, models, records, limitBytes: config.uploadLimitBytes, logger, metrics }),
    downloads: new DownloadSigner(box.derivedKeys('download-url'), config.publicBaseUrl),
    reads: new ModelFileReads(db.sql, models, now),
    reprocessor,
    audit,
    start() {
      reprocessor.start()
      sweep = clock.setInterval(purge, sweepEveryMs)
      purge()
    },
    async close() {
      clock.clearInterval(sweep)
      await reprocessor.stop()
      await store.close()
    },
  }
}
