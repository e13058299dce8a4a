/**
 * POST /v1/printer-config/{id}/test-connection: can this node open a TCP
 * connection to the printer's address and protocol port? A real, bounded
 * check: never longer than the timeout, the socket always closed.
 *
 * Decision: the port is the printer's configured `port`, else the usual one
 * for its protocol/type (Bambu MQTT over TLS 8883, OctoPrint/Prusa HTTP 80 or
 * 443 when secure, Moonraker 7125, Snapmaker 8080, FlashForge 8899). Only TCP
 * reachability is tested: the service does not hold a session with the
 * printer (the bridge does), so a credential check would prove little.
 *
 * Security: the address is the organization's own configuration, the route
 * is for admins and printers:write keys only, and the check sends no bytes,
 * so it cannot be used to talk to other services on the node's network.
 */
import { connect } from 'node:net'
import type { PrinterConfig } from '../../protocol/schemas/printers.js'
import type { Timers } from '../../actors/clock.js'

/** The longest a test waits, whatever the printer's own timeout says. */
export const maxProbeMs = 3_000

export function probePort(printer: Pick<PrinterConfig, 'port' | 'communication_protocol' | 'printer_type' | 'secure'>): number {
  if (printer.port !== null) return printer.port
  if (printer.communication_protocol === 'mqtt' || (printer.communication_protocol === null && printer.printer_type === 'bambu')) return printer.secure ? 8883 : 1883
  switch (printer.printer_type) {
    case 'klipper':
      return 7125
    case 'snapmaker':
      return 8080
    case 'flashforge':
      return 8899
    default:
      return printer.secure ? 443 : 80
  }
}

export interface ProbeResult {
  success: boolean
  error?: string
  host: string
  port: number
  elapsedMs: number
}

export function probeTcp(host: string, port: number, timeoutMs: number, timers: Timers): Promise<ProbeResult> {
  const started = performance.now()
  return new Promise((resolve) => {
    let settled = false
    const socket = connect({ host, port })
    const finish = (error: string | undefined) => {
      if (settled) return
      settled = true
      timers.clearTimeout(timer)
      socket.destroy()
      const elapsedMs = Math.round(performance.now() - started)
      resolve(error === undefined ? { success: true, host, port, elapsedMs } : { success: false, error, host, port, elapsedMs })
    }
    const timer = timers.setTimeout(() => finish(`no answer from ${host}:${port} within ${timeoutMs} ms`), timeoutMs)
    socket.once('connect', () => finish(undefined))
    socket.once('error', (error: NodeJS.ErrnoException) => finish(describe(error, host, port)))
  })
}

function describe(error: NodeJS.ErrnoException, host: string, port: number): string {
  switch (error.code) {
    case 'ECONNREFUSED':
      return `${host}:${port} refused the connection (nothing listens on that port)`
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${host} could not be resolved`
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${host} is unreachable from the service`
    default:
      return `${host}:${port}: ${error.code ?? error.message}`
  }
}
