// Policy and audit: the admission decisions (GET /admissions), every federated MCP call's decision
// (GET /audit) and the policy notices of the event history, all filtered by one search box.
import { h, fill, badge, clock, agentName, table, empty, errorBox, throttle } from './dom.js';
import { getJson } from './api.js';
import { isSecurityNotice, reasonText } from './events.js';

const matches = (q, ...values) =>
  !q ||
  values.some((v) =>
    String(v ?? '')
      .toLowerCase()
      .includes(q),
  );

/** From this many rows of one kind, the rows fold into one line with a count (a click unfolds them). */
export const GROUP_AT = 2;

/** What a group of warnings of one reason says, for the reasons a default setup repeats. */
const GROUP_TITLES = {
  watcher_output_unverified: (n) =>
    `${n} agents admitted without SPIFFE (their watcher summaries are unsigned)`,
  mcp_call_unauthenticated: (n) =>
    `${n} MCP calls forwarded over plain http without authenticating the agent`,
  no_agent_for_tag: (n) => `${n} requests for a tag no agent serves`,
};

/** The distinct short names of agents, the first 12 and a count of the rest. */
function names(ids) {
  const all = [...new Set(ids.map(agentName))];
  return all.length > 12 ? `${all.slice(0, 12).join(', ')} and ${all.length - 12} more` : all.join(', ');
}

/**
 * Splits rows into groups by key, in order of their newest row: a group of GROUP_AT or more (and not
 * unfolded) is one summary, any other is its rows.
 */
export function groupRows(items, keyOf) {
  const groups = new Map();
  for (const item of items) {
    const key = keyOf(item);
    if (key === undefined) groups.set(Symbol('single'), [item]);
    else groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  return [...groups.entries()].map(([key, members]) => ({
    key: typeof key === 'symbol' ? undefined : key,
    members,
  }));
}

export const policyView = {
  name: 'policy',
  title: 'Policy and audit',
  mount(section, { store }) {
    this.store = store;
    this.search = h('input', {
      type: 'search',
      placeholder: 'search agent, tool, reason, decision…',
      'aria-label': 'Search decisions',
      size: 36,
    });
    this.search.addEventListener('input', () => this.render());
    this.admissions = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-admissions' });
    this.audit = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-mcp' });
    this.notices = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-notices' });
    this.unfolded = new Set();
    fill(
      section,
      h('h2', { id: 'h-policy' }, 'Policy and audit'),
      h(
        'div',
        { class: 'toolbar' },
        this.search,
        h('button', { type: 'button', onclick: () => this.load() }, 'Refresh'),
      ),
      h('h3', { id: 'h-admissions' }, 'Admission decisions'),
      this.admissions,
      h('h3', { id: 'h-mcp' }, 'MCP calls'),
      this.audit,
      h('h3', { id: 'h-notices' }, 'Policy notices'),
      this.notices,
    );
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
  /**
   * Rows with groups folded: `keyOf` names an item's group (undefined: never folded); a group of
   * GROUP_AT or more is one row (its title, its count, a button to unfold it) unless unfolded.
   */
  folded(section, items, keyOf, title, one, columns, detail) {
    return groupRows(items, keyOf).flatMap(({ key, members }) => {
      const id = `${section}:${key}`;
      if (key === undefined || members.length < GROUP_AT) return members.map(one);
      const open = this.unfolded.has(id);
      const toggle = h(
        'button',
        {
          type: 'button',
          'aria-expanded': String(open),
          onclick: () => {
            if (open) this.unfolded.delete(id);
            else this.unfolded.add(id);
            this.render();
          },
        },
        open ? 'Fold' : `Show ${members.length}`,
      );
      const summary = h(
        'tr',
        { class: 'grouped' },
        h('td', {}, clock(members[0].time ?? members[0].e?.time)),
        h('td', {}, h('span', { class: 'count' }, `×${members.length}`)),
        h(
          'td',
          { colspan: String(columns - 3), class: 'wrap' },
          h('strong', {}, title(members)),
          detail ? [h('br'), h('span', { class: 'muted' }, detail(members))] : null,
        ),
        h('td', {}, toggle),
      );
      return open ? [summary, ...members.map(one)] : [summary];
    });
  },
  async load() {
    const [adm, aud] = await Promise.allSettled([
      getJson('/admissions?limit=500'),
      getJson('/audit?limit=500'),
    ]);
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
      const one = (d) =>
        h(
          'tr',
          { class: d.decision === 'denied' ? 'failed' : '' },
          h('td', {}, clock(d.time)),
          h('td', {}, badge(d.decision)),
          h('td', {}, agentName(d.agent_id) || '—'),
          h('td', {}, d.risk_score === null ? '—' : d.risk_score.toFixed(2)),
          h(
            'td',
            { class: 'wrap' },
            d.reasons.length ? h('span', { class: 'reason' }, d.reasons.join(', ')) : (d.risk_reason ?? ''),
          ),
          h('td', { class: 'wrap hide-sm' }, d.message ?? (d.scorer ? `scored by ${d.scorer}` : '')),
        );
      // Admitted agents with the same verdict (a default setup admits every agent the same way) fold.
      const rows = this.folded(
        'adm',
        decisions.filter((d) =>
          matches(q, d.agent_id, d.decision, d.reasons.join(' '), d.risk_reason, d.stage, d.message),
        ),
        (d) => (d.decision === 'admitted' ? `${d.risk_reason ?? ''}|${d.reasons.join(',')}` : undefined),
        (ds) =>
          `${ds.length} agents admitted${ds[0].risk_reason ? `, ${String(ds[0].risk_reason).replace(/_/g, ' ')}` : ''}`,
        one,
        6,
        (ds) => names(ds.map((d) => d.agent_id)),
      );
      fill(
        this.admissions,
        rows.length
          ? table(
              ['Time', 'Decision', 'Agent', 'Risk', 'Reasons', { label: 'Detail', class: 'hide-sm' }],
              rows,
            )
          : empty(q ? 'No admission decision matches.' : 'No admission decisions kept.'),
      );
    }
    if (records instanceof Error) fill(this.audit, errorBox(records));
    else {
      const one = (r) =>
        h(
          'tr',
          { class: r.decision === 'deny' || r.outcome === 'failed' ? 'failed' : '' },
          h('td', {}, clock(r.time)),
          h('td', {}, badge(r.decision)),
          h(
            'td',
            {},
            badge(r.outcome === 'ok' ? 'ok' : r.outcome === 'denied' ? 'denied' : 'failed', r.outcome),
          ),
          h('td', { class: 'mono wrap' }, r.tool ?? r.wire_name),
          h('td', { class: 'hide-sm' }, r.caller),
          h('td', {}, `${r.duration_ms} ms`),
          h('td', { class: 'wrap reason' }, [...r.reasons, r.error].filter(Boolean).join(', ')),
        );
      // Successful calls of one tool by one caller fold; denials and failures stay one row each.
      const rows = this.folded(
        'mcp',
        records.filter((r) =>
          matches(q, r.tool, r.wire_name, r.decision, r.outcome, r.caller, r.reasons.join(' '), r.agent_id),
        ),
        (r) =>
          r.decision === 'allow' && r.outcome === 'ok' ? `${r.wire_name ?? r.tool}|${r.caller}` : undefined,
        (rs) => `${rs.length} allowed calls of ${rs[0].tool ?? rs[0].wire_name} by ${rs[0].caller}`,
        one,
        7,
      );
      fill(
        this.audit,
        rows.length
          ? table(
              [
                'Time',
                'Decision',
                'Outcome',
                'Tool',
                { label: 'Caller', class: 'hide-sm' },
                'Took',
                'Reasons',
              ],
              rows,
            )
          : empty(q ? 'No MCP call matches.' : 'No MCP calls yet (try the Tools view).'),
      );
    }
    const oneNotice = ({ e, p }) =>
      h(
        'tr',
        { class: e.type === 'amf.policy.deny' || isSecurityNotice(e) ? 'failed' : '' },
        h('td', {}, clock(e.time)),
        h(
          'td',
          {},
          badge(e.type === 'amf.policy.deny' || isSecurityNotice(e) ? 'deny' : 'warn', e.type.slice(11)),
        ),
        h(
          'td',
          {},
          h('span', { class: 'mono' }, p.reason ?? ''),
          isSecurityNotice(e) ? [' ', h('span', { class: 'reason' }, reasonText(p.reason))] : null,
        ),
        h('td', { class: 'wrap' }, p.message ?? ''),
        h(
          'td',
          {},
          p.task_id
            ? h('a', { href: `#/tasks/${encodeURIComponent(p.task_id)}` }, p.task_id.slice(0, 8))
            : agentName(p.agent_id),
        ),
      );
    // Warnings of one reason fold (one per MCP call, one per refused request...); denials, identity
    // warnings and the warnings about one task stay one row each.
    const notices = this.folded(
      'notice',
      this.store.events
        .filter((e) => e.type.startsWith('amf.policy.'))
        .map((e) => ({ e, p: e.data?.payload ?? {} }))
        .filter(({ e, p }) =>
          matches(
            q,
            e.type,
            p.reason,
            reasonText(p.reason),
            p.message,
            p.agent_id,
            p.task_id,
            JSON.stringify(p.details ?? {}),
          ),
        )
        .reverse()
        .slice(0, 2000),
      ({ e, p }) =>
        e.type === 'amf.policy.warning' && !isSecurityNotice(e) && !p.task_id && p.reason
          ? p.reason
          : undefined,
      (ns) =>
        GROUP_TITLES[ns[0].p.reason]?.(ns.length) ?? `${ns.length} warnings: ${reasonText(ns[0].p.reason)}`,
      oneNotice,
      5,
      (ns) =>
        ns.every((n) => n.p.agent_id)
          ? names(ns.map((n) => n.p.agent_id))
          : `latest: ${ns[0].p.message ?? ''}`,
    ).slice(0, 300);
    fill(
      this.notices,
      notices.length
        ? table(['Time', 'Kind', 'Reason', 'Message', 'About'], notices)
        : empty('No policy notices in the history.'),
    );
  },
};
