/**
 * Method + path routing with `{name}` parameters.
 *
 * Static paths resolve with one Map lookup; parameterised paths walk a segment
 * tree in which a literal segment wins over a parameter at the same depth
 * (so /v1/printers/summary is not taken as /v1/printers/{id}). The result
 * tells "no such path" (404) apart from "path exists, method does not" (405).
 */

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'

export type RouteMatch<V> =
  | { kind: 'found'; value: V; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: HttpMethod[] }
  | { kind: 'not_found' }
  | { kind: 'bad_path'; reason: string }

interface Node<V> {
  literal: Map<string, Node<V>>
  param: { name: string; node: Node<V> } | undefined
  methods: Map<HttpMethod, V>
}

/** A static path's methods, with the answer for each made once (the hot path allocates no match). */
interface StaticPath<V> {
  methods: Map<HttpMethod, V>
  found: Map<HttpMethod, RouteMatch<V>>
}

const newNode = <V>(): Node<V> => ({ literal: new Map(), param: undefined, methods: new Map() })
const noParams: Record<string, string> = Object.freeze({}) as Record<string, string>
const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/

export class Router<V> {
  readonly #static = new Map<string, StaticPath<V>>()
  readonly #root: Node<V> = newNode()

  add(method: HttpMethod, pattern: string, value: V): void {
    if (!pattern.startsWith('/')) throw new TypeError(`route pattern must start with '/': ${pattern}`)
    const segments = pattern.split('/').slice(1)
    if (!segments.some((s) => s.includes('{'))) {
      const path = this.#static.get(pattern) ?? { methods: new Map<HttpMethod, V>(), found: new Map<HttpMethod, RouteMatch<V>>() }
      if (path.methods.has(method)) throw new TypeError(`duplicate route ${method} ${pattern}`)
      path.methods.set(method, value)
      path.found.set(method, { kind: 'found', value, params: noParams })
      if (method === 'GET' && !path.methods.has('HEAD')) path.found.set('HEAD', { kind: 'found', value, params: noParams })
      this.#static.set(pattern, path)
      return
    }
    let node = this.#root
    for (const segment of segments) {
      const param = PARAM.exec(segment)
      if (param) {
        const name = param[1]!
        if (node.param && node.param.name !== name) {
          throw new TypeError(`conflicting parameter names at ${pattern}: {${node.param.name}} vs {${name}}`)
        }
        node.param ??= { name, node: newNode() }
        node = node.param.node
      } else {
        if (segment.includes('{') || segment.includes('}')) throw new TypeError(`bad segment '${segment}' in ${pattern}`)
        let next = node.literal.get(segment)
        if (!next) node.literal.set(segment, (next = newNode()))
        node = next
      }
    }
    if (node.methods.has(method)) throw new TypeError(`duplicate route ${method} ${pattern}`)
    node.methods.set(method, value)
  }

  match(method: HttpMethod, path: string): RouteMatch<V> {
    // One look-up of the path among the static ones, whatever the outcome.
    const fixed = this.#static.get(path)
    if (fixed !== undefined) return fixed.found.get(method) ?? { kind: 'method_not_allowed', allowed: allowedMethods(fixed.methods) }
    const methods = this.#walk(path)
    if (methods === undefined) return { kind: 'not_found' }
    if ('kind' in methods) return methods
    const found = methods.map.get(method) ?? (method === 'HEAD' ? methods.map.get('GET') : undefined)
    if (found !== undefined) return { kind: 'found', value: found, params: methods.params }
    return { kind: 'method_not_allowed', allowed: allowedMethods(methods.map) }
  }

  /** Methods registered for a path, for CORS preflight; empty when the path is unknown. */
  allowed(path: string): HttpMethod[] {
    const methods = this.#lookup(path)
    if (methods === undefined || 'kind' in methods) return []
    return allowedMethods(methods.map)
  }

  #lookup(path: string): { map: Map<HttpMethod, V>; params: Record<string, string> } | { kind: 'bad_path'; reason: string } | undefined {
    const map = this.#static.get(path)?.methods
    return map !== undefined ? { map, params: {} } : this.#walk(path)
  }

  #walk(path: string): { map: Map<HttpMethod, V>; params: Record<string, string> } | { kind: 'bad_path'; reason: string } | undefined {
    if (!this.#root.literal.size && !this.#root.param) return undefined
    const segments = path.split('/').slice(1)
    const params: Record<string, string> = {}
    const found = this.#descend(this.#root, segments, 0, params)
    if (found === undefined) return undefined
    for (const [name, raw] of Object.entries(params)) {
      try {
        params[name] = decodeURIComponent(raw)
      } catch {
        return { kind: 'bad_path', reason: `path parameter '${name}' is not valid percent-encoding` }
      }
    }
    return { map: found, params }
  }

  #descend(node: Node<V>, segments: string[], i: number, params: Record<string, string>): Map<HttpMethod, V> | undefined {
    if (i === segments.length) return node.methods.size ? node.methods : undefined
    const segment = segments[i]!
    const literal = node.literal.get(segment)
    if (literal) {
      const found = this.#descend(literal, segments, i + 1, params)
      if (found) return found
    }
    // An empty segment ("/v1/printers//x") never binds a parameter.
    if (node.param && segment !== '') {
      params[node.param.name] = segment
      const found = this.#descend(node.param.node, segments, i + 1, params)
      if (found) return found
      delete params[node.param.name]
    }
    return undefined
  }
}

function allowedMethods<V>(map: Map<HttpMethod, V>): HttpMethod[] {
  const allowed = [...map.keys()]
  if (map.has('GET') && !map.has('HEAD')) allowed.push('HEAD')
  return allowed
}
