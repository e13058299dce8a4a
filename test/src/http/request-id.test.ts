import t from 'tap'
import { nextRequestNumber, requestIdBytes, requestIdText } from '../../../src/http/request-id.js'

const uuidShape = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

t.test('request ids - the header bytes and the text of one request are the same id', async (t) => {
  // Around the split of the counter into two 24-bit halves, and at its top.
  for (const n of [1, 15, 16, 0xffffff, 0x1000000, 0x1000001, 0xabcdef123456, 2 ** 48 - 1]) {
    const text = requestIdText(n)
    t.match(text, uuidShape, `id ${n} is UUID-shaped`)
    t.equal(requestIdBytes(n).toString(), text, `bytes of ${n.toString(16)}`)
  }
})

t.test('request ids - numbers are consecutive and their ids distinct', async (t) => {
  const first = nextRequestNumber()
  const second = nextRequestNumber()
  t.equal(second, first + 1)
  t.not(requestIdText(first), requestIdText(second))
  t.ok(requestIdText(second).endsWith(second.toString(16).padStart(12, '0')))
})
