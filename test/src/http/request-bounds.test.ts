/**
 * Every number a request may carry is bounded by its schema, so no value
 * that passes validation can overflow a column or a timer further in (a
 * `before=1e308` once reached PostgreSQL's bigint and came back a 500).
 * Every string is bounded too. New routes are covered as they are added.
 */
import t from 'tap'
import { allRoutes } from '../../../src/node/service.js'

type Json = Record<string, unknown>

/** Where in the schema, and what is missing there. */
function unbounded(schema: unknown, at: string, found: string[]): string[] {
  if (schema === null || typeof schema !== 'object') return found
  const node = schema as Json
  const type = node['type']
  if (type === 'integer' || type === 'number') {
    if (node['minimum'] === undefined && node['exclusiveMinimum'] === undefined) found.push(`${at}: ${type} without a minimum`)
    if (node['maximum'] === undefined && node['exclusiveMaximum'] === undefined) found.push(`${at}: ${type} without a maximum`)
  }
  if (type === 'string' && node['maxLength'] === undefined && node['const'] === undefined && node['enum'] === undefined && !['uuid', 'date-time'].includes(String(node['format']))) {
    found.push(`${at}: string without a maxLength`)
  }
  if (type === 'array' && node['maxItems'] === undefined) found.push(`${at}: array without maxItems`)
  for (const [key, value] of Object.entries(node)) {
    if (key === 'properties' && value !== null && typeof value === 'object') {
      for (const [name, property] of Object.entries(value as Json)) unbounded(property, `${at}.${name}`, found)
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => unbounded(item, `${at}.${key}[${i}]`, found))
    } else if (value !== null && typeof value === 'object') {
      unbounded(value, `${at}.${key}`, found)
    }
  }
  return found
}

t.test('request bounds - every number, string and array of every request schema has bounds', async (t) => {
  let schemas = 0
  for (const route of allRoutes()) {
    for (const where of ['body', 'query', 'params'] as const) {
      const schema = route.schemas[where]
      if (schema === undefined) continue
      schemas++
      const found = unbounded(JSON.parse(JSON.stringify(schema)), `${route.method} ${route.path} ${where}`, [])
      t.same(found, [], `${route.method} ${route.path} ${where}`)
    }
  }
  t.ok(schemas > 20, `${schemas} request schemas read`)
})

t.test('request bounds - the check itself finds an unbounded integer and string', async (t) => {
  t.same(unbounded({ type: 'object', properties: { before: { type: 'integer', minimum: 1 }, name: { type: 'string' } } }, 'x', []), [
    'x.before: integer without a maximum',
    'x.name: string without a maxLength',
  ])
})
