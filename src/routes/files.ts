/**
 * Files (docs/files.md): a file's record, its bytes
 * (with ranges), a signed download URL, soft delete and restore. Bearer or
 * x-api-key: reads need files:read (a paired bridge's key has it, to fetch
 * what it prints), changes files:write. A signed URL reads the content with
 * no other credential.
 */
import { Type } from '@sinclair/typebox'
import { ServiceError } from '../../protocol/errors.js'
import { DownloadUrlSchema, FileContentQuery, FileParams, FileSchema, ModelParams, SuccessSchema } from '../../protocol/schemas/models.js'
import { organizationOf } from '../auth/principal.js'
import { fileNotFound, fileRecordOf, type FileRow } from '../files/file-records.js'
import { FileStoreError } from '../files/file-store.js'
import { defineRoute, type Reply, type Route, type RouteRequest, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'

/** What the file routes use of the node. */
export type FilesContext = Pick<Services, 'clock' | 'files' | 'jobs' | 'logger'>

export const fileMetadataRoute = defineRoute({
  method: 'GET',
  path: '/v1/files/{fileId}/metadata',
  operationId: 'getFileMetadata',
  summary: "A file's record: name, type, size, hash, slicer metadata, project filaments.",
  tags: ['files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { params: FileParams, query: FileContentQuery },
  responses: { 200: { description: 'The file.', schema: FileSchema } },
  errors: ['file_not_found'],
  handler: async (req, svc: FilesContext) => ({ body: fileRecordOf(await svc.files.records.active(organizationOf(req.principal), req.params.fileId)) }),
})

export const fileContentRoute = defineRoute({
  method: 'GET',
  path: '/v1/files/{fileId}',
  operationId: 'getFileContent',
  summary: "The file's bytes.",
  description:
    'With content-type (the file type), content-length, etag (the quoted SHA-256), content-disposition (the name it was uploaded with) ' +
    'and accept-ranges. A single `Range: bytes=…` answers 206 with that part; a range beyond the end answers 416. If-None-Match with ' +
    'the etag answers 304. A signed download URL (GET /v1/files/{fileId}/download-url) reads it with no other credential until it expires. ' +
    'A bridge reading the file of a claimed printer task adds print_job_id, printer_task_id, claim_generation and printer_task_access_token: they ' +
    'must match the live claim of the printer\'s current host and epoch (a stale claim_generation, or a claim fenced by a host move → 409 task_claim_mismatch, a wrong token → 403 task_access_denied); a key with only ' +
    'print:launch reads files this way, a key with files:read may also read without them.',
  tags: ['files'],
  auth: { kind: 'organization', scope: ['files:read', 'print:launch'], signedUrl: true },
  access: 'organization member, or anyone holding a signed download URL',
  schemas: { params: FileParams, query: FileContentQuery },
  responses: {
    200: { description: 'The whole file.', contentType: 'application/octet-stream', schema: Type.String({ format: 'binary' }) },
    206: { description: 'The requested range.', contentType: 'application/octet-stream', schema: Type.String({ format: 'binary' }) },
    304: { description: 'Not modified: the etag matches.' },
  },
  errors: ['file_not_found', 'download_url_invalid', 'range_not_satisfiable', 'file_storage_unavailable', 'task_claim_mismatch', 'task_access_denied', 'printer_task_not_found'],
  handler: async (req, svc: FilesContext) => {
    const row = await fileForContent(req, svc)
    return contentReply(row, req.headers, svc, req.principal.kind === 'anonymous')
  },
})

export const downloadUrlRoute = defineRoute({
  method: 'GET',
  path: '/v1/files/{fileId}/download-url',
  operationId: 'getFileDownloadUrl',
  summary: 'A URL that reads the file with no other credential, for 15 minutes.',
  description: 'Signed with the service key over the file id, its SHA-256 and the expiry: altered or expired, it answers 403 download_url_invalid.',
  tags: ['files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { params: FileParams, query: FileContentQuery },
  responses: { 200: { description: 'The signed URL.', schema: DownloadUrlSchema } },
  errors: ['file_not_found'],
  handler: async (req, svc: FilesContext) => {
    const row = await svc.files.records.active(organizationOf(req.principal), req.params.fileId)
    return { body: svc.files.downloads.url(row.id, row.sha256, svc.clock.now()) }
  },
})

export const deleteFileRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/files/{fileId}',
  operationId: 'deleteFile',
  summary: 'Delete a file (soft): its bytes are kept for FILE_DELETE_GRACE_DAYS, during which it can be restored.',
  tags: ['files'],
  auth: { kind: 'organization', scope: 'files:write' },
  schemas: { params: FileParams },
  responses: { 200: { description: 'Deleted.', schema: SuccessSchema } },
  errors: ['file_not_found'],
  handler: async (req, svc: FilesContext) => {
    await svc.files.records.softDelete(organizationOf(req.principal), req.params.fileId)
    return { body: { success: true } }
  },
})

export const restoreFileRoute = defineRoute({
  method: 'POST',
  path: '/v1/files/{fileId}/restore',
  operationId: 'restoreFile',
  summary: 'Bring a deleted file back. Restoring an active file changes nothing.',
  description: '409 model_unavailable while its model is deleted; 409 file_purged once its bytes were removed after the grace period.',
  tags: ['files'],
  auth: { kind: 'organization', scope: 'files:write' },
  emptyBodyAllowed: true,
  schemas: { params: FileParams },
  responses: { 204: { description: 'The file is active.' } },
  errors: ['file_not_found', 'model_unavailable', 'file_purged'],
  handler: async (req, svc: FilesContext) => {
    await svc.files.records.restore(organizationOf(req.principal), req.params.fileId)
    return { status: 204 }
  },
})

const CleanupBody = Type.Object(
  {
    orphaned_file_paths: Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), { maxItems: 1000, description: 'Storage paths, as the audit lists them in orphaned_files.' }),
    organizationId: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false, title: 'CleanupRequest' },
)
const AuditSchema = Type.Object(
  {
    database_files: Type.Array(Type.Object({}, { additionalProperties: true })),
    storage_files: Type.Array(Type.Object({}, { additionalProperties: true })),
    orphaned_files: Type.Array(Type.Object({ name: Type.String(), path: Type.String(), size: Type.Integer(), last_modified: Type.String({ format: 'date-time' }) })),
    summary: Type.Object({ total_database_files: Type.Integer(), total_storage_files: Type.Integer(), total_orphaned_files: Type.Integer() }),
  },
  { title: 'FileAudit' },
)
const CleanupSchema = Type.Object(
  {
    success: Type.Boolean({ description: 'True only when nothing failed.' }),
    deleted_files: Type.Array(Type.String()),
    failed_deletions: Type.Array(
      Type.Object({
        path: Type.String(),
        error: Type.Union([Type.Literal('outside_model'), Type.Literal('not_found'), Type.Literal('not_orphaned')]),
        message: Type.String(),
      }),
    ),
  },
  { title: 'FileCleanup' },
)

export const auditRoute = defineRoute({
  method: 'GET',
  path: '/v1/models/{modelId}/files/audit',
  operationId: 'auditModelFiles',
  summary: "Compare a model's file records with the objects in storage; list the orphans (stored, named by no record).",
  description: 'Records are the active files and the deleted ones still in their grace period. Storage items are named by their path.',
  tags: ['files'],
  auth: { kind: 'organization', scope: 'files:read' },
  schemas: { params: ModelParams, query: Type.Object({ organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Must name the request's organization when given." })) }, { additionalProperties: false }) },
  responses: { 200: { description: 'The audit.', schema: AuditSchema } },
  errors: ['model_not_found'],
  handler: async (req, svc: FilesContext) => ({ body: await svc.files.audit.audit(organizationOf(req.principal), req.params.modelId) }),
})

export const cleanupRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/models/{modelId}/files/cleanup',
  operationId: 'cleanupModelFiles',
  summary: "Delete orphaned objects from a model's storage (admins).",
  description:
    'Each path is deleted only when it is under this model\'s storage prefix and no file record names it at that moment; otherwise it is ' +
    'listed in failed_deletions with error outside_model, not_found or not_orphaned. An object stored in the last 15 minutes counts as ' +
    'not orphaned (an upload may be about to claim it).',
  tags: ['files'],
  auth: { kind: 'organization', scope: 'files:write', admin: true },
  schemas: { params: ModelParams, body: CleanupBody },
  responses: { 200: { description: 'What was deleted, and what was not and why.', schema: CleanupSchema } },
  errors: ['model_not_found', 'organization_not_found'],
  handler: async (req, svc: FilesContext) => {
    const organizationId = organizationOf(req.principal)
    // The body may name the organization too (docs/files.md); it must be the one acting.
    if (req.body.organizationId !== undefined && req.body.organizationId.toLowerCase() !== organizationId) {
      throw new ServiceError('organization_not_found', 'organizationId names another organization than the one acting')
    }
    return { body: await svc.files.audit.cleanup(organizationId, req.params.modelId, req.body.orphaned_file_paths, svc.clock.now()) }
  },
})

/** The row a content request may read: by its signature (anonymous) or in the caller's organization. */
async function fileForContent(req: RouteRequest<{ params: typeof FileParams; query: typeof FileContentQuery }>, svc: Pick<FilesContext, 'clock' | 'files' | 'jobs'>): Promise<FileRow> {
  if (req.principal.kind !== 'anonymous') {
    const organizationId = organizationOf(req.principal)
    // Task parameters, when given, must match the live claim whoever reads; without them files:read is needed.
    const taskBound = await svc.jobs.dispatcher.checkTaskRead(organizationId, req.params.fileId, req.query)
    if (!taskBound && (req.principal.kind === 'api_key' || req.principal.kind === 'oauth') && !req.principal.scopes.has('files:read')) {
      throw new ServiceError('insufficient_scope', "reading a file needs files:read, or a printer task's claim (print_job_id, printer_task_id, claim_generation, printer_task_access_token)")
    }
    return svc.files.records.active(organizationId, req.params.fileId)
  }
  const { expires, signature } = req.query
  const invalid = new ServiceError('download_url_invalid', 'the download URL has expired or was altered; ask for a new one')
  if (expires === undefined || signature === undefined) throw invalid
  const row = await svc.files.records.byIdForDownload(req.params.fileId)
  // A deleted file and a bad signature answer alike: the URL no longer opens anything.
  if (row === undefined || !svc.files.downloads.verify(row.id, row.sha256, expires, signature, svc.clock.now())) throw invalid
  return row
}

async function contentReply(row: FileRow, headers: Readonly<Record<string, string>>, svc: Pick<FilesContext, 'files' | 'logger'>, signed: boolean): Promise<Reply> {
  const size = Number(row.file_size)
  const etag = `"${row.sha256}"`
  const common: Record<string, string> = {
    etag,
    'accept-ranges': 'bytes',
    'content-disposition': contentDisposition(row.filename),
    // Bytes under an organization's credential are nobody else's to cache.
    'cache-control': signed ? 'private, max-age=60' : 'private, no-cache',
  }
  if (headers['if-none-match'] !== undefined && headers['if-none-match'].split(',').some((t) => t.trim() === etag || t.trim() === '*')) {
    return { status: 304, headers: common }
  }
  const range = parseRange(headers['range'], size)
  if (range === 'unsatisfiable') {
    throw new ServiceError('range_not_satisfiable', `the file is ${size} bytes`, { headers: { 'content-range': `bytes */${size}` } })
  }
  try {
    if (range === undefined) {
      return { status: 200, contentType: row.file_type, headers: common, stream: { body: await svc.files.store.get(row.file_path), size } }
    }
    const body = await svc.files.store.get(row.file_path, range)
    return {
      status: 206,
      contentType: row.file_type,
      headers: { ...common, 'content-range': `bytes ${range.start}-${range.end}/${size}` },
      stream: { body, size: range.end - range.start + 1 },
    }
  } catch (error) {
    if (error instanceof FileStoreError && error.reason === 'not_found') {
      svc.logger.error('a file row names bytes the store does not have', { fileId: row.id, key: row.file_path })
      throw fileNotFound()
    }
    if (error instanceof FileStoreError && error.reason === 'unavailable') throw new ServiceError('file_storage_unavailable', 'file storage did not answer; retry')
    throw error
  }
}

/**
 * RFC 9110 §14.2: one `bytes=` range is served; several, or a header that is
 * not a byte range, are ignored (the whole file is sent), which the RFC allows.
 */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined
  const match = /^bytes=(\d{0,15})-(\d{0,15})$/.exec(header.trim())
  if (match === null || (match[1] === '' && match[2] === '')) return undefined
  if (match[1] === '') {
    const suffix = Number(match[2])
    if (suffix === 0 || size === 0) return 'unsatisfiable'
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(match[1])
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1)
  if (match[2] !== '' && Number(match[2]) < start) return undefined
  if (start >= size) return 'unsatisfiable'
  return { start, end }
}

/** RFC 6266: an ASCII fallback and the UTF-8 name (RFC 8187). */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_')
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`
}

export const fileRoutes: readonly Route<RouteSchemas, FilesContext>[] = [
  fileMetadataRoute,
  fileContentRoute,
  downloadUrlRoute,
  deleteFileRoute,
  restoreFileRoute,
  auditRoute,
  cleanupRoute,
] as Route<RouteSchemas, FilesContext>[]
