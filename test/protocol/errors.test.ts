import t from 'tap'
import { errorBody, errorCodes, isErrorCode, ServiceError, type ErrorCode } from '../../protocol/errors.js'

const codes = Object.keys(errorCodes) as ErrorCode[]

t.test('errors - the registry is not empty', async (t) => {
  t.ok(codes.length > 0)
})

t.test('errors - every code is snake_case: lower for ours, upper only where the documented contract spells it so', async (t) => {
  const specUpperCase = new Set(['ORG_ADMIN_REQUIRED', 'MQTT_DISPLAY_REQUEST_INVALID', 'MQTT_DISPLAY_NOT_CONFIGURED'])
  for (const code of codes) {
    if (specUpperCase.has(code)) t.match(code, /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/, code)
    else t.match(code, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, code)
  }
})

t.test('errors - every code has a 4xx or 5xx status', async (t) => {
  for (const code of codes) {
    const { status } = errorCodes[code]
    t.ok(Number.isInteger(status) && status >= 400 && status <= 599, `${code}: ${status}`)
  }
})

t.test('errors - every description is a non-empty sentence ending with a period', async (t) => {
  for (const code of codes) {
    const { description } = errorCodes[code]
    t.ok(description.trim().length > 0, `${code} has a description`)
    t.match(description, /\.$/, `${code} ends with a period`)
    t.equal(description, description.trim(), `${code} has no surrounding whitespace`)
  }
})

t.test('errors - retryable codes are 429 or 5xx: a 4xx otherwise means the request itself must change', async (t) => {
  for (const code of codes) {
    const info: { status: number; retryable?: boolean } = errorCodes[code]
    if (info.retryable) t.ok(info.status === 429 || info.status >= 500, `${code} is retryable and ${info.status}`)
  }
})

t.test('errors - ServiceError carries code, status, extra and headers', async (t) => {
  const cause = new Error('socket closed')
  const err = new ServiceError('method_not_allowed', 'use GET', {
    extra: { job: 'j1', reason: 'maintenance' },
    headers: { allow: 'GET, HEAD' },
    cause,
  })
  t.ok(err instanceof Error)
  t.ok(err instanceof ServiceError)
  t.equal(err.name, 'ServiceError')
  t.equal(err.message, 'use GET')
  t.equal(err.code, 'method_not_allowed')
  t.equal(err.status, 405)
  t.same(err.extra, { job: 'j1', reason: 'maintenance' })
  t.same(err.headers, { allow: 'GET, HEAD' })
  t.equal(err.cause, cause)
})

t.test('errors - ServiceError status follows the registry for every code', async (t) => {
  for (const code of codes) t.equal(new ServiceError(code, 'x').status, errorCodes[code].status, code)
})

t.test('errors - ServiceError without options has no extra, headers or cause', async (t) => {
  const err = new ServiceError('payload_too_large', 'too big')
  t.equal(err.status, 413)
  t.equal(err.extra, undefined)
  t.equal(err.headers, undefined)
  t.equal(err.cause, undefined)
  t.notOk('cause' in err, 'no cause property at all')
})

t.test('errors - errorBody has error and message, and requestId only when given', async (t) => {
  const without = errorBody('route_not_found', 'no route')
  t.same(without, { error: 'route_not_found', message: 'no route' })
  t.notOk('requestId' in without, 'no requestId key, not even undefined')
  t.same(errorBody('internal_error', 'boom', 'req-1'), { error: 'internal_error', message: 'boom', requestId: 'req-1' })
  t.same(errorBody('internal_error', 'boom', ''), { error: 'internal_error', message: 'boom', requestId: '' }, 'an empty id is still an id')
})

t.test('errors - isErrorCode accepts registry codes only', async (t) => {
  for (const code of codes) t.ok(isErrorCode(code), code)
  for (const other of ['', 'not_a_code', 'NOT_READY', 'toString', 'constructor', '__proto__', 'hasOwnProperty']) {
    t.notOk(isErrorCode(other), JSON.stringify(other))
  }
})
