// rpd status page. Plain script, no dependencies: it polls the daemon's JSON
// API every second and renders what it answers. The HTML carries no data.
'use strict';

(function () {
  const POLL_MS = 1000;
  const HOLDERS_PAGE = 100; // holders an open card fetches, more on demand
  const SEARCH_LIMIT = 5000; // grants a search looks through
  const AUTO_EXPAND = 12; // sections with at most this many items start expanded
  const TOKEN_KEY = 'rpd-token';

  const $ = (id) => document.getElementById(id);
  const ui = {
    expanded: new Set(), // "kind:name" the operator opened
    collapsed: new Set(), // "kind:name" the operator closed
    autoExpand: {}, // kind -> its section is small enough to start open
    cards: new Map(), // "kind:name" -> {sig, el}: the cards last rendered
    filter: '',
    busyOnly: false,
    data: null,
    lastOK: 0,
    inflight: false, // a poll is under way
    again: false, // poll again as soon as it is done
    etags: new Map(), // path -> {etag, body}: conditional GETs answer 304
    limits: new Map(), // "kind:name" -> holders to fetch for its open card
    totals: new Map(), // "grantKind:name" -> holders in all (fetched cards)
    timer: 0,
  };

  // h builds an element: h('td', {class: 'num'}, 'text', child, ...). Text is
  // always set as text, never parsed as HTML: names and task IDs come from
  // clients.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'width') el.style.width = v; // CSSOM, allowed by the CSP
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  // ---- formatting ----
  function bytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
  }
  function span(sec) {
    sec = Math.max(0, Math.round(sec));
    if (sec < 60) return sec + 's';
    if (sec < 3600) return Math.floor(sec / 60) + 'm ' + (sec % 60) + 's';
    if (sec < 86400) return Math.floor(sec / 3600) + 'h ' + Math.floor((sec % 3600) / 60) + 'm';
    return Math.floor(sec / 86400) + 'd ' + Math.floor((sec % 86400) / 3600) + 'h';
  }
  function ago(t) {
    if (!t) return '—';
    const s = (Date.now() - Date.parse(t)) / 1000;
    if (Math.abs(s) < 1) return 'just now';
    return s < 0 ? 'in ' + span(-s) : span(s) + ' ago';
  }
  function until(t) {
    if (!t) return 'never';
    const s = (Date.parse(t) - Date.now()) / 1000;
    return s >= 0 ? 'in ' + span(s) : span(-s) + ' ago';
  }
  function pct(used, total) {
    if (!(total > 0)) return used > 0 ? '100%' : '0%';
    return Math.min(100, (100 * used) / total).toFixed(1) + '%';
  }
  function level(used, total) {
    if (!(total > 0)) return '';
    const f = used / total;
    return f >= 1 ? 'full' : f >= 0.8 ? 'high' : '';
  }

  // ---- API ----
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  class Unauthorized extends Error {}

  // get fetches path, conditionally: an unchanged answer is a bodiless 304
  // and the copy kept from last time is used.
  async function get(path) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const kept = ui.etags.get(path);
    if (kept) headers['If-None-Match'] = kept.etag;
    const r = await fetch(path, { headers, cache: 'no-store', credentials: 'omit' });
    if (r.status === 304 && kept) return kept.body;
    if (r.status === 401) throw new Unauthorized('unauthorized');
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { msg = (await r.json()).error.message; } catch (e) { /* keep the status line */ }
      throw new Error(path + ': ' + msg);
    }
    const body = await r.json();
    const etag = r.headers.get('ETag');
    if (etag) ui.etags.set(path, { etag, body });
    return body;
  }

  // leasePaths are the GET /v1/leases queries the page needs: the first
  // holders of every open card (summaries come with the status), or for a
  // search, every grant up to SEARCH_LIMIT.
  function leasePaths(status) {
    if (ui.filter) return ['v1/leases?limit=' + SEARCH_LIMIT];
    const paths = [];
    for (const [kind, list, param] of [['pool', status.pools, 'pool'], ['budget', status.budgets, 'budget'], ['ceiling', status.ceilings, 'ceiling']]) {
      ui.autoExpand[kind] = (list || []).length <= AUTO_EXPAND;
      for (const it of list || []) {
        const key = kind + ':' + it.name;
        if (isOpen(key)) paths.push('v1/leases?' + param + '=' + encodeURIComponent(it.name) + '&limit=' + (ui.limits.get(key) || HOLDERS_PAGE));
      }
    }
    return paths;
  }

  // poll fetches and renders now, then every POLL_MS; a call while one is
  // in flight (a card opened, a search typed) runs once it is done.
  async function poll() {
    if (ui.inflight) { ui.again = true; return; }
    ui.inflight = true;
    clearTimeout(ui.timer);
    let keepPolling = true;
    try { keepPolling = await pollOnce(); } finally { ui.inflight = false; }
    if (!keepPolling) return;
    if (ui.again) { ui.again = false; poll(); return; }
    ui.timer = setTimeout(poll, POLL_MS);
  }

  // pollOnce fetches and renders once; false: stop polling (a token is needed).
  async function pollOnce() {
    try {
      const got = await Promise.allSettled([get('v1/status'), get('v1/classes')]);
      for (const g of got) if (g.status === 'rejected' && g.reason instanceof Unauthorized) throw g.reason;
      if (got[0].status === 'rejected') throw got[0].reason;
      // During a failover (or on a standby cut off from its leader) the
      // figures are unknown: keep the last ones on screen, marked stale,
      // rather than blank the page or show zeros.
      const prev = ui.data;
      const status = got[0].value;
      const problems = [];
      if (status.source === 'unavailable') {
        problems.push(status.source_error || 'the leader does not answer');
        for (const k of ['pools', 'budgets', 'ceilings']) status[k] = prev ? prev.status[k] : [];
      }
      let classes = prev ? prev.classes : [];
      if (got[1].status === 'fulfilled') classes = got[1].value.classes || [];
      else problems.push(got[1].reason.message);
      let leases = status.source === 'unavailable' && prev ? prev.leases : [];
      const paths = status.source === 'unavailable' ? [] : leasePaths(status);
      const lists = await Promise.allSettled(paths.map(get));
      ui.totals = new Map();
      for (const l of lists) {
        if (l.status === 'rejected') {
          if (l.reason instanceof Unauthorized) throw l.reason;
          problems.push(l.reason.message);
          leases = prev ? prev.leases : [];
          break;
        }
        const ls = l.value.leases || [];
        leases.push(...ls);
        if (ls.length) ui.totals.set(ls[0].kind + ':' + ls[0].component, l.value.total);
      }
      ui.data = { status, leases, classes };
      showLogin(false);
      render();
      if (problems.length === 0) {
        ui.lastOK = Date.now();
        setConn('live', 'ok');
      } else {
        const since = ui.lastOK ? ' (figures from ' + span((Date.now() - ui.lastOK) / 1000) + ' ago)' : '';
        setConn('showing the last known figures' + since + ': ' + problems.join('; '), 'warn');
      }
    } catch (e) {
      if (e instanceof Unauthorized) {
        ui.data = null;
        clearContent();
        showLogin(true, token() ? 'That token was refused. Enter the daemon\'s current token.' : '');
        setConn('token needed', 'warn');
        return false; // no polling until a token is entered
      }
      const since = ui.lastOK ? ' (last update ' + span((Date.now() - ui.lastOK) / 1000) + ' ago)' : '';
      setConn('daemon unreachable: ' + e.message + since, 'bad');
    }
    return true;
  }

  function setConn(text, cls) {
    const c = $('conn');
    c.textContent = text;
    c.className = 'conn ' + cls;
  }

  function showLogin(on, msg) {
    $('login').hidden = !on;
    $('content').hidden = on;
    document.querySelector('footer').hidden = on; // its links need the token too
    const err = $('login-error');
    err.hidden = !msg;
    err.textContent = msg || '';
    if (on) $('token').focus();
  }

  function clearContent() {
    ui.cards = new Map();
    for (const id of ['stack', 'meta', 'reload', 'pools', 'budgets', 'ceilings', 'classes']) $(id).replaceChildren();
  }

  // ---- rendering ----
  function render() {
    const d = ui.data;
    if (!d) return;
    const st = d.status;
    const comp = st;
    $('stack').textContent = 'stack ' + (st.stack || 'default');
    document.title = 'rpd · ' + (st.stack || 'default');
    renderMeta(st);
    renderReload(st.last_reload || {});
    const byComponent = {};
    for (const g of d.leases) (byComponent[g.kind + ':' + g.component] ||= []).push(g);
    section('pools', comp.pools || [], (p) => poolCard(p, byComponent['pool:' + p.name] || []), 'pool',
      (p) => p.used > 0 || p.queued > 0, byComponent, 'pool');
    section('budgets', comp.budgets || [], (b) => budgetCard(b, byComponent['permit:' + b.name] || []), 'budget',
      (b) => b.permits > 0 || b.queued > 0, byComponent, 'permit');
    section('ceilings', comp.ceilings || [], (c) => ceilingCard(c, byComponent['claim:' + c.name] || []), 'ceiling',
      (c) => c.local_claims > 0 || c.queued > 0 || c.stale, byComponent, 'claim');
    section('classes', d.classes, classCard, 'class',
      (c) => c.instances.claimed > 0 || c.depth.visible > 0 || c.depth.in_flight > 0, {}, '');
  }

  function renderMeta(st) {
    const hash = (st.config_hash || '').slice(0, 12);
    const items = [
      h('span', {}, st.mode),
      h('span', {}, 'config v' + st.config_version),
      hash && h('span', { title: st.config_hash }, 'hash ', h('code', {}, hash)),
      h('span', {}, 'state v' + st.state_version),
      h('span', { title: st.started_at }, 'up ' + span((Date.now() - Date.parse(st.started_at)) / 1000)),
    ];
    // Replicas: this daemon's role, and the leader a standby forwards to.
    if (st.role) {
      const epoch = st.epoch || (st.leader && st.leader.epoch);
      items.push(h('span', { class: 'badge ' + (st.role === 'leader' ? 'ok' : 'warn') }, st.role + (epoch ? ' · epoch ' + epoch : '')));
    }
    if (st.version) {
      const v = st.version;
      items.push(h('span', { title: (v.revision || '') + ' ' + (v.go_version || '') }, 'rpd ' + v.version + (v.revision ? ' ' + v.revision.slice(0, 7) : '')));
    }
    const lv = st.leader_version;
    if (lv && st.version && (lv.version !== st.version.version || lv.revision !== st.version.revision)) {
      items.push(h('span', { class: 'badge warn', title: 'a rolling update is under way, or stuck' }, 'mixed versions: leader runs ' + lv.version + (lv.revision ? ' ' + lv.revision.slice(0, 7) : '')));
    }
    if (st.role === 'standby' && st.source === 'leader') {
      items.push(h('span', { class: 'badge ok', title: 'pools, budgets, ceilings and holders are the leader\'s, fetched through this standby' }, 'figures from the leader'));
    }
    if (st.leader && st.role !== 'leader') {
      const l = st.leader;
      items.push(h('span', { title: l.since ? 'leader since ' + l.since : '' }, 'leader ', h('code', {}, l.address || l.holder || '?')));
    }
    if (st.role && st.config_matches_leader === false) {
      items.push(h('span', { class: 'badge bad', title: 'this replica runs other configuration files than the leader' }, 'config differs from the leader'));
    }
    const lr = st.last_reload || {};
    if (lr.ok) items.push(h('span', { class: 'ok-text', title: lr.at }, 'reloaded ' + ago(lr.at)));
    $('meta').replaceChildren(...items.filter(Boolean));
  }

  // renderReload shows a rejected configuration in red, one line per
  // diagnostic, with its file:line picked out.
  function renderReload(lr) {
    const box = $('reload');
    if (lr.ok !== false) { box.replaceChildren(); box.className = 'reload'; return; }
    const lines = (lr.error || 'unknown error').split('\n').filter((l) => l.trim() !== '');
    box.className = 'reload failed';
    box.replaceChildren(
      h('h2', {}, 'Configuration rejected ' + ago(lr.at) + ' — version ' + lr.config_version + ' stays active'),
      h('ul', {}, lines.map((l) => {
        const m = /^(.+?):(\d+)(?:,(\d+))?: (.*)$/.exec(l);
        if (!m) return h('li', {}, l);
        return h('li', {}, h('code', { class: 'where' }, m[1] + ':' + m[2] + (m[3] ? ',' + m[3] : '')), ' ', m[4]);
      })));
  }

  function section(id, items, card, kind, busy, byComponent, grantKind) {
    const f = ui.filter;
    const shown = items.filter((it) => {
      if (ui.busyOnly && !busy(it)) return false;
      if (!f) return true;
      if (it.name.toLowerCase().includes(f)) return true;
      return (byComponent[grantKind + ':' + it.name] || []).some((g) =>
        (g.task_id + ' ' + g.worker_id + ' ' + g.id).toLowerCase().includes(f));
    });
    ui.autoExpand[kind] = items.length <= AUTO_EXPAND;
    $(id + '-count').textContent = shown.length === items.length ? String(items.length) : shown.length + ' of ' + items.length;
    $(id + '-group').hidden = items.length === 0;
    // A card is rebuilt only when what it shows changed: its data, whether
    // it is open, and (open cards show relative times) the second.
    const now = Math.floor(Date.now() / 1000);
    const next = new Map();
    const els = shown.map((it) => {
      const key = kind + ':' + it.name;
      const open = isOpen(key);
      const sig = JSON.stringify([it, byComponent[grantKind + ':' + it.name], open, open ? now : 0]);
      const prev = ui.cards.get(key);
      const el = prev && prev.sig === sig ? prev.el : card(it);
      next.set(key, { sig, el });
      return el;
    });
    for (const [key, v] of ui.cards) if (!key.startsWith(kind + ':')) next.set(key, v);
    ui.cards = next;
    const box = $(id);
    if (els.length !== box.children.length || els.some((el, i) => box.children[i] !== el)) box.replaceChildren(...els);
  }

  function isOpen(key) {
    if (ui.expanded.has(key)) return true;
    if (ui.collapsed.has(key)) return false;
    return ui.autoExpand[key.slice(0, key.indexOf(':'))] || ui.filter !== '';
  }

  // toggle opens or closes a card; an opened card fetches its holders.
  function toggle(key) {
    if (isOpen(key)) { ui.expanded.delete(key); ui.collapsed.add(key); render(); } else { ui.collapsed.delete(key); ui.expanded.add(key); render(); poll(); }
  }

  function card(key, title, badges, summary, body) {
    const open = isOpen(key);
    return h('article', { class: 'card' + (open ? ' open' : ''), 'data-key': key },
      h('button', { class: 'head', type: 'button', 'aria-expanded': String(open), onclick: () => toggle(key) },
        h('span', { class: 'caret', 'aria-hidden': 'true' }, open ? '▾' : '▸'),
        h('span', { class: 'name' }, title), badges, h('span', { class: 'summary' }, summary)),
      body.bars,
      open ? body.detail() : null);
  }

  function bar(label, used, total, text, extra) {
    return h('div', { class: 'bar-row' },
      h('span', { class: 'bar-label' }, label),
      h('div', { class: 'bar ' + level(used, total), role: 'meter', 'aria-label': label, 'aria-valuenow': used, 'aria-valuemin': 0, 'aria-valuemax': total },
        h('span', { class: 'fill', width: pct(used, total) }), extra),
      h('span', { class: 'bar-text' }, text));
  }

  function plural(n, noun) { return n + ' ' + noun + (n === 1 ? '' : 's'); }

  // priorityName names a weight by the priority blocks that declare it.
  function priorityName(w) {
    const prios = (ui.data && ui.data.status.priorities) || {};
    const names = Object.keys(prios).filter((n) => prios[n] === w).sort();
    return names.length ? names.join('/') + ' (' + w + ')' : String(w);
  }

  function queueText(q) {
    if (!q || q.length === 0) return null;
    return h('div', { class: 'queue' }, 'waiting: ', q.map((e) => {
      const ids = e.task_ids || [];
      const more = e.requests - ids.length;
      return h('span', { class: 'chip', title: ids.length ? 'first in line: ' + ids.join(', ') + (more > 0 ? ' and ' + more + ' more' : '') : '' },
        plural(e.requests, 'request') + ' at priority ' + priorityName(e.priority) + (e.slots ? ' (' + plural(e.slots, 'slot') + ')' : '') +
        (e.oldest_wait_seconds ? ', oldest ' + span(e.oldest_wait_seconds) : '') +
        (ids.length ? ': ' + ids.join(', ') + (more > 0 ? ' +' + more : '') : ''));
    }));
  }

  function retainedBadge(x) { return x.retained ? h('span', { class: 'badge warn' }, 'removed, in use') : null; }

  // table renders a card's holders; when the daemon has more than were
  // fetched (totals, keyed by grant kind), a button fetches more.
  function table(cols, rows, empty, cardKey, grantKey) {
    if (rows.length === 0) return h('p', { class: 'empty' }, empty);
    const total = (grantKey && ui.totals.get(grantKey)) || rows.length;
    const more = total > rows.length && !ui.filter
      ? h('p', { class: 'more' }, 'showing the first ' + rows.length + ' of ' + total + ' ',
        h('button', { type: 'button', onclick: () => { ui.limits.set(cardKey, rows.length + HOLDERS_PAGE); poll(); } }, 'show ' + HOLDERS_PAGE + ' more'))
      : null;
    return h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', { class: c.num ? 'num' : '' }, c.title)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, cols.map((c) => h('td', { class: c.num ? 'num' : '' }, c.cell(r))))))), more);
  }

  const timeCols = [
    { title: 'granted', cell: (g) => h('span', { title: g.granted_at || '' }, ago(g.granted_at)) },
    { title: 'heartbeat', cell: (g) => h('span', { title: g.heartbeat_at || '' }, ago(g.heartbeat_at)) },
    { title: 'expires', cell: (g) => h('span', { title: g.expires_at || '' }, until(g.expires_at)) },
  ];

  function poolCard(p, grants) {
    const used = p.used, total = p.total;
    return card('pool:' + p.name, p.name, [retainedBadge(p), level(used, total) === 'full' ? h('span', { class: 'badge bad' }, 'full') : null],
      used + '/' + total + ' used' + (p.queued ? ' · ' + p.queued + ' queued' : ''),
      {
        bars: h('div', { class: 'bars' }, bar('slots', used, total, used + ' / ' + total), queueText(p.queued_by_priority),
          p.description ? h('p', { class: 'desc' }, p.description) : null),
        detail: () => table([
          { title: 'task', cell: (g) => h('code', {}, g.task_id || '(none)') },
          { title: 'slots', num: true, cell: (g) => g.slots },
          { title: 'priority', num: true, cell: (g) => priorityName(g.priority) },
          ...timeCols,
          { title: 'lease', cell: (g) => h('code', { class: 'id' }, g.id) },
        ], grants, 'No holders.', 'pool:' + p.name, 'pool:' + p.name),
      });
  }

  function budgetCard(b, grants) {
    const sr = b.scan_ring_bytes, dc = b.delta_cache_bytes, sp = b.spill_slots;
    const srUsed = sr.total - sr.available, dcUsed = dc.total - dc.available;
    const spBar = sp.unlimited
      ? bar('spill slots', 0, 0, (isOpen('budget:' + b.name) ? grants.filter((g) => g.spill).length : '?') + ' used, unlimited')
      : bar('spill slots', sp.total - sp.available, sp.total, (sp.total - sp.available) + ' / ' + sp.total);
    return card('budget:' + b.name, b.name, [retainedBadge(b)],
      b.permits + ' permit' + (b.permits === 1 ? '' : 's') + (b.queued ? ' · ' + b.queued + ' queued' : ''),
      {
        bars: h('div', { class: 'bars' },
          bar('scan ring', srUsed, sr.total, bytes(srUsed) + ' / ' + bytes(sr.total)),
          bar('delta cache', dcUsed, dc.total, bytes(dcUsed) + ' / ' + bytes(dc.total)),
          spBar, queueText(b.queued_by_priority)),
        detail: () => table([
          { title: 'scan ring', num: true, cell: (g) => bytes(g.scan_ring_bytes) },
          { title: 'delta cache', num: true, cell: (g) => bytes(g.delta_cache_bytes) },
          { title: 'spill', cell: (g) => (g.spill ? 'yes' : 'no') },
          ...timeCols,
          { title: 'permit', cell: (g) => h('code', { class: 'id' }, g.id) },
        ], grants, 'No permits held.', 'budget:' + b.name, 'permit:' + b.name),
      });
  }

  function ceilingCard(c, grants) {
    const total = c.max;
    const provider = h('span', { class: 'fill provider', width: pct(c.provider_active, total) });
    const claims = h('span', { class: 'fill claims', width: pct(c.local_claims, total) });
    const b = h('div', { class: 'bar-row' },
      h('span', { class: 'bar-label' }, 'VMs'),
      h('div', { class: 'bar stacked ' + level(c.effective, total), role: 'meter', 'aria-label': 'VMs', 'aria-valuenow': c.effective, 'aria-valuemin': 0, 'aria-valuemax': total }, provider, claims),
      h('span', { class: 'bar-text' }, c.provider_active + ' provider + ' + c.local_claims + ' claimed / ' + total));
    const badges = [retainedBadge(c), c.stale ? h('span', { class: 'badge bad', title: 'no fresh usage figure: granting nothing' }, 'stale') : null];
    return card('ceiling:' + c.name, c.name, badges,
      c.available + ' available' + (c.queued ? ' · ' + c.queued + ' queued' : ''),
      {
        bars: h('div', { class: 'bars' }, b,
          h('p', { class: 'desc' }, 'usage figure ' + (c.last_usage_at ? ago(c.last_usage_at) : 'never received'),
            c.last_error ? h('span', { class: 'error-text' }, ' · ' + c.last_error) : null),
          queueText(c.queued_by_priority)),
        detail: () => table([
          { title: 'worker', cell: (g) => h('code', {}, g.worker_id) },
          { title: 'VMs', num: true, cell: (g) => g.vms },
          { title: 'confirmed', cell: (g) => (g.confirmed ? 'yes' : 'no') },
          { title: 'granted', cell: (g) => h('span', { title: g.granted_at || '' }, ago(g.granted_at)) },
          { title: 'expires', cell: (g) => h('span', { title: g.expires_at || '' }, until(g.expires_at)) },
          { title: 'claim', cell: (g) => h('code', { class: 'id' }, g.id) },
        ], grants, 'No claims.', 'ceiling:' + c.name, 'claim:' + c.name),
      });
  }

  function sumPrefix(m, prefix) {
    let n = 0;
    for (const [k, v] of Object.entries(m || {})) if (k.startsWith(prefix)) n += v;
    return n;
  }

  function classCard(c) {
    const r = c.recent || { events: {}, window_seconds: 0 };
    const ev = r.events || {};
    const stat = (label, n, cls) => h('div', { class: 'stat ' + (cls || '') }, h('span', { class: 'n' }, n), h('span', { class: 'l' }, label));
    const group = (title, stats) => h('div', { class: 'stat-group' }, h('div', { class: 'group-label' }, title), h('div', { class: 'stats' }, stats));
    const discarded = sumPrefix(ev, 'discarded_');
    const exhausted = (ev.exhausted_global || 0) + (ev.exhausted_local || 0);
    const f = c.fleet;
    const badges = [c.errors && c.errors.length ? h('span', { class: 'badge warn', title: c.errors.join('\n') }, 'backend error') : null];
    if (f && f.spot_snoozed_until) badges.push(h('span', { class: 'badge warn', title: 'spot launches wait until ' + f.spot_snoozed_until }, 'spot snoozed ' + until(f.spot_snoozed_until)));
    if (f && (f.last_error || f.last_launch_error)) badges.push(h('span', { class: 'badge warn', title: f.last_error || f.last_launch_error }, 'fleet error'));
    const fleetGroup = f ? group('fleet: ' + f.desired_idle + ' idle wanted' + (f.schedule ? ' (schedule ' + f.schedule + ')' : '') + (f.leading ? '' : ' · standby'), [
      stat('idle', f.idle), stat('booting', f.booting), stat('claimed', f.claimed), stat('terminating', f.terminating),
      stat('refused by ' + f.vm_ceiling, f.ceiling_refused, f.ceiling_refused ? 'warn' : '')]) : null;
    const lastHour = f ? Object.entries(f.last_hour || {}).map(([k, v]) => k + ' ' + v).join(' · ') : '';
    return card('class:' + c.name, c.name, badges,
      c.instances.idle + ' idle · ' + c.instances.claimed + ' claimed' + (f ? ' · ' + f.booting + ' booting' : ''),
      {
        bars: h('div', { class: 'stat-groups' },
          group('queue (idle runners)', [stat('visible', c.depth.visible), stat('in flight', c.depth.in_flight), stat('delayed', c.depth.delayed)]),
          group('instances', [stat('idle', c.instances.idle), stat('claimed', c.instances.claimed), stat('retired', c.instances.retired)]),
          fleetGroup),
        detail: () => h('div', {},
          group('pickups in the last ' + span(r.window_seconds), [
            stat('passed', ev.passed || 0), stat('claimed', ev.claimed || 0), stat('re-queued', ev.requeued || 0),
            stat('discarded', discarded, discarded ? 'warn' : ''), stat('exhausted', exhausted, exhausted ? 'warn' : ''),
            stat('lost races', ev.claim_lost_race || 0)]),
          h('p', { class: 'desc' }, 'queue ', h('code', {}, c.queue), ' · pickup mode ' + c.mode),
          f ? h('p', { class: 'desc' }, 'fleet (' + f.usage_class + ') in the last hour: ' + (lastHour || 'nothing launched or terminated') +
            (f.last_launch_error ? ' · last launch error: ' + f.last_launch_error : '')) : null,
          c.errors && c.errors.length ? h('ul', { class: 'error-text' }, c.errors.map((e) => h('li', {}, e))) : null),
      });
  }

  // ---- wiring ----
  function start() {
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
      $('token').value = '';
      $('login-error').hidden = true;
      poll();
    });
    $('filter').addEventListener('input', (ev) => { ui.filter = ev.target.value.trim().toLowerCase(); render(); poll(); });
    $('busy').addEventListener('change', (ev) => { ui.busyOnly = ev.target.checked; render(); });
    $('expand').addEventListener('click', () => {
      for (const el of document.querySelectorAll('article.card')) { ui.collapsed.delete(el.dataset.key); ui.expanded.add(el.dataset.key); }
      render();
    });
    $('collapse').addEventListener('click', () => {
      for (const el of document.querySelectorAll('article.card')) { ui.expanded.delete(el.dataset.key); ui.collapsed.add(el.dataset.key); }
      render();
    });
    document.addEventListener('visibilitychange', () => { if (!document.hidden) poll(); });
    poll();
  }

  start();
})();
