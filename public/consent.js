// The sign-in and consent page of GET /v1/oauth/authorize: signs in, asks the
// service for a single-use handoff bound to this request, and comes back to
// authorize with it; Deny comes back with decision=deny. Nothing is stored.
'use strict'
;(() => {
  const request = JSON.parse(document.getElementById('consent-request').textContent)
  const form = document.getElementById('consent')
  const errorLine = document.getElementById('error')
  const note = document.getElementById('note')
  const orgField = document.getElementById('organization-field')
  const orgSelect = orgField.querySelector('select')
  const buttons = form.querySelectorAll('button')
  let session

  const back = (extra) => {
    const url = new URL(window.location.href)
    for (const [key, value] of Object.entries(extra)) url.searchParams.set(key, value)
    window.location.assign(url.toString())
  }
  const busy = (on) => buttons.forEach((b) => (b.disabled = on))
  const fail = (text) => {
    errorLine.textContent = text
    busy(false)
  }
  const call = async (path, init) => {
    const response = await fetch(path, { ...init, headers: { 'content-type': 'application/json', ...(init.headers || {}) } })
    const body = await response.json().catch(() => ({}))
    if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`)
    return body
  }

  document.getElementById('deny').addEventListener('click', () => back({ decision: 'deny', consent: request.consent_token }))

  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    busy(true)
    errorLine.textContent = ''
    try {
      if (session === undefined) {
        const tokens = await call('/v1/auth/login', { method: 'POST', body: JSON.stringify({ email: form.email.value, password: form.password.value }) })
        const me = await call('/v1/me', { method: 'GET', headers: { authorization: `Bearer ${tokens.access_token}` } })
        session = { token: tokens.access_token, organizations: me.organizations }
        const wanted = request.organization_id
        const choices = wanted ? session.organizations.filter((o) => o.id === wanted) : session.organizations
        if (choices.length === 0) return fail('You are not a member of the organization this application is for.')
        if (choices.length > 1) {
          // No organization is preselected: allowing in the wrong one by a second click must not happen.
          orgSelect.append(new Option('Choose an organization', ''))
          for (const o of choices) orgSelect.append(new Option(o.name, o.id))
          orgField.hidden = false
          note.textContent = 'You belong to several organizations: choose the one to allow it in, then Allow.'
          note.hidden = false
          busy(false)
          orgSelect.focus()
          return
        }
        orgSelect.append(new Option(choices[0].name, choices[0].id))
        if (session.organizations.length > 1) {
          // The application named the organization: the person sees which one before it is allowed there.
          note.textContent = `It asks for ${choices[0].name}, one of your organizations. Allow again to allow it there.`
          note.hidden = false
          busy(false)
          return
        }
      }
      const organization = orgSelect.value
      if (organization === '') return fail('Choose an organization first.')
      const handoff = await call('/v1/oauth/session-handoff', {
        method: 'POST',
        headers: { authorization: `Bearer ${session.token}`, 'x-organization-id': organization },
        body: JSON.stringify({
          clientId: request.client.client_id,
          redirectUri: request.redirect_uri,
          scopes: request.scopes,
          resource: request.resource,
          ...(request.code_challenge ? { codeChallenge: request.code_challenge } : {}),
        }),
      })
      back({ handoff: handoff.handoff, organization_id: organization, consent: request.consent_token })
    } catch (error) {
      if (session === undefined) form.password.value = ''
      fail(error.message)
    }
  })
})()
