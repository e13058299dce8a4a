import t, { type Test } from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { resolve } from 'node:path'
import { ConfigError, configVariables, loadConfig, redact } from '../../../src/node/config.js'

const cwd = resolve('/srv/printfarm')

/** The ConfigError thrown by loadConfig, or a test failure if it does not throw one. */
function configError(t: Test, env: Record<string, string>): ConfigError | undefined {
  try {
    loadConfig(env, cwd)
  } catch (err) {
    if (err instanceof ConfigError) return err
    t.fail(`expected a ConfigError, got ${String(err)}`)
    return undefined
  }
  t.fail(`expected ${JSON.stringify(env)} to be refused`)
  return undefined
}

t.test('config - an empty environment gives the documented defaults', async (t) => {
  const config = loadConfig({}, cwd)
  t.same(config, {
    port: 8080,
    host: '0.0.0.0',
    dataDir: resolve(cwd, 'data'),
    databaseUrl: undefined,
    databaseSchema: 'public',
    databasePoolMax: 10,
    redisUrl: undefined,
    mqttUrl: undefined,
    mqttPort: 1883,
    mqttDisplayCredentials: 'none',
    publicBaseUrl: 'http://localhost:8080',
    logLevel: 'info',
    corsOrigins: [],
    trustedProxies: [],
    checkResponses: false,
    passwordHashCost: 17,
    adminEmail: undefined,
    adminPassword: undefined,
    bodyLimitBytes: 4 * 1024 * 1024,
    shutdownTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    loginFailuresPerAccount: 10,
    loginFailuresPerAddress: 100,
    authCodesPerAddress: 200,
    oauthRegistrationsPerAddress: 30,
    oauthAccessTtlSeconds: 3600,
    oauthCodeTtlSeconds: 60,
    oauthRefreshTtlSeconds: 30 * 86_400,
    oauthFailuresPerAddress: 100,
    agentClaimTtlSeconds: 900,
    agentIdentitiesPerAddress: 30,
    appsChallenge: undefined,
    authCodeFailuresPerSource: 30,
    secretKey: undefined,
    presenceTimeoutMs: 90_000,
    eventRetentionDays: 30,
    printerActorsMax: 100_000,
    nodeId: undefined,
    shardLeaseMs: 10_000,
    forwardTimeoutMs: 10_000,
    uploadLimitBytes: 1024 * 1024 * 1024,
    fileDeleteGraceDays: 30,
    taskOfferTtlSeconds: 120,
    taskStartDeadlineSeconds: 600,
    queueMaxStarts: 25,
    queueStaggerMs: 10_000,
    queueColorTolerance: 10,
    queueSweepMs: 30_000,
    filesS3: undefined,
  })
})

t.test('config - files go to S3 with FILES_S3_ENDPOINT and its bucket and keys; a partial setting names what is missing', async (t) => {
  const s3 = { FILES_S3_ENDPOINT: 'http://127.0.0.1:9000/', FILES_S3_BUCKET: 'farm-files', FILES_S3_ACCESS_KEY_ID: 'id', FILES_S3_SECRET_ACCESS_KEY: 'secret' }
  t.same(loadConfig(s3, '/srv').filesS3, {
    endpoint: 'http://127.0.0.1:9000',
    bucket: 'farm-files',
    region: 'us-east-1',
    accessKeyId: 'id',
    secretAccessKey: 'secret',
    prefix: '',
    forcePathStyle: true,
  })
  t.match(loadConfig({ ...s3, FILES_S3_PREFIX: 'printfarm/prod/', FILES_S3_PATH_STYLE: 'false' }, '/srv').filesS3, { prefix: 'printfarm/prod/', forcePathStyle: false })
  t.throws(() => loadConfig({ FILES_S3_ENDPOINT: 'http://127.0.0.1:9000' }, '/srv'), /FILES_S3_BUCKET is required[\s\S]*FILES_S3_ACCESS_KEY_ID is required[\s\S]*FILES_S3_SECRET_ACCESS_KEY is required/)
  t.throws(() => loadConfig({ FILES_S3_BUCKET: 'farm' }, '/srv'), /FILES_S3_BUCKET apply only with FILES_S3_ENDPOINT/)
  t.throws(() => loadConfig({ ...s3, FILES_S3_BUCKET: 'Bad_Bucket' }, '/srv'), /FILES_S3_BUCKET must be an S3 bucket name/)
  t.throws(() => loadConfig({ ...s3, FILES_S3_PREFIX: '../x' }, '/srv'), /FILES_S3_PREFIX must be/)
  t.throws(() => loadConfig({ ...s3, FILES_S3_ENDPOINT: 'ftp://x' }, '/srv'), /FILES_S3_ENDPOINT must use http: or https:/)
  t.throws(() => loadConfig({ UPLOAD_LIMIT_BYTES: '10' }, '/srv'), /UPLOAD_LIMIT_BYTES must be an integer from 1024/)
})

t.test('config - several nodes: NODE_ID must be a plain name; lease and forward timeouts are bounded', async (t) => {
  t.match(loadConfig({ NODE_ID: 'node-a.1', SHARD_LEASE_MS: '2000', FORWARD_TIMEOUT_MS: '500' }, '/srv'), { nodeId: 'node-a.1', shardLeaseMs: 2000, forwardTimeoutMs: 500 })
  t.throws(() => loadConfig({ NODE_ID: 'a b' }, '/srv'), /NODE_ID must be/)
  t.throws(() => loadConfig({ SHARD_LEASE_MS: '10' }, '/srv'), /SHARD_LEASE_MS/)
  t.throws(() => loadConfig({ FORWARD_TIMEOUT_MS: '0' }, '/srv'), /FORWARD_TIMEOUT_MS/)
})

t.test('config - presence, retention and actor bounds are validated', async (t) => {
  const config = loadConfig({ PRESENCE_TIMEOUT_MS: '5000', EVENT_RETENTION_DAYS: '7', PRINTER_ACTORS_MAX: '500' }, cwd)
  t.match(config, { presenceTimeoutMs: 5000, eventRetentionDays: 7, printerActorsMax: 500 })
  let error: unknown
  try {
    loadConfig({ PRESENCE_TIMEOUT_MS: '10', EVENT_RETENTION_DAYS: '0', PRINTER_ACTORS_MAX: 'many' }, cwd)
  } catch (e) {
    error = e
  }
  t.type(error, ConfigError)
  t.match((error as ConfigError).problems, [/PRESENCE_TIMEOUT_MS must be an integer from 1000/, /EVENT_RETENTION_DAYS must be an integer from 1/, /PRINTER_ACTORS_MAX must be an integer from 100/])
})

t.test('config - MQTT_DISPLAY_CREDENTIALS is dynamic-security or none, and applies only to MQTT_URL', async (t) => {
  t.equal(loadConfig({ MQTT_URL: 'mqtt://svc:pw@broker:1883', MQTT_DISPLAY_CREDENTIALS: 'dynamic-security' }, cwd).mqttDisplayCredentials, 'dynamic-security')
  t.equal(loadConfig({ MQTT_URL: 'mqtt://broker:1883', MQTT_DISPLAY_CREDENTIALS: 'none' }, cwd).mqttDisplayCredentials, 'none')
  t.match(configError(t, { MQTT_URL: 'mqtt://broker:1883', MQTT_DISPLAY_CREDENTIALS: 'dynsec' })?.problems, [/MQTT_DISPLAY_CREDENTIALS must be 'dynamic-security' or 'none', got 'dynsec'/])
  t.match(configError(t, { MQTT_DISPLAY_CREDENTIALS: 'dynamic-security' })?.problems, [/MQTT_DISPLAY_CREDENTIALS applies to the external broker of MQTT_URL/])
})

t.test('config - CHECK_RESPONSES is true or false', async (t) => {
  t.equal(loadConfig({ CHECK_RESPONSES: 'true' }, cwd).checkResponses, true)
  t.equal(loadConfig({ CHECK_RESPONSES: 'false' }, cwd).checkResponses, false)
  t.match(configError(t, { CHECK_RESPONSES: 'yes' })?.problems, [/CHECK_RESPONSES must be 'true' or 'false', got 'yes'/])
})

t.test('config - blank and whitespace-only values count as unset', async (t) => {
  const config = loadConfig({ PORT: '', LOG_LEVEL: '   ', DATABASE_URL: ' ', CORS_ORIGINS: '' }, cwd)
  t.equal(config.port, 8080)
  t.equal(config.logLevel, 'info')
  t.equal(config.databaseUrl, undefined)
  t.same(config.corsOrigins, [])
})

t.test('config - valid values are read and trimmed', async (t) => {
  const config = loadConfig(
    {
      PORT: ' 9000 ',
      HOST: '127.0.0.1',
      DATA_DIR: '/var/lib/printfarm',
      DATABASE_URL: 'postgres://farm@db:5432/farm',
      DATABASE_SCHEMA: 'farm_test_1',
      DATABASE_POOL_MAX: '25',
      REDIS_URL: 'rediss://cache:6380',
      MQTT_URL: 'mqtts://broker:8883',
      MQTT_PORT: '0',
      LOG_LEVEL: 'debug',
      PRINTFARM_ADMIN_EMAIL: 'admin@farm.example.com',
      PRINTFARM_ADMIN_PASSWORD: 'correct horse battery',
      BODY_LIMIT_BYTES: '1024',
      SHUTDOWN_TIMEOUT_MS: '0',
    },
    cwd,
  )
  t.equal(config.port, 9000)
  t.equal(config.host, '127.0.0.1')
  t.equal(config.dataDir, '/var/lib/printfarm', 'an absolute DATA_DIR is kept')
  t.equal(config.databaseUrl, 'postgres://farm@db:5432/farm')
  t.equal(config.databaseSchema, 'farm_test_1')
  t.equal(config.databasePoolMax, 25)
  t.equal(config.redisUrl, 'rediss://cache:6380')
  t.equal(config.mqttUrl, 'mqtts://broker:8883')
  t.equal(config.mqttPort, 0)
  t.equal(config.logLevel, 'debug')
  t.equal(config.adminEmail, 'admin@farm.example.com')
  t.equal(config.adminPassword, 'correct horse battery')
  t.equal(config.bodyLimitBytes, 1024)
  t.equal(config.shutdownTimeoutMs, 0)
  t.equal(config.publicBaseUrl, 'http://127.0.0.1:9000', 'the default public URL follows HOST and PORT')
})

t.test('config - a relative DATA_DIR is resolved against cwd', async (t) => {
  t.equal(loadConfig({ DATA_DIR: 'state/db' }, cwd).dataDir, resolve(cwd, 'state/db'))
  t.equal(loadConfig({ DATA_DIR: '../shared' }, cwd).dataDir, resolve(cwd, '../shared'))
})

t.test('config - the default public URL uses localhost for a wildcard host and brackets IPv6', async (t) => {
  t.equal(loadConfig({ HOST: '::' }, cwd).publicBaseUrl, 'http://localhost:8080')
  t.equal(loadConfig({ HOST: '::1', PORT: '81' }, cwd).publicBaseUrl, 'http://[::1]:81')
  t.equal(loadConfig({ HOST: 'farm.local' }, cwd).publicBaseUrl, 'http://farm.local:8080')
})

t.test('config - every invalid variable is named in the error', async (t) => {
  const invalid: Record<string, string[]> = {
    PORT: ['abc', '-1', '65536', '80.5', '0x50', '1e3'],
    DATABASE_URL: ['mysql://x', 'not a url'],
    DATABASE_SCHEMA: ['Public', '1farm', 'farm-1', 'a'.repeat(64)],
    DATABASE_POOL_MAX: ['0', '1001', 'ten'],
    REDIS_URL: ['http://cache', 'cache:6379x'],
    MQTT_URL: ['http://broker', '::'],
    MQTT_PORT: ['65536', 'x'],
    PUBLIC_BASE_URL: ['ftp://farm', 'farm.example.com'],
    LOG_LEVEL: ['loud', 'INFO', 'trace'],
    CORS_ORIGINS: ['https://a.example.com/path', 'a.example.com', 'ftp://a.example.com', 'https://a.example.com/'],
    PRINTFARM_ADMIN_EMAIL: ['admin', 'admin@', 'a b@c'],
    PRINTFARM_ADMIN_PASSWORD: ['short', '12345678901'],
    BODY_LIMIT_BYTES: ['1023', String(256 * 1024 * 1024 + 1)],
    SHUTDOWN_TIMEOUT_MS: ['600001', '1.5'],
  }
  for (const [name, values] of Object.entries(invalid)) {
    for (const value of values) {
      const err = configError(t, { [name]: value })
      if (!err) continue
      t.equal(err.problems.length, 1, `${name}=${value}: one problem`)
      t.match(err.problems[0], name, `${name}=${value}: the problem names the variable`)
      t.match(err.message, name, `${name}=${value}: the message names the variable`)
    }
  }
})

t.test('config - all problems are reported at once', async (t) => {
  const err = configError(t, { PORT: 'abc', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x' })
  if (!err) return
  t.equal(err.name, 'ConfigError')
  t.ok(err instanceof Error)
  t.equal(err.problems.length, 3)
  for (const name of ['PORT', 'LOG_LEVEL', 'DATABASE_URL']) {
    t.ok(err.problems.some((p) => p.includes(name)), `a problem names ${name}`)
    t.match(err.message, name)
  }
  t.match(err.message, /'abc'/, 'the bad value is shown')
  t.match(err.message, /debug, info, warn, error, silent/, 'LOG_LEVEL lists what it accepts')
})

t.test('config - every validated variable at once gives one problem each', async (t) => {
  const err = configError(t, {
    PORT: 'abc',
    DATABASE_URL: 'mysql://x',
    DATABASE_SCHEMA: 'Bad',
    DATABASE_POOL_MAX: '0',
    REDIS_URL: 'http://x',
    MQTT_URL: 'http://x',
    MQTT_PORT: 'x',
    PUBLIC_BASE_URL: 'ftp://x',
    LOG_LEVEL: 'loud',
    CORS_ORIGINS: 'https://a.example.com/x',
    PRINTFARM_ADMIN_EMAIL: 'nope',
    PRINTFARM_ADMIN_PASSWORD: 'short',
    BODY_LIMIT_BYTES: '1',
    SHUTDOWN_TIMEOUT_MS: '-5',
  })
  t.equal(err?.problems.length, 14)
})

t.test('config - CORS_ORIGINS accepts * and a comma-separated list of origins', async (t) => {
  t.equal(loadConfig({ CORS_ORIGINS: '*' }, cwd).corsOrigins, '*')
  t.same(loadConfig({ CORS_ORIGINS: 'https://dash.example.com' }, cwd).corsOrigins, ['https://dash.example.com'])
  t.same(loadConfig({ CORS_ORIGINS: ' https://a.example.com , http://localhost:3000,,' }, cwd).corsOrigins, [
    'https://a.example.com',
    'http://localhost:3000',
  ])
})

t.test('config - a CORS origin with a path is refused and named', async (t) => {
  const err = configError(t, { CORS_ORIGINS: 'https://ok.example.com,https://bad.example.com/app' })
  if (!err) return
  t.equal(err.problems.length, 1, 'only the bad entry is a problem')
  t.match(err.message, 'CORS_ORIGINS')
  t.match(err.message, 'https://bad.example.com/app')
})

t.test('config - PUBLIC_BASE_URL loses its trailing slashes', async (t) => {
  t.equal(loadConfig({ PUBLIC_BASE_URL: 'https://farm.example.com/' }, cwd).publicBaseUrl, 'https://farm.example.com')
  t.equal(loadConfig({ PUBLIC_BASE_URL: 'https://farm.example.com/api//' }, cwd).publicBaseUrl, 'https://farm.example.com/api')
  t.equal(loadConfig({ PUBLIC_BASE_URL: 'http://farm:8080' }, cwd).publicBaseUrl, 'http://farm:8080')
})

t.test('config - a password in a URL is never echoed in the error', async (t) => {
  const secret = 'Sup3rSecretPw'
  for (const [name, value] of [
    ['DATABASE_URL', `postgres://farm:${secret}@db:54x32/farm`], // unparsable port
    ['DATABASE_URL', `mysql://farm:${secret}@db/farm`], // wrong scheme
    ['REDIS_URL', `redis://:${secret}@cache:notaport`],
    ['MQTT_URL', `mqtt://user:${secret}@broker:99999`],
  ] as const) {
    const err = configError(t, { [name]: value })
    if (!err) continue
    t.match(err.message, name)
    t.notMatch(err.message, secret, `${value}: the password is not in the message`)
  }
})

t.test('config - a password containing @ is not partly echoed in the error', async (t) => {
  const err = configError(t, { DATABASE_URL: 'postgres://farm:p@ssw0rd@db:54x32/farm' })
  if (!err) return
  t.match(err.message, 'DATABASE_URL')
  t.notMatch(err.message, 'ssw0rd')
})

t.test('config - PRINTFARM_ADMIN_PASSWORD shorter than 12 characters is refused, without echoing it', async (t) => {
  const err = configError(t, { PRINTFARM_ADMIN_PASSWORD: 'elevenchars' })
  if (!err) return
  t.match(err.message, 'PRINTFARM_ADMIN_PASSWORD')
  t.match(err.message, /12/)
  t.notMatch(err.message, 'elevenchars')
  t.equal(loadConfig({ PRINTFARM_ADMIN_PASSWORD: 'twelve-chars' }, cwd).adminPassword, 'twelve-chars', '12 is enough')
})

t.test('config - DATABASE_SCHEMA must be a lower-case identifier', async (t) => {
  for (const ok of ['public', 'farm', '_x', 'farm_2', 'a'.repeat(63)]) {
    t.equal(loadConfig({ DATABASE_SCHEMA: ok }, cwd).databaseSchema, ok, `${ok} is accepted`)
  }
  for (const bad of ['Farm', 'FARM', '2farm', 'farm-x', 'farm.x', 'farm x', 'a'.repeat(64), 'farm;drop']) {
    const err = configError(t, { DATABASE_SCHEMA: bad })
    if (err) t.match(err.message, 'DATABASE_SCHEMA', `${bad} is refused`)
  }
})

t.test('config - redact() hides the password of a URL and nothing else', async (t) => {
  t.equal(redact('postgres://farm:secret@db:5432/farm'), 'postgres://farm:***@db:5432/farm')
  t.equal(redact('redis://:secret@cache:6379'), 'redis://:***@cache:6379')
  t.equal(redact('postgres://farm:pa:ss/wd@db/farm'), 'postgres://farm:***@db/farm', 'colons and slashes in the password')
  t.equal(redact('postgres://farm@db:5432/farm'), 'postgres://farm@db:5432/farm', 'no password, nothing to hide')
  t.equal(redact('postgres://db:5432/farm'), 'postgres://db:5432/farm')
  t.equal(redact('not a url'), 'not a url')
  t.equal(redact('postgres://farm:p@ss@db/farm'), 'postgres://farm:***@db/farm', "an '@' inside the password")
})

t.test('config - every variable is in the README configuration table', async (t) => {
  const readme = new URL('../../../README.md', import.meta.url)
  if (!existsSync(readme)) {
    t.fail(`README.md is missing at ${fileURLToPath(readme)}`)
    return
  }
  const text = readFileSync(readme, 'utf8')
  // First cells of markdown table rows, without backticks: `| \`PORT\` | 8080 | ... |` gives PORT.
  const documented = new Set<string>()
  for (const line of text.split('\n')) {
    const row = /^\s*\|([^|]*)\|/.exec(line)
    if (row) documented.add(row[1]!.replace(/`/g, '').trim())
  }
  for (const name of configVariables) t.ok(documented.has(name), `${name} is documented in a README table`)
})

t.test('config - PRINTFARM_SECRET_KEY must be 32 bytes of base64, and is never echoed', async (t) => {
  const key = Buffer.alloc(32, 7).toString('base64')
  t.same(loadConfig({ PRINTFARM_SECRET_KEY: key }, cwd).secretKey, Buffer.alloc(32, 7))
  for (const bad of ['short', Buffer.alloc(16).toString('base64'), 'not base64 !!!']) {
    const err = configError(t, { PRINTFARM_SECRET_KEY: bad })
    if (err) {
      t.match(err.message, 'PRINTFARM_SECRET_KEY')
      t.notMatch(err.message, bad)
    }
  }
})
