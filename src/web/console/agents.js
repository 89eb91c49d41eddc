// Agents: admitted (live, unverified, offline), pending (heard on mDNS only, waiting for the
// operator) and denied, with the risk score and reasons of each admission decision, identity and
// visibility; one agent opened with its card and tools. A pending agent can be approved
// (POST /agents/<id>/approve, also `amf agents approve <id>`); any agent can be forgotten
// (DELETE /agents/<id>, also `amf agents forget <id>`), a live one after a confirmation. An admitted
// agent can be disabled and enabled (POST /agents/<id>/disable and /enable, also `amf agents
// disable <id>`): disabled, it stays connected and finishes what it holds, but gets no new work.
import { h, fill, badge, clock, agentName, table, empty, errorBox, json, throttle } from './dom.js';
import { getJson, sendJson } from './api.js';

function risk(decision) {
  if (!decision || decision.risk_score === null || decision.risk_score === undefined) return '—';
  return decision.risk_score.toFixed(2);
}

export const agentsView = {
  name: 'agents',
  title: 'Agents',
  mount(section, { store }) {
    this.status = h('span', { class: 'muted', role: 'status' });
    this.list = h('div', { class: 'panel' });
    this.detail = h('div');
    this.notice = h('div', { 'aria-live': 'polite' });
    fill(
      section,
      h('h2', { id: 'h-agents' }, 'Agents'),
      this.notice,
      this.detail,
      h(
        'div',
        { class: 'toolbar' },
        h('button', { type: 'button', onclick: () => this.load() }, 'Refresh'),
        h('span', { class: 'grow' }),
        this.status,
      ),
      this.list,
    );
    const again = throttle(() => this.visible && this.load(), 1000);
    store.subscribe((e) => {
      if (e && /^amf\.(discovery\.capability|policy\.deny)/.test(e.type)) again();
      // Disabled or enabled (here, from the CLI or on another coordinator).
      else if (
        e?.type === 'amf.policy.warning' &&
        /^agent_(disabled|enabled)$/.test(e.data?.payload?.reason ?? '')
      )
        again();
    });
  },
  show(param) {
    this.visible = true;
    this.param = param;
    void this.load();
  },
  hide() {
    this.visible = false;
  },
  async load() {
    // A later load (the route changed while this one waited) owns the view: this one's answers
    // would overwrite it with what was asked before.
    const run = (this.loads = (this.loads ?? 0) + 1);
    let agents;
    let decisions;
    try {
      [{ agents }, { decisions }] = await Promise.all([getJson('/agents'), getJson('/admissions?limit=200')]);
    } catch (err) {
      if (run === this.loads) fill(this.list, errorBox(err));
      return;
    }
    if (run !== this.loads) return;
    this.decisions = decisions;
    const latest = new Map();
    for (const d of decisions) if (d.agent_id && !latest.has(d.agent_id)) latest.set(d.agent_id, d);
    const known = new Set(agents.map((a) => a.agent_id));
    const denied = [...latest.values()].filter((d) => d.decision === 'denied' && !known.has(d.agent_id));
    const pending = agents.filter((a) => a.status === 'pending').length;
    this.status.textContent = `${agents.length - pending} admitted, ${pending} pending, ${denied.length} denied`;
    const rows = [
      ...agents.map((a) => {
        const d = latest.get(a.agent_id);
        const why =
          a.status === 'pending'
            ? 'heard on mDNS only: waiting for your approval'
            : a.disabled
              ? h(
                  'span',
                  {},
                  `disabled by the ${a.disabled.by} at `,
                  clock(a.disabled.disabled_at),
                  `: no new work (it is ${a.liveness})`,
                )
              : a.unverified
                ? `${a.unverified.reason}: ${a.unverified.message}`
                : (d?.risk_reason ?? '');
        return h(
          'tr',
          {},
          h('td', {}, badge(a.status)),
          h('td', {}, h('a', { href: `#/agents/${encodeURIComponent(a.agent_id)}` }, agentName(a.agent_id))),
          h(
            'td',
            {},
            a.capability_tags.map((t) => h('span', { class: 'tag' }, t)),
          ),
          h('td', {}, risk(d)),
          h('td', { class: 'wrap' }, why),
          h('td', { class: 'mono wrap hide-sm' }, a.agent_id),
          h('td', {}, a.visibility ?? 'local'),
          h('td', {}, clock(a.last_seen)),
        );
      }),
      ...denied.map((d) =>
        h(
          'tr',
          { class: 'failed' },
          h('td', {}, badge('denied')),
          h('td', {}, agentName(d.agent_id)),
          h('td', {}),
          h('td', {}, risk(d)),
          h('td', { class: 'wrap reason' }, `${d.reasons.join(', ')}${d.stage ? ` (${d.stage})` : ''}`),
          h('td', { class: 'mono wrap hide-sm' }, d.agent_id),
          h('td', {}, ''),
          h('td', {}, clock(d.time)),
        ),
      ),
    ];
    fill(
      this.list,
      rows.length
        ? table(
            ['Status', 'Agent', 'Tags', 'Risk', 'Decision reasons', 'Identity', 'Visibility', 'Last seen'],
            rows,
          )
        : empty('No agents yet. Start one: amf worker --name my-echo --tags echo'),
    );
    await this.renderDetail();
  },
  async renderDetail() {
    const id = this.param;
    if (!id) return fill(this.detail);
    let a;
    try {
      a = await getJson(`/agents/${encodeURIComponent(id)}`);
    } catch (err) {
      return this.param === id ? fill(this.detail, errorBox(err)) : undefined;
    }
    // Another agent was opened while this one's answer was on its way.
    if (this.param !== id) return;
    const mine = (this.decisions ?? []).filter((d) => d.agent_id === id);
    const approve =
      a.status === 'pending'
        ? h('button', { type: 'button', onclick: () => this.approve(id, a.nkey ?? '') }, 'Approve agent')
        : null;
    const disabled = a.status === 'disabled';
    const toggle =
      a.status === 'pending'
        ? null
        : h(
            'button',
            { type: 'button', onclick: () => this.toggle(id, disabled ? 'enable' : 'disable') },
            disabled ? 'Enable agent' : 'Disable agent',
          );
    const forget = h(
      'button',
      { type: 'button', class: 'danger', onclick: () => this.forget(id, a.status) },
      a.status === 'pending' ? 'Dismiss' : 'Forget agent',
    );
    fill(
      this.detail,
      h(
        'article',
        { class: 'card', 'aria-label': `Agent ${id}` },
        h(
          'div',
          { class: 'toolbar' },
          h('h3', { class: 'flush' }, agentName(id)),
          badge(a.status),
          h('span', { class: 'grow' }),
          approve,
          toggle,
          forget,
          h('a', { href: '#/agents' }, 'Close'),
        ),
        h(
          'div',
          { class: 'split' },
          h(
            'div',
            {},
            h(
              'dl',
              { class: 'kv' },
              h('dt', {}, 'Identity'),
              h('dd', { class: 'mono' }, a.agent_id),
              h('dt', {}, 'Trust domain'),
              h('dd', {}, a.trust_domain ?? 'local'),
              h('dt', {}, 'Visibility'),
              h('dd', {}, a.visibility ?? 'local'),
              h('dt', {}, 'Endpoint'),
              h('dd', { class: 'mono' }, a.endpoint),
              h('dt', {}, 'MCP'),
              h('dd', { class: 'mono' }, a.mcp_endpoint ?? '—'),
              h('dt', {}, 'Protocols'),
              h('dd', {}, (a.protocols_supported ?? []).join(', ')),
              h('dt', {}, 'Admitted'),
              h('dd', {}, clock(a.admitted_at)),
              h('dt', {}, 'Last seen'),
              h('dd', {}, clock(a.last_seen)),
              h('dt', {}, 'Key'),
              h(
                'dd',
                { class: 'mono wrap' },
                a.nkey ?? 'none (cannot prove itself: tied to its address once approved)',
              ),
              a.heard_from
                ? [
                    h('dt', {}, 'Heard from'),
                    h(
                      'dd',
                      { class: 'mono' },
                      `${a.heard_from.source}${a.heard_from.instance ? ` (${a.heard_from.instance})` : ''} on mDNS`,
                    ),
                  ]
                : null,
              a.enrollment
                ? [
                    h('dt', {}, 'Enrolled'),
                    h('dd', {}, `${a.enrollment.via}, ${a.enrollment.tags.join(', ') || 'no tags'}`),
                  ]
                : null,
              a.disabled
                ? [
                    h('dt', {}, 'Disabled'),
                    h(
                      'dd',
                      { class: 'reason' },
                      `by the ${a.disabled.by}${a.disabled.from ? ` from ${a.disabled.from}` : ''} at `,
                      clock(a.disabled.disabled_at),
                      `: it finishes what it holds and gets no new work (it is ${a.liveness})`,
                    ),
                  ]
                : null,
              a.unverified
                ? [
                    h('dt', {}, 'Unverified'),
                    h('dd', { class: 'reason' }, `${a.unverified.reason}: ${a.unverified.message}`),
                  ]
                : null,
            ),
            h('h3', {}, 'Tools'),
            a.tools.length
              ? h(
                  'ul',
                  {},
                  a.tools.map((t) =>
                    h(
                      'li',
                      {},
                      h('a', { href: `#/tools/${encodeURIComponent(t.wire_name)}` }, t.wire_name),
                      ' ',
                      h('span', { class: 'muted' }, t.description),
                    ),
                  ),
                )
              : h(
                  'p',
                  { class: 'muted' },
                  a.disabled ? 'None in /mcp while it is disabled.' : 'No MCP tools.',
                ),
            h('h3', {}, 'Admission decisions'),
            mine.length
              ? table(
                  ['Time', 'Decision', 'Risk', 'Reason'],
                  mine.map((d) =>
                    h(
                      'tr',
                      {},
                      h('td', {}, clock(d.time)),
                      h('td', {}, badge(d.decision)),
                      h('td', {}, risk(d)),
                      h(
                        'td',
                        { class: 'wrap' },
                        d.reasons.length ? d.reasons.join(', ') : (d.risk_reason ?? ''),
                      ),
                    ),
                  ),
                )
              : h('p', { class: 'muted' }, 'No decision in the kept history.'),
          ),
          h(
            'div',
            {},
            h('h3', {}, 'Agent card'),
            a.card ? json(a.card) : h('p', { class: 'muted' }, 'No verified card.'),
          ),
        ),
      ),
    );
  },
  async approve(id, nkey) {
    try {
      // The key shown is the key approved: a listing replaced since is refused, not approved.
      const r = await sendJson('POST', `/agents/${encodeURIComponent(id)}/approve`, { nkey });
      fill(
        this.notice,
        h(
          'div',
          { class: 'notice', role: 'status' },
          r.enrollment
            ? `Approved ${id}: its key is enrolled; it is live once it connects with it.`
            : `Approved ${id}.`,
        ),
      );
      await this.load();
    } catch (err) {
      fill(this.notice, errorBox(err));
    }
  },
  async toggle(id, action) {
    try {
      await sendJson('POST', `/agents/${encodeURIComponent(id)}/${action}`);
      fill(
        this.notice,
        h(
          'div',
          { class: 'notice', role: 'status' },
          action === 'disable'
            ? `Disabled ${id}: it finishes what it holds and gets no new work.`
            : `Enabled ${id}: it is offered work again.`,
        ),
      );
      await this.load();
    } catch (err) {
      fill(this.notice, errorBox(err));
    }
  },
  async forget(id, status) {
    if (
      status === 'live' &&
      !confirm(`${id} is live. Forget it anyway? It loses its NATS login and is disconnected.`)
    )
      return;
    try {
      await sendJson('DELETE', `/agents/${encodeURIComponent(id)}`);
      fill(this.notice, h('div', { class: 'notice', role: 'status' }, `Forgot ${id}.`));
      location.hash = '#/agents';
    } catch (err) {
      fill(this.notice, errorBox(err));
    }
  },
};
