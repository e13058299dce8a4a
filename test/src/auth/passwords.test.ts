import t from 'tap'
import { decoyHash, defaultPasswordCost, hashPassword, needsRehash, setPasswordCost, verifyPassword } from '../../../src/auth/passwords.js'

t.test('passwords - by default a hash costs N = 2^17, r 8, p 1 (current guidance), and verifies its own password and nothing else', async (t) => {
  t.equal(defaultPasswordCost, 17)
  const stored = await hashPassword('correct horse battery staple')
  t.match(stored, /^scrypt\$17\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/)
  t.equal(await verifyPassword('correct horse battery staple', stored), true)
  t.equal(await verifyPassword('correct horse battery stapl', stored), false)
  t.equal(await verifyPassword('', stored), false)
})

t.test('passwords - the same password hashes differently each time (salted)', async (t) => {
  const a = await hashPassword('same password')
  const b = await hashPassword('same password')
  t.not(a, b)
  t.equal(await verifyPassword('same password', a), true)
  t.equal(await verifyPassword('same password', b), true)
})

t.test('passwords - unicode passwords are normalised, so composed and decomposed forms match', async (t) => {
  const stored = await hashPassword('caf\u00e9-au-lait')
  t.equal(await verifyPassword('cafe\u0301-au-lait', stored), true)
})

t.test('passwords - a malformed or tampered stored hash never verifies and never throws', async (t) => {
  const good = await hashPassword('pw-123456789012')
  const parts = good.split('$')
  for (const bad of ['', 'plain', 'scrypt$15$8$1$salt', `bcrypt$${parts.slice(1).join('$')}`, `scrypt$40$8$1$${parts[4]}$${parts[5]}`, `scrypt$15$8$1$${parts[4]}$AAAA`]) {
    t.equal(await verifyPassword('pw-123456789012', bad), false, JSON.stringify(bad))
  }
})

t.test('passwords - hashes of an older cost ask to be rehashed; the cost is settable within 15-20', async (t) => {
  const stored = await hashPassword('x'.repeat(12))
  t.equal(needsRehash(stored), false)
  t.equal(needsRehash(stored.replace(/^scrypt\$17\$/, 'scrypt$15$')), true, 'the old default, 2^15, is rehashed')
  t.equal(needsRehash('garbage'), true)
  t.teardown(() => setPasswordCost(defaultPasswordCost))
  setPasswordCost(15)
  const cheap = await hashPassword('x'.repeat(12))
  t.match(cheap, /^scrypt\$15\$/)
  t.equal(await verifyPassword('x'.repeat(12), cheap), true)
  t.equal(await verifyPassword('x'.repeat(12), stored), true, 'a hash keeps its own cost: the 2^17 one still verifies')
  t.equal(needsRehash(stored), false, 'a costlier hash than the setting is kept')
  t.throws(() => setPasswordCost(14), RangeError)
  t.throws(() => setPasswordCost(21), RangeError)
})

t.test('passwords - the decoy hash is a valid hash that no likely password matches', async (t) => {
  const decoy = await decoyHash()
  t.equal(decoy, await decoyHash(), 'made once')
  t.equal(await verifyPassword('', decoy), false)
  t.equal(await verifyPassword('password', decoy), false)
})
