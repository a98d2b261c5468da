// Busbar console: a single page over the JSON API under /ui/api/.
// Plain ES module, no build step. Every element is built with textContent,
// never from HTML strings, so no message content can become markup.

const $main = document.getElementById('main');
const $tree = document.getElementById('tree');
const $status = document.getElementById('status');
let me = null; // {keyName, rights, csrf}
let treeData = null;

// ---- helpers -------------------------------------------------------------

function h(tag, attrs = {}, ...kids) {
  const el = tag === 'svg' || attrs.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false || k === 'svg') continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) el.append(k instanceof Node ? k : String(k));
  return el;
}

// put replaces el's children, leaving out the null, undefined and false
// that conditional parts give.
function put(el, ...kids) {
  el.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

let uid = 0;
// field returns a labelled input (or select/textarea given as el).
function field(label, el, hint) {
  const id = el.id || `f${++uid}`;
  el.id = id;
  return h('div', {}, h('label', { for: id, text: label }), el, hint ? h('div', { class: 'muted', text: hint }) : null);
}

function say(msg, isError) {
  $status.textContent = msg;
  $status.className = 'status' + (isError ? ' error' : '');
  clearTimeout(say.t);
  say.t = setTimeout(() => { $status.textContent = ''; }, isError ? 8000 : 3000);
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) { opts.body = JSON.stringify(body); opts.headers['Content-Type'] = 'application/json'; }
  if (method !== 'GET' && me && me.csrf) opts.headers['X-Busbar-Csrf'] = me.csrf;
  const r = await fetch('api/' + path, opts);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    if (r.status === 401 && path !== 'signin') { me = null; showSignIn(data.error); }
    const e = new Error(data.error || r.statusText); e.status = r.status; throw e;
  }
  return data;
}

const q = (o) => new URLSearchParams(Object.entries(o).filter(([, v]) => v !== '' && v !== undefined && v !== null)).toString();
const can = (right) => me && me.rights.includes(right);
const fmtN = (n) => (n ?? 0).toLocaleString('en');
const fmtRate = (r) => (r ?? 0) < 10 ? (r ?? 0).toFixed(1) : Math.round(r).toLocaleString('en');
const enc = encodeURIComponent;

async function guarded(f) {
  try { return await f(); } catch (e) { say(e.message, true); return undefined; }
}

// ---- theme ---------------------------------------------------------------

function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
}
applyTheme(localStorage.getItem('busbar-theme'));
document.getElementById('theme').addEventListener('click', () => {
  const dark = document.documentElement.dataset.theme === 'dark' ||
    (!document.documentElement.dataset.theme && matchMedia('(prefers-color-scheme: dark)').matches);
  const t = dark ? 'light' : 'dark';
  localStorage.setItem('busbar-theme', t);
  applyTheme(t);
});

// On a phone-width screen the tree folds away behind the Entities button,
// and folds again after each navigation.
const $toggle = document.getElementById('nav-toggle');
const phone = matchMedia('(max-width: 720px)');
function foldTree(folded) {
  $tree.classList.toggle('collapsed', folded);
  $toggle.setAttribute('aria-expanded', String(!folded));
}
$toggle.addEventListener('click', () => foldTree(!$tree.classList.contains('collapsed')));
phone.addEventListener('change', (e) => foldTree(e.matches));

document.getElementById('signout').addEventListener('click', async () => {
  await guarded(() => api('POST', 'signout', {}));
  me = null; showSignIn();
});

// ---- sign-in -------------------------------------------------------------

function showSignIn(err) {
  document.getElementById('signout').hidden = true;
  $toggle.hidden = true;
  $tree.hidden = true;
  document.getElementById('who').textContent = '';
  const cs = h('textarea', { rows: 3, autocomplete: 'off', spellcheck: 'false', name: 'connectionString' });
  const kn = h('input', { name: 'keyName', autocomplete: 'username' });
  const key = h('input', { type: 'password', name: 'key', autocomplete: 'current-password' });
  const ep = h('input', { name: 'entityPath' });
  const msg = h('p', { class: 'error', role: 'alert', text: err || '' });
  const form = h('form', { class: 'signin', onsubmit: async (ev) => {
    ev.preventDefault();
    msg.textContent = '';
    try {
      me = await api('POST', 'signin', cs.value.trim()
        ? { connectionString: cs.value.trim() }
        : { keyName: kn.value.trim(), key: key.value, entityPath: ep.value.trim() });
      cs.value = ''; key.value = '';
      start();
    } catch (e) { msg.textContent = e.message; }
  } },
  h('h1', { text: 'Sign in to Busbar' }),
  h('p', { class: 'muted', text: 'Paste a connection string, or give a shared access key name and key. The key stays on the server side: the browser gets a session cookie only.' }),
  field('Connection string', cs),
  h('fieldset', {}, h('legend', { text: 'or a key' }),
    field('Key name', kn), field('Key', key), field('Entity path (for a key of one entity)', ep)),
  msg,
  h('button', { class: 'primary', type: 'submit', text: 'Sign in' }));
  put($main, form);
  cs.focus();
}

async function start() {
  document.getElementById('who').textContent = `${me.keyName} · ${me.rights.join(', ')}`;
  document.getElementById('signout').hidden = false;
  $toggle.hidden = false;
  $tree.hidden = false;
  foldTree(phone.matches);
  await loadTree();
  route();
  clearInterval(start.refresh);
  start.refresh = setInterval(() => { if (me) loadTree(); }, 10000); // the tree's counts
}

// ---- tree ----------------------------------------------------------------

async function loadTree() {
  treeData = await guarded(() => api('GET', 'tree'));
  if (treeData) renderTree();
}

function treeLink(n, label, kind) {
  const dl = n.counts.deadLetter ? h('span', { class: 'badge dlq', title: 'dead-lettered', text: fmtN(n.counts.deadLetter) }) : null;
  return h('a', { href: `#/e/${enc(n.path)}`, 'data-path': n.path },
    h('span', { class: 'kind', text: kind }), h('span', { text: label }),
    h('span', { class: 'badge', title: 'active messages', text: fmtN(n.counts.active) }), dl);
}

function renderTree() {
  const qs = h('ul', {}, treeData.queues.map((n) => h('li', {}, treeLink(n, n.name, 'q'))));
  const ts = h('ul', {}, treeData.topics.map((t) => h('li', {}, treeLink(t, t.name, 't'),
    h('ul', {}, (t.subscriptions || []).map((s) => h('li', {}, treeLink(s, s.name, 'sub'),
      h('ul', {}, (s.rules || []).map((r) => h('li', {}, h('a', { href: `#/e/${enc(s.path)}/rules`, 'data-rule': r.name },
        h('span', { class: 'kind', text: 'rule' }), h('span', { text: r.name })))))))))));
  put($tree, 
    h('ul', {}, h('li', {}, h('a', { href: '#/' }, h('span', { text: 'Namespace' }))),
      h('li', {}, h('a', { href: '#/toolkit' }, h('span', { text: 'Toolkit' })))),
    h('h2', { text: 'Queues' }), qs, h('h2', { text: 'Topics' }), ts);
  markTree();
}

// markTree marks the link of the page shown: the entity's own link for
// any of its tabs (rule links lead to their subscription's rules tab).
function markTree() {
  const cur = location.hash || '#/';
  let marked = false;
  for (const a of $tree.querySelectorAll('a')) {
    const href = a.getAttribute('href');
    const here = !marked && !a.dataset.rule && (href === cur || (href.startsWith('#/e/') && cur.startsWith(href + '/')));
    if (here) { a.setAttribute('aria-current', 'page'); marked = true; } else a.removeAttribute('aria-current');
  }
}

function findNode(path) {
  if (!treeData) return null;
  for (const n of treeData.queues) if (n.path === path) return n;
  for (const t of treeData.topics) {
    if (t.path === path) return t;
    for (const s of t.subscriptions || []) if (s.path === path) return s;
  }
  return null;
}

// ---- routing -------------------------------------------------------------

window.addEventListener('hashchange', () => { if (me) route(); });

async function route() {
  if (phone.matches) foldTree(true);
  markTree();
  const parts = (location.hash.slice(2) || '').split('/');
  stopTimers();
  if (parts[0] === 'e' && parts[1]) return entityPage(decodeURIComponent(parts[1]), parts[2] || 'overview');
  if (parts[0] === 'new') return createPage(parts[1], parts[2] ? decodeURIComponent(parts[2]) : '');
  if (parts[0] === 'toolkit') return toolkitPage();
  return namespacePage();
}

let timers = [];
function stopTimers() { timers.forEach(clearInterval); timers = []; }
function every(ms, f) { timers.push(setInterval(f, ms)); }

// ---- namespace -----------------------------------------------------------

function countsRow(n, label) {
  const c = n.counts;
  return h('tr', {}, h('td', {}, h('a', { href: `#/e/${enc(n.path)}`, text: label })), h('td', { text: n.kind }),
    h('td', { class: 'num', text: fmtN(c.active) }), h('td', { class: 'num', text: fmtN(c.deadLetter) }),
    h('td', { class: 'num', text: fmtN(c.scheduled) }), h('td', { class: 'num', text: fmtN(c.transfer) }),
    h('td', { class: 'num', text: fmtRate(c.inPerSecond) }), h('td', { class: 'num', text: fmtRate(c.outPerSecond) }),
    h('td', { text: c.status }));
}

async function namespacePage() {
  await loadTree();
  if (!treeData) return;
  const rows = [];
  for (const n of treeData.queues) rows.push(countsRow(n, n.name));
  for (const t of treeData.topics) {
    rows.push(countsRow(t, t.name));
    for (const s of t.subscriptions || []) rows.push(countsRow(s, `${t.name} › ${s.name}`));
  }
  put($main, 
    h('h1', { text: 'Namespace' }),
    can('Manage') ? h('div', { class: 'row' },
      h('a', { class: 'button', href: '#/new/queue', text: 'New queue' }),
      h('a', { class: 'button', href: '#/new/topic', text: 'New topic' })) : null,
    h('div', { class: 'table-wrap' }, h('table', {},
      h('caption', { class: 'muted', text: 'Counts refresh every 5 seconds; rates are messages per second over the last sample.' }),
      h('thead', {}, h('tr', {}, ['Entity', 'Kind'].map((t) => h('th', { text: t })),
        ['Active', 'Dead-letter', 'Scheduled', 'Transfer', 'In/s', 'Out/s'].map((t) => h('th', { class: 'num', text: t })), h('th', { text: 'Status' }))),
      h('tbody', {}, rows))));
  every(5000, async () => { if ((location.hash || '#/') === '#/') { await loadTree(); } });
}

// ---- entity pages --------------------------------------------------------

async function entityPage(path, tab) {
  const ev = await guarded(() => api('GET', 'entity?' + q({ path })));
  if (!ev) { put($main, h('h1', { text: path }), h('p', { class: 'error', text: 'Not found, or not visible to this key.' })); return; }
  // A topic has no messages of its own to peek, and no dead-letter queue.
  const tabs = ev.kind === 'topic' ? [['overview', 'Overview'], ['messages', 'Send']]
    : [['overview', 'Overview'], ['messages', 'Messages'], ['deadletters', 'Dead letters']];
  if (ev.counts.requiresSession) tabs.push(['sessions', 'Sessions']);
  if (ev.kind !== 'subscription') tabs.push(['scheduled', 'Scheduled']);
  if (ev.kind === 'topic') tabs.push(['subscriptions', 'Subscriptions']);
  if (ev.kind === 'subscription') tabs.push(['rules', 'Rules']);
  tabs.push(['properties', 'Properties']);
  const body = h('div', {});
  put($main, 
    h('h1', {}, h('span', { class: 'muted', text: ev.kind + ' ' }), ev.path),
    h('nav', { class: 'tabs', 'aria-label': 'Entity views' }, tabs.map(([id, label]) =>
      h('a', { href: `#/e/${enc(path)}/${id}`, 'aria-current': id === tab ? 'page' : null, text: label }))),
    body);
  const pages = { overview: overviewTab, messages: messagesTab, deadletters: deadLettersTab, sessions: sessionsTab,
    scheduled: scheduledTab, subscriptions: subscriptionsTab, rules: rulesTab, properties: propertiesTab };
  await (pages[tab] || overviewTab)(ev, body);
}

function cards(c) {
  const card = (n, l) => h('div', { class: 'card' }, h('div', { class: 'n', text: n }), h('div', { class: 'l', text: l }));
  return h('div', { class: 'cards' }, card(fmtN(c.active), 'active'), card(fmtN(c.deadLetter), 'dead-lettered'),
    card(fmtN(c.scheduled), 'scheduled'), card(fmtN(c.deferred), 'deferred'), card(fmtN(c.transfer), 'transfer'),
    card(fmtRate(c.inPerSecond), 'in per second'), card(fmtRate(c.outPerSecond), 'out per second'));
}

// chart draws series of samples as an SVG line chart.
function chart(samples, series, label) {
  const W = 600, H = 160, P = 24;
  const svg = h('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': label, preserveAspectRatio: 'none' });
  if (samples.length < 2) {
    svg.append(h('text', { svg: true, x: P, y: H / 2, fill: 'currentColor', text: 'Collecting samples…' }));
    return svg;
  }
  const t0 = samples[0].t, t1 = samples[samples.length - 1].t;
  let top = 1;
  for (const s of samples) for (const [k] of series) top = Math.max(top, s[k]);
  for (const [k, cls] of series) {
    const pts = samples.map((s) => `${P + (W - 2 * P) * (s.t - t0) / Math.max(t1 - t0, 1)},${H - P - (H - 2 * P) * s[k] / top}`).join(' ');
    svg.append(h('polyline', { svg: true, points: pts, fill: 'none', 'stroke-width': 2, class: cls, stroke: `var(--chart-${cls})` }));
  }
  svg.append(h('text', { svg: true, x: 2, y: 14, fill: 'currentColor', 'font-size': 11, text: fmtRate(top) }));
  const clock = (t) => new Date(t * 1000).toLocaleTimeString('en-GB');
  svg.append(h('text', { svg: true, x: P, y: H - 6, fill: 'currentColor', 'font-size': 11, text: clock(t0) }));
  svg.append(h('text', { svg: true, x: W - P, y: H - 6, fill: 'currentColor', 'font-size': 11, 'text-anchor': 'end', text: clock(t1) }));
  svg.append(h('title', { svg: true, text: label }));
  return svg;
}

async function overviewTab(ev, body) {
  const draw = async () => {
    const e2 = await guarded(() => api('GET', 'entity?' + q({ path: ev.path })));
    const st = await guarded(() => api('GET', 'stats?' + q({ path: ev.path })));
    if (!e2 || !st) return;
    put(body, cards(e2.counts),
      h('h2', { text: 'Last hour' }),
      h('div', { class: 'legend' }, h('span', { class: 'in', text: 'in/s' }), h('span', { class: 'out', text: 'out/s' })),
      chart(st.samples, [['in', 'in'], ['out', 'out']], 'Messages in and out per second over the last hour'),
      h('div', { class: 'legend' }, h('span', { class: 'backlog', text: 'active' }), h('span', { class: 'dlq', text: 'dead-lettered' })),
      chart(st.samples, [['active', 'backlog'], ['deadLetter', 'dlq']], 'Backlog over the last hour'),
      h('p', { class: 'muted', text: `Created ${e2.counts.createdAt || '–'} · updated ${e2.counts.updatedAt || '–'} · accessed ${e2.counts.accessedAt || 'never'} · ${fmtN(e2.counts.sizeInBytes)} bytes` }),
      can('Manage') ? h('button', { class: 'danger', type: 'button', text: `Delete ${ev.kind}`, onclick: async () => {
        if (!confirm(`Delete ${ev.kind} ${ev.path} and all its messages?`)) return;
        if (await guarded(() => api('DELETE', 'entity?' + q({ path: ev.path })))) { say(`Deleted ${ev.path}`); await loadTree(); location.hash = '#/'; }
      } }) : null);
  };
  await draw();
  every(10000, draw);
}

// ---- messages ------------------------------------------------------------

function b64bytes(b64) {
  const s = atob(b64); const a = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
  return a;
}

function prettyXML(s) {
  const doc = new DOMParser().parseFromString(s, 'application/xml');
  if (doc.getElementsByTagName('parsererror').length) return null;
  const out = [];
  const walk = (n, d) => {
    const pad = '  '.repeat(d);
    if (n.nodeType === 3) { const t = n.nodeValue.trim(); if (t) out.push(pad + t); return; }
    if (n.nodeType !== 1) return;
    const attrs = [...n.attributes].map((a) => ` ${a.name}="${a.value}"`).join('');
    if (!n.childNodes.length) { out.push(`${pad}<${n.nodeName}${attrs}/>`); return; }
    if (n.childNodes.length === 1 && n.firstChild.nodeType === 3) { out.push(`${pad}<${n.nodeName}${attrs}>${n.textContent.trim()}</${n.nodeName}>`); return; }
    out.push(`${pad}<${n.nodeName}${attrs}>`);
    n.childNodes.forEach((c) => walk(c, d + 1));
    out.push(`${pad}</${n.nodeName}>`);
  };
  walk(doc.documentElement, 0);
  return out.join('\n');
}

function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = [...bytes.slice(i, i + 16)];
    lines.push(i.toString(16).padStart(8, '0') + '  ' + row.map((b) => b.toString(16).padStart(2, '0')).join(' ').padEnd(48) +
      '  ' + row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join(''));
  }
  return lines.join('\n');
}

// bodyText renders a body in a mode: auto, json, xml, text, hex.
function bodyText(m, mode) {
  const bytes = b64bytes(m.body);
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (mode === 'hex') return hexDump(bytes);
  if (mode === 'text') return text;
  if (mode === 'json' || mode === 'auto') {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { if (mode === 'json') return 'Not JSON.'; }
  }
  if (mode === 'xml' || mode === 'auto') {
    const x = text.trimStart().startsWith('<') ? prettyXML(text) : null;
    if (x) return x;
    if (mode === 'xml') return 'Not XML.';
  }
  return /[\x00-\x08\x0e-\x1f]/.test(text) ? hexDump(bytes) : text;
}

function viewer(m) {
  let mode = 'auto';
  const pre = h('pre', { class: 'body', tabindex: 0, 'aria-label': 'Message body' });
  const show = () => { pre.textContent = bodyText(m, mode); };
  const modes = h('div', { class: 'row', role: 'group', 'aria-label': 'Body format' }, ['auto', 'json', 'xml', 'text', 'hex'].map((x) =>
    h('button', { type: 'button', 'aria-pressed': String(x === mode), text: x.toUpperCase(), onclick: (e) => {
      mode = x; for (const b of modes.children) b.setAttribute('aria-pressed', String(b === e.target)); show();
    } })));
  show();
  const sys = Object.entries(m).filter(([k]) => !['properties', 'body'].includes(k) && m[k] !== '' && m[k] !== undefined);
  const props = Object.entries(m.properties || {});
  return h('section', { class: 'viewer', 'aria-label': `Message ${m.sequenceNumber}` },
    h('h2', { text: `Message ${m.sequenceNumber}` }), modes, pre,
    h('h3', { text: 'System properties' }),
    h('div', { class: 'table-wrap' }, h('table', {}, h('tbody', {}, sys.map(([k, v]) => h('tr', {}, h('th', { scope: 'row', text: k }), h('td', { class: 'mono', text: String(v) })))))),
    h('h3', { text: 'Application properties' }),
    props.length ? h('div', { class: 'table-wrap' }, h('table', {}, h('tbody', {}, props.map(([k, v]) => h('tr', {}, h('th', { scope: 'row', text: k }), h('td', { class: 'mono', text: JSON.stringify(v) })))))) : h('p', { class: 'muted', text: 'None.' }));
}

// messageList shows a searchable, paged list; opts.select adds checkboxes.
function messageList(ev, opts) {
  const wrap = h('div', {});
  const inputs = {
    messageId: h('input', { name: 'messageId' }), sessionId: h('input', { name: 'sessionId' }),
    subject: h('input', { name: 'subject' }), property: h('input', { name: 'property', placeholder: 'name=value' }),
    text: h('input', { name: 'text' }),
  };
  if (opts.reason !== undefined) inputs.reason = h('input', { name: 'reason', value: opts.reason });
  const state = opts.state !== undefined ? opts.state : null;
  const stateSel = state === null ? h('select', { name: 'state' }, ['', 'Active', 'Deferred', 'Scheduled'].map((s) => h('option', { value: s, text: s || 'any' }))) : null;
  const list = h('div', { class: 'table-wrap' });
  const detail = h('div', {});
  const selected = new Set();
  let from = 0; let next = 0; let history = [];
  const search = () => {
    const s = {}; for (const [k, el] of Object.entries(inputs)) s[k] = el.value.trim();
    s.state = state !== null ? state : stateSel.value; return s;
  };
  const load = async (start) => {
    from = start;
    const s = search();
    const res = await guarded(() => api('GET', 'messages?' + q({ path: ev.path, subqueue: opts.subqueue, from, count: 25, ...s })));
    if (!res) return;
    next = res.next;
    const rows = res.messages.map((m) => {
      const cb = opts.select ? h('input', { type: 'checkbox', 'aria-label': `Select message ${m.sequenceNumber}`, checked: selected.has(m.sequenceNumber),
        onchange: (e) => { if (e.target.checked) selected.add(m.sequenceNumber); else selected.delete(m.sequenceNumber); } }) : null;
      const tr = h('tr', {}, opts.select ? h('td', {}, cb) : null,
        h('td', { class: 'num' }, h('button', { type: 'button', class: 'link', 'aria-label': `Show message ${m.sequenceNumber}`, text: String(m.sequenceNumber),
          onclick: () => { for (const r of list.querySelectorAll('tr')) r.classList.remove('selected'); tr.classList.add('selected'); put(detail, viewer(m)); } })),
        h('td', { class: 'mono', text: m.messageId }), h('td', { text: m.state }), h('td', { text: m.sessionId || '' }),
        h('td', { text: m.subject || '' }), h('td', { text: (m.enqueuedTime || '').replace('T', ' ').slice(0, 19) }),
        opts.subqueue === 'deadletter' ? h('td', { text: m.deadLetterReason || '' }) : h('td', { class: 'num', text: m.deliveryCount }),
        h('td', { class: 'num', text: fmtN(m.size) }));
      return tr;
    });
    put(list, h('table', {},
      h('thead', {}, h('tr', {}, opts.select ? h('th', { text: '' }) : null, h('th', { class: 'num', text: 'Seq' }),
        ['Message id', 'State', 'Session', 'Subject', 'Enqueued'].map((t) => h('th', { text: t })),
        h('th', { text: opts.subqueue === 'deadletter' ? 'Reason' : 'Deliveries' }), h('th', { class: 'num', text: 'Bytes' }))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 9, class: 'muted', text: 'No messages.' })))),
    h('div', { class: 'row' },
      h('button', { type: 'button', text: 'First page', disabled: from === 0, onclick: () => { history = []; load(0); } }),
      h('button', { type: 'button', text: 'Previous page', disabled: !history.length, onclick: () => load(history.pop()) }),
      h('button', { type: 'button', text: 'Next page', disabled: !next, onclick: () => { history.push(from); load(next); } }),
      h('span', { class: 'muted', text: `${res.messages.length} shown, ${fmtN(res.scanned)} read` })));
  };
  const form = h('form', { class: 'row', role: 'search', 'aria-label': 'Search messages', onsubmit: (e) => { e.preventDefault(); history = []; selected.clear(); load(0); } },
    Object.entries(inputs).map(([k, el]) => field({ messageId: 'Message id', sessionId: 'Session id', subject: 'Subject', property: 'Property', text: 'Body contains', reason: 'Reason' }[k], el)),
    stateSel ? field('State', stateSel) : null,
    h('button', { type: 'submit', text: 'Search' }));
  wrap.append(form, list, detail);
  load(0);
  return { el: wrap, reload: () => load(from), search, selected };
}

function sendForm(ev, done) {
  const body = h('textarea', { rows: 5, name: 'body' });
  const ct = h('input', { name: 'contentType', value: 'application/json' });
  const id = h('input', { name: 'messageId' });
  const sid = h('input', { name: 'sessionId' });
  const subj = h('input', { name: 'subject' });
  const corr = h('input', { name: 'correlationId' });
  const ttl = h('input', { name: 'timeToLive', placeholder: 'PT10M' });
  const sched = h('input', { name: 'scheduledEnqueueTime', type: 'datetime-local', step: 1 });
  const props = h('textarea', { rows: 2, name: 'properties', placeholder: '{"priority": 3}' });
  const count = h('input', { name: 'count', type: 'number', min: 1, max: 1000, value: 1 });
  const err = h('div', { class: 'field-error', role: 'alert' });
  return h('form', { 'aria-label': 'Send a message', onsubmit: async (e) => {
    e.preventDefault(); err.textContent = '';
    let p = {};
    if (props.value.trim()) { try { p = JSON.parse(props.value); } catch (x) { err.textContent = 'Properties must be a JSON object: ' + x.message; return; } }
    const msg = { path: ev.path, body: body.value, contentType: ct.value, messageId: id.value, sessionId: sid.value, subject: subj.value,
      correlationId: corr.value, timeToLive: ttl.value, properties: p, count: Number(count.value) || 1,
      scheduledEnqueueTime: sched.value ? new Date(sched.value).toISOString().replace(/\.\d+Z$/, 'Z') : '' };
    try { const r = await api('POST', 'send', msg); say(`Sent ${r.sent} message${r.sent > 1 ? 's' : ''}`); done && done(); } catch (x) { err.textContent = x.message; }
  } }, h('h2', { text: 'Send a message' }),
  field('Body', body),
  h('div', { class: 'row' }, field('Content type', ct), field('Message id (empty: generated)', id), field('Session id', sid),
    field('Subject', subj), field('Correlation id', corr), field('Time to live (ISO 8601)', ttl), field('Schedule at (local time)', sched), field('Copies', count)),
  field('Application properties (JSON object)', props), err,
  h('button', { type: 'submit', class: 'primary', text: 'Send' }));
}

async function messagesTab(ev, body) {
  if (ev.kind === 'topic') { put(body, can('Send') ? sendForm(ev) : h('p', { class: 'muted', text: 'Sending needs the Send right.' })); return; }
  const list = messageList(ev, { subqueue: 'main' });
  const n = h('input', { type: 'number', min: 1, max: 1000, value: 1, name: 'receiveCount' });
  const sid = h('input', { name: 'receiveSession' });
  const receive = async (mode) => {
    const r = await guarded(() => api('POST', 'receive', { path: ev.path, count: Number(n.value) || 1, mode, sessionId: sid.value }));
    if (r) { say(`${mode === 'delete' ? 'Received and deleted' : 'Dead-lettered'} ${r.messages.length} message(s)`); list.reload(); loadTree(); }
  };
  put(body, 
    can('Listen') ? h('div', { class: 'row' }, field('Messages', n), ev.counts.requiresSession ? field('Session (empty: next)', sid) : null,
      h('button', { type: 'button', text: 'Receive and delete', onclick: () => receive('delete') }),
      h('button', { type: 'button', text: 'Dead-letter', onclick: () => receive('deadletter') })) : null,
    list.el,
    can('Send') && ev.kind !== 'subscription' ? sendForm(ev, () => list.reload()) : null);
}

async function deadLettersTab(ev, body) {
  const reasons = h('div', {});
  const list = messageList(ev, { subqueue: 'deadletter', select: true, reason: '' });
  const target = h('input', { name: 'target', placeholder: ev.kind === 'subscription' ? ev.path.split('/')[0] : ev.path });
  const progress = h('div', { 'aria-live': 'polite' });
  const loadReasons = async () => {
    const r = await guarded(() => api('GET', 'deadletters?' + q({ path: ev.path })));
    if (!r) return;
    put(reasons, h('h2', { text: `Reasons (${fmtN(r.total)} dead letters)` }),
      h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Reason' }), h('th', { class: 'num', text: 'Count' }), h('th', { text: 'Example description' }))),
        h('tbody', {}, r.reasons.map((g) => h('tr', {}, h('td', {}, h('button', { type: 'button', text: g.reason || '(none)', 'aria-label': `Show dead letters with reason ${g.reason || 'none'}`,
          onclick: () => { const el = list.el.querySelector('input[name=reason]'); el.value = g.reason; list.el.querySelector('form').requestSubmit(); } })),
        h('td', { class: 'num', text: fmtN(g.count) }), h('td', { text: g.description || '' })))))));
  };
  const runJob = async (kind, selectedOnly) => {
    const req = { kind, path: ev.path, target: target.value.trim() };
    if (selectedOnly) { req.sequenceNumbers = [...list.selected]; if (!req.sequenceNumbers.length) { say('Select messages first', true); return; } } else {
      req.search = list.search(); delete req.search.state;
      if (kind === 'purge' && !confirm('Purge every dead letter matching the search?')) return;
    }
    let job = await guarded(() => api('POST', 'jobs', req));
    if (!job) return;
    const bar = h('progress', { max: Math.max(job.total, 1), value: 0, 'aria-label': `${kind} progress` });
    const line = h('p', {});
    put(progress, bar, line);
    while (true) {
      bar.max = Math.max(job.total, job.examined, 1); bar.value = job.examined;
      line.textContent = `${kind}: examined ${fmtN(job.examined)} of ${fmtN(job.total)}, selected ${fmtN(job.matched)}, done ${fmtN(job.done)}, failed ${fmtN(job.failed)}`;
      if (job.finished) break;
      await new Promise((r) => setTimeout(r, 500));
      job = await guarded(() => api('GET', 'jobs?' + q({ id: job.id })));
      if (!job) return;
    }
    progress.append(h('section', { class: 'viewer', 'aria-label': 'Report' }, h('h3', { text: 'Report' }),
      h('p', { class: job.failed ? 'error' : 'ok', text: `${kind === 'resubmit' ? 'Resubmitted' : 'Purged'} ${fmtN(job.done)} of ${fmtN(job.matched)} selected; ${fmtN(job.failed)} failed and stayed in the dead-letter queue.` + (job.unconfirmed ? ` ${fmtN(job.unconfirmed)} were resubmitted but not removed: they may be there twice.` : '') }),
      job.target ? h('p', { text: `Target: ${job.target}` }) : null,
      job.errors.length ? h('ul', {}, job.errors.map((e) => h('li', { class: 'error', text: e }))) : null,
      h('p', { class: 'muted', text: `Started ${job.started}, ended ${job.ended}` })));
    list.selected.clear(); list.reload(); loadReasons(); loadTree();
  };
  put(body, reasons, h('h2', { text: 'Dead-lettered messages' }), list.el,
    can('Manage') ? h('fieldset', {}, h('legend', { text: 'Resubmit or purge' }),
      field('Resubmit to (empty: the source entity)', target),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'primary', text: 'Resubmit selected', onclick: () => runJob('resubmit', true) }),
        h('button', { type: 'button', text: 'Resubmit all matching', onclick: () => runJob('resubmit', false) }),
        h('button', { type: 'button', class: 'danger', text: 'Purge selected', onclick: () => runJob('purge', true) }),
        h('button', { type: 'button', class: 'danger', text: 'Purge all matching', onclick: () => runJob('purge', false) })),
      progress) : null);
  loadReasons();
}

async function scheduledTab(ev, body) {
  if (ev.kind === 'topic') {
    // A topic cannot be peeked: its scheduled messages are cancelled by the
    // sequence numbers their sender got.
    const seqs = h('input', { name: 'sequenceNumbers', placeholder: '12, 13' });
    put(body, h('p', { class: 'muted', text: 'A topic keeps its scheduled messages until they fan out to the subscriptions; it cannot be peeked. Cancel them by the sequence numbers their sender got.' }),
      can('Send') ? h('form', { class: 'row', onsubmit: async (e) => {
        e.preventDefault();
        const list = seqs.value.split(/[\s,]+/).filter(Boolean).map(Number);
        const r = await guarded(() => api('POST', 'cancel', { path: ev.path, sequenceNumbers: list }));
        if (r) { say(`Cancelled ${r.cancelled}`); seqs.value = ''; }
      } }, field('Sequence numbers', seqs), h('button', { type: 'submit', class: 'danger', text: 'Cancel scheduled messages' })) : null);
    return;
  }
  const list = messageList(ev, { subqueue: 'main', state: 'Scheduled', select: can('Send') });
  put(body, list.el, can('Send') ? h('button', { type: 'button', class: 'danger', text: 'Cancel selected', onclick: async () => {
    const seqs = [...list.selected];
    if (!seqs.length) { say('Select scheduled messages first', true); return; }
    const r = await guarded(() => api('POST', 'cancel', { path: ev.path, sequenceNumbers: seqs }));
    if (r) { say(`Cancelled ${r.cancelled}`); list.selected.clear(); list.reload(); }
  } }) : null);
}

// ---- sessions ------------------------------------------------------------

async function sessionsTab(ev, body) {
  const editor = h('div', {});
  const load = async () => {
    const r = await guarded(() => api('GET', 'sessions?' + q({ path: ev.path })));
    if (!r) return;
    put(body, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', { text: 'Session' }), h('th', { class: 'num', text: 'Messages' }), h('th', { class: 'num', text: 'State bytes' }), h('th', { text: 'State updated' }), h('th', { text: 'Locked until' }))),
      h('tbody', {}, r.sessions.length ? r.sessions.map((s) => h('tr', {},
        h('td', {}, h('button', { type: 'button', text: s.id || '(empty id)', 'aria-label': `Open session ${s.id}`, onclick: () => openSession(s.id) })),
        h('td', { class: 'num', text: fmtN(s.messages) }), h('td', { class: 'num', text: fmtN(s.stateSize) }),
        h('td', { text: s.stateUpdated || '' }), h('td', { text: s.lockedUntil || '' }))) : h('tr', {}, h('td', { colspan: 5, class: 'muted', text: 'No session has messages or state.' }))))),
    h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); openSession(e.target.elements.sid.value); } },
      field('Open a session by id', h('input', { name: 'sid' })), h('button', { type: 'submit', text: 'Open' })),
    editor);
  };
  const openSession = async (id) => {
    const s = await guarded(() => api('GET', 'session?' + q({ path: ev.path, id })));
    if (!s) return;
    let text = s.isText ? s.text : s.base64;
    let isJSON = s.isText && !text; // an empty state is edited as JSON
    if (s.isText && text) { try { text = JSON.stringify(JSON.parse(text), null, 2); isJSON = true; } catch { /* not JSON */ } }
    const ta = h('textarea', { rows: 14, name: 'state', value: text });
    const asJSON = h('input', { type: 'checkbox', name: 'asJSON', checked: isJSON, disabled: !s.isText });
    const note = h('div', { class: 'field-error', role: 'alert' });
    const check = () => {
      if (!asJSON.checked || !ta.value.trim()) { note.textContent = ''; ta.removeAttribute('aria-invalid'); return true; }
      try { JSON.parse(ta.value); note.textContent = ''; ta.removeAttribute('aria-invalid'); return true; } catch (e) { note.textContent = 'Not valid JSON: ' + e.message; ta.setAttribute('aria-invalid', 'true'); return false; }
    };
    ta.addEventListener('input', check);
    asJSON.addEventListener('change', check);
    put(editor, h('section', { class: 'viewer', 'aria-label': `Session ${id}` },
      h('h2', { text: `Session ${id}` }), h('p', { class: 'muted', text: `${fmtN(s.size)} bytes${isJSON ? ', JSON' : s.isText ? ', text' : ', binary (base64)'}` }),
      field('State', ta), h('label', { class: 'inline' }, asJSON, 'JSON (checked as you type)'), note,
      can('Manage') ? h('div', { class: 'row' },
        h('button', { type: 'button', class: 'primary', text: 'Save state', onclick: async () => {
          if (!check()) return;
          const state = asJSON.checked && ta.value.trim() ? JSON.stringify(JSON.parse(ta.value)) : ta.value;
          const r = await guarded(() => api('POST', 'session', { path: ev.path, id, state, base64: !s.isText }));
          if (r) { say(`Saved the state of session ${id}`); load().then(() => openSession(id)); }
        } }),
        h('button', { type: 'button', class: 'danger', text: 'Clear state', onclick: async () => {
          const r = await guarded(() => api('POST', 'session', { path: ev.path, id, state: '' }));
          if (r) { say(`Cleared the state of session ${id}`); load(); }
        } })) : h('p', { class: 'muted', text: 'Editing a session state needs the Manage right.' })));
  };
  await load();
}

// ---- entity create / edit -------------------------------------------------

function propertyForm(fields, onSubmit, submitLabel) {
  const err = h('div', { class: 'field-error', role: 'alert' });
  const rows = fields.map((f) => {
    let el;
    if (f.type === 'bool') { el = h('input', { type: 'checkbox', name: f.name, checked: f.value }); return h('div', {}, h('label', { class: 'inline' }, el, f.name)); }
    if (f.type === 'status') el = h('select', { name: f.name }, ['Active', 'Disabled', 'SendDisabled', 'ReceiveDisabled'].map((s) => h('option', { value: s, text: s, selected: s === f.value })));
    else el = h('input', { name: f.name, value: f.value, type: f.type === 'int' ? 'number' : 'text' });
    return field(f.name + (f.type === 'duration' ? ' (ISO 8601)' : ''), el);
  });
  return h('form', { onsubmit: async (e) => {
    e.preventDefault(); err.textContent = '';
    const props = {};
    for (const f of fields) {
      const el = e.target.elements[f.name];
      const v = f.type === 'bool' ? el.checked : f.type === 'int' ? Number(el.value) : el.value;
      if (v !== f.value) props[f.name] = v;
    }
    try { await onSubmit(props); } catch (x) { err.textContent = x.message; }
  } }, h('div', { class: 'row' }, rows.filter((r, i) => fields[i].type !== 'bool')),
  h('div', { class: 'row' }, rows.filter((r, i) => fields[i].type === 'bool')), err,
  h('button', { type: 'submit', class: 'primary', text: submitLabel }));
}

async function propertiesTab(ev, body) {
  if (!can('Manage')) { put(body, h('table', {}, h('tbody', {}, ev.properties.map((f) => h('tr', {}, h('th', { scope: 'row', text: f.name }), h('td', { text: String(f.value) })))))); return; }
  put(body, propertyForm(ev.properties, async (props) => {
    await api('POST', 'entity', { kind: ev.kind, path: ev.path, properties: props });
    say(`Saved ${ev.path}`); route();
  }, 'Save properties'));
}

// createPage starts from the fields the server gives a new entity of the
// kind, with the broker's defaults (api/defaults), and sends only those
// changed; an emptied field takes the default.
async function createPage(kind, topic) {
  const d = await guarded(() => api('GET', 'defaults?' + q({ kind })));
  if (!d) return namespacePage();
  const name = h('input', { name: 'name', required: true, autocomplete: 'off' });
  const fields = d.properties;
  const form = propertyForm(fields, async (props) => {
    for (const f of fields) if (f.type !== 'bool' && props[f.name] === '') delete props[f.name];
    const path = kind === 'subscription' ? `${topic}/Subscriptions/${name.value.trim()}` : name.value.trim();
    await api('POST', 'entity', { kind, path, create: true, properties: props });
    say(`Created ${kind} ${path}`); await loadTree(); location.hash = `#/e/${enc(path)}`;
  }, `Create ${kind}`);
  form.prepend(field(kind === 'subscription' ? `Subscription name (topic ${topic})` : `${kind[0].toUpperCase() + kind.slice(1)} name`, name));
  put($main, h('h1', { text: `New ${kind}` }), form);
  name.focus();
}

async function subscriptionsTab(ev, body) {
  const t = findNode(ev.path);
  put(body, can('Manage') ? h('a', { class: 'button', href: `#/new/subscription/${enc(ev.path)}`, text: 'New subscription' }) : null,
    h('div', { class: 'table-wrap' }, h('table', {}, h('tbody', {}, (t && t.subscriptions || []).map((s) => countsRow(s, s.name))))));
}

// ---- rules ---------------------------------------------------------------

function sqlEditor(kind, initial) {
  const ta = h('textarea', { rows: 3, name: kind, value: initial || '', spellcheck: 'false', 'aria-describedby': '' });
  const note = h('div', { class: 'field-error', 'aria-live': 'polite', id: `note${++uid}` });
  ta.setAttribute('aria-describedby', note.id);
  let t;
  const check = async () => {
    if (kind === 'action' && !ta.value.trim()) { note.textContent = ''; ta.removeAttribute('aria-invalid'); return; }
    const r = await api('POST', 'validate', { kind, text: ta.value }).catch((e) => ({ ok: false, error: e.message }));
    note.className = r.ok ? 'field-error ok' : 'field-error';
    note.textContent = r.ok ? 'Valid.' : r.error;
    if (r.ok) ta.removeAttribute('aria-invalid'); else ta.setAttribute('aria-invalid', 'true');
  };
  ta.addEventListener('input', () => { clearTimeout(t); t = setTimeout(check, 250); });
  if (initial) check();
  return { ta, note };
}

function ruleForm(ev, r) {
  const create = !r;
  r = r || { name: '', filterType: 'sql', sql: '1=1', action: '' };
  const name = h('input', { name: 'ruleName', value: r.name, readonly: !create, required: true });
  const type = h('select', { name: 'filterType' }, ['sql', 'correlation', 'true', 'false'].map((x) => h('option', { value: x, text: x, selected: x === r.filterType })));
  const filter = sqlEditor('filter', r.sql);
  const action = sqlEditor('action', r.action);
  const corr = h('textarea', { rows: 3, name: 'correlation', value: JSON.stringify({ ...(r.correlation || {}), ...(r.properties ? { properties: r.properties } : {}) }, null, 1) });
  const sqlBox = h('div', {}, field('SQL filter', filter.ta), filter.note);
  const corrBox = h('div', {}, field('Correlation filter (JSON: correlationId, messageId, to, replyTo, subject, sessionId, replyToSessionId, contentType, properties)', corr));
  const sync = () => { sqlBox.hidden = type.value !== 'sql'; corrBox.hidden = type.value !== 'correlation'; };
  type.addEventListener('change', sync); sync();
  const err = h('div', { class: 'field-error', role: 'alert' });
  return h('form', { class: 'viewer', onsubmit: async (e) => {
    e.preventDefault(); err.textContent = '';
    const body = { path: ev.path, name: name.value.trim(), filterType: type.value, action: action.ta.value, create };
    if (type.value === 'sql') body.sql = filter.ta.value;
    if (type.value === 'correlation') {
      try { const c = JSON.parse(corr.value || '{}'); body.properties = c.properties; delete c.properties; body.correlation = c; } catch (x) { err.textContent = 'Correlation filter: ' + x.message; return; }
    }
    try { await api('POST', 'rule', body); say(`Saved rule ${body.name}`); await loadTree(); route(); } catch (x) { err.textContent = x.message; }
  } }, h('h2', { text: create ? 'New rule' : `Rule ${r.name}` }), field('Name', name), field('Filter type', type), sqlBox, corrBox,
  h('div', {}, field('SQL action (optional)', action.ta), action.note), err,
  h('button', { type: 'submit', class: 'primary', text: create ? 'Add rule' : 'Save rule' }));
}

async function rulesTab(ev, body) {
  const edit = h('div', {});
  put(body, h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ['Name', 'Filter', 'Action', ''].map((t) => h('th', { text: t })))),
    h('tbody', {}, (ev.rules || []).map((r) => h('tr', {}, h('td', { text: r.name }),
      h('td', { class: 'mono', text: r.filterType === 'sql' ? r.sql : r.filterType === 'correlation' ? JSON.stringify({ ...r.correlation, ...(r.properties ? { properties: r.properties } : {}) }) : r.filterType }),
      h('td', { class: 'mono', text: r.action || '' }),
      h('td', {}, can('Manage') ? [h('button', { type: 'button', text: 'Edit', 'aria-label': `Edit rule ${r.name}`, onclick: () => put(edit, ruleForm(ev, r)) }), ' ',
        h('button', { type: 'button', class: 'danger', text: 'Delete', 'aria-label': `Delete rule ${r.name}`, onclick: async () => {
          if (!confirm(`Delete rule ${r.name}?`)) return;
          if (await guarded(() => api('DELETE', 'rule?' + q({ path: ev.path, name: r.name })))) { say(`Deleted rule ${r.name}`); await loadTree(); route(); }
        } })] : null)))))),
  can('Manage') ? h('button', { type: 'button', text: 'New rule', onclick: () => put(edit, ruleForm(ev, null)) }) : null, edit);
}

// ---- toolkit -------------------------------------------------------------

async function toolkitPage() {
  const r = await guarded(() => api('GET', 'toolkit'));
  if (!r) return;
  const acts = r.actions && can('Manage');
  const run = async (op, queue, name, done, store = '') => {
    const res = await guarded(() => api('POST', 'toolkit', { op, queue, name, store }));
    if (res) { say(done(res)); toolkitPage(); }
  };
  const table = (cols, rows, empty) => rows.length ? h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, cols.map(([t]) => h('th', { text: t })))),
    h('tbody', {}, rows.map((x) => h('tr', {}, cols.map(([, f]) => { const v = f(x); return h('td', {}, v instanceof Node || Array.isArray(v) ? v : String(v ?? '')); })))))) : h('p', { class: 'muted', text: empty });
  const sess = (entity, id) => h('a', { href: `#/e/${enc(entity)}/sessions`, text: `${entity} › ${id}` });
  const t = (s) => (s && !s.startsWith('0001') ? s.replace('T', ' ').slice(0, 19) : '');
  const btn = (text, label, f) => h('button', { type: 'button', text, 'aria-label': label, onclick: f });
  const scheduleActions = (x) => !acts ? '' : [
    x.paused ? btn('Resume', `Resume schedule ${x.session}`, () => run('resume', x.entity, x.session, () => `Resumed ${x.session}`))
      : btn('Pause', `Pause schedule ${x.session}`, () => run('pause', x.entity, x.session, () => `Paused ${x.session}`)), ' ',
    btn('Trigger', `Trigger schedule ${x.session}`, () => run('trigger', x.entity, x.session, () => `Triggered ${x.session}`))];
  const firstOfJob = new Set();
  const failedActions = (x) => {
    const k = x.queue + '\n' + x.store + '\n' + x.job;
    if (!acts || !x.queue || firstOfJob.has(k)) return '';
    firstOfJob.add(k);
    return btn('Resubmit job', `Resubmit job ${x.job}`, () => run('resubmit', x.queue, x.job, (res) => `Resubmitted ${x.job} as ${res.job}`, x.store));
  };
  put($main, h('h1', { text: 'Toolkit' }),
    h('p', { class: 'muted', text: 'What the saga, schedule and pipeline packages keep in this namespace. Open a session to view or edit its state.' }),
    h('h2', { text: `Sagas (${r.sagas.length})` }),
    table([['Instance', (x) => sess(x.entity, x.id)], ['Saga', (x) => x.saga], ['Status', (x) => x.status], ['Version', (x) => x.version],
      ['Updated', (x) => t(x.updated)], ['Deadline', (x) => t(x.deadline)],
      ['Pending timeouts', (x) => Object.entries(x.timeouts || {}).map(([k, v]) => `${k} due ${t(v.due)} (seq ${v.seq})`).join('; ')]], r.sagas, 'No saga instances in session state.'),
    h('h2', { text: `Schedules (${r.schedules.length})` }),
    table([['Schedule', (x) => sess(x.entity, x.session)], ['Target', (x) => x.definition.target], ['Spec', (x) => x.definition.cron || x.definition.every || (x.definition.calendar ? 'calendar' : '')],
      ['Next firing', (x) => x.paused ? 'paused' : x.finished ? 'finished' : t(x.next)], ['Last fired', (x) => t(x.lastFired)], ['Firings', (x) => x.firings], ['Missed', (x) => x.missed],
      ['', scheduleActions]], r.schedules, 'No schedules.'),
    h('h2', { text: `Pipeline jobs in progress (${r.jobs.length})` }),
    table([['Job', (x) => sess(x.entity, x.job)], ['Progress', (x) => `${x.lastTask + 1} of ${x.count}`], ['Failed', (x) => x.failed ? `task ${x.failedTask}` : ''],
      ['Error', (x) => x.error], ['Started', (x) => t(x.started)], ['Updated', (x) => t(x.updated)]], r.jobs, 'No jobs in progress.'),
    h('h2', { text: `Failed pipeline tasks (${r.failed.length})` }),
    table([['Job', (x) => x.entity ? sess(x.entity, x.job) : `${x.queue} › ${x.job}`], ['Store', (x) => x.store || 'broker'],
      ['Task', (x) => `${x.index} ${x.type || ''}`], ['Reason', (x) => x.reason], ['Error', (x) => x.error],
      ['Attempts', (x) => x.attempts], ['Failed at', (x) => t(x.failedAt)], ['', failedActions]], r.failed, 'No failed pipeline tasks.'),
    r.failedError ? h('p', { class: 'error', role: 'alert', text: r.failedError }) : null,
    r.actions ? null : h('p', { class: 'muted', text: 'This broker runs no toolkit operations from the console: use busbar schedule pause|resume|trigger NAME and busbar job resubmit QUEUE JOB.' }));
}

// ---- boot ----------------------------------------------------------------

(async () => {
  try { me = await api('GET', 'me'); start(); } catch { showSignIn(); }
})();
