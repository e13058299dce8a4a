/**
 * Mosquitto's dynamic-security plugin, driven over MQTT (Mosquitto 2.0+):
 * JSON commands published to `$CONTROL/dynamic-security/v1`, answered on
 * `.../response`. Every command carries a correlationData of its own, so
 * several service nodes can share the response topic and each takes only
 * its answers.
 *
 * The service's MQTT user needs the rights `serviceRoleAcls` lists;
 * `printfarm mosquitto-setup` creates that role and user with a dynsec admin
 * login (README, "Status displays on Mosquitto").
 */
import type { MqttClient } from 'mqtt'
import { randomBytes } from 'node:crypto'
import { topicRoot } from '../../protocol/display-mqtt.js'
import type { Timers } from '../../actors/clock.js'

export const controlTopic = '$CONTROL/dynamic-security/v1'
export const responseTopic = `${controlTopic}/response`

/** How long a command may wait for its answer before it counts as failed. */
export const commandTimeoutMs = 10_000

export type AclType = 'publishClientSend' | 'publishClientReceive' | 'subscribeLiteral' | 'subscribePattern' | 'unsubscribeLiteral' | 'unsubscribePattern'

export interface Acl {
  acltype: AclType
  topic: string
  allow: boolean
  priority?: number
}

export interface Command {
  command: string
  [field: string]: unknown
}

export interface CommandResult {
  command: string
  error?: string
  data?: unknown
}

/** The service's own role: control of the plugin, and the display topic tree of every organization, nothing else. */
export const serviceRoleName = 'printfarm-service'
export const serviceRoleAcls: readonly Acl[] = [
  { acltype: 'publishClientSend', topic: controlTopic, allow: true },
  { acltype: 'subscribeLiteral', topic: responseTopic, allow: true },
  { acltype: 'publishClientReceive', topic: responseTopic, allow: true },
  { acltype: 'publishClientSend', topic: `${topicRoot}/+/display/#`, allow: true },
  { acltype: 'subscribePattern', topic: `${topicRoot}/+/display/#`, allow: true },
  { acltype: 'publishClientReceive', topic: `${topicRoot}/+/display/#`, allow: true },
]

export class DynamicSecurityUnavailable extends Error {
  override name = 'DynamicSecurityUnavailable'
}

export class DynamicSecurityError extends Error {
  override name = 'DynamicSecurityError'
  readonly command: string
  readonly reason: string
  constructor(command: string, reason: string) {
    super(`dynamic-security ${command}: ${reason}`)
    this.command = command
    this.reason = reason
  }
}

interface Pending {
  resolve: (result: CommandResult) => void
  reject: (error: Error) => void
  timer: unknown
}

export class DynamicSecurity {
  readonly #client: MqttClient
  readonly #pending = new Map<string, Pending>()
  readonly #prefix = randomBytes(6).toString('hex')
  #next = 0

  readonly #timers: Timers

  private constructor(client: MqttClient, timers: Timers) {
    this.#client = client
    this.#timers = timers
  }

  /**
   * Subscribes to the response topic and checks that the plugin answers this
   * login; a broker without the plugin, or a login without the rights, is a
   * clear start-up failure rather than display credentials nobody checks.
   */
  static async attach(client: MqttClient, timers: Timers): Promise<DynamicSecurity> {
    const dynsec = new DynamicSecurity(client, timers)
    client.on('message', (topic, payload) => {
      if (topic === responseTopic) dynsec.#onResponse(payload)
    })
    try {
      const granted = await client.subscribeAsync(responseTopic, { qos: 1 })
      if (granted.some((g) => g.qos === 128)) throw new Error('subscription refused')
    } catch (error) {
      throw new DynamicSecurityUnavailable(`this MQTT login may not subscribe to ${responseTopic} (${(error as Error).message}); give it the ${serviceRoleName} role (printfarm mosquitto-setup)`)
    }
    try {
      await dynsec.run({ command: 'getDefaultACLAccess' })
    } catch (error) {
      throw new DynamicSecurityUnavailable(
        `the broker's dynamic-security plugin did not answer (${(error as Error).message}); is the plugin loaded, and may this login publish to ${controlTopic}?`,
      )
    }
    return dynsec
  }

  /** One command; rejects with DynamicSecurityError when the plugin reports an error. */
  async run(command: Command): Promise<unknown> {
    const [result] = await this.batch([command])
    if (result!.error !== undefined) throw new DynamicSecurityError(command.command, result!.error)
    return result!.data
  }

  /**
   * Several commands in one message, answered in order; each result says
   * whether its command failed (the plugin carries on after a failure).
   */
  async batch(commands: readonly Command[]): Promise<CommandResult[]> {
    if (!this.#client.connected) throw new DynamicSecurityUnavailable('the MQTT broker is not connected')
    const ids = commands.map(() => `${this.#prefix}-${++this.#next}`)
    const answers = ids.map(
      (id, i) =>
        new Promise<CommandResult>((resolve, reject) => {
          const timer = this.#timers.setTimeout(() => {
            this.#pending.delete(id)
            reject(new DynamicSecurityUnavailable(`no answer to ${commands[i]!.command} within ${commandTimeoutMs} ms`))
          }, commandTimeoutMs)
          this.#pending.set(id, { resolve, reject, timer })
        }),
    )
    const payload = JSON.stringify({ commands: commands.map((c, i) => ({ ...c, correlationData: ids[i] })) })
    try {
      await this.#client.publishAsync(controlTopic, payload, { qos: 1 })
    } catch (error) {
      for (const id of ids) this.#settle(id)?.reject(error as Error)
    }
    return Promise.all(answers)
  }

  #settle(id: string): Pending | undefined {
    const pending = this.#pending.get(id)
    if (pending === undefined) return undefined
    this.#timers.clearTimeout(pending.timer)
    this.#pending.delete(id)
    return pending
  }

  #onResponse(payload: Buffer): void {
    let body: unknown
    try {
      body = JSON.parse(payload.toString('utf8'))
    } catch {
      return
    }
    const responses = (body as { responses?: unknown }).responses
    if (!Array.isArray(responses)) return
    for (const r of responses as Record<string, unknown>[]) {
      if (typeof r?.correlationData !== 'string') continue
      const pending = this.#settle(r.correlationData)
      if (pending === undefined) continue
      const result: CommandResult = { command: String(r.command) }
      if (typeof r.error === 'string') result.error = r.error
      if (r.data !== undefined) result.data = r.data
      pending.resolve(result)
    }
  }
}

/**
 * Creates (or brings up to date) the service's role and MQTT user, with a
 * dynsec admin login. Idempotent: run it again to change the password or to
 * restore the role's rights.
 */
export async function ensureServiceLogin(dynsec: DynamicSecurity, username: string, password: string): Promise<void> {
  const created = await dynsec.batch([{ command: 'createRole', rolename: serviceRoleName, acls: serviceRoleAcls }])
  if (created[0]!.error !== undefined) {
    if (!/already exists/i.test(created[0]!.error)) throw new DynamicSecurityError('createRole', created[0]!.error)
    // An existing role gets exactly these rights again: each ACL replaced.
    const fixes = serviceRoleAcls.flatMap((acl) => [
      { command: 'removeRoleACL', rolename: serviceRoleName, acltype: acl.acltype, topic: acl.topic },
      { command: 'addRoleACL', rolename: serviceRoleName, ...acl },
    ])
    const results = await dynsec.batch(fixes)
    const failed = results.find((r, i) => r.error !== undefined && !(fixes[i]!.command === 'removeRoleACL' && /not found/i.test(r.error)))
    if (failed !== undefined) throw new DynamicSecurityError(failed.command, failed.error!)
  }
  const client = await dynsec.batch([{ command: 'createClient', username, password, roles: [{ rolename: serviceRoleName }] }])
  if (client[0]!.error === undefined) return
  if (!/already exists/i.test(client[0]!.error)) throw new DynamicSecurityError('createClient', client[0]!.error)
  await dynsec.run({ command: 'setClientPassword', username, password })
  // Mosquitto 2.0.11 answers "Internal error" to adding a role the client already has: look first.
  const existing = (await dynsec.run({ command: 'getClient', username })) as { client?: { roles?: { rolename?: string }[] } }
  if (!existing.client?.roles?.some((r) => r.rolename === serviceRoleName)) await dynsec.run({ command: 'addClientRole', username, rolename: serviceRoleName })
}
