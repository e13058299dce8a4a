/**
 * The TCP connections of the PostgreSQL pool, with Nagle's algorithm off.
 *
 * postgres.js opens plain sockets, which keep Nagle on: a small write waits
 * while earlier bytes are unacknowledged, and PostgreSQL acknowledges late
 * (delayed ACK, 40 ms on Linux). Every write that follows another before its
 * answer came back waited that long: a COPY's end after its data, a query
 * pipelined behind another on the same connection. Measured with four
 * connections writing COPY-then-INSERT transactions: 28k rows/s with
 * PostgreSQL idle most of the time, 72k with this (bench/ingest).
 *
 * postgres.js calls this for every connection it opens (its `socket`
 * option) and then speaks its protocol, TLS included, over what it returns.
 * Hosts are tried in turn, one per connection attempt, as postgres.js does
 * itself for a URL that names several.
 */
import { connect, type Socket } from 'node:net'
import type { Timers } from '../../actors/clock.js'

export interface SocketTarget {
  host: string[]
  port: number[]
  path: string | false
  connect_timeout: number
}

export function noDelaySockets(timers: Timers): (target: SocketTarget) => Promise<Socket> {
  let next = 0
  return (target) => {
    const index = next++ % Math.max(1, target.host.length)
    const host = target.host[index] ?? 'localhost'
    const port = target.port[index] ?? 5432
    const socket = target.path ? connect({ path: target.path }) : connect({ host, port, noDelay: true })
    // What postgres.js sets on its own sockets (the TLS server name is read from it).
    Object.assign(socket, { host, port })
    return new Promise<Socket>((resolve, reject) => {
      const timer = timers.setTimeout(() => socket.destroy(new Error(`connecting to ${host}:${port} took more than ${target.connect_timeout} s`)), target.connect_timeout * 1000)
      const failed = (error: Error) => {
        timers.clearTimeout(timer)
        reject(error)
      }
      socket.once('error', failed)
      socket.once('connect', () => {
        timers.clearTimeout(timer)
        socket.off('error', failed)
        resolve(socket)
      })
    })
  }
}
