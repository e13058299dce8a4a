/**
 * The resources this service issues tokens for (RFC 8707): the REST API,
 * named by the service's base URL, and the MCP endpoint. A grant stores ''
 * for the API, so a request naming it and one naming nothing are the same
 * grant.
 */
import { ServiceError } from '../../protocol/errors.js'

export class Resources {
  readonly api: string
  readonly mcp: string

  constructor(publicBaseUrl: string) {
    this.api = publicBaseUrl.replace(/\/+$/, '')
    this.mcp = `${this.api}/v1/mcp`
  }

  /** '' for the API, the MCP resource as stored; anything else → invalid_target. A trailing slash is the same resource. */
  stored(resource: string | undefined): string {
    if (resource === undefined || resource === '') return ''
    const plain = resource.replace(/\/+$/, '')
    if (plain === this.api) return ''
    if (plain === this.mcp) return this.mcp
    throw new ServiceError('invalid_target', `resource ${resource.slice(0, 200)} is not served here: use ${this.api} (the API) or ${this.mcp} (MCP)`)
  }

  /** The audience of a token for a stored resource. */
  audience(stored: string): string {
    return stored === '' ? this.api : stored
  }
}
