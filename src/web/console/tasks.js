// Tasks: every task the event history and the live stream mention, folded from its events into a
// state timeline (announced, claimed by whom, progress, attempts, delegations, the terminal event),
// with durations, rates per tag, filters, and one task opened from a link (#/tasks/<id>) with its
// cancel (a running task) and retry (a failed one) actions.
import {
  h,
  fill,
  badge,
  clock,
  clockMs,
  between,
  duration,
  shortId,
  agentName,
  table,
  empty,
  errorBox,
  json,
  throttle,
  messageOf,
} from './dom.js';
import { getJson, publishEvent } from './api.js';
import { rateChart } from './rates.js';

const payloadOf = (e) => e?.data?.payload ?? e?.data ?? {};
const TERMINAL = new Set(['completed', 'failed', 'expired', 'cancelled']);

function taskFor(tasks, id, e) {
  let t = tasks.get(id);
  if (!t) {
    t = {
      id,
      tag: '',
      text: '',
      trace: e.amftraceid ?? '',
      state: 'announced',
      claimedBy: '',
      attempts: 0,
      parent: '',
      children: [],
      timeline: [],
      partials: 0,
      created: e.time,
      claimed: '',
      lastClaimed: '',
      ended: '',
      reason: '',
      result: '',
    };
    tasks.set(id, t);
  }
  if (!t.trace && e.amftraceid) t.trace = e.amftraceid;
  return t;
}

function step(t, e, text, kind = '') {
  t.timeline.push({ time: e.time, type: e.type, text, kind });
}

/** Folds events (oldest first) into tasks keyed by id. */
export function foldTasks(events) {
  const tasks = new Map();
  for (const e of events) {
    const p = payloadOf(e);
    const id = e.amftaskid ?? p.task_id;
    switch (e.type) {
      case 'amf.task.announce': {
        const t = taskFor(tasks, p.task_id ?? id, e);
        if (!t.timeline.length) t.created = e.time;
        t.tag = p.required_capability ?? t.tag;
        t.text = p.task ?? t.text;
        t.attempts = Math.max(t.attempts, p.attempt ?? 1);
        if (p.parent_task_id) t.parent = p.parent_task_id;
        if (!TERMINAL.has(t.state)) t.state = 'announced';
        step(t, e, `announced for ${t.tag}${(p.attempt ?? 1) > 1 ? ` (attempt ${p.attempt})` : ''}`);
        break;
      }
      case 'amf.task.claim': {
        if (!id) break;
        const t = taskFor(tasks, id, e);
        t.claimedBy = p.agent_id ?? '';
        t.claimed = t.claimed || e.time;
        t.lastClaimed = e.time;
        if (p.attempt) t.attempts = Math.max(t.attempts, p.attempt);
        if (!TERMINAL.has(t.state)) t.state = 'claimed';
        step(t, e, `claimed by ${agentName(p.agent_id)}${p.attempt ? ` (attempt ${p.attempt})` : ''}`);
        break;
      }
      case 'amf.task.progress': {
        if (!id) break;
        const t = taskFor(tasks, id, e);
        if (!TERMINAL.has(t.state)) t.state = 'running';
        const pct = typeof p.percent === 'number' ? ` ${p.percent}%` : '';
        step(t, e, `progress${pct}${p.message ? `: ${p.message}` : ''}`);
        break;
      }
      case 'amf.task.input': {
        if (!id) break;
        const t = taskFor(tasks, id, e);
        step(
          t,
          e,
          `follow-up message for ${agentName(p.agent_id)}: ${String(p.text ?? '').slice(0, 200)}`,
          'input',
        );
        break;
      }
      case 'amf.task.blocked': {
        if (!id) break;
        const t = taskFor(tasks, id, e);
        if (!TERMINAL.has(t.state)) t.state = 'blocked';
        step(t, e, `blocked: ${p.reason ?? ''}`, 'warn');
        break;
      }
      case 'amf.task.delegate': {
        const parent = taskFor(tasks, p.parent_task_id, e);
        if (!parent.children.includes(p.child_task_id)) parent.children.push(p.child_task_id);
        const child = taskFor(tasks, p.child_task_id, e);
        child.parent = p.parent_task_id;
        child.tag = child.tag || p.required_capability;
        step(
          parent,
          e,
          `delegated to ${p.required_capability} as ${String(p.child_task_id).slice(0, 8)} by ${agentName(p.agent_id)}`,
        );
        break;
      }
      case 'amf.result.partial': {
        if (id) taskFor(tasks, id, e).partials += 1;
        break;
      }
      case 'amf.result.final': {
        if (!id) break;
        const t = taskFor(tasks, id, e);
        t.state = p.status === 'failed' ? 'failed' : 'completed';
        t.ended = e.time;
        if (p.agent_id) t.claimedBy = t.claimedBy || p.agent_id;
        if (p.status === 'failed') {
          t.reason = p.error ? `${p.error.code}: ${p.error.message}` : 'failed';
          step(t, e, `failed — ${t.reason}`, 'bad');
        } else {
          t.result = p.result?.text ?? '';
          step(
            t,
            e,
            `completed by ${agentName(p.agent_id)}${t.partials ? ` (${t.partials} streamed chunks)` : ''}`,
            'ok',
          );
        }
        break;
      }
      case 'amf.task.cancel': {
        if (!id) break;
        const t = taskFor(tasks, id, e);
        t.state = 'cancelled';
        t.ended = e.time;
        t.reason = `${p.reason}: ${p.message ?? ''}`;
        step(t, e, `cancelled — ${t.reason}`, 'bad');
        break;
      }
      case 'amf.policy.deny':
      case 'amf.policy.warning': {
        if (!id || !tasks.has(id)) break;
        const t = tasks.get(id);
        if (p.terminal && p.state) {
          t.state = p.state;
          t.ended = e.time;
          t.reason = `${p.reason}: ${p.message}`;
        }
        const deny = e.type === 'amf.policy.deny';
        step(
          t,
          e,
          `${deny ? 'policy deny' : 'warning'} ${p.reason}: ${p.message}${p.retrying ? ' (retrying)' : ''}`,
          deny || p.terminal ? 'bad' : 'warn',
        );
        break;
      }
      default:
        break;
    }
  }
  return tasks;
}

const FAILED = new Set(['failed', 'expired', 'cancelled']);
const ENDED = new Set([...TERMINAL, ...FAILED]);

/**
 * A task's durations: queued (announced until its first claim), ran (its last claim until its end)
 * and total (announced until its end). Any of them is undefined when the events to tell are missing.
 */
export function durations(t) {
  return {
    queued: between(t.created, t.claimed),
    ran: between(t.lastClaimed, t.ended),
    total: between(t.created, t.ended),
  };
}

function tookCell(t) {
  const d = durations(t);
  if (d.total === undefined) return h('td', { class: 'hide-sm muted' }, ENDED.has(t.state) ? '—' : '…');
  const parts = [
    d.queued !== undefined ? `queued ${duration(d.queued)}` : '',
    d.ran !== undefined ? `ran ${duration(d.ran)}` : '',
  ].filter(Boolean);
  return h('td', { class: 'hide-sm num', title: parts.join(', ') }, duration(d.total));
}
/** Tasks asked of the coordinator's task list (GET /tasks), newest first. */
const LISTED = 500;

/**
 * Adds the coordinator's stored tasks (GET /tasks) to those folded from events: a task whose events
 * are older than the loaded history is still listed, with the state the coordinators stored.
 */
export function mergeListed(tasks, listed) {
  for (const s of listed) {
    const known = tasks.get(s.task_id);
    if (known) {
      known.tag = known.tag || s.tag;
      known.claimedBy = known.claimedBy || s.claimed_by || '';
      known.trace = known.trace || s.trace_id;
      if (!known.ended && s.ended_at && TERMINAL.has(s.state)) known.ended = s.ended_at;
      continue;
    }
    tasks.set(s.task_id, {
      id: s.task_id,
      tag: s.tag,
      text: '',
      trace: s.trace_id ?? '',
      state: s.state,
      claimedBy: s.claimed_by ?? '',
      attempts: s.attempt ?? 1,
      parent: s.parent_task_id ?? '',
      children: [],
      timeline: [],
      partials: 0,
      created: s.created_at,
      claimed: '',
      lastClaimed: '',
      ended: s.ended_at ?? '',
      reason: s.outcome ? `${s.outcome.reason}: ${s.outcome.message}` : '',
      result: '',
    });
  }
  for (const t of tasks.values()) {
    const parent = t.parent && tasks.get(t.parent);
    if (parent && !parent.children.includes(t.id)) parent.children.push(t.id);
  }
  return tasks;
}

function options(select, label, values, keep) {
  fill(
    select,
    h('option', { value: '' }, `all ${label}`),
    [...values].sort().map((v) => h('option', { value: v }, v)),
  );
  select.value = values.has(keep) ? keep : '';
}

export const tasksView = {
  name: 'tasks',
  title: 'Tasks',
  mount(section, { store }) {
    this.store = store;
    this.filters = {
      state: h('select', { 'aria-label': 'Filter by state' }),
      tag: h('select', { 'aria-label': 'Filter by tag' }),
      agent: h('select', { 'aria-label': 'Filter by agent' }),
      trace: h('input', {
        type: 'search',
        placeholder: 'trace or task id',
        'aria-label': 'Filter by trace or task id',
        size: 20,
      }),
    };
    this.count = h('span', { class: 'muted', role: 'status' });
    this.list = h('div', { class: 'panel', id: 'task-list' });
    this.detail = h('div');
    this.notice = h('div');
    this.ratesBy = h(
      'select',
      { 'aria-label': 'Group rates by' },
      h('option', { value: 'tag' }, 'per tag'),
      h('option', { value: 'agent' }, 'per agent'),
    );
    this.ratesBy.addEventListener('input', () => this.renderList());
    for (const f of Object.values(this.filters)) f.addEventListener('input', () => this.renderList());
    fill(
      section,
      h('h2', { id: 'h-tasks' }, 'Tasks'),
      this.detail,
      h(
        'div',
        { class: 'toolbar', role: 'group', 'aria-label': 'Task filters' },
        ...Object.values(this.filters),
        h('span', { class: 'grow' }),
        this.count,
      ),
      this.list,
      (this.rates = h('div', { role: 'region', 'aria-labelledby': 'h-rates' })),
    );
    this.listed = [];
    const again = throttle(() => this.render(), 300);
    const reload = throttle(() => this.visible && this.loadList(), 2000);
    store.subscribe((e) => {
      if (!e || /^amf\.(task|result|policy)\./.test(e.type)) again();
      if (e && /^amf\.(task\.announce|result\.final)/.test(e.type)) reload();
    });
  },
  show(param) {
    if (param !== this.param) fill(this.notice);
    this.param = param;
    this.visible = true;
    this.render();
    void this.loadList();
  },
  hide() {
    this.visible = false;
  },
  /** The coordinator's task list; on failure the tasks of the event history are shown alone. */
  async loadList() {
    try {
      this.listed = (await getJson(`/tasks?limit=${LISTED}`)).tasks;
      this.listError = '';
    } catch (err) {
      this.listError = messageOf(err);
    }
    this.render();
  },
  render() {
    this.tasks = mergeListed(foldTasks(this.store.events), this.listed);
    this.renderList();
    void this.renderDetail(); // its own fetches catch their errors; a newer render supersedes it (token)
  },
  renderList() {
    const all = [...this.tasks.values()];
    const f = Object.fromEntries(Object.entries(this.filters).map(([k, el]) => [k, el.value.trim()]));
    options(this.filters.state, 'states', new Set(all.map((t) => t.state)), f.state);
    options(this.filters.tag, 'tags', new Set(all.map((t) => t.tag).filter(Boolean)), f.tag);
    options(
      this.filters.agent,
      'agents',
      new Set(all.map((t) => agentName(t.claimedBy)).filter(Boolean)),
      f.agent,
    );
    const shown = all
      .filter((t) => (!f.state || t.state === f.state) && (!f.tag || t.tag === f.tag))
      .filter((t) => !f.agent || agentName(t.claimedBy) === f.agent)
      .filter((t) => !f.trace || t.trace.includes(f.trace) || t.id.includes(f.trace))
      .sort((a, b) => (a.created < b.created ? 1 : -1));
    this.count.textContent = `${shown.length} of ${all.length} tasks${this.listError ? ` (task list: ${this.listError})` : ''}`;
    if (all.length === 0) {
      fill(
        this.list,
        empty(
          this.store.historyState === 'loading'
            ? 'Loading history…'
            : 'No tasks yet. Ask the mesh in Chat, or run: amf send --tag echo hello',
        ),
      );
      return;
    }
    const rows = shown.map((t) =>
      h(
        'tr',
        { class: FAILED.has(t.state) ? 'failed' : '' },
        h('td', {}, badge(t.state)),
        h(
          'td',
          {},
          h(
            'a',
            { href: `#/tasks/${encodeURIComponent(t.id)}`, 'aria-label': `task ${t.id}` },
            t.id.slice(0, 8),
          ),
        ),
        h('td', {}, t.tag ? h('span', { class: 'tag' }, t.tag) : ''),
        h('td', { class: 'hide-sm' }, agentName(t.claimedBy)),
        h('td', { class: 'hide-sm' }, String(t.attempts || 1)),
        h(
          'td',
          { class: 'wrap result' },
          FAILED.has(t.state) ? h('span', { class: 'reason' }, t.reason) : (t.result || t.text).slice(0, 120),
        ),
        tookCell(t),
        h('td', { class: 'hide-sm' }, shortId(t.trace)),
        h('td', { class: 'hide-sm' }, clock(t.created)),
      ),
    );
    fill(
      this.list,
      table(
        [
          'State',
          'Task',
          'Tag',
          { label: 'Claimed by', class: 'hide-sm' },
          { label: 'Attempts', class: 'hide-sm' },
          'Result or reason',
          { label: 'Took', class: 'hide-sm' },
          { label: 'Trace', class: 'hide-sm' },
          { label: 'Created', class: 'hide-sm' },
        ],
        rows,
      ),
    );
    fill(
      this.rates,
      h(
        'div',
        { class: 'toolbar rates-head' },
        h('h3', { id: 'h-rates', class: 'flush' }, 'Rates and errors'),
        this.ratesBy,
      ),
      rateChart(all, this.ratesBy.value),
    );
  },
  async renderDetail() {
    const id = this.param;
    if (!id) return fill(this.detail);
    let t = this.tasks.get(id);
    const token = (this.token = Symbol());
    let snap;
    let snapError;
    try {
      snap = await getJson(`/tasks/${encodeURIComponent(id)}`);
    } catch (err) {
      snapError = err;
    }
    // Older than the loaded history: ask JetStream for this task's own events.
    // (also a task known only from the task list: it has no timeline yet).
    if (!t || t.timeline.length === 0) {
      try {
        const page = await getJson(`/events/history?task=${encodeURIComponent(id)}&limit=500`);
        const own = foldTasks(page.events.map((e) => e.event)).get(id);
        if (own)
          t = {
            ...own,
            tag: own.tag || t?.tag || '',
            children: t?.children.length ? t.children : own.children,
          };
      } catch {
        /* the snapshot, if any, is shown alone */
      }
    }
    if (this.token !== token) return;
    if (!t && !snap)
      return fill(this.detail, errorBox(`task ${id}: ${snapError ? messageOf(snapError) : 'not found'}`));
    const state = snap?.state ?? t?.state;
    const reason = snap?.outcome ? `${snap.outcome.reason}: ${snap.outcome.message}` : t?.reason;
    const d = durations({
      created: t?.created || snap?.created_at,
      claimed: t?.claimed,
      lastClaimed: t?.lastClaimed,
      ended: t?.ended || snap?.ended_at,
    });
    const start = Date.parse(t?.timeline[0]?.time ?? '');
    const since = (time) =>
      Number.isNaN(start) ? '' : h('span', { class: 'muted num' }, ` +${duration(Date.parse(time) - start)}`);
    fill(
      this.detail,
      h(
        'article',
        { class: 'card', 'aria-label': `Task ${id}` },
        h(
          'div',
          { class: 'toolbar' },
          h('h3', { class: 'flush' }, `Task ${id}`),
          badge(state),
          h('span', { class: 'grow' }),
          this.actions(id, state, snap?.tag ?? t?.tag, t),
          h('a', { href: '#/tasks' }, 'Close'),
        ),
        this.notice,
        h(
          'div',
          { class: 'split' },
          h(
            'div',
            {},
            h(
              'dl',
              { class: 'kv' },
              h('dt', {}, 'Tag'),
              h('dd', {}, snap?.tag ?? t?.tag ?? ''),
              h('dt', {}, 'Claimed by'),
              h('dd', {}, snap?.claimed_by ?? t?.claimedBy ?? '—'),
              h('dt', {}, 'Attempts'),
              h('dd', {}, String(snap?.attempt ?? t?.attempts ?? 1)),
              h('dt', {}, 'Queued'),
              h('dd', { 'aria-label': 'Queued for' }, d.queued === undefined ? '—' : duration(d.queued)),
              h('dt', {}, 'Ran'),
              h('dd', { 'aria-label': 'Ran for' }, d.ran === undefined ? '—' : duration(d.ran)),
              h('dt', {}, 'Total'),
              h('dd', { 'aria-label': 'Total time' }, d.total === undefined ? '—' : duration(d.total)),
              h('dt', {}, 'Trace'),
              h('dd', { class: 'mono' }, snap?.trace_id ?? t?.trace ?? ''),
              h('dt', {}, 'Task'),
              h('dd', {}, t?.text ?? ''),
              FAILED.has(state) ? [h('dt', {}, 'Reason'), h('dd', { class: 'reason' }, reason ?? '')] : null,
              t?.result ? [h('dt', {}, 'Result'), h('dd', {}, t.result)] : null,
            ),
            h('h3', {}, 'Delegations'),
            this.tree(id),
          ),
          h(
            'div',
            {},
            h('h3', {}, 'Timeline'),
            t
              ? h(
                  'ol',
                  { class: 'timeline' },
                  t.timeline.map((s) =>
                    h('li', { class: s.kind }, clockMs(s.time), since(s.time), ' ', s.text),
                  ),
                )
              : empty('No events of this task are in the loaded history.'),
          ),
        ),
        snap
          ? h('details', {}, h('summary', {}, 'Coordinator snapshot (GET /tasks/<id>)'), json(snap))
          : null,
      ),
    );
  },
  /**
   * Cancel for a task still running, retry for one that failed: both behind the operator key
   * (`POST /publish` as the operator), each after a confirmation, the outcome shown above the details.
   */
  actions(id, state, tag, t) {
    if (!ENDED.has(state))
      return h('button', { type: 'button', class: 'danger', onclick: () => this.cancel(id) }, 'Cancel task');
    if (FAILED.has(state) && tag) {
      const text = t?.text ?? '';
      return h(
        'button',
        {
          type: 'button',
          disabled: !text,
          title: text ? undefined : 'the task text is not in the loaded history',
          onclick: () => this.retry(id, tag, text),
        },
        'Retry as a new task',
      );
    }
    return null;
  },
  async cancel(id) {
    if (!confirm(`Cancel task ${id}? Its agent is told to stop and the task fails with task_cancelled.`))
      return;
    try {
      await publishEvent(
        'amf.task.cancel',
        { task_id: id, reason: 'task_cancelled', message: 'from the console' },
        { taskId: id },
      );
      this.say(`Cancelled task ${id}.`);
    } catch (err) {
      this.say(`Could not cancel task ${id}: ${messageOf(err)}`, true);
    }
  },
  async retry(id, tag, text) {
    if (!confirm(`Send the text of task ${id} to ${tag} again, as a new task?`)) return;
    const taskId = crypto.randomUUID();
    try {
      await publishEvent(
        'amf.task.announce',
        { task_id: taskId, task: text, required_capability: tag },
        { taskId },
      );
      this.say(
        h(
          'span',
          {},
          `Retried task ${id.slice(0, 8)} as `,
          h('a', { href: `#/tasks/${taskId}` }, taskId),
          '.',
        ),
      );
    } catch (err) {
      this.say(`Could not retry task ${id}: ${messageOf(err)}`, true);
    }
  },
  say(content, bad = false) {
    fill(this.notice, h('div', { class: `notice ${bad ? 'bad' : ''}`, role: 'status' }, content));
  },
  tree(id) {
    let root = id;
    const seen = new Set();
    while (this.tasks.get(root)?.parent && !seen.has(root)) {
      seen.add(root);
      root = this.tasks.get(root).parent;
    }
    const node = (tid, depth) => {
      const t = this.tasks.get(tid);
      const label = h('a', { href: `#/tasks/${encodeURIComponent(tid)}` }, tid.slice(0, 8));
      return h(
        'li',
        {},
        tid === id ? h('strong', {}, label) : label,
        ' ',
        t ? badge(t.state) : '',
        ' ',
        t?.tag ?? '',
        t && t.children.length && depth < 10
          ? h(
              'ul',
              { class: 'tree' },
              t.children.map((c) => node(c, depth + 1)),
            )
          : null,
      );
    };
    const r = this.tasks.get(root);
    if (!r || (r.children.length === 0 && root === id)) return h('p', { class: 'muted' }, 'No delegations.');
    return h('ul', { class: 'tree', 'aria-label': 'Delegation tree' }, node(root, 0));
  },
};
