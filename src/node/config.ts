/**
 * Configuration from the environment, validated once at start (STYLE practice
 * 12). The variable names are a public contract: keep them. Every
 * problem is reported at once, naming the variable and what it accepts, so a
 * bad deployment fails at boot rather than on the first request.
 */
import { defaultPasswordCost } from '../auth/passwords.js'
import { trustedProxyProblems } from '../http/client-address.js'
import { isAbsolute, resolve } from 'node:path'
import { logLevels, type LogLevel } from '../observability/log.js'
import { StartupProblem } from '../startup/problems.js'

export interface Config {
  /** HTTP + WebSocket port; 0 picks a free one (tests). */
  port: number
  host: string
  /** Embedded PGlite data and local files live here. */
  dataDir: string
  /** Real PostgreSQL; unset → embedded PGlite in dataDir. */
  databaseUrl: string | undefined
  /** PostgreSQL schema the service owns (lets several deployments or test runs share a database). */
  databaseSchema: string
  databasePoolMax: number
  redisUrl: string | undefined
  /** External MQTT broker; unset → embedded broker on mqttPort. */
  mqttUrl: string | undefined
  mqttPort: number
  /** How the external broker of mqttUrl learns display credentials: 'dynamic-security' (Mosquitto's plugin) or 'none'. */
  mqttDisplayCredentials: 'none' | 'dynamic-security'
  publicBaseUrl: string
  logLevel: LogLevel
  /** '*' allows any origin; an empty list sends no CORS headers (same-origin only). */
  corsOrigins: '*' | readonly string[]
  /** Reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client (src/http/client-address.ts). */
  trustedProxies: readonly string[]
  /** Every JSON answer checked against its route's response schema; a mismatch answers 500 (tests and development, src/http/response-check.ts). */
  checkResponses: boolean
  /** log2 of scrypt's N for new password hashes (src/auth/passwords.ts). */
  passwordHashCost: number
  adminEmail: string | undefined
  adminPassword: string | undefined
  bodyLimitBytes: number
  requestTimeoutMs: number
  shutdownTimeoutMs: number
  /** Failed sign-ins per account, then per remote address, allowed in 15 minutes. */
  loginFailuresPerAccount: number
  loginFailuresPerAddress: number
  /** Pairing codes one address may request in 15 minutes. */
  authCodesPerAddress: number
  /** OAuth clients one address may register (RFC 7591) in 15 minutes. */
  oauthRegistrationsPerAddress: number
  /** Lifetime of an OAuth access token, seconds. */
  oauthAccessTtlSeconds: number
  /** Lifetime of an OAuth authorization code, seconds. */
  oauthCodeTtlSeconds: number
  /** Lifetime of an OAuth refresh token (and of an agent's identity assertion), seconds. */
  oauthRefreshTtlSeconds: number
  /** Failed token, revocation and handoff requests one address may make in 15 minutes. */
  oauthFailuresPerAddress: number
  /** How long a person has to confirm an agent's identity claim, seconds. */
  agentClaimTtlSeconds: number
  /** Agent identities (and claim renewals) one address may start in 15 minutes. */
  agentIdentitiesPerAddress: number
  /** `/.well-known/{vendor}-apps-challenge`: the vendor in the path and the token it answers; both unset → 404. */
  appsChallenge: { vendor: string; token: string } | undefined
  /** Failed code verifications per user and per address, and unknown codes exchanged per address, in 15 minutes. */
  authCodeFailuresPerSource: number
  /** 32-byte key that seals stored printer credentials; undefined → a key kept in the store. */
  secretKey: Buffer | undefined
  /** Silence after which a printer is offline. */
  presenceTimeoutMs: number
  /** This node's id among several (REDIS_URL); random per start when unset. */
  nodeId: string | undefined
  /** Shard lease TTL: a dead node's printers and displays move after at most this long. */
  shardLeaseMs: number
  /** How long a request forwarded to a shard's owner waits for its answer. */
  forwardTimeoutMs: number
  /** Days a stored printer event is kept after receipt. */
  eventRetentionDays: number
  /** Printer actors kept in memory at most (idle ones are passivated first). */
  printerActorsMax: number
  /** Largest file one upload may carry (413 above). */
  uploadLimitBytes: number
  /** Days a soft-deleted file's bytes are kept before the sweep removes them. */
  fileDeleteGraceDays: number
  /** An offered printer task nobody claimed goes back to the queue after this (120 s; docs/print-jobs.md). */
  taskOfferTtlSeconds: number
  /** A claimed task whose start the bridge has not reported by then is `unconfirmed` (600 s). */
  taskStartDeadlineSeconds: number
  /** The queue starts at most this many prints per organization within queueStaggerMs (0: no limit). */
  queueMaxStarts: number
  /** The stagger window of queueMaxStarts, ms (0: no limit). */
  queueStaggerMs: number
  /** Largest CIEDE2000 colour difference the queue accepts between the colour a job asks for and a loaded one. */
  queueColorTolerance: number
  /** Every queue also runs this often without being woken (a safety net for a missed wake), ms. */
  queueSweepMs: number
  /** S3-compatible object storage for model files; undefined → the file system under dataDir/files. */
  filesS3: FilesS3Settings | undefined
}

export interface FilesS3Settings {
  /** e.g. https://s3.eu-west-1.amazonaws.com or http://minio.lan:9000 */
  endpoint: string
  bucket: string
  region: string
  accessKeyId: string
  secretAccessKey: string
  /** Key prefix inside the bucket ('' or ending with '/'), so several deployments can share one bucket. */
  prefix: string
  /** true → endpoint/bucket/key (MinIO and most self-hosted stores); false → bucket.endpoint/key (AWS). */
  forcePathStyle: boolean
}

export class ConfigError extends StartupProblem {
  readonly problems: readonly string[]
  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

type Env = Readonly<Record<string, string | undefined>>

/** Documented in the README's configuration table; the test of that table reads this list. */
export const configVariables = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'DATABASE_URL',
  'DATABASE_SCHEMA',
  'DATABASE_POOL_MAX',
  'REDIS_URL',
  'MQTT_URL',
  'MQTT_PORT',
  'MQTT_DISPLAY_CREDENTIALS',
  'PUBLIC_BASE_URL',
  'LOG_LEVEL',
  'CORS_ORIGINS',
  'TRUSTED_PROXIES',
  'PASSWORD_HASH_COST',
  'PRINTFARM_ADMIN_EMAIL',
  'PRINTFARM_ADMIN_PASSWORD',
  'BODY_LIMIT_BYTES',
  'REQUEST_TIMEOUT_MS',
  'SHUTDOWN_TIMEOUT_MS',
  'LOGIN_FAILURES_PER_ACCOUNT',
  'LOGIN_FAILURES_PER_ADDRESS',
  'AUTH_CODES_PER_ADDRESS',
  'OAUTH_REGISTRATIONS_PER_ADDRESS',
  'OAUTH_ACCESS_TTL_S',
  'OAUTH_CODE_TTL_S',
  'OAUTH_REFRESH_TTL_S',
  'OAUTH_FAILURES_PER_ADDRESS',
  'AGENT_CLAIM_TTL_S',
  'AGENT_IDENTITIES_PER_ADDRESS',
  'APPS_CHALLENGE_VENDOR',
  'APPS_CHALLENGE_TOKEN',
  'AUTH_CODE_FAILURES_PER_SOURCE',
  'PRINTFARM_SECRET_KEY',
  'PRESENCE_TIMEOUT_MS',
  'EVENT_RETENTION_DAYS',
  'PRINTER_ACTORS_MAX',
  'NODE_ID',
  'SHARD_LEASE_MS',
  'FORWARD_TIMEOUT_MS',
  'UPLOAD_LIMIT_BYTES',
  'FILE_DELETE_GRACE_DAYS',
  'TASK_OFFER_TTL_S',
  'TASK_START_DEADLINE_S',
  'QUEUE_MAX_STARTS',
  'QUEUE_STAGGER_MS',
  'QUEUE_COLOR_TOLERANCE',
  'QUEUE_SWEEP_MS',
  'FILES_S3_ENDPOINT',
  'FILES_S3_BUCKET',
  'FILES_S3_REGION',
  'FILES_S3_ACCESS_KEY_ID',
  'FILES_S3_SECRET_ACCESS_KEY',
  'FILES_S3_PREFIX',
  'FILES_S3_PATH_STYLE',
  'CHECK_RESPONSES',
] as const

type ConfigVariable = (typeof configVariables)[number]

/** Reads the variables; every problem found is added to `problems`, reported together at the end. */
interface Reader {
  readonly problems: string[]
  read(name: ConfigVariable): string | undefined
  integer(name: ConfigVariable, fallback: number, min: number, max: number): number
  url(name: ConfigVariable, protocols: readonly string[]): string | undefined
  flag(name: ConfigVariable, fallback: 'true' | 'false'): boolean
}

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const reader = readerOf(env)
  const config: Config = {
    ...listenSettings(reader, cwd),
    ...storeSettings(reader),
    ...httpSettings(reader),
    ...accountSettings(reader),
    ...clusterSettings(reader),
    ...farmSettings(reader),
    filesS3: filesS3Settings(reader),
  }
  if (reader.problems.length) throw new ConfigError(reader.problems)
  return config
}

function readerOf(env: Env): Reader {
  const problems: string[] = []
  const read = (name: ConfigVariable): string | undefined => {
    const value = env[name]?.trim()
    return value === undefined || value === '' ? undefined : value
  }
  return {
    problems,
    read,
    integer(name, fallback, min, max) {
      const raw = read(name)
      if (raw === undefined) return fallback
      const value = Number(raw)
      if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
        problems.push(`${name} must be an integer from ${min} to ${max} (got '${raw}')`)
        return fallback
      }
      return value
    },
    url(name, protocols) {
      const raw = read(name)
      if (raw === undefined) return undefined
      let parsed: URL
      try {
        parsed = new URL(raw)
      } catch {
        problems.push(`${name} must be a URL (${protocols.join(' or ')}), got '${redact(raw)}'`)
        return undefined
      }
      if (!protocols.includes(parsed.protocol)) {
        problems.push(`${name} must use ${protocols.join(' or ')}, got '${parsed.protocol}'`)
        return undefined
      }
      return raw
    },
    flag(name, fallback) {
      const raw = read(name) ?? fallback
      if (raw !== 'true' && raw !== 'false') problems.push(`${name} must be 'true' or 'false', got '${raw}'`)
      return raw === 'true'
    },
  }
}

/** Where the node listens and keeps its local data, and the address clients reach it at. */
function listenSettings({ read, integer, url }: Reader, cwd: string): Pick<Config, 'port' | 'host' | 'dataDir' | 'publicBaseUrl'> {
  const port = integer('PORT', 8080, 0, 65535)
  const host = read('HOST') ?? '0.0.0.0'
  const dataDirRaw = read('DATA_DIR') ?? './data'
  const dataDir = isAbsolute(dataDirRaw) ? dataDirRaw : resolve(cwd, dataDirRaw)
  const publicHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host
  const publicBaseUrl = url('PUBLIC_BASE_URL', ['http:', 'https:'])?.replace(/\/+$/, '') ?? `http://${publicHost}:${port}`
  return { port, host, dataDir, publicBaseUrl }
}

/** PostgreSQL (or the embedded store), Redis and the MQTT broker. */
function storeSettings({ read, integer, url, problems }: Reader): Pick<Config, 'databaseUrl' | 'databaseSchema' | 'databasePoolMax' | 'redisUrl' | 'mqttUrl' | 'mqttPort' | 'mqttDisplayCredentials'> {
  const databaseUrl = url('DATABASE_URL', ['postgres:', 'postgresql:'])
  const databaseSchema = read('DATABASE_SCHEMA') ?? 'public'
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseSchema)) {
    problems.push(`DATABASE_SCHEMA must be a lower-case SQL identifier (letters, digits, _), got '${databaseSchema}'`)
  }
  const databasePoolMax = integer('DATABASE_POOL_MAX', 10, 1, 1000)
  const redisUrl = url('REDIS_URL', ['redis:', 'rediss:'])
  const mqttUrl = url('MQTT_URL', ['mqtt:', 'mqtts:', 'ws:', 'wss:', 'tcp:'])
  const mqttPort = integer('MQTT_PORT', 1883, 0, 65535)
  const mqttDisplayCredentialsRaw = read('MQTT_DISPLAY_CREDENTIALS') ?? 'none'
  let mqttDisplayCredentials: Config['mqttDisplayCredentials'] = 'none'
  if (mqttDisplayCredentialsRaw === 'dynamic-security' || mqttDisplayCredentialsRaw === 'none') mqttDisplayCredentials = mqttDisplayCredentialsRaw
  else problems.push(`MQTT_DISPLAY_CREDENTIALS must be 'dynamic-security' or 'none', got '${mqttDisplayCredentialsRaw}'`)
  if (mqttDisplayCredentials !== 'none' && mqttUrl === undefined) {
    problems.push('MQTT_DISPLAY_CREDENTIALS applies to the external broker of MQTT_URL; the embedded broker manages display credentials itself')
  }
  return { databaseUrl, databaseSchema, databasePoolMax, redisUrl, mqttUrl, mqttPort, mqttDisplayCredentials }
}

/** How the HTTP server treats requests: logging, proxies, browsers' origins, bounds and timeouts. */
function httpSettings({ read, integer, flag, problems }: Reader): Pick<Config, 'logLevel' | 'trustedProxies' | 'checkResponses' | 'corsOrigins' | 'bodyLimitBytes' | 'requestTimeoutMs' | 'shutdownTimeoutMs'> {
  const logLevelRaw = read('LOG_LEVEL') ?? 'info'
  let logLevel: LogLevel = 'info'
  if ((logLevels as readonly string[]).includes(logLevelRaw)) logLevel = logLevelRaw as LogLevel
  else problems.push(`LOG_LEVEL must be one of ${logLevels.join(', ')}, got '${logLevelRaw}'`)
  const trustedProxies = (read('TRUSTED_PROXIES') ?? '').split(',').map((p) => p.trim()).filter(Boolean)
  problems.push(...trustedProxyProblems(trustedProxies))
  const checkResponses = flag('CHECK_RESPONSES', 'false')
  return {
    logLevel,
    trustedProxies,
    checkResponses,
    corsOrigins: corsOrigins(read('CORS_ORIGINS'), problems),
    bodyLimitBytes: integer('BODY_LIMIT_BYTES', 4 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    requestTimeoutMs: integer('REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    shutdownTimeoutMs: integer('SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
  }
}

function corsOrigins(raw: string | undefined, problems: string[]): '*' | string[] {
  if (raw === '*') return '*'
  if (raw === undefined) return []
  const origins = raw.split(',').map((o) => o.trim()).filter(Boolean)
  for (const origin of origins) {
    // An origin is scheme://host[:port], exactly as a browser sends it: no path, no trailing slash.
    let ok = false
    try {
      const u = new URL(origin)
      ok = (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === origin
    } catch {
      ok = false
    }
    if (!ok) problems.push(`CORS_ORIGINS entries must be origins like https://farm.example.com (no path), got '${origin}'`)
  }
  return origins
}

type AccountSettings = Pick<
  Config,
  | 'adminEmail'
  | 'adminPassword'
  | 'passwordHashCost'
  | 'loginFailuresPerAccount'
  | 'loginFailuresPerAddress'
  | 'authCodesPerAddress'
  | 'oauthRegistrationsPerAddress'
  | 'oauthAccessTtlSeconds'
  | 'oauthCodeTtlSeconds'
  | 'oauthRefreshTtlSeconds'
  | 'oauthFailuresPerAddress'
  | 'agentClaimTtlSeconds'
  | 'agentIdentitiesPerAddress'
  | 'appsChallenge'
  | 'authCodeFailuresPerSource'
  | 'secretKey'
>

/** People, keys and the OAuth server: the first admin, the limits on guessing, the lifetimes of what is issued, the sealing key. */
function accountSettings({ read, integer, problems }: Reader): AccountSettings {
  const adminEmail = read('PRINTFARM_ADMIN_EMAIL')
  if (adminEmail !== undefined && !/^[^\s@]+@[^\s@]+$/.test(adminEmail)) {
    problems.push(`PRINTFARM_ADMIN_EMAIL must be an email address, got '${adminEmail}'`)
  }
  const adminPassword = read('PRINTFARM_ADMIN_PASSWORD')
  if (adminPassword !== undefined && adminPassword.length < 12) {
    problems.push('PRINTFARM_ADMIN_PASSWORD must be at least 12 characters')
  }
  return {
    adminEmail,
    adminPassword,
    loginFailuresPerAccount: integer('LOGIN_FAILURES_PER_ACCOUNT', 10, 1, 1_000_000),
    loginFailuresPerAddress: integer('LOGIN_FAILURES_PER_ADDRESS', 100, 1, 1_000_000),
    authCodesPerAddress: integer('AUTH_CODES_PER_ADDRESS', 200, 1, 1_000_000),
    oauthRegistrationsPerAddress: integer('OAUTH_REGISTRATIONS_PER_ADDRESS', 30, 1, 1_000_000),
    oauthAccessTtlSeconds: integer('OAUTH_ACCESS_TTL_S', 3600, 1, 86_400),
    oauthCodeTtlSeconds: integer('OAUTH_CODE_TTL_S', 60, 1, 600),
    oauthRefreshTtlSeconds: integer('OAUTH_REFRESH_TTL_S', 30 * 86_400, 60, 365 * 86_400),
    oauthFailuresPerAddress: integer('OAUTH_FAILURES_PER_ADDRESS', 100, 1, 1_000_000),
    agentClaimTtlSeconds: integer('AGENT_CLAIM_TTL_S', 900, 1, 86_400),
    agentIdentitiesPerAddress: integer('AGENT_IDENTITIES_PER_ADDRESS', 30, 1, 1_000_000),
    appsChallenge: appsChallenge(read, problems),
    authCodeFailuresPerSource: integer('AUTH_CODE_FAILURES_PER_SOURCE', 30, 1, 1_000_000),
    secretKey: secretKey(read('PRINTFARM_SECRET_KEY'), problems),
    passwordHashCost: integer('PASSWORD_HASH_COST', defaultPasswordCost, 15, 20),
  }
}

function appsChallenge(read: Reader['read'], problems: string[]): Config['appsChallenge'] {
  const vendor = read('APPS_CHALLENGE_VENDOR')
  const token = read('APPS_CHALLENGE_TOKEN')
  if (vendor !== undefined && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(vendor)) {
    problems.push('APPS_CHALLENGE_VENDOR must be 1-63 lower-case letters, digits or dashes (it becomes /.well-known/{vendor}-apps-challenge)')
  }
  if ((vendor === undefined) !== (token === undefined)) problems.push('APPS_CHALLENGE_VENDOR and APPS_CHALLENGE_TOKEN are set together or not at all')
  if (token !== undefined && token.length > 4096) problems.push('APPS_CHALLENGE_TOKEN must be at most 4096 characters')
  return vendor !== undefined && token !== undefined ? { vendor, token } : undefined
}

function secretKey(raw: string | undefined, problems: string[]): Buffer | undefined {
  if (raw === undefined) return undefined
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(raw) ? Buffer.from(raw, 'base64') : undefined
  if (key?.length === 32) return key
  problems.push('PRINTFARM_SECRET_KEY must be 32 random bytes in base64 (e.g. from: openssl rand -base64 32)')
  return undefined
}

/** The printer actors and how nodes share them. */
function clusterSettings({ read, integer, problems }: Reader): Pick<Config, 'presenceTimeoutMs' | 'eventRetentionDays' | 'printerActorsMax' | 'nodeId' | 'shardLeaseMs' | 'forwardTimeoutMs'> {
  const nodeId = read('NODE_ID')
  if (nodeId !== undefined && !/^[A-Za-z0-9._-]{1,64}$/.test(nodeId)) problems.push(`NODE_ID must be 1-64 letters, digits, '.', '_' or '-', got '${nodeId}'`)
  return {
    presenceTimeoutMs: integer('PRESENCE_TIMEOUT_MS', 90_000, 1_000, 86_400_000),
    eventRetentionDays: integer('EVENT_RETENTION_DAYS', 30, 1, 3_650),
    printerActorsMax: integer('PRINTER_ACTORS_MAX', 100_000, 100, 10_000_000),
    nodeId,
    shardLeaseMs: integer('SHARD_LEASE_MS', 10_000, 1_000, 300_000),
    forwardTimeoutMs: integer('FORWARD_TIMEOUT_MS', 10_000, 100, 300_000),
  }
}

/** Files, printer tasks and the queue. */
function farmSettings({ integer }: Reader): Pick<
  Config,
  'uploadLimitBytes' | 'fileDeleteGraceDays' | 'taskOfferTtlSeconds' | 'taskStartDeadlineSeconds' | 'queueMaxStarts' | 'queueStaggerMs' | 'queueColorTolerance' | 'queueSweepMs'
> {
  return {
    uploadLimitBytes: integer('UPLOAD_LIMIT_BYTES', 1024 * 1024 * 1024, 1024, 64 * 1024 * 1024 * 1024),
    fileDeleteGraceDays: integer('FILE_DELETE_GRACE_DAYS', 30, 0, 3_650),
    taskOfferTtlSeconds: integer('TASK_OFFER_TTL_S', 120, 5, 86_400),
    taskStartDeadlineSeconds: integer('TASK_START_DEADLINE_S', 600, 5, 86_400),
    // 25 starts per 10 s: heaters of a whole farm never switch on at once, and 1,000 free printers refill in under 7 minutes.
    queueMaxStarts: integer('QUEUE_MAX_STARTS', 25, 0, 1_000_000),
    queueStaggerMs: integer('QUEUE_STAGGER_MS', 10_000, 0, 3_600_000),
    queueColorTolerance: integer('QUEUE_COLOR_TOLERANCE', 10, 0, 100),
    queueSweepMs: integer('QUEUE_SWEEP_MS', 30_000, 1_000, 3_600_000),
  }
}


/** FILES_S3_ENDPOINT switches files to S3; the bucket and both keys must come with it. */
function filesS3Settings({ read, url, flag, problems }: Reader): FilesS3Settings | undefined {
  const others = ['FILES_S3_BUCKET', 'FILES_S3_REGION', 'FILES_S3_ACCESS_KEY_ID', 'FILES_S3_SECRET_ACCESS_KEY', 'FILES_S3_PREFIX', 'FILES_S3_PATH_STYLE'] as const
  const endpoint = url('FILES_S3_ENDPOINT', ['http:', 'https:'])
  if (endpoint === undefined) {
    const stray = others.filter((name) => read(name) !== undefined)
    if (stray.length > 0 && read('FILES_S3_ENDPOINT') === undefined) problems.push(`${stray.join(', ')} apply only with FILES_S3_ENDPOINT (files are on the file system without it)`)
    return undefined
  }
  const bucket = read('FILES_S3_BUCKET')
  const accessKeyId = read('FILES_S3_ACCESS_KEY_ID')
  const secretAccessKey = read('FILES_S3_SECRET_ACCESS_KEY')
  for (const [name, value] of [['FILES_S3_BUCKET', bucket], ['FILES_S3_ACCESS_KEY_ID', accessKeyId], ['FILES_S3_SECRET_ACCESS_KEY', secretAccessKey]] as const) {
    if (value === undefined) problems.push(`${name} is required with FILES_S3_ENDPOINT`)
  }
  if (bucket !== undefined && !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) problems.push(`FILES_S3_BUCKET must be an S3 bucket name (3-63 lower-case letters, digits, '.', '-'), got '${bucket}'`)
  const prefix = read('FILES_S3_PREFIX') ?? ''
  if (prefix !== '' && !/^([A-Za-z0-9._-]+\/)+$/.test(prefix)) problems.push(`FILES_S3_PREFIX must be path segments each ending with '/', like 'printfarm/', got '${prefix}'`)
  const forcePathStyle = flag('FILES_S3_PATH_STYLE', 'true')
  if (bucket === undefined || accessKeyId === undefined || secretAccessKey === undefined) return undefined
  return { endpoint: endpoint.replace(/\/+$/, ''), bucket, region: read('FILES_S3_REGION') ?? 'us-east-1', accessKeyId, secretAccessKey, prefix, forcePathStyle }
}

/** Never echo a password from a connection string back into a log or error. */
export function redact(value: string): string {
  // Greedy up to the last '@': a password may itself contain '@'. Over-redacting
  // an '@' in a path or query is the safe way to be wrong.
  return value.replace(/\/\/([^:/@]*):(.*)@/, '//$1:***@')
}
