// The agent claim page: reads the claim (its token is in the URL fragment,
// never sent to a server by the browser), signs in, and confirms the agent
// for one organization and the scopes ticked.
'use strict'
;(() => {
  const claimToken = new URLSearchParams(window.location.hash.slice(1)).get('claim_token') || ''
  const summary = document.getElementById('summary')
  const form = document.getElementById('claim')
  const errorLine = document.getElementById('error')
  const note = document.getElementById('note')
  const heading = document.getElementById('heading')
  const orgField = document.getElementById('organization-field')
  const orgSelect = orgField.querySelector('select')
  const button = document.getElementById('confirm')
  let session
  let hint = null

  const call = async (path, init) => {
    const response = await fetch(path, { ...init, headers: { 'content-type': 'application/json', ...(init.headers || {}) } })
    const body = await response.json().catch(() => ({}))
    if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`)
    return body
  }
  const fail = (text) => {
    errorLine.textContent = text
    button.disabled = false
  }

  const load = async () => {
    if (claimToken === '') return (summary.textContent = 'This link has no claim in it: open the claim_url the agent gave you, whole.')
    try {
      const claim = await call(`/v1/agent/identity/claim/inspect?claim_token=${encodeURIComponent(claimToken)}`, { method: 'GET' })
      hint = claim.login_hint
      const who = claim.login_hint ? ` (for ${claim.login_hint})` : ''
      const expires = new Date(claim.expires_at).toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' })
      if (claim.status === 'confirmed') return (summary.textContent = `This ${claim.type} agent${who} is already confirmed.`)
      if (claim.status === 'expired') return (summary.textContent = `This claim by a ${claim.type} agent${who} expired; ask the agent to renew it.`)
      summary.textContent = `A ${claim.type} agent${who} asks to act for you. The claim expires ${expires}.`
      form.hidden = false
    } catch (error) {
      summary.textContent = error.message
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    button.disabled = true
    errorLine.textContent = ''
    try {
      if (session === undefined) {
        const tokens = await call('/v1/auth/login', { method: 'POST', body: JSON.stringify({ email: form.email.value, password: form.password.value }) })
        const me = await call('/v1/me', { method: 'GET', headers: { authorization: `Bearer ${tokens.access_token}` } })
        session = { token: tokens.access_token, organizations: me.organizations }
        if (me.organizations.length === 0) return fail('You belong to no organization.')
        const notes = []
        if (hint && hint.toLowerCase() !== me.user.email.toLowerCase()) notes.push(`The agent said it acts for ${hint}; you are signed in as ${me.user.email}.`)
        if (me.organizations.length > 1) {
          orgSelect.append(new Option('Choose an organization', ''))
          for (const o of me.organizations) orgSelect.append(new Option(o.name, o.id))
          orgField.hidden = false
          notes.push('You belong to several organizations: choose the one to let it act in, then Confirm.')
        } else {
          orgSelect.append(new Option(me.organizations[0].name, me.organizations[0].id))
        }
        if (notes.length > 0) {
          note.textContent = notes.join(' ')
          note.hidden = false
          button.disabled = false
          return
        }
      }
      const scopes = [...form.querySelectorAll('input[name=scope]:checked')].map((box) => box.value)
      if (scopes.length === 0) return fail('Tick at least one thing the agent may do.')
      if (orgSelect.value === '') return fail('Choose an organization first.')
      await call('/v1/agent/identity/claim/confirm', {
        method: 'POST',
        headers: { authorization: `Bearer ${session.token}` },
        body: JSON.stringify({ claim_token: claimToken, organization_id: orgSelect.value, scopes }),
      })
      form.hidden = true
      const organization = session.organizations.find((o) => o.id === orgSelect.value)
      heading.textContent = 'Agent confirmed'
      summary.textContent = `It may now act for you in ${organization ? organization.name : 'your organization'} (${scopes.join(', ')}). It picks up its access by itself; you can close this page.`
    } catch (error) {
      fail(error.message)
    }
  })

  void load()
})()
