/**
 * `printfarm mosquitto-setup`: with a dynamic-security admin login (made by
 * `mosquitto_ctrl dynsec init`), creates the service's MQTT user of MQTT_URL
 * and its role (serviceRoleAcls). Idempotent: running it again resets the
 * password and the role's rights.
 */
import { connectAsync } from 'mqtt'
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { redact } from '../node/config.js'
import { DynamicSecurity, ensureServiceLogin, serviceRoleName } from './dynamic-security.js'
import { systemClock } from '../../actors/clock.js'

export const mosquittoSetupUsage = `usage: printfarm mosquitto-setup --admin-url mqtt://<dynsec admin>:<password>@host:port [--service-url mqtt://<user>:<password>@host:port]
  --service-url defaults to MQTT_URL; its user name and password are the login the service will use.
`

/** The user name and password of an MQTT URL (percent-decoded), or why there are none. */
export function loginOf(raw: string, what: string): { url: string; username: string; password: string } | string {
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    return `${what} is not a URL`
  }
  if (!['mqtt:', 'mqtts:', 'tcp:', 'ws:', 'wss:'].includes(u.protocol)) return `${what} must be an mqtt:// URL`
  if (u.username === '' || u.password === '') return `${what} must carry a user name and a password (mqtt://user:password@host:port)`
  return { url: raw, username: decodeURIComponent(u.username), password: decodeURIComponent(u.password) }
}

export async function setupServiceLogin(adminUrl: string, service: { username: string; password: string }): Promise<void> {
  const admin = loginOf(adminUrl, '--admin-url')
  if (typeof admin === 'string') throw new Error(admin)
  const client = await connectAsync(admin.url, {
    username: admin.username,
    password: admin.password,
    protocolVersion: 4,
    clientId: `printfarm-setup-${randomBytes(6).toString('hex')}`,
    connectTimeout: 10_000,
    reconnectPeriod: 0,
  })
  try {
    await ensureServiceLogin(await DynamicSecurity.attach(client, systemClock), service.username, service.password)
  } finally {
    await client.endAsync().catch(() => undefined)
  }
}

export async function runMosquittoSetup(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let values
  try {
    values = parseArgs({ args: [...argv], options: { 'admin-url': { type: 'string' }, 'service-url': { type: 'string' } }, strict: true }).values
  } catch (error) {
    process.stderr.write(`printfarm mosquitto-setup: ${(error as Error).message}\n${mosquittoSetupUsage}`)
    return 2
  }
  const serviceUrl = values['service-url'] ?? env.MQTT_URL
  const problem =
    values['admin-url'] === undefined ? 'missing --admin-url' : serviceUrl === undefined ? 'missing --service-url (or MQTT_URL)' : undefined
  const service = serviceUrl === undefined ? undefined : loginOf(serviceUrl, '--service-url')
  if (problem !== undefined || typeof service === 'string' || service === undefined) {
    process.stderr.write(`printfarm mosquitto-setup: ${problem ?? service}\n${mosquittoSetupUsage}`)
    return 2
  }
  await setupServiceLogin(values['admin-url']!, service)
  process.stdout.write(
    `MQTT user '${service.username}' has the ${serviceRoleName} role on ${redact(values['admin-url']!)}.\n` +
      `Start the service with MQTT_URL=${redact(service.url)} MQTT_DISPLAY_CREDENTIALS=dynamic-security\n`,
  )
  return 0
}
