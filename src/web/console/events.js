// Events: the history replayed from JetStream on load, then the live stream; heartbeats are hidden
// unless asked for; a task's streamed chunks are one row; a row opens the full CloudEvent. Failed
// results are red, not green.
import { h, fill, badge, clock, agentName, table, empty, json, throttle } from './dom.js';

const HEARTBEAT = 'amf.discovery.agent.heartbeat';
const SHOWN = 500;

/**
 * Warnings about an agent's identity or permissions (per-agent identity): a person reads what
 * happened, not the reason code alone, and sees them in red like a deny.
 */
const SECURITY_REASONS = {
  forged_event: 'forged event',
  identity_mismatch: 'identity mismatch',
  unsigned_event: 'unsigned event',
  bad_signature: 'bad signature',
  permission_violation: 'permission violation',
  agent_key_mismatch: 'key mismatch',
  tag_not_admitted: 'claim outside its tags',
};

/** A policy notice's reason as words: known security reasons named, others with spaces. */
export function reasonText(reason) {
  return SECURITY_REASONS[reason] ?? String(reason ?? '').replace(/_/g, ' ');
}

export function isSecurityNotice(e) {
  const p = e.data?.payload ?? {};
  return e.type.startsWith('amf.policy.') && Object.hasOwn(SECURITY_REASONS, p.reason ?? '');
}

/** The badge tone of each task event type, so a task's steps read at a glance. */
const TASK_TONES = {
  'amf.task.announce': 'announced',
  'amf.task.claim': 'claimed',
  'amf.task.input': 'input',
  'amf.task.progress': 'running',
  'amf.task.blocked': 'blocked',
  'amf.task.delegate': 'delegated',
};

/** One line a person can read instead of the raw payload. */
export function summarize(e) {
  const p = e.data?.payload ?? e.data ?? {};
  switch (e.type) {
    case 'amf.task.announce':
      return `${p.required_capability}: ${String(p.task ?? '').slice(0, 100)}`;
    case 'amf.task.claim':
      return `claimed by ${agentName(p.agent_id)}`;
    case 'amf.task.progress':
      return `${agentName(p.agent_id)} ${p.percent ?? ''}${p.percent !== undefined ? '%' : ''} ${p.message ?? ''}`;
    case 'amf.task.input':
      return `follow-up for ${agentName(p.agent_id)}: ${String(p.text ?? '').slice(0, 100)}`;
    case 'amf.task.delegate':
      return `${agentName(p.agent_id)} delegated to ${p.required_capability}`;
    case 'amf.result.partial':
      return `chunk ${p.seq}: ${String(p.delta ?? '').slice(0, 80)}`;
    case 'amf.result.final':
      return p.status === 'failed'
        ? `failed: ${p.error?.code} ${p.error?.message ?? ''}`
        : `completed: ${String(p.result?.text ?? '').slice(0, 100)}`;
    case 'amf.discovery.capability.advertise':
      return `${agentName(p.agent_id)} ${p.change ?? ''} [${(p.capability_tags ?? []).join(', ')}]`;
    case HEARTBEAT:
      return `${agentName(p.agent_id)} alive`;
    case 'amf.policy.warning':
    case 'amf.policy.deny':
      return `${reasonText(p.reason)}: ${p.message ?? ''}${p.agent_id ? ` (agent ${agentName(p.agent_id)})` : ''}`;
    default:
      return p.message ?? p.reason ?? '';
  }
}

/** @typedef {{ e: any, chunks?: number, text?: string }} EventRow one event, or a task's folded chunks */

/**
 * The events as rows: every streamed chunk (`amf.result.partial`) of a task folds into one row, at
 * the place of its latest chunk, with the count and the text streamed so far. Others are one row each.
 * @returns {EventRow[]}
 */
export function foldPartials(events) {
  const chunks = new Map();
  for (const e of events) {
    if (e.type !== 'amf.result.partial') continue;
    const id = e.amftaskid ?? e.data?.payload?.task_id ?? e.id;
    const group = chunks.get(id) ?? { count: 0, text: '', last: undefined };
    group.count += 1;
    if (group.text.length < 200) group.text += String(e.data?.payload?.delta ?? '');
    group.last = e;
    chunks.set(id, group);
  }
  /** @type {EventRow[]} */
  const rows = [];
  for (const e of events) {
    if (e.type !== 'amf.result.partial') rows.push({ e });
    else {
      const group = chunks.get(e.amftaskid ?? e.data?.payload?.task_id ?? e.id);
      if (group.last === e) rows.push({ e, chunks: group.count, text: group.text });
    }
  }
  return rows;
}

function tone(e) {
  const p = e.data?.payload ?? {};
  if (
    e.type === 'amf.policy.deny' ||
    isSecurityNotice(e) ||
    (e.type === 'amf.result.final' && p.status === 'failed') ||
    e.type === 'amf.task.cancel'
  )
    return 'failed';
  if (e.type === 'amf.result.final') return 'completed';
  if (e.type === 'amf.policy.warning') return 'unverified';
  return TASK_TONES[e.type] ?? 'info';
}

export const eventsView = {
  name: 'events',
  title: 'Events',
  mount(section, { store }) {
    this.store = store;
    this.heartbeats = h('input', { type: 'checkbox', id: 'show-heartbeats' });
    this.filter = h('input', {
      type: 'search',
      placeholder: 'type or text, e.g. amf.task',
      'aria-label': 'Filter events',
      size: 26,
    });
    this.pause = h(
      'button',
      { type: 'button', 'aria-pressed': 'false', onclick: () => this.togglePause() },
      'Pause',
    );
    this.count = h('span', { class: 'muted', role: 'status' });
    this.list = h('div', { class: 'panel' });
    this.open = new Set();
    for (const el of [this.heartbeats, this.filter]) el.addEventListener('input', () => this.render());
    fill(
      section,
      h('h2', { id: 'h-events' }, 'Events'),
      h(
        'div',
        { class: 'toolbar' },
        this.filter,
        h('label', { for: 'show-heartbeats' }, this.heartbeats, ' show heartbeats'),
        this.pause,
        h('span', { class: 'grow' }),
        this.count,
      ),
      this.list,
    );
    const again = throttle(() => this.visible && !this.paused && this.render(), 250);
    store.subscribe((e) => {
      if (!e || e.type !== HEARTBEAT || this.heartbeats.checked) again();
      else this.count.textContent = this.countText();
    });
  },
  show() {
    this.visible = true;
    this.render();
  },
  hide() {
    this.visible = false;
  },
  togglePause() {
    this.paused = !this.paused;
    this.pause.textContent = this.paused ? 'Resume' : 'Pause';
    this.pause.setAttribute('aria-pressed', String(this.paused));
    if (!this.paused) this.render();
  },
  countText() {
    const all = this.store.events;
    const hidden = all.filter((e) => e.type === HEARTBEAT).length;
    return `${this.shownCount ?? 0} shown of ${all.length} events${this.heartbeats.checked ? '' : ` (${hidden} heartbeats hidden)`} · history ${this.store.historyState}`;
  },
  render() {
    // A re-render replaces the rows: the row that had keyboard focus gets it back.
    const focused = /** @type {HTMLElement | null} */ (document.activeElement)?.dataset?.eventId;
    const q = this.filter.value.trim().toLowerCase();
    const all = this.store.events;
    const summary = (/** @type {EventRow} */ { e, chunks, text }) =>
      chunks
        ? `${chunks} streamed chunk${chunks === 1 ? '' : 's'}: ${(text ?? '').slice(0, 120)}`
        : summarize(e);
    const shown = foldPartials(all.filter((e) => this.heartbeats.checked || e.type !== HEARTBEAT))
      .filter(
        (r) =>
          !q ||
          r.e.type.includes(q) ||
          summary(r).toLowerCase().includes(q) ||
          (r.e.amftaskid ?? '').includes(q),
      )
      .slice(-SHOWN)
      .reverse();
    this.shownCount = shown.length;
    this.count.textContent = this.countText();
    if (shown.length === 0)
      return fill(
        this.list,
        empty(this.store.historyState === 'loading' ? 'Loading history…' : 'Waiting for events…'),
      );
    const rows = shown.flatMap((r) => {
      const { e, chunks } = r;
      const toggle = () => {
        if (this.open.has(e.id)) this.open.delete(e.id);
        else this.open.add(e.id);
        this.render();
      };
      const row = h(
        'tr',
        {
          class: `ev-row ${tone(e) === 'failed' ? 'failed' : ''}`,
          tabindex: '0',
          'data-event-id': e.id,
          'aria-expanded': String(this.open.has(e.id)),
          onclick: toggle,
          onkeydown: (k) => (k.key === 'Enter' || k.key === ' ') && (k.preventDefault(), toggle()),
        },
        h('td', {}, clock(e.time)),
        h(
          'td',
          {},
          badge(tone(e), e.type.replace(/^amf\./, '')),
          chunks ? [' ', h('span', { class: 'count', title: 'chunks' }, `×${chunks}`)] : null,
        ),
        h(
          'td',
          {},
          e.amftaskid
            ? h(
                'a',
                { href: `#/tasks/${encodeURIComponent(e.amftaskid)}`, onclick: (c) => c.stopPropagation() },
                e.amftaskid.slice(0, 8),
              )
            : '',
        ),
        h('td', { class: 'wrap' }, summary(r)),
      );
      return this.open.has(e.id) ? [row, h('tr', {}, h('td', { colspan: '4' }, json(e)))] : [row];
    });
    fill(this.list, table(['Time', 'Type', 'Task', 'Summary'], rows));
    if (focused) this.list.querySelector(`tr[data-event-id="${CSS.escape(focused)}"]`)?.focus();
  },
};
