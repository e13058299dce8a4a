/**
 * CHECK_RESPONSES: every JSON answer a handler gives is checked against the
 * response schema its route publishes (the same schema that reaches
 * /openapi.json and MCP), so a drift between what a route says it answers and
 * what it answers fails the test that caused it instead of a client later.
 * The answer is checked as the client will read it (serialised and parsed:
 * a Date is its ISO string). Off in production: it costs a serialisation and
 * a validation per answer. Validators are compiled on first use, per route
 * and status.
 */
import type { TSchema } from '@sinclair/typebox'
import { compileResponseValidator, type Validator } from '../../protocol/schemas/validator.js'
import type { Reply, Route } from './route.js'

export type ResponseCheck = (route: Pick<Route, 'method' | 'path' | 'responses'>, reply: Reply) => void

export function createResponseCheck(): ResponseCheck {
  const validators = new Map<TSchema, Validator<unknown>>()
  return (route, reply) => {
    if (reply === null || typeof reply !== 'object' || reply.body === undefined || reply.raw !== undefined || reply.stream !== undefined) return
    const status = reply.status ?? 200
    const doc = route.responses[status]
    // An error answered rather than thrown (an OAuth refusal) is one of the route's `errors`, in the error body.
    if (doc === undefined && status >= 400) return
    if (doc === undefined) throw new Error(`${route.method} ${route.path} answered ${status}, which its responses do not list`)
    if (doc.schema === undefined) return
    let validate = validators.get(doc.schema)
    if (validate === undefined) {
      validate = compileResponseValidator(doc.schema)
      validators.set(doc.schema, validate)
    }
    const result = validate(JSON.parse(JSON.stringify(reply.body)))
    if (!result.ok) throw new Error(`${route.method} ${route.path} answered ${status} with a body its response schema does not allow: ${result.reason}`)
  }
}
