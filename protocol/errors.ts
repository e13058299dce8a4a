/**
 * The error-code registry (docs/errors.md).
 *
 * Every coded error the service can answer with is listed here, once, with its
 * HTTP status and the sentence a client developer reads to learn what to fix.
 * Handlers throw `ServiceError` with one of these codes; one mapper in
 * src/http turns it into a body. Codes are never reused for a different cause.
 */

export interface ErrorCodeInfo {
  readonly status: number
  /** What causes it and what the caller should do; shown in the OpenAPI document. */
  readonly description: string
  /** Whether retrying the same request later can succeed (sets Retry-After). */
  readonly retryable?: boolean
}

export const errorCodes = {
  // Request framing: the server could not read what was sent.
  invalid_json: {
    status: 400,
    description: 'The request body is not valid JSON. Send a UTF-8 JSON document.',
  },
  validation_failed: {
    status: 400,
    description:
      'A body, query or path field is missing, unknown, of the wrong type or out of range. The message names the field and the rule.',
  },
  invalid_unicode: {
    status: 400,
    description:
      'The text is not Unicode: its bytes are not UTF-8, or a \\u escape names half of a surrogate pair (such as \\ud800 alone). Send UTF-8; escape a character outside the BMP as a pair. The message names the field.',
  },
  body_required: {
    status: 400,
    description: 'This route needs a JSON body and the request had none.',
  },
  unsupported_media_type: {
    status: 415,
    description: 'The Content-Type is not JSON. Send application/json (the OAuth token and revocation endpoints also take application/x-www-form-urlencoded).',
  },
  payload_too_large: {
    status: 413,
    description: 'The body is larger than the configured limit (BODY_LIMIT_BYTES; for uploads UPLOAD_LIMIT_BYTES). Split the request, or ask the operator to raise the limit.',
  },
  route_not_found: {
    status: 404,
    description: 'No route has this path. See /openapi.json for the routes.',
  },
  method_not_allowed: {
    status: 405,
    description: 'The path exists but not with this method; the Allow header lists the methods it takes.',
  },

  // Who is calling (docs/authentication.md).
  unauthorized: {
    status: 401,
    description: 'No credential, or one the service does not accept. Send Authorization: Bearer <access token> or x-api-key.',
  },
  token_expired: {
    status: 401,
    description: 'The access token has expired. Get a new one at POST /v1/auth/refresh.',
  },
  invalid_credentials: {
    status: 401,
    description: 'The email or password is wrong.',
  },
  refresh_token_invalid: {
    status: 401,
    description: 'The refresh token is unknown, expired or revoked. Sign in again.',
  },
  refresh_token_reused: {
    status: 401,
    description: 'A refresh token was presented after it had been rotated; every session of that sign-in was revoked. Sign in again.',
  },
  api_key_disabled: {
    status: 401,
    description: 'The API key has been disabled by an admin of its organization.',
  },
  api_key_expired: {
    status: 401,
    description: 'The API key has passed its expiry time. Create a new one, or have an admin extend it.',
  },
  session_required: {
    status: 403,
    description: 'This route is for signed-in people only; API keys cannot use it.',
  },
  insufficient_scope: {
    status: 403,
    description: 'The credential lacks the scope this route needs; the message names it.',
  },
  ORG_ADMIN_REQUIRED: {
    status: 403,
    description: 'Only an admin of the organization may do this; a member may not. `printfarm routes` lists which routes need an admin.',
  },
  organization_required: {
    status: 400,
    description: 'The caller belongs to several organizations: name one with the x-organization-id header.',
  },
  organization_not_found: {
    status: 404,
    description: 'No such organization among the caller\'s.',
  },

  // Accounts.
  user_exists: {
    status: 409,
    description: 'That email already has an account: add it as a member without a password.',
  },
  password_required: {
    status: 400,
    description: 'A new account needs a password (12 to 200 characters).',
  },
  member_not_found: {
    status: 404,
    description: 'No such member in this organization.',
  },
  last_admin: {
    status: 409,
    description: 'The organization would be left without an admin. Make another member admin first.',
  },
  api_key_not_found: {
    status: 404,
    description: 'No such API key in this organization.',
  },
  auth_code_not_found: {
    status: 404,
    description: 'No such pairing code. Check it, or generate a new one on the bridge.',
  },
  auth_code_pending: {
    status: 400,
    description: 'The pairing code has not been verified yet: a signed-in admin must confirm it first. Poll again.',
  },
  auth_code_expired: {
    status: 400,
    description: 'The pairing code has expired (10 minutes). Generate a new one.',
  },
  auth_code_used: {
    status: 400,
    description: 'The pairing code was already verified or exchanged; a code pairs one bridge once.',
  },
  printer_not_found: {
    status: 404,
    description: 'No such printer in this organization.',
  },
  printer_assigned_elsewhere: {
    // docs/errors.md: printer-config routes answer 400, 404 or 500.
    status: 400,
    description: 'The printer is assigned to another host; move it with PUT /v1/printers/{id}/host-assignment.',
  },
  serial_number_taken: {
    status: 400,
    description: 'Another printer of this organization has that serial number (the upsert key).',
  },
  printer_not_assigned: {
    status: 409,
    description: 'The printer is not assigned to any host yet, so no bridge may post its events. Assign it with PUT /v1/printers/{id}/host-assignment (or create it with host_id).',
  },
  assignment_epoch_stale: {
    status: 409,
    description:
      'The assignmentEpoch is older than the printer\'s current one: the printer was moved since this bridge read its configuration. Stop posting for it; read GET /v1/printer-config?host_id=... again.',
  },
  assignment_epoch_unknown: {
    status: 409,
    description: 'The assignmentEpoch is newer than any the service issued for this printer. Read the epoch from GET /v1/printer-config.',
  },
  assignment_other_host: {
    status: 409,
    description: 'The printer is assigned to another host at this epoch; only that host\'s bridge may post its events.',
  },
  printer_busy: {
    status: 409,
    description: 'The printer is running a job (printing or paused); finish or cancel it first. The body carries the job and the reason.',
  },
  printer_owner_unavailable: {
    status: 503,
    description: "The node that owns this printer's shard cannot take the request right now. Nothing was stored; retry after the Retry-After delay.",
    retryable: true,
  },
  display_owner_unavailable: {
    status: 503,
    description: "The node that owns this display's shard cannot take the request right now (it is moving to another node). Nothing was stored; retry after the Retry-After delay.",
    retryable: true,
  },
  topic_not_found: {
    status: 404,
    description: 'Live feed: no such topic in this organization (a printer of another organization is unknown here too).',
  },
  invalid_frame: {
    status: 400,
    description: 'Live feed: the frame is not JSON (printfarm.v1.json) or MessagePack (printfarm.v1.msgpack). See docs/live-feed.md.',
  },
  MQTT_DISPLAY_REQUEST_INVALID: {
    // docs/errors.md: the signal-profile and display routes' own 400 code.
    status: 400,
    description: 'A signal-profile or display request has an unknown or invalid field (the message names it), or a draft breaks a compiler rule.',
  },
  signal_profile_not_found: {
    status: 404,
    description: 'No such signal profile in this organization.',
  },
  signal_profile_revision_not_found: {
    status: 404,
    description: 'No such published signal-profile revision in this organization.',
  },
  signal_profile_target_not_found: {
    status: 404,
    description: 'The display has no signal-profile activation in its current binding yet: assign one with POST /v1/mqtt/displays/{id}/profile.',
  },
  display_not_found: {
    status: 404,
    description: 'No such status display in this organization.',
  },
  signal_profile_revision_conflict: {
    status: 409,
    description: 'expectedRevision is not the current draftRevision: someone changed the profile since you read it. Read it again and redo the change.',
  },
  signal_profile_archived: {
    status: 409,
    description: 'The profile is archived: unarchive it (PATCH archived false) before saving its draft or publishing.',
  },
  display_binding_epoch_conflict: {
    status: 409,
    description: 'expectedBindingEpoch is not the display\'s current binding epoch: it was rebound since you read it. Read the display again.',
  },
  signal_profile_activation_conflict: {
    status: 409,
    description: 'expectedActivationGeneration is not the display\'s current activation generation: another assignment came first. Read the target again.',
  },
  signal_profile_capability_missing: {
    status: 409,
    description: 'The display has not advertised the signal_profile capability in this binding (its firmware keeps its built-in patterns); nothing was published.',
  },
  signal_profile_capability_insufficient: {
    status: 409,
    description: 'The revision needs more than the display advertised (decoded size, phases, white output or CCT); the message names the limit. Nothing was published.',
  },
  signal_profile_target_healthy: {
    status: 409,
    description: 'Retry asked for a target with no recorded error: delivery is already going on (or done).',
  },
  material_not_found: {
    status: 404,
    description: 'No material with that id in this organization. List them with GET /v1/materials.',
  },
  material_in_use: {
    status: 409,
    description: 'A make (or a spool) uses this material: change those to another material first. The answer names how many use it.',
  },
  spool_not_found: {
    status: 404,
    description: 'No spool with that id in this organization. List them with GET /v1/inventory.',
  },
  spool_slot_taken: {
    status: 409,
    description:
      "Another spool is loaded in that printer slot; the answer names it (spool_id). Unload it first (PATCH /v1/inventory/{id} {printer_id: null, slot: null}), then load this one.",
  },
  model_not_found: {
    status: 404,
    description: 'No model with that id in this organization (or it was deleted). List them with GET /v1/models.',
  },
  file_not_found: {
    status: 404,
    description: 'No file with that id in this organization, or it was deleted (restore it with POST /v1/files/{fileId}/restore).',
  },
  file_deleted: {
    status: 409,
    description: 'The file is deleted: restore it first (POST /v1/files/{fileId}/restore).',
  },
  file_purged: {
    status: 409,
    description: "The file's bytes were removed after its deletion grace period (FILE_DELETE_GRACE_DAYS); it cannot be restored. Upload it again.",
  },
  model_unavailable: {
    status: 409,
    description: "The file's model is deleted: restore the model (POST /v1/models/{modelId}/restore) before restoring its files.",
  },
  command_not_found: {
    status: 404,
    description: 'No reprocess command with that id for this file. Use the command_id POST …/reprocess answered.',
  },
  multipart_invalid: {
    status: 400,
    description:
      'The upload is not a usable multipart/form-data body: send Content-Type multipart/form-data with exactly one part named file (and optionally a tags field). The message says what was wrong.',
  },
  download_url_invalid: {
    status: 403,
    description: 'The signed download URL has expired or was altered. Ask for a new one with GET /v1/files/{fileId}/download-url.',
  },
  range_not_satisfiable: {
    status: 416,
    description: 'The Range header asks for bytes outside the file. The Content-Range header of the answer gives its size.',
  },
  file_storage_unavailable: {
    status: 503,
    description: 'File storage (the data directory or the S3 bucket) did not answer. Nothing was stored; retry after the Retry-After delay.',
    retryable: true,
  },
  print_job_not_found: {
    status: 404,
    description: 'No print job with that id in this organization. List them with POST /v1/print-jobs.',
  },
  job_transition_invalid: {
    status: 409,
    description:
      "The job cannot go from its status to the one asked for (the message names both). Requeue works from failed, cancelled, or dispatching once the task's start is unconfirmed; pause/resume only while it prints.",
  },
  job_in_progress: {
    status: 409,
    description: 'The job is dispatching, printing or paused: cancel it first (PATCH /v1/print-jobs/{id}/status {status: "cancelled"}).',
  },
  job_not_awaiting_verification: {
    status: 409,
    description: 'The job is not waiting for an operator to verify its plate (it has not ended, or was verified already).',
  },
  job_already_started: {
    status: 409,
    description: "The job's task has already started: nothing to confirm.",
  },
  no_task_to_start: {
    status: 409,
    description: 'The printer has no offered, claimed or unconfirmed task that an operator could say started.',
  },
  printer_not_eligible: {
    status: 409,
    description:
      'The printer cannot take this job now. Only a printer whose status is WAITING, IDLE or COMPLETE takes a job; the body gives its status and lists the reasons (codes such as printer_error, printer_offline, printer_state_unknown, printer_not_ready, printer_busy, host_unassigned, printer_disabled, printer_maintenance, printer_model_mismatch, nozzle_mismatch, material_missing, material_insufficient); fix them and assign again.',
  },
  job_not_dispatchable: {
    status: 409,
    description: 'Only a queued job can be assigned to a printer. Requeue it first if it failed or was cancelled.',
  },
  job_not_queued: {
    status: 409,
    description: 'Only a queued job has a place in the queue to change. A job being dispatched or printed keeps its place; requeue a failed or cancelled one first.',
  },
  file_not_printable: {
    status: 409,
    description: "The job's file is deleted, purged or no longer exists: restore it or create the job from another file.",
  },
  invalid_client_metadata: {
    status: 400,
    description:
      'OAuth client registration (RFC 7591): a field is unknown, missing or out of range (grant_types, response_types, token_endpoint_auth_method, scope…). error_description names it.',
  },
  invalid_redirect_uri: {
    status: 400,
    description:
      'OAuth client registration (RFC 7591): a redirect URI is not https, http on a loopback host, or a private-use scheme with a dot, or it has a fragment or credentials. error_description names it.',
  },
  oauth_client_not_found: {
    status: 404,
    description: 'No OAuth client with that id (or client_id) in an organization of yours. List them with GET /v1/oauth-clients.',
  },
  invalid_request: {
    status: 400,
    description:
      'OAuth (RFC 6749 §5.2): a parameter is missing, unknown, repeated or malformed, or the authorization request does not repeat what its handoff bound (client, redirect URI, scopes, resource, code challenge). error_description names it.',
  },
  invalid_client: {
    status: 400,
    description:
      'OAuth: the client_id is unknown or disabled, or the client_secret of a confidential client is missing or wrong. Register the client (POST /v1/oauth/register) or check its secret.',
  },
  invalid_grant: {
    status: 400,
    description:
      'OAuth: the authorization code, refresh token, assertion or claim is unknown, expired, already used, revoked, issued to another client, or does not match the redirect_uri or code_verifier. Start the sign-in again.',
  },
  unauthorized_client: {
    status: 400,
    description: 'OAuth: this client is not registered for the grant type it asked for (its grant_types), or a public client asked without PKCE.',
  },
  unsupported_grant_type: {
    status: 400,
    description:
      'OAuth: grant_type is not one of authorization_code, refresh_token, urn:ietf:params:oauth:grant-type:jwt-bearer, urn:printfarm:agent-auth:grant-type:claim.',
  },
  unsupported_response_type: {
    status: 400,
    description: 'OAuth: response_type must be code (the authorization code flow with PKCE).',
  },
  invalid_scope: {
    status: 400,
    description: 'OAuth: none of the requested scopes is one this client, grant or assertion may have, or a scope value is unknown. See scopes_supported in the authorization server metadata.',
  },
  invalid_target: {
    status: 400,
    description:
      'OAuth (RFC 8707): the resource is not one this service serves (the API at its base URL, or its MCP endpoint), or differs from the resource the grant was made for.',
  },
  authorization_pending: {
    status: 400,
    description: 'Agent claim grant: nobody has confirmed the claim yet. Keep polling every `interval` seconds until tokens or expired_token.',
  },
  expired_token: {
    status: 400,
    description: 'Agent claim grant: the claim attempt expired before anyone confirmed it. Renew it with POST /agent/identity/claim {claim_token, email}.',
  },
  agent_claim_not_found: {
    status: 404,
    description: 'No agent identity claim with that claim_token, or it expired. Agents start one with POST /agent/identity.',
  },
  claim_attempt_active: {
    status: 409,
    description: 'The claim attempt has not expired yet: open its claim_url (or wait for it to expire) before renewing it.',
  },
  claim_already_confirmed: {
    status: 409,
    description: 'This claim was already confirmed; the agent collects its tokens from the token endpoint with the claim grant.',
  },
  claim_email_mismatch: {
    status: 403,
    description: 'This claim was renewed for another email address: only the person signed in with that email may confirm it.',
  },
  oauth_authorization_not_found: {
    status: 404,
    description: 'No application sign-in or agent with that id acts for you (or, for an admin, in the organization). List them with GET /v1/oauth/authorizations.',
  },
  mcp_origin_forbidden: {
    status: 403,
    description:
      'The MCP endpoint refuses requests from a browser page of another site (their Origin is not the service\'s own or one of CORS_ORIGINS). Agents send no Origin; a web client must be served from an allowed origin.',
  },
  mcp_resource_unknown: {
    status: 400,
    description:
      'An MCP subscriptions/listen named a resource this server does not have (answered in-band as JSON-RPC -32602, before the stream opens). Follow printfarm://printers/{printer_id}, printfarm://print-jobs/{job_id} or printfarm://queue.',
  },
  mcp_subscription_limit: {
    status: 429,
    description: 'The organization has as many MCP subscriptions/listen streams open as it may (answered in-band as JSON-RPC -32603). Close a stream, or follow more resources with one.',
    retryable: true,
  },
  make_not_found: {
    status: 404,
    description: 'No make with that id in this organization (or it is a make of another file). List them with GET /v1/makes?model_file_id=….',
  },
  make_revision_conflict: {
    status: 409,
    description:
      'The make was saved by someone else since you read it: expected_revision is not its revision (the answer gives the current one in `revision`). Read it again (GET /v1/makes/{id}), apply your change, and save with that revision.',
  },
  make_in_use: {
    status: 409,
    description: 'A SKU is made of this make, or a job that has not ended prints it (the answer names them): remove it from the SKU (PATCH /v1/skus/{sku}) or cancel the jobs first.',
  },
  sku_not_found: {
    status: 404,
    description: 'No SKU with that code (or id) in this organization. List them with GET /v1/skus.',
  },
  sku_exists: {
    status: 409,
    description: 'The organization already has a SKU with that code. Choose another code, or change that SKU (PATCH /v1/skus/{sku}).',
  },
  order_too_large: {
    status: 400,
    description: 'The order would create more than 10,000 jobs (units × make quantity × quantity_to_print, summed over the makes). Order fewer units at a time.',
  },
  batch_not_found: {
    status: 404,
    description: 'No batch with that id in this organization. List them with GET /v1/batches.',
  },
  printer_task_not_found: {
    status: 404,
    description: 'No printer task with that id for this organization.',
  },
  task_not_claimable: {
    status: 409,
    description: 'The task is no longer offered (it expired, was cancelled, started, or another claim won). Poll GET /v1/hosts/{hostId}/printer-tasks for the current ones.',
  },
  task_claim_mismatch: {
    status: 409,
    description: "The claim_generation (or print_job_id) does not match the task's live claim: the task was claimed again or moved on. Use the values of your latest claim.",
  },
  task_access_denied: {
    status: 403,
    description: "The printer_task_access_token does not match the task's claim. Use the token the claim answered with.",
  },
  api_key_host_mismatch: {
    status: 403,
    description:
      "This paired bridge key speaks for another host: a paired key is bound to the first hostId it uses, and acts only on that host's printers and their jobs. Pair the other bridge separately.",
  },
  operator_only: {
    status: 403,
    description: "An operator's decision (the ready gate's verdict, confirming that a print started): a paired bridge key cannot make it. Use a member's sign-in or an API key an admin created.",
  },
  MQTT_DISPLAY_NOT_CONFIGURED: {
    status: 503,
    description:
      'Displays cannot be served: the MQTT broker has no way for the service to manage display credentials (see docs/displays.md, "Brokers"), or the display store is unavailable.',
  },
  mqtt_broker_unavailable: {
    status: 503,
    description: "The MQTT broker did not take the display's new credential (it is unreachable or refused the command). Nothing was stored; retry after the Retry-After delay.",
    retryable: true,
  },
  rate_limited: {
    status: 429,
    description: 'Too many attempts. Wait for the Retry-After delay.',
    retryable: true,
  },

  // The service's own condition.
  store_unavailable: {
    status: 503,
    description: 'The database did not answer. Nothing was stored; retry after the Retry-After delay.',
    retryable: true,
  },
  shutting_down: {
    status: 503,
    description: 'This node is shutting down. Retry; another node or the restarted one will answer.',
    retryable: true,
  },
  request_timeout: {
    status: 503,
    description:
      'The service did not finish the request in time (REQUEST_TIMEOUT_MS). It may or may not have taken effect: retry requests that are safe to repeat.',
    retryable: true,
  },
  internal_error: {
    status: 500,
    description: 'An unexpected fault in the service. It is logged with the request id; report that id.',
  },
} as const satisfies Record<string, ErrorCodeInfo>

export type ErrorCode = keyof typeof errorCodes

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(errorCodes, value)
}

/** the contract, "Error body": error and message always; code and requestId where a route adds them. */
export interface ErrorBody {
  error: string
  message: string
  code?: string
  /** RFC 6749 §5.2: the OAuth endpoints' copy of `message`. */
  error_description?: string
  requestId?: string
}

/**
 * A coded error: bad input or a refused operation, never a programmer mistake
 * (those stay plain Errors and become internal_error).
 */
export class ServiceError extends Error {
  readonly code: ErrorCode
  readonly status: number
  /** Extra fields merged into the error body (e.g. `{job, reason}` of maintenance). */
  readonly extra: Readonly<Record<string, unknown>> | undefined
  /** Response headers the error needs (Allow, Retry-After). */
  readonly headers: Readonly<Record<string, string>> | undefined

  constructor(
    code: ErrorCode,
    message: string,
    options: { extra?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'ServiceError'
    this.code = code
    this.status = errorCodes[code].status
    this.extra = options.extra
    this.headers = options.headers
  }
}

export function errorBody(code: string, message: string, requestId?: string): ErrorBody {
  return requestId === undefined ? { error: code, message } : { error: code, message, requestId }
}
