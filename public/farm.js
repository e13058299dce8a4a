// The live farm page (issue 5): sign in, open /v1/live, show every printer as a tile that updates live,
// and beside them the queue: the waiting jobs in order, each with why it waits.
// No framework: the page is small and must stay fast on a phone and on a wall screen of a thousand tiles,
// so a frame re-renders only its printers' tiles, and sorting and counting wait for the next animation frame.
'use strict'
;(() => {
  const $ = (id) => document.getElementById(id)
  const labels = { FILAMENT_RUNOUT: 'Filament runout', ERROR: 'Error', COMPLETE: 'Complete', OFFLINE: 'Offline', PAUSED: 'Paused', RUNNING: 'Printing', WAITING: 'Ready', IDLE: 'Idle', UNKNOWN: 'Unknown' }
  // The printer's own words that say what the label already says (protocol/printer-reports/status-words.ts):
  // these are not repeated under it; any other word (PREPARE, Offline after error, FAILED…) is.
  const sameMeaning = {
    FILAMENT_RUNOUT: ['runout', 'filament runout'], ERROR: ['error'], COMPLETE: ['finished', 'finish', 'complete', 'completed', 'done'],
    OFFLINE: ['offline', 'disconnected'], PAUSED: ['paused', 'pause'], RUNNING: ['printing', 'running', 'building'],
    WAITING: ['ready', 'idle', 'operational', 'standby'], IDLE: ['idle', 'standby', 'operational'], UNKNOWN: ['unknown'],
  }
  // Display status priority (docs/printers-and-events.md): what needs a person first.
  const order = ['FILAMENT_RUNOUT', 'ERROR', 'COMPLETE', 'OFFLINE', 'PAUSED', 'RUNNING', 'WAITING', 'IDLE', 'UNKNOWN']
  const store = window.sessionStorage
  let tokens = JSON.parse(store.getItem('printfarm.tokens') || 'null')
  let orgId = store.getItem('printfarm.org')
  let filter = store.getItem('printfarm.filter') || 'ALL'
  let sort = store.getItem('printfarm.sort') || 'name'
  let socket = null
  let stream = null
  let lastSeq = null
  let retryMs = 500
  const printers = new Map()
  const tiles = new Map()
  // The head of the queue as the last `queue` frame had it; null until a snapshot (or when it is refused).
  let queue = null

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

  function closeSocket() {
    if (socket) { socket.onclose = null; socket.close() }
    socket = null
  }

  // Forget every tile and the resume point (another organization, another user).
  function reset() {
    printers.clear()
    tiles.clear()
    $('grid').replaceChildren()
    stream = null
    lastSeq = null
    summaryKey = ''
    queue = null
    renderQueue()
    schedule()
  }

  function signOut() {
    tokens = null
    store.removeItem('printfarm.tokens')
    closeSocket()
    reset()
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
    select.onchange = () => { orgId = select.value; store.setItem('printfarm.org', orgId); reset(); connect() }
    $('login').hidden = true
    $('farm').hidden = false
    connect()
  }

  function setConn(text, cls) {
    const el = $('conn')
    el.textContent = text
    el.className = cls
    // What is on screen may be out of date while the feed is down: say so from across the room.
    document.body.classList.toggle('stale', cls === 'down')
  }

  function connect() {
    closeSocket()
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
      // Resume where we were (docs/live-feed.md); the server answers a fresh snapshot if it cannot.
      if (stream !== null && lastSeq !== null) { frame.since = { printers: lastSeq }; frame.stream = stream }
      ws.send(JSON.stringify(frame))
      // A frame of its own, so a server that refuses it still serves the printers. No resume point: every
      // queue frame holds the whole head of the queue, so a fresh snapshot costs what a replay would.
      ws.send(JSON.stringify({ op: 'subscribe', topics: ['queue'] }))
    }
    ws.onmessage = (m) => onFrame(JSON.parse(m.data))
    ws.onclose = async (e) => {
      if (socket !== ws) return
      setConn('reconnecting', 'down')
      // 4001: the access token expired; a failed refresh signs out, a network error just retries.
      if (e.code === 4001) await refresh().catch(() => undefined)
      setTimeout(connect, retryMs)
      retryMs = Math.min(retryMs * 2, 10000)
    }
  }

  // Every frame carries each printer's whole state (the read model of GET /v1/printers/{id}): nothing is merged.
  function onFrame(f) {
    if (f.topic === 'queue') return onQueueFrame(f)
    if (f.topic !== 'printers') return
    if (f.op === 'snapshot') {
      stream = f.data.stream
      lastSeq = f.seq
      const ids = new Set(f.data.printers.map((p) => p.id))
      for (const id of [...tiles.keys()]) if (!ids.has(id)) remove(id)
      for (const p of f.data.printers) render(p)
    } else if (f.op === 'event') {
      lastSeq = f.seq
      const p = f.data.printer
      if (p && p.removed) remove(p.id)
      else if (p) render(p)
      for (const q of f.data.printers || []) {
        if (q.removed) remove(q.id)
        else render(q)
      }
    }
  }

  function remove(id) {
    const t = tiles.get(id)
    if (t) t.root.remove()
    tiles.delete(id)
    printers.delete(id)
    schedule()
  }

  function tileFor(id) {
    let t = tiles.get(id)
    if (t) return t
    const root = document.createElement('article')
    root.className = 'tile'
    root.dataset.printerId = id
    root.tabIndex = 0
    const el = (cls, parent = root, tag = 'div') => { const e = document.createElement(tag); e.className = cls; parent.append(e); return e }
    const name = el('name')
    const head = el('head')
    t = { root, name, status: el('status', head, 'span'), word: el('word', head, 'span'), job: el('job'), bar: el('bar'), progress: el('progress') }
    t.fill = el('', t.bar)
    t.pct = el('pct', t.progress, 'span')
    t.layer = el('layer', t.progress, 'span')
    t.timeLeft = el('time-left', t.progress, 'span')
    Object.assign(t, { temps: el('temps'), filaments: el('filaments'), flag: el('flag'), error: el('error'), meta: el('meta'), key: '', swatches: '' })
    // The full error text on tap, Enter or Space (a wall screen has no hover).
    const toggle = () => root.classList.toggle('expanded')
    root.addEventListener('click', toggle)
    root.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle() } })
    tiles.set(id, t)
    $('grid').append(root)
    return t
  }

  // `215/220°C`; a heater that is off (target 0 or unknown) shows only what it reads.
  const temp = (h) => (h && h.actual !== null ? `${Math.round(h.actual)}${h.target ? `/${Math.round(h.target)}` : ''}°C` : null)
  function duration(seconds) {
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60)
    return h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m` : `${Math.round(seconds)}s`
  }
  const active = (p) => p.job !== null && p.job.ended_at === null
  const left = (p) => (active(p) && p.job.remaining_seconds !== null ? p.job.remaining_seconds : Infinity)
  const typeNames = { bambu: 'Bambu', prusa_connect: 'Prusa', octoprint: 'OctoPrint', klipper: 'Klipper', snapmaker: 'Snapmaker', flashforge: 'FlashForge' }
  const text = (el, value, title) => {
    if (el.textContent !== value) el.textContent = value
    if (title !== undefined && el.title !== title) el.title = title
  }

  function render(p) {
    printers.set(p.id, p)
    const t = tileFor(p.id)
    const label = labels[p.status] || p.status
    t.root.className = `tile s-${p.status}${t.root.classList.contains('expanded') ? ' expanded' : ''}`
    t.root.dataset.status = p.status
    t.root.hidden = filter !== 'ALL' && p.status !== filter
    text(t.name, p.name || p.id.slice(0, 8), p.name || p.id)
    text(t.status, label)
    const word = p.raw_status ? p.raw_status.trim() : ''
    text(t.word, word && !(sameMeaning[p.status] || []).includes(word.toLowerCase()) ? word : '', word ? `The printer says: ${word}` : '')
    const job = p.job
    const running = active(p)
    const jobName = job ? job.name || `Job ${job.id}` : ''
    text(t.job, job ? (running ? jobName : `${jobName} · ${job.state}`) : '', jobName)
    t.bar.hidden = !running
    t.fill.style.width = `${running && job.progress !== null ? job.progress : 0}%`
    text(t.pct, running && job.progress !== null ? `${Math.round(job.progress)}%` : '')
    text(t.layer, running && job.layer !== null ? `layer ${job.layer}${job.total_layers !== null ? `/${job.total_layers}` : ''}` : '')
    text(t.timeLeft, running && job.remaining_seconds !== null ? `${duration(job.remaining_seconds)} left` : '')
    t.progress.hidden = !t.pct.textContent && !t.layer.textContent && !t.timeLeft.textContent
    // Non-breaking inside a reading so a narrow tile wraps between readings, never inside one.
    const temps = [['Nozzle', temp(p.temperatures.nozzle)], ['Bed', temp(p.temperatures.bed)], ['Chamber', temp(p.temperatures.chamber)]].filter(([, v]) => v !== null)
    text(t.temps, temps.map(([k, v]) => `${k}\u00a0${v}`).join(' · '))
    const swatches = JSON.stringify(p.filaments)
    if (swatches !== t.swatches) {
      t.swatches = swatches
      t.filaments.replaceChildren(...p.filaments.map((f) => {
        const sw = document.createElement('span')
        sw.className = 'swatch'
        sw.dataset.slot = String(f.slot)
        if (f.color_hex) sw.style.background = f.color_hex
        else sw.classList.add('unknown')
        sw.title = `Slot ${f.slot + 1}: ${f.type || 'unknown material'}${f.remaining_percent !== null ? ` · ${Math.round(f.remaining_percent)}% left` : ''}`
        return sw
      }))
    }
    // The ready gate: a finished plate waits for an operator's look before the next job (PATCH /v1/printers/{id}/ready).
    text(t.flag, p.maintenance ? 'Maintenance' : p.ready_gate === 'awaiting_verification' ? 'Verify plate' : p.ready_gate === 'held' ? 'Held' : '')
    const error = p.error ? `${p.error.code}${p.error.message ? `: ${p.error.message}` : ''}` : ''
    text(t.error, error, error)
    text(t.meta, [p.host_id || 'no host', typeNames[p.printer_type] || p.printer_type, p.model].filter(Boolean).join(' · '))
    // Only what the order or the counts depend on schedules a re-sort (time left only when sorted by it).
    const key = `${p.name}\u0000${p.status}\u0000${sort === 'time' ? left(p) : ''}`
    if (key !== t.key) { t.key = key; schedule() }
  }

  const sorters = {
    name: (a, b) => (a.name || '').localeCompare(b.name || '', undefined, { numeric: true }) || a.id.localeCompare(b.id),
    status: (a, b) => order.indexOf(a.status) - order.indexOf(b.status) || sorters.name(a, b),
    time: (a, b) => left(a) - left(b) || sorters.name(a, b),
  }
  let scheduled = false
  // Sorting and counting a thousand printers per frame would be wasted work: at most once per animation frame.
  function schedule() {
    if (scheduled) return
    scheduled = true
    requestAnimationFrame(() => {
      scheduled = false
      const grid = $('grid')
      const sorted = [...printers.values()].sort(sorters[sort] || sorters.name)
      sorted.forEach((p, i) => { const root = tiles.get(p.id).root; if (grid.children[i] !== root) grid.insertBefore(root, grid.children[i] || null) })
      summarize()
      renderQueue() // a printer's name in a queue line follows a rename
    })
  }

  function applyFilter() {
    for (const [id, t] of tiles) t.root.hidden = filter !== 'ALL' && printers.get(id).status !== filter
    $('filter').value = filter
    summaryKey = ''
    schedule()
  }
  function setFilter(value) { filter = value; store.setItem('printfarm.filter', filter); applyFilter() }
  $('filter').value = filter
  $('sort').value = sort
  $('filter').addEventListener('change', () => setFilter($('filter').value))
  $('sort').addEventListener('change', () => { sort = $('sort').value; store.setItem('printfarm.sort', sort); schedule() })
  // A count in the summary is a shortcut to its filter (and back to all).
  $('summary').addEventListener('click', (e) => { const s = e.target.dataset.status; if (s) setFilter(filter === s ? 'ALL' : s) })

  // "2 printers in error", not "2 error": the count reads as a sentence about printers.
  const counted = { FILAMENT_RUNOUT: 'out of filament', ERROR: 'in error' }
  let summaryKey = ''
  function summarize() {
    const counts = {}
    for (const p of printers.values()) counts[p.status] = (counts[p.status] || 0) + 1
    const shown = order.filter((s) => counts[s])
    const key = `${filter}|${printers.size}|${shown.map((s) => `${s}:${counts[s]}`).join()}`
    $('empty').hidden = (filter === 'ALL' ? printers.size : counts[filter] || 0) > 0
    if (key === summaryKey) return
    summaryKey = key
    const total = Object.assign(document.createElement('span'), { className: 'total', textContent: `${printers.size} printer${printers.size === 1 ? '' : 's'}` })
    $('summary').replaceChildren(total, ...shown.map((s) => {
      const b = Object.assign(document.createElement('button'), { type: 'button', className: `s-${s}${filter === s ? ' on' : ''}`, textContent: `${counts[s]} ${counted[s] || labels[s].toLowerCase()}` })
      b.dataset.status = s
      b.title = filter === s ? 'Show all printers' : `Show only: ${labels[s]}`
      return b
    }))
  }

  // The queue topic: a snapshot and each event carry the whole head of the queue (its first jobs, in order,
  // each with a one-sentence summary of why it waits); the panel is drawn again from it, nothing is merged.
  // A refusal (an older server, a key without print-jobs:read) hides the panel.
  function onQueueFrame(f) {
    if (f.op === 'error') queue = null
    else if ((f.op === 'snapshot' || f.op === 'event') && f.data && f.data.queue) queue = f.data.queue
    else return
    renderQueue()
  }

  const queueLabels = { queued: 'Queued', dispatching: 'Dispatching' }
  let queueKey = ''
  function renderQueue() {
    const panel = $('queue')
    panel.hidden = queue === null
    panel.parentElement.classList.toggle('with-queue', queue !== null)
    if (queue === null) { queueKey = ''; return }
    // What the lines show, printer names included: a frame or a rename that changes none of it touches nothing.
    const rows = queue.jobs.map((j) => {
      const p = j.printer_id ? printers.get(j.printer_id) : undefined
      return [j.id, j.index, j.name || `Job ${j.id}`, j.priority, j.status, j.summary, j.printer_id ? (p && p.name) || j.printer_id.slice(0, 8) : '']
    })
    const more = Math.max(0, queue.total - rows.length)
    const key = JSON.stringify([more, rows])
    if (key === queueKey) return
    queueKey = key
    text($('queue-count'), queue.total > 0 ? `${queue.total} waiting` : '')
    text($('queue-more'), more > 0 ? `${more} more` : '')
    $('queue-empty').hidden = queue.total > 0
    $('queue-list').replaceChildren(...rows.map(queueLine))
  }

  function queueLine([id, index, name, priority, status, summary, printer]) {
    const li = document.createElement('li')
    li.className = `q-${status}${status === 'queued' && printer ? ' q-chosen' : ''}`
    li.dataset.jobId = String(id)
    li.dataset.status = status
    const part = (cls, value) => { const e = document.createElement('span'); e.className = cls; e.textContent = value; li.append(e); return e }
    part('index', String(index))
    part('name', name).title = name
    if (priority !== 0) part('priority', `priority ${priority}`)
    part('status', queueLabels[status] || status)
    // "3 busy, 1 offline": a narrow panel wraps between counts, never inside one.
    const why = part('why', summary.replace(/(\d) /g, '$1\u00a0'))
    if (printer) why.append(' · ', Object.assign(document.createElement('span'), { className: 'printer', textContent: printer }))
    return li
  }

  if (tokens) start().catch(signOut)
  else $('login').hidden = false
})()
