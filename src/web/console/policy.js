// Policy and audit: the admission decisions (GET /admissions), every federated MCP call's decision
// (GET /audit) and the policy notices of the event history, all filtered by one search box.
import { h, fill, badge, clock, agentName, table, empty, errorBox, throttle } from './dom.js';
import { getJson } from './api.js';
import { isSecurityNotice, reasonText } from './events.js';

const matches = (q, ...values) => !q || values.some((v) => String(v ?? '').toLowerCase().includes(q));

export const policyView = {
  name: 'policy',
  title: 'Policy and audit',
  mount(section, { store }) {
    this.store = store;
    this.search = h('input', { type: 'search', placeholder: 'search agent, tool, reason, decision…', 'aria-label': 'Search decisions', size: 36 });
    this.search.addEventListener('input', () => this.render());
    this.admissions = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-admissions' });
    this.audit = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-mcp' });
    this.notices = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-notices' });
    fill(section, h('h2', { id: 'h-policy' }, 'Policy and audit'),
      h('div', { class: 'toolbar' }, this.search, h('button', { type: 'button', onclick: () => this.load() }, 'Refresh')),
      h('h3', { id: 'h-admissions' }, 'Admission decisions'), this.admissions,
      h('h3', { id: 'h-mcp' }, 'MCP calls'), this.audit,
      h('h3', { id: 'h-notices' }, 'Policy notices'), this.notices);
    const again = throttle(() => this.visible && this.render(), 500);
    store.subscribe((e) => {
      if (!e || e.type.startsWith('amf.policy.')) again();
    });
  },
  show() {
    this.visible = true;
    void this.load();
  },
  hide() {
    this.visible = false;
  },
  async load() {
    const [adm, aud] = await Promise.allSettled([getJson('/admissions?limit=500'), getJson('/audit?limit=500')]);
    this.data = {
      decisions: adm.status === 'fulfilled' ? adm.value.decisions : adm.reason,
      records: aud.status === 'fulfilled' ? aud.value.records : aud.reason,
    };
    this.render();
  },
  render() {
    if (!this.data) return;
    const q = this.search.value.trim().toLowerCase();
    const { decisions, records } = this.data;
    if (decisions instanceof Error) fill(this.admissions, errorBox(decisions));
    else {
      const rows = decisions
        .filter((d) => matches(q, d.agent_id, d.decision, d.reasons.join(' '), d.risk_reason, d.stage, d.message))
        .map((d) => h('tr', { class: d.decision === 'denied' ? 'failed' : '' },
          h('td', {}, clock(d.time)), h('td', {}, badge(d.decision)), h('td', {}, agentName(d.agent_id) || '—'),
          h('td', {}, d.risk_score === null ? '—' : d.risk_score.toFixed(2)),
          h('td', { class: 'wrap' }, d.reasons.length ? h('span', { class: 'reason' }, d.reasons.join(', ')) : d.risk_reason ?? ''),
          h('td', { class: 'wrap hide-sm' }, d.message ?? (d.scorer ? `scored by ${d.scorer}` : ''))));
      fill(this.admissions, rows.length ? table(['Time', 'Decision', 'Agent', 'Risk', 'Reasons', 'Detail'], rows) : empty(q ? 'No admission decision matches.' : 'No admission decisions kept.'));
    }
    if (records instanceof Error) fill(this.audit, errorBox(records));
    else {
      const rows = records
        .filter((r) => matches(q, r.tool, r.wire_name, r.decision, r.outcome, r.caller, r.reasons.join(' '), r.agent_id))
        .map((r) => h('tr', { class: r.decision === 'deny' || r.outcome === 'failed' ? 'failed' : '' },
          h('td', {}, clock(r.time)), h('td', {}, badge(r.decision)), h('td', {}, badge(r.outcome === 'ok' ? 'ok' : r.outcome === 'denied' ? 'denied' : 'failed', r.outcome)),
          h('td', { class: 'mono wrap' }, r.tool ?? r.wire_name), h('td', { class: 'hide-sm' }, r.caller),
          h('td', {}, `${r.duration_ms} ms`), h('td', { class: 'wrap reason' }, [...r.reasons, r.error].filter(Boolean).join(', '))));
      fill(this.audit, rows.length ? table(['Time', 'Decision', 'Outcome', 'Tool', 'Caller', 'Took', 'Reasons'], rows) : empty(q ? 'No MCP call matches.' : 'No MCP calls yet (try the Tools view).'));
    }
    const notices = this.store.events
      .filter((e) => e.type.startsWith('amf.policy.'))
      .map((e) => ({ e, p: e.data?.payload ?? {} }))
      .filter(({ e, p }) => matches(q, e.type, p.reason, reasonText(p.reason), p.message, p.agent_id, p.task_id, JSON.stringify(p.details ?? {})))
      .reverse()
      .slice(0, 300)
      .map(({ e, p }) => h('tr', { class: e.type === 'amf.policy.deny' || isSecurityNotice(e) ? 'failed' : '' },
        h('td', {}, clock(e.time)), h('td', {}, badge(e.type === 'amf.policy.deny' || isSecurityNotice(e) ? 'deny' : 'warn', e.type.slice(11))),
        h('td', {}, h('span', { class: 'mono' }, p.reason ?? ''), isSecurityNotice(e) ? [' ', h('span', { class: 'reason' }, reasonText(p.reason))] : null), h('td', { class: 'wrap' }, p.message ?? ''),
        h('td', {}, p.task_id ? h('a', { href: `#/tasks/${encodeURIComponent(p.task_id)}` }, p.task_id.slice(0, 8)) : agentName(p.agent_id))));
    fill(this.notices, notices.length ? table(['Time', 'Kind', 'Reason', 'Message', 'About'], notices) : empty('No policy notices in the history.'));
  },
};
