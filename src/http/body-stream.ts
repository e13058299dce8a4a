/**
 * A request body as a Node stream, for the routes that must not hold it in
 * memory (uploads; docs/files.md). uWS hands out each chunk only during
 * its onData callback (docs/development.md), so each is copied once; when the
 * reader falls behind (`push` answers false) the socket is paused with
 * `res.pause()` and resumed on the next `_read`, so a slow disk slows the
 * client down instead of filling memory.
 *
 * The byte limit is enforced as the bytes arrive: a declared Content-Length
 * over it is refused before a byte is read, an undeclared one the moment it
 * passes. An aborted request destroys the stream with RequestAborted, so
 * whoever is writing it somewhere cleans up.
 */
import { Readable } from 'node:stream'
import { payloadTooLarge, RequestAborted, type BodySource } from './body.js'

export interface PausableBodySource extends BodySource {
  pause(): void
  resume(): void
}

export class RequestBodyStream extends Readable {
  readonly #source: PausableBodySource
  readonly #limitBytes: number
  readonly #tooLarge: () => Error
  /** False once the response ended or the client left: `res` must not be touched then. */
  readonly #sourceValid: () => boolean
  #received = 0
  #paused = false
  /** True once the last chunk arrived: the connection may be kept alive. */
  complete = false

  constructor(source: PausableBodySource, limitBytes: number, sourceValid: () => boolean, tooLarge: () => Error = () => payloadTooLarge(limitBytes)) {
    super({ highWaterMark: 256 * 1024 })
    this.#source = source
    this.#limitBytes = limitBytes
    this.#tooLarge = tooLarge
    this.#sourceValid = sourceValid
    source.onData((chunk, isLast) => this.#onData(chunk, isLast))
    // The request owns its body: a reader learns a failure through its own pipe or iteration, and a
    // body nobody reads yet (the handler is still checking the model) must not end the process when
    // the client leaves or sends too much.
    this.on('error', () => undefined)
  }

  get received(): number {
    return this.#received
  }

  /** The client went away: whoever reads learns it as an error. */
  abort(): void {
    if (!this.destroyed && !this.complete) this.destroy(new RequestAborted())
  }

  override _read(): void {
    if (!this.#paused) return
    this.#paused = false
    if (this.#sourceValid()) this.#source.resume()
  }

  #onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.destroyed) return
    this.#received += chunk.byteLength
    if (this.#received > this.#limitBytes) {
      this.destroy(this.#tooLarge())
      return
    }
    const more = chunk.byteLength === 0 ? true : this.push(Buffer.copyBytesFrom(new Uint8Array(chunk)))
    if (isLast) {
      this.complete = true
      this.push(null)
      return
    }
    if (!more && !this.#paused) {
      this.#paused = true
      this.#source.pause()
    }
  }
}
