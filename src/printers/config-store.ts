/**
 * Printer configuration in the store (docs/printers-and-events.md; decisions in
 * protocol/schemas/printers.ts). Credentials go through the sealed box with
 * the printer's organization and id as context, so a sealed value copied to
 * another printer does not open.
 */
import type { BridgeBinding } from '../auth/host-binding.js'
import { randomUUID } from 'node:crypto'
import { ServiceError } from '../../protocol/errors.js'
import type { PrinterConfig, UpdatePrinterConfigBody, UpsertPrinterConfigBody } from '../../protocol/schemas/printers.js'
import type { Logger } from '../observability/log.js'
import type { SealedBox } from '../secrets/sealed-box.js'
import type { Database, Queryable } from '../storage/database.js'

interface Row {
  id: string
  organization_id: string
  name: string
  ip_address: string
  serial_number: string | null
  model: string | null
  access_token_sealed: string | null
  api_key_sealed: string | null
  enabled: boolean
  host_id: string | null
  assignment_epoch: number
  discovery_method: string | null
  discovered_at: Date | null
  printer_type: PrinterConfig['printer_type']
  port: number | null
  communication_protocol: PrinterConfig['communication_protocol']
  capabilities: Record<string, unknown>
  secure: boolean
  timeout_ms: number
  reconnect_interval_ms: number
  created_at: Date
  updated_at: Date
}

/** API field → column, for the plain (unsealed) fields a body may set. */
const plainColumns = {
  name: 'name',
  ip_address: 'ip_address',
  serial_number: 'serial_number',
  model: 'model',
  enabled: 'enabled',
  discovery_method: 'discovery_method',
  discovered_at: 'discovered_at',
  printer_type: 'printer_type',
  port: 'port',
  communication_protocol: 'communication_protocol',
  capabilities: 'capabilities',
  secure: 'secure',
  timeout: 'timeout_ms',
  reconnect_interval: 'reconnect_interval_ms',
} as const

type Fields = Omit<UpdatePrinterConfigBody, never>

export interface ListFilters {
  host_id?: string | undefined
  name?: string | undefined
  serial_number?: string | undefined
  ip_address?: string | undefined
  include_incomplete: boolean
  enabled_only: boolean
}

/** What the caller may see and change beyond the route's own scope (holdsScope of the principal). */
export interface PrinterAccess {
  /** The printers' own credentials (access_token, api_key) in answers. */
  readonly credentials: boolean
  /** Giving a printer a host or enabling it: a change of the fleet. */
  readonly fleet: boolean
  /** A paired bridge key: credentials only of printers on this host (null: none). */
  readonly onlyHost?: string | null | undefined
  /** A paired bridge key and its host: it changes only printers on that host (src/auth/host-binding.ts). */
  readonly binding?: BridgeBinding
}

export class PrinterConfigStore {
  readonly #db: Database
  readonly #box: SealedBox
  readonly #logger: Logger

  /** The node's clock: what it stamps a change with. */
  readonly #now: () => number

  constructor(db: Database, box: SealedBox, logger: Logger, now: () => number) {
    this.#now = now
    this.#db = db
    this.#box = box
    this.#logger = logger
  }

  async list(organizationId: string, filters: ListFilters, access: Pick<PrinterAccess, 'credentials' | 'onlyHost'>): Promise<PrinterConfig[]> {
    const sql = this.#db.sql
    const rows = await sql<Row[]>`
      select * from printers
      where organization_id = ${organizationId}
        ${filters.host_id === undefined ? sql`` : sql`and host_id = ${filters.host_id}`}
        ${filters.name === undefined ? sql`` : sql`and name = ${filters.name}`}
        ${filters.serial_number === undefined ? sql`` : sql`and serial_number = ${filters.serial_number}`}
        ${filters.ip_address === undefined ? sql`` : sql`and ip_address = ${filters.ip_address}`}
        ${filters.enabled_only ? sql`and enabled` : sql``}
        ${filters.include_incomplete ? sql`` : sql`and serial_number is not null and (access_token_sealed is not null or api_key_sealed is not null)`}
      order by created_at, id`
    return rows.map((r) => this.#toApi(r, showsCredentials(access, r)))
  }

  /** Another organization's printer is "not found", exactly like a missing one. */
  async get(organizationId: string, id: string, access: Pick<PrinterAccess, 'credentials' | 'onlyHost'>): Promise<PrinterConfig> {
    const [row] = await this.#db.sql<Row[]>`select * from printers where organization_id = ${organizationId} and id = ${id}`
    if (row === undefined) throw new ServiceError('printer_not_found', 'no such printer in this organization')
    return this.#toApi(row, showsCredentials(access, row))
  }

  /** Upsert (by id, else serial number, else create); one retry when a concurrent create took the serial first. */
  async upsert(organizationId: string, body: UpsertPrinterConfigBody, access: Pick<PrinterAccess, 'fleet' | 'binding'>): Promise<{ id: string; updated: boolean }> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#db.sql.begin((tx) => this.#upsertIn(tx, organizationId, body, access))
      } catch (error) {
        if (attempt === 0 && (error as { code?: string }).code === '23505' && body.serial_number !== undefined) continue
        throw translateUnique(error)
      }
    }
  }

  async update(organizationId: string, id: string, body: UpdatePrinterConfigBody, access: Pick<PrinterAccess, 'fleet'>): Promise<void> {
    try {
      await this.#db.sql.begin(async (tx) => {
        const [row] = await tx<Row[]>`select * from printers where organization_id = ${organizationId} and id = ${id} for update`
        if (row === undefined) throw new ServiceError('printer_not_found', 'no such printer in this organization')
        if (!access.fleet) guardFleet(row, body)
        await this.#write(tx, row.organization_id, row.id, body)
      })
    } catch (error) {
      throw translateUnique(error)
    }
  }

  /**
   * Deletes a printer: its state goes with it, its jobs keep their history (without the printer),
   * its events age out with the log's retention. Refused while it prints: the bridge would go on
   * reporting a job nobody could see.
   */
  async delete(organizationId: string, id: string): Promise<void> {
    await this.#db.sql.begin(async (tx) => {
      const [row] = await tx<{ job: { jobId: number; state: string; endedAt: number | null } | null }[]>`
        select s.state->'job' as job from printers p left join printer_state s on s.printer_id = p.id
        where p.organization_id = ${organizationId} and p.id = ${id} for update of p`
      if (row === undefined) throw new ServiceError('printer_not_found', 'no such printer in this organization')
      const job = row.job
      if (job !== null && job.endedAt === null && (job.state === 'printing' || job.state === 'paused')) {
        throw new ServiceError('printer_busy', `the printer is ${job.state} job ${job.jobId}; delete it once the job ends`, {
          extra: { job, reason: job.state === 'printing' ? 'job_printing' : 'job_paused' },
        })
      }
      // A printer task would go with the printer and leave its job dispatching (or printing) for ever.
      const [task] = await tx<{ job_id: string; state: string }[]>`
        select job_id, state from printer_tasks where printer_id = ${id} and state in ('offered', 'claimed', 'unconfirmed', 'started') limit 1`
      if (task !== undefined) {
        throw new ServiceError('printer_busy', `the printer has a ${task.state} task of job ${task.job_id}; cancel or requeue the job first (PATCH /v1/print-jobs/{id}/status)`, {
          extra: { job: { jobId: Number(task.job_id) }, reason: `task_${task.state}` },
        })
      }
      await tx`delete from printers where id = ${id}`
    })
  }

  async #upsertIn(tx: Queryable, organizationId: string, body: UpsertPrinterConfigBody, access: Pick<PrinterAccess, 'fleet' | 'binding'>): Promise<{ id: string; updated: boolean }> {
    let existing: Row | undefined
    if (body.id !== undefined) {
      ;[existing] = await tx<Row[]>`select * from printers where organization_id = ${organizationId} and id = ${body.id} for update`
      if (existing === undefined) throw new ServiceError('printer_not_found', 'no printer with that id in this organization')
    } else if (body.serial_number !== undefined) {
      ;[existing] = await tx<Row[]>`select * from printers where organization_id = ${organizationId} and serial_number = ${body.serial_number} for update`
    }
    // Checked against the row under its lock, so the answer cannot depend on a concurrent change.
    if (!access.fleet) guardFleet(existing, body)
    // A paired bridge reports new printers, and changes only its own host's (a serial number is no proof of whose printer it is).
    if (existing !== undefined && access.binding !== undefined && (access.binding.host === null || existing.host_id !== access.binding.host)) {
      throw new ServiceError('api_key_host_mismatch', `printer ${existing.id} is not on the host this paired bridge key speaks for; a paired key changes only its own host's printers`)
    }
    // #write sets configuration columns only: id and host_id in the body never reach it.
    const hostId = body.host_id
    if (existing === undefined) {
      const id = randomUUID()
      await tx`insert into printers (id, organization_id, name, ip_address) values (${id}, ${organizationId}, ${body.name}, ${body.ip_address})`
      await this.#write(tx, organizationId, id, body)
      // Created with a host_id → assigned to that host at epoch 1.
      if (hostId !== undefined) await tx`update printers set host_id = ${hostId}, assignment_epoch = 1 where id = ${id}`
      return { id, updated: false }
    }
    await this.#write(tx, organizationId, existing.id, body)
    if (hostId !== undefined && hostId !== existing.host_id) {
      if (existing.host_id !== null) {
        throw new ServiceError('printer_assigned_elsewhere', `the printer is assigned to host '${existing.host_id}'; move it with PUT /v1/printers/${existing.id}/host-assignment`)
      }
      await tx`update printers set host_id = ${hostId}, assignment_epoch = assignment_epoch + 1 where id = ${existing.id}`
    }
    return { id: existing.id, updated: true }
  }

  async #write(tx: Queryable, organizationId: string, id: string, fields: Fields): Promise<void> {
    const set: Record<string, unknown> = { updated_at: new Date(this.#now()) }
    for (const [field, column] of Object.entries(plainColumns) as [keyof typeof plainColumns, string][]) {
      const value = fields[field]
      if (value !== undefined) set[column] = field === 'capabilities' ? tx.json(value as never) : value
    }
    if (fields.access_token !== undefined) set['access_token_sealed'] = this.#box.seal(fields.access_token, context(organizationId, id, 'access_token'))
    if (fields.api_key !== undefined) set['api_key_sealed'] = this.#box.seal(fields.api_key, context(organizationId, id, 'api_key'))
    await tx`update printers set ${tx(set)} where id = ${id}`
  }

  #open(row: Row, field: 'access_token' | 'api_key', sealed: string | null): string | null {
    if (sealed === null) return null
    try {
      return this.#box.open(sealed, context(row.organization_id, row.id, field))
    } catch (error) {
      // A key change without the old key kept: the credential must be entered again.
      this.#logger.warn('a stored printer credential cannot be opened with the sealing keys', { printerId: row.id, field, error })
      return null
    }
  }

  #toApi(row: Row, withCredentials: boolean): PrinterConfig {
    return {
      id: row.id,
      name: row.name,
      ip_address: row.ip_address,
      serial_number: row.serial_number,
      model: row.model,
      access_token: withCredentials ? this.#open(row, 'access_token', row.access_token_sealed) : null,
      organization_id: row.organization_id,
      enabled: row.enabled,
      host_id: row.host_id,
      assignment_epoch: row.assignment_epoch,
      discovery_method: row.discovery_method,
      discovered_at: row.discovered_at?.toISOString() ?? null,
      printer_type: row.printer_type,
      api_key: withCredentials ? this.#open(row, 'api_key', row.api_key_sealed) : null,
      port: row.port,
      communication_protocol: row.communication_protocol,
      capabilities: row.capabilities,
      secure: row.secure,
      timeout: row.timeout_ms,
      reconnect_interval: row.reconnect_interval_ms,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
      credentials_redacted: !withCredentials,
    }
  }
}

/**
 * A caller without fleet:write may report and describe printers (a bridge's discoveries), but
 * not put one into service: no host for a printer that has none or another, no enabling of a
 * disabled or new one. Re-sending what is already so is not a change and passes.
 */
function showsCredentials(access: Pick<PrinterAccess, 'credentials' | 'onlyHost'>, row: Pick<Row, 'host_id'>): boolean {
  return access.credentials && (access.onlyHost === undefined || (access.onlyHost !== null && row.host_id === access.onlyHost))
}

function guardFleet(existing: Pick<Row, 'host_id' | 'enabled'> | undefined, body: { host_id?: string | undefined; enabled?: boolean | undefined }): void {
  if (body.host_id !== undefined && body.host_id !== existing?.host_id) {
    throw new ServiceError('insufficient_scope', 'giving a printer a host needs the scope fleet:write (or an organization admin); leave host_id out to report the printer')
  }
  if (body.enabled === true && existing?.enabled !== true) {
    throw new ServiceError('insufficient_scope', 'enabling a printer needs the scope fleet:write (or an organization admin); a reported printer stays disabled until then')
  }
}

const context = (organizationId: string, printerId: string, field: string): string => `${organizationId}/printers/${printerId}/${field}`

function translateUnique(error: unknown): unknown {
  if ((error as { code?: string; constraint_name?: string }).code === '23505') {
    return new ServiceError('serial_number_taken', 'another printer of this organization has that serial number')
  }
  return error
}
