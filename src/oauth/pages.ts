/**
 * The authorization server's pages: the sign-in and consent page of
 * GET /v1/oauth/authorize, its error page, and the agent claim page. Each is
 * rendered here with every value escaped; what the page's script needs is
 * a JSON data block (`<` escaped, so no value can close the element). The
 * scripts are static files of public/, and the content security policy
 * lets only them run, connect only to this origin, and never be framed
 * (no clickjacking of the Allow button).
 */
import { holdsBridgeScope } from '../../protocol/scopes.js'
import type { ConsentRequest } from './authorization.js'

export const pageSecurity = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

/** What each scope lets an application do, in the words the consent page uses. */
export const scopeWords: Readonly<Record<string, string>> = {
  'printers:read': 'See your printers, their state and temperatures',
  'printers:write': 'Change printers: settings, maintenance, enable or disable',
  'jobs:read': 'See the work printers are doing',
  'jobs:write': 'Report and change the work printers are doing',
  'telemetry:read': "Read printers' telemetry history",
  'models:read': 'See your models',
  'models:write': 'Create, change and delete models',
  'files:read': 'Download and read model files',
  'files:write': 'Upload, change and delete files',
  'print-jobs:read': 'See print jobs and the queue',
  'print-jobs:write': 'Create, cancel and reorder print jobs',
  'inventory:read': 'See materials and spool inventory',
  'inventory:write': 'Change materials and spool inventory',
  'makes:read': 'See makes, SKUs and batches',
  'makes:write': 'Create and change makes and SKUs, order batches',
  'fleet:read': 'See hosts, bridges and status displays',
  'fleet:write': 'Change hosts, bridges and status displays',
  'host:pair': 'Act as the bridge of one host of the farm',
  'print:launch': "Receive and start the prints sent to that host's printers",
}

const escapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => escapes[c]!)
}

/** JSON for a `<script type="application/json">` block: nothing in it can end the element or start a comment. */
function dataBlock(id: string, value: unknown): string {
  const json = JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
  return `<script type="application/json" id="${id}">${json}</script>`
}

const style = `
  :root { color-scheme: dark; --bg: #0d0f13; --card: #171a21; --line: #2b303b; --text: #eef0f5; --muted: #9aa1b2; --accent: #3b82f6; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
  * { box-sizing: border-box; }
  [hidden] { display: none !important; }
  body { margin: 0; background: var(--bg); color: var(--text); display: flex; justify-content: center; padding: 6vh 1rem 2rem; line-height: 1.45; }
  main { width: 100%; max-width: 28rem; background: var(--card); border: 1px solid var(--line); border-radius: .8rem; padding: 1.5rem 1.6rem; }
  .brand { color: var(--muted); font-size: .85rem; letter-spacing: .04em; margin: 0 0 .8rem; }
  h1 { font-size: 1.3rem; margin: 0 0 .4rem; overflow-wrap: anywhere; }
  h2 { font-size: .95rem; margin: 1.2rem 0 .4rem; color: var(--muted); font-weight: 600; }
  ul { margin: 0; padding-left: 1.2rem; } li { margin: .15rem 0; }
  .muted { color: var(--muted); font-size: .9rem; overflow-wrap: anywhere; }
  label { display: block; margin: .8rem 0 0; font-size: .9rem; }
  input, select { display: block; width: 100%; margin-top: .3rem; padding: .55rem .65rem; border-radius: .45rem; border: 1px solid var(--line); background: #0f1217; color: var(--text); font: inherit; }
  input:focus, select:focus, button:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
  .buttons { display: flex; gap: .7rem; margin-top: 1.3rem; }
  button { flex: 1; padding: .65rem; border-radius: .45rem; border: 1px solid var(--line); font: inherit; font-weight: 600; cursor: pointer; background: #232833; color: var(--text); }
  button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
  button:disabled { opacity: .6; cursor: wait; }
  #error { color: #fca5a5; min-height: 1.2em; margin: .8rem 0 0; font-size: .9rem; }
  #note { color: #fde68a; margin: .8rem 0 0; font-size: .9rem; }
  code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .8em; color: var(--muted); white-space: nowrap; }
  label.scope { display: grid; grid-template-columns: auto 1fr; gap: .55rem; align-items: baseline; margin: .35rem 0; }
  label.scope input { width: auto; margin: 0; }
  a { color: #93c5fd; }
`

function page(title: string, body: string, script?: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="/logo.svg" type="image/svg+xml">
<style>${style}</style>
</head>
<body>
<main>
<p class="brand">printfarm</p>
${body}
</main>
${script === undefined ? '' : `<script src="${script}"></script>`}
</body>
</html>
`
}

/** The sign-in and consent page: who asks, for what, where it goes back to; sign in, Allow or Deny. */
export function consentPage(request: ConsentRequest, resourceName: string): string {
  const client = request.client
  const scopes = request.scopes.map((s) => `<li>${escapeHtml(scopeWords[s] ?? s)} <code>${escapeHtml(s)}</code></li>`).join('')
  // A client that registered itself chose its own name and site: the page says so rather than vouching for them.
  const origin = client.organization_id === null ? '<p class="muted">Registered by the application itself: its name and site are its own words, not checked.</p>' : ''
  const site = client.client_uri === null ? '' : `<p class="muted">${escapeHtml(client.client_uri)}</p>`
  const bridge = holdsBridgeScope(request.scopes)
    ? '<p class="muted">Bridge access is allowed only by an admin of the organization; the application then acts only on the printers of the first host it speaks for. A member who allows gets the rest without it.</p>'
    : ''
  let returnTo = request.redirect_uri
  try {
    const url = new URL(request.redirect_uri)
    returnTo = url.protocol === 'http:' || url.protocol === 'https:' ? url.host : `${url.protocol}//`
  } catch {
    // Registered URIs always parse; the raw value is shown if one ever does not.
  }
  return page(
    `Sign in to allow ${client.name}`,
    `<h1>${escapeHtml(client.name)} wants to use your print farm</h1>
${site}${origin}
<h2>It asks to</h2>
<ul>${scopes}</ul>
${bridge}<p class="muted">For ${escapeHtml(resourceName)}. Afterwards you go back to <strong>${escapeHtml(returnTo)}</strong>.</p>
<form id="consent" autocomplete="on">
<label>Email <input name="email" type="email" autocomplete="username" required maxlength="320"></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required maxlength="1024"></label>
<label id="organization-field" hidden>Organization <select name="organization"></select></label>
<p id="note" role="status" hidden></p>
<p id="error" role="alert"></p>
<div class="buttons"><button type="button" id="deny">Deny</button><button type="submit" class="primary" id="allow">Allow</button></div>
</form>
${dataBlock('consent-request', request)}`,
    '/oauth/consent.js',
  )
}

/** An authorization request that cannot go back to its application (unknown client or redirect URI…). */
export function errorPage(error: string, description: string): string {
  return page(
    'Cannot sign in',
    `<h1>This sign-in cannot continue</h1>
<p>${escapeHtml(description)}</p>
<p class="muted">Error: ${escapeHtml(error)}. Nothing was sent back to the application; go back to it and start again.</p>`,
  )
}

/** The page a person opens to confirm an AI agent's identity claim. */
export function claimPage(scopes: readonly string[]): string {
  const boxes = scopes
    .map((s) => `<label class="scope"><input type="checkbox" name="scope" value="${escapeHtml(s)}"${s.endsWith(':read') ? ' checked' : ''}><span>${escapeHtml(scopeWords[s] ?? s)} <code>${escapeHtml(s)}</code></span></label>`)
    .join('\n')
  return page(
    'Confirm an AI agent',
    `<h1 id="heading">An AI agent asks to use your print farm</h1>
<p id="summary" class="muted">Reading the claim…</p>
<form id="claim" hidden>
<p class="muted">If you did not start an agent that asked for this, close this page: nothing happens, and the claim expires by itself.</p>
<label>Email <input name="email" type="email" autocomplete="username" required maxlength="320"></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required maxlength="1024"></label>
<label id="organization-field" hidden>Organization <select name="organization"></select></label>
<h2>Let it</h2>
<div id="scopes">
${boxes}
</div>
<p id="note" role="status" hidden></p>
<p id="error" role="alert"></p>
<div class="buttons"><button type="submit" class="primary" id="confirm">Confirm</button></div>
</form>`,
    '/agent/claim.js',
  )
}
