// DOM helpers: elements are built with textContent only (never HTML strings), so nothing a remote
// agent says can become markup in the operator's page.

/** Creates an element: h('td', { class: 'x', onclick: fn }, 'text', child, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A status badge whose colour follows the value (s-<value> classes in console.css). */
export function badge(value, label) {
  return h('span', { class: `badge s-${String(value).replace(/[^a-z-]/gi, '')}` }, label ?? value);
}

/** hh:mm:ss of an ISO time (local clock); the full time in the title. */
export function clock(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return h(
    'time',
    { datetime: d.toISOString(), title: d.toLocaleString() },
    d.toLocaleTimeString([], { hour12: false }),
  );
}

/** hh:mm:ss.mmm of an ISO time (local clock), for timelines where steps are milliseconds apart. */
export function clockMs(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const ms = String(d.getMilliseconds()).padStart(3, '0');
  return h(
    'time',
    { datetime: d.toISOString(), title: d.toLocaleString() },
    `${d.toLocaleTimeString([], { hour12: false })}.${ms}`,
  );
}

/** Milliseconds between two ISO times, or undefined when either is missing or unreadable. */
export function between(from, to) {
  const a = Date.parse(from ?? '');
  const b = Date.parse(to ?? '');
  return Number.isNaN(a) || Number.isNaN(b) ? undefined : Math.max(0, b - a);
}

/** A duration a person reads at a glance: 840 ms, 3.2 s, 4 min 05 s, 2 h 10 min. */
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** A short form of a long id, the full one in the title. */
export function shortId(id, keep = 8) {
  if (!id) return '';
  const s = String(id);
  return h('span', { class: 'mono', title: s }, s.length > keep + 1 ? `${s.slice(0, keep)}…` : s);
}

/** The last path segment of an agent id (spiffe://local/worker/demo-echo → demo-echo). */
export function agentName(id) {
  if (!id) return '';
  const s = String(id);
  return s.slice(s.lastIndexOf('/') + 1) || s;
}

/** A table; a header is its text, or { label, class } (e.g. hide-sm, hidden on a phone like its cells). */
export function table(headers, rows, caption) {
  return h(
    'table',
    {},
    caption ? h('caption', { class: 'muted' }, caption) : null,
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((x) =>
          typeof x === 'object'
            ? h('th', { scope: 'col', class: x.class }, x.label)
            : h('th', { scope: 'col' }, x),
        ),
      ),
    ),
    h('tbody', {}, rows),
  );
}

/**
 * The element of index.html with this id. A missing one is a broken page: said plainly, not as a
 * TypeError on null further on.
 * @param {string} id
 * @returns {HTMLElement}
 */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`console: the page has no #${id}`);
  return el;
}

/**
 * The text of something caught: an Error's message, else the value itself.
 * @param {unknown} err
 */
export function messageOf(err) {
  return err instanceof Error ? err.message : String(err);
}

export function empty(text) {
  return h('div', { class: 'empty' }, text);
}

export function errorBox(err) {
  return h('div', { class: 'notice bad', role: 'alert' }, String(err && err.message ? err.message : err));
}

/** Pretty JSON in a <pre>. */
export function json(value) {
  return h('pre', { class: 'json' }, JSON.stringify(value, null, 2));
}

/** Calls fn at most once per `ms` (trailing), for re-rendering on bursts of live events. */
export function throttle(fn, ms) {
  let timer;
  return () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      fn();
    }, ms);
  };
}
