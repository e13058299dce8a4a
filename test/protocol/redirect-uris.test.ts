/** Which redirect URIs a client may register, and how a presented one matches (RFC 8252 loopback ports). */
import t from 'tap'
import { redirectUriMatches, redirectUriProblem } from '../../protocol/redirect-uris.js'

t.test('redirect URIs - https, loopback http and private-use schemes are accepted; the rest is refused with the reason', async (t) => {
  for (const uri of ['https://a.example/cb', 'https://a.example:8443/cb?x=1', 'http://127.0.0.1/cb', 'http://localhost:3000/cb', 'http://[::1]:9/cb', 'com.example.app:/oauth', 'com.example.app:/']) {
    t.equal(redirectUriProblem(uri), undefined, `${uri} is accepted`)
  }
  const refused: [string, RegExp][] = [
    ['', /1-2048/],
    [`https://a.example/${'x'.repeat(2040)}`, /1-2048/],
    ['/cb', /absolute/],
    ['http://a.example/cb', /loopback/],
    ['http://127.0.0.2.nip.io/cb', /loopback/],
    ['https://a.example/cb#frag', /fragment/],
    ['https://u:p@a.example/cb', /user name/],
    ['javascript:alert(1)', /scheme javascript:/],
    ['myapp:/cb', /private-use scheme with a dot/],
    ['data:text/html,hi', /scheme data:/],
  ]
  for (const [uri, reason] of refused) t.match(redirectUriProblem(uri), reason, `${JSON.stringify(uri.slice(0, 40))} is refused`)
})

t.test('redirect URIs - exact match, except that a loopback http URI matches any port (RFC 8252 7.3)', async (t) => {
  t.ok(redirectUriMatches('https://a.example/cb', 'https://a.example/cb'))
  t.notOk(redirectUriMatches('https://a.example/cb', 'https://a.example/cb/'), 'a trailing slash is another URI')
  t.notOk(redirectUriMatches('https://a.example/cb', 'https://a.example:444/cb'), 'an https port must match')
  t.ok(redirectUriMatches('http://127.0.0.1/cb', 'http://127.0.0.1:53712/cb'), 'loopback: any port')
  t.ok(redirectUriMatches('http://localhost:3000/cb', 'http://localhost:41000/cb'))
  t.notOk(redirectUriMatches('http://127.0.0.1/cb', 'http://127.0.0.1:53712/other'), 'loopback: the path must match')
  t.notOk(redirectUriMatches('http://127.0.0.1/cb', 'http://localhost:53712/cb'), 'loopback: the host must match')
  t.notOk(redirectUriMatches('http://127.0.0.1/cb?a=1', 'http://127.0.0.1:5/cb?a=2'), 'loopback: the query must match')
  t.notOk(redirectUriMatches('http://127.0.0.1/cb', 'not a uri'))
  t.notOk(redirectUriMatches('http://127.0.0.1:9/cb', 'http://u:p@127.0.0.1:9/cb'), 'loopback: no credentials ride along')
  t.notOk(redirectUriMatches('http://127.0.0.1:9/cb', 'http://127.0.0.1:9/cb#frag'), 'loopback: no fragment rides along')
})
