/**
 * Two connected in-memory streams: what one side writes, the other reads, in order, with
 * backpressure (a write waits while the other side's read buffer is full). The service's MQTT
 * client talks to the broker it embeds over such a pair rather than a loopback TCP connection:
 * the same MQTT packets, without a system call per packet on each side (bench/displays).
 */
import { Duplex } from 'node:stream'

class LinkEnd extends Duplex {
  peer!: LinkEnd
  /** The write waiting for the peer's reader to want more. */
  #blocked: ((error?: Error | null) => void) | undefined

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    if (this.peer.destroyed) return done(new Error('the other end of the link is closed'))
    if (this.peer.push(chunk)) return done()
    this.#blocked = done
  }

  override _final(done: (error?: Error | null) => void): void {
    if (!this.peer.destroyed) this.peer.push(null)
    done()
  }

  override _read(): void {
    const blocked = this.peer.#blocked
    this.peer.#blocked = undefined
    blocked?.()
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    const blocked = this.#blocked
    this.#blocked = undefined
    blocked?.(error ?? new Error('the link is closed'))
    // The other side sees its reader end and closes too, as a socket does when its peer goes.
    if (!this.peer.destroyed) {
      this.peer.push(null)
      this.peer.destroy()
    }
    done(error)
  }
}

export function inProcessLink(): [LinkEnd, LinkEnd] {
  const a = new LinkEnd()
  const b = new LinkEnd()
  a.peer = b
  b.peer = a
  return [a, b]
}
