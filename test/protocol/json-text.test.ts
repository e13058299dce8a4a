import t from 'tap'
import { isWellFormedText, parseJsonText } from '../../protocol/json-text.js'

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

t.test('json text - well-formed UTF-8 JSON parses, including escaped surrogate pairs and non-BMP characters', async (t) => {
  t.same(parseJsonText(bytes('{"name":"Bénchy 🐢","e":"\\ud83d\\udc22"}'), 'body'), { ok: true, value: { name: 'Bénchy 🐢', e: '🐢' } })
  t.same(parseJsonText(bytes('[1,"\\u00b0C"]'), 'body'), { ok: true, value: [1, '°C'] })
})

t.test('json text - bytes that are not UTF-8 are invalid_unicode, never silently replaced', async (t) => {
  const result = parseJsonText(Uint8Array.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), 'body')
  t.match(result, { ok: false, code: 'invalid_unicode', reason: /^body is not valid UTF-8/ })
  // A surrogate encoded as UTF-8 bytes (CESU-8) is not UTF-8 either.
  t.match(parseJsonText(Uint8Array.from([0x22, 0xed, 0xa0, 0x80, 0x22]), 'payload'), { ok: false, code: 'invalid_unicode' })
})

t.test('json text - a lone surrogate escape is invalid_unicode naming where it is', async (t) => {
  t.match(parseJsonText(bytes('{"name":"\\ud800"}'), 'body'), { ok: false, code: 'invalid_unicode', reason: /^body\.name holds an unpaired UTF-16 surrogate/ })
  t.match(parseJsonText(bytes('{"a":[1,{"b":"x\\uDC00y"}]}'), 'body'), { ok: false, reason: /^body\.a\[1\]\.b / })
  t.match(parseJsonText(bytes('{"\\udbff":1}'), 'frame'), { ok: false, reason: /^frame\.\S+ holds/ }, 'in a key too')
  t.match(parseJsonText(bytes('"\\ud83d\\ud83d"'), 'payload'), { ok: false, reason: /^payload holds/ }, 'two high halves are not a pair')
})

t.test('json text - malformed JSON is invalid_json', async (t) => {
  t.match(parseJsonText(bytes('{"a":'), 'body'), { ok: false, code: 'invalid_json', reason: /^body is not valid JSON/ })
})

t.test('json text - isWellFormedText agrees with the platform', async (t) => {
  for (const text of ['', 'abc', '\ud83d\udc22', '\ud800', '\udc00', 'a\ud800b', '\udc00\ud800', '\ud800\udc00\ud800']) {
    t.equal(isWellFormedText(text), (text as unknown as { isWellFormed(): boolean }).isWellFormed(), JSON.stringify(text))
  }
})

t.test('json text - a value nested 100,000 deep is walked without overflowing the stack (once a 500, and a crash on the live feed)', async (t) => {
  const depth = 100_000
  const deep = bytes('['.repeat(depth) + '"\\ud83d\\ude00"' + ']'.repeat(depth))
  t.equal(parseJsonText(deep, 'body').ok, true, 'a valid pair deep down parses')
  const bad = bytes('{"a":' + '['.repeat(depth) + '"\\ud800"' + ']'.repeat(depth) + '}')
  const result = parseJsonText(bad, 'frame')
  t.equal(result.ok, false)
  t.match(!result.ok && result.reason, /^frame\.a\[0\]\[0\]/)
})

t.test('json text - the path of a deep value is shortened in the middle', async (t) => {
  const result = parseJsonText(bytes('['.repeat(40) + '"\\udc00"' + ']'.repeat(40)), 'body')
  t.match(!result.ok && result.reason, /^body(\[0\]){8}…(\[0\]){8} holds/)
})
