import t from 'tap'
import { randomBytes } from 'node:crypto'
import { SealedBox } from '../../../src/secrets/sealed-box.js'

const box = new SealedBox(randomBytes(32))

t.test('sealed box - a sealed value opens to the same text, and never contains it', async (t) => {
  const sealed = box.seal('bambu-access-code-12345678', 'org-1/printer-9/access_token')
  t.match(sealed, /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/)
  t.notMatch(sealed, /bambu-access-code/)
  t.equal(box.open(sealed, 'org-1/printer-9/access_token'), 'bambu-access-code-12345678')
})

t.test('sealed box - the same text seals differently each time', async (t) => {
  t.not(box.seal('x', 'c'), box.seal('x', 'c'))
})

t.test('sealed box - another context, another key or a flipped bit does not open', async (t) => {
  const sealed = box.seal('secret', 'org-1/p/access_token')
  t.throws(() => box.open(sealed, 'org-2/p/access_token'), 'moved to another organization')
  t.throws(() => box.open(sealed, 'org-1/p/api_key'), 'moved to another field')
  t.throws(() => new SealedBox(randomBytes(32)).open(sealed, 'org-1/p/access_token'), 'another key')
  const parts = sealed.split('.')
  const body = Buffer.from(parts[2]!, 'base64url')
  body[0]! ^= 1
  t.throws(() => box.open(`${parts[0]}.${parts[1]}.${body.toString('base64url')}`, 'org-1/p/access_token'), 'tampered')
  for (const bad of ['', 'v2.a.b', 'v1.a', 'plain text']) t.throws(() => box.open(bad, 'c'), bad)
})

t.test('sealed box - keys must be 32 bytes', async (t) => {
  t.throws(() => new SealedBox(randomBytes(16)), TypeError)
})
