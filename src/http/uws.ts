/**
 * uWebSockets.js, native or not at all.
 *
 * The republished package (docs/development.md) falls back to a slow pure-JS
 * implementation when its binary does not load, with only a console warning.
 * A farm sized for the native server would fall over on the fallback, so the
 * service refuses to start instead.
 */
import uWS from 'uWebSockets.js'
import type { RecognizedString, us_listen_socket } from 'uWebSockets.js'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

export { uWS }
export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js'

declare module 'uWebSockets.js' {
  interface TemplatedApp {
    /** The native build takes host, port and listen options together; the typings list only (port, options). */
    listen(host: RecognizedString, port: number, options: number, cb: (listenSocket: us_listen_socket | false) => void | Promise<void>): TemplatedApp
  }
}

/** ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT: an ambient enum in the typings, so its value is spelled out here. */
export const listenExclusivePort = 1

export class UwsNotNative extends Error {
  override name = 'UwsNotNative'
}

export function assertNativeUws(): void {
  if (/^(true|1)$/i.test(process.env['UWS_USE_FALLBACK'] ?? '')) {
    throw new UwsNotNative('UWS_USE_FALLBACK is set: the service runs only on the native uWebSockets.js build; unset it')
  }
  const require = createRequire(import.meta.url)
  const entry = require.resolve('uWebSockets.js')
  const binary = join(dirname(entry), '..', 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`)
  let native: unknown
  try {
    native = require(binary)
  } catch (error) {
    throw new UwsNotNative(
      `the native uWebSockets.js binary for ${process.platform}-${process.arch}, Node ABI ${process.versions.modules}, did not load ` +
        `(${(error as Error).message.split('\n')[0]}); use Node 20 on linux x64/arm64 and reinstall with npm ci`,
    )
  }
  if (native !== uWS) throw new UwsNotNative('uWebSockets.js loaded its JavaScript fallback instead of the native binary')
}
