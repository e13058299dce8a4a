// The live farm page (issue 5): sign in, open /v1/live, show every printer as a tile that updates live.
// No framework: the page is small and must stay fast on a phone and on a wall screen.
'use strict'
;(() => {
  const $ = (id) => document.getElementById(id)
  const labels = { FILAMENT_RUNOUT: 'Filament runout', ERROR: 'Error', COMPLETE: 'Complete', OFFLINE: 'Offline', PAUSED: 'Paused', RUNNING: 'Printing', WAITING: 'Ready', IDLE: 'Idle', UNKNOWN: 'Unknown' }
  const store = window.sessionStorage
  let tokens = JSON.parse(store.getItem('printfarm.tokens') || 'null')
  let orgId = store.getItem('printfarm.org')
  let socket = null
  let stream = null
  let lastSeq = null
  let retryMs = 500
  const printers = new Map()
  const tiles = new Map()

  async function api(path, options = {}) {
    const headers = { 'content-type': 'application/json', ...(options.headers || {}) }
    if (tokens) headers.authorization = `Bearer ${tokens.access_token}`
    const res = await fetch(path, { ...options, headers })
    const body = await res.json().catch(() => ({}))
    if (!res.ok) throw Object.assign(new Error(body.message || res.statusText), { status: res.status, code: body.error })
    return body
  }

  async function refresh() {
    if (!tokens) throw new Error('signed out')
    const res = await fetch('/v1/auth/refresh', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refresh_token: tokens.refresh_token }) })
    if (!res.ok) return signOut()
    tokens = await res.json()
    store.setItem('printfarm.tokens', JSON.stringify(tokens))
  }

  function signOut() {
    tokens = null
    store.removeItem('printfarm.tokens')
    if (socket) socket.close()
    $('farm').hidden = true
    $('login').hidden = false
  }

  $('login').addEventListener('submit', async (e) => {
    e.preventDefault()
    $('login-error').textContent = ''
    try {
      tokens = null
      tokens = await api('/v1/auth/login', { method: 'POST', body: JSON.stringify({ email: $('email').value, password: $('password').value }) })
      store.setItem('printfarm.tokens', JSON.stringify(tokens))
      await start()
    } catch (error) {
      $('login-error').textContent = error.message
    }
  })
  $('logout').addEventListener('click', signOut)

  async function start() {
    let me
    try {
      me = await api('/v1/me')
    } catch (error) {
      if (error.status === 401) {
        try { await refresh(); me = await api('/v1/me') } catch { return signOut() }
      } else throw error
    }
    const orgs = me.organizations || []
    if (!orgs.some((o) => o.id === orgId)) orgId = orgs[0] ? orgs[0].id : null
    const select = $('org')
    select.replaceChildren(...orgs.map((o) => Object.assign(document.createElement('option'), { value: o.id, textContent: o.name, selected: o.id === orgId })))
    select.hidden = orgs.length < 2
    select.onchange = () => { orgId = select.value; store.setItem('printfarm.org', orgId); printers.clear(); tiles.clear(); $('grid').replaceChildren(); stream = null; lastSeq = null; connect() }
    $('login').hidden = true
    $('farm').hidden = false
    connect()
  }

  function setConn(text, cls) {
    const el = $('conn')
    el.textContent = text
    el.className = cls
  }

  function connect() {
    if (socket) { socket.onclose = null; socket.close() }
    if (!tokens || !orgId) return
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:'
    const url = `${proto}//${location.host}/v1/live?access_token=${encodeURIComponent(tokens.access_token)}&organizationId=${encodeURIComponent(orgId)}`
    const ws = new WebSocket(url, 'printfarm.v1.json')
    socket = ws
    setConn('connecting', '')
    ws.onopen = () => {
      retryMs = 500
      setConn('live', 'live')
      const frame = { op: 'subscribe', topics: ['printers'] }
      if (stream !== null && lastSeq !== null) { frame.since = { printers: lastSeq }; frame.stream = stream }
      ws.send(JSON.stringify(frame))
    }
    ws.onmessage = (m) => onFrame(JSON.parse(m.data))
    ws.onclose = async (e) => {
      if (socket !== ws) return
      setConn('reconnecting', 'down')
      if (e.code === 4001) { try { await refresh() } catch { return } }
      setTimeout(connect, retryMs)
      retryMs = Math.min(retryMs * 2, 10000)
    }
  }

  function onFrame(f) {
    if (f.topic !== 'printers') return
    if (f.op === 'snapshot') {
      stream = f.data.stream
      lastSeq = f.seq
      const ids = new Set(f.data.printers.map((p) => p.id))
      for (const id of [...tiles.keys()]) if (!ids.has(id)) { tiles.get(id).root.remove(); tiles.delete(id); printers.delete(id) }
      for (const p of f.data.printers) upsert(p)
    } else if (f.op === 'event') {
      lastSeq = f.seq
      if (f.data.printer) upsert(f.data.printer)
      if (f.data.printers) for (const p of f.data.printers) upsert(p)
    }
    summarize()
  }

  function upsert(p) {
    const known = printers.get(p.id)
    const merged = known && p.name === undefined ? { ...p, name: known.name } : p
    printers.set(p.id, merged)
    render(merged)
  }

  function tileFor(id) {
    let t = tiles.get(id)
    if (t) return t
    const root = document.createElement('article')
    root.className = 'tile'
    root.dataset.printerId = id
    const el = (cls, tag = 'div') => { const e = document.createElement(tag); e.className = cls; root.append(e); return e }
    t = { root, name: el('name'), status: el('status'), job: el('job'), bar: el('bar'), error: el('error') }
    t.fill = document.createElement('div')
    t.bar.append(t.fill)
    tiles.set(id, t)
    $('grid').append(root)
    return t
  }

  function render(p) {
    const t = tileFor(p.id)
    t.root.className = `tile s-${p.status}`
    t.root.dataset.status = p.status
    t.name.textContent = p.name || p.id.slice(0, 8)
    t.status.textContent = labels[p.status] || p.status
    const job = p.job
    const active = job && job.endedAt === null
    t.job.textContent = job ? `${job.name || `Job ${job.jobId}`}${active && job.progress !== null ? ` · ${Math.round(job.progress)}%` : ''}` : ''
    t.bar.hidden = !active
    t.fill.style.width = `${active && job.progress !== null ? job.progress : 0}%`
    const error = p.errors && p.errors[p.errors.length - 1]
    t.error.textContent = error ? `${error.code}${error.message ? `: ${error.message}` : ''}` : ''
  }

  function summarize() {
    const counts = {}
    for (const p of printers.values()) counts[p.status] = (counts[p.status] || 0) + 1
    $('summary').textContent = `${printers.size} printers · ` + Object.entries(counts).map(([s, n]) => `${n} ${(labels[s] || s).toLowerCase()}`).join(' · ')
  }

  if (tokens) start().catch(signOut)
  else $('login').hidden = false
})()
