// Rates and error rates per tag (or per agent) over time, from the tasks the console knows (task
// list and history): one row per tag with its totals and a small inline SVG bar chart, one bar per time bucket, the
// failed share of each bar in red. No chart library: a few rects built with the DOM.
import { h, duration, agentName } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';
const BUCKETS = 24;
const WIDTH = 240;
const HEIGHT = 36;
const FAILED = new Set(['failed', 'expired', 'cancelled']);

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

/** What the rates are grouped by: a task's tag, or the agent that claimed it. */
export const RATE_KEYS = {
  tag: (t) => t.tag,
  agent: (t) => agentName(t.claimedBy),
};

/**
 * Per tag (or per `keyOf`), the tasks created in each of BUCKETS equal slices of the span the tasks cover (at least a
 * minute), split into failed and the rest.
 */
export function ratesByTag(tasks, keyOf = RATE_KEYS.tag) {
  const timed = tasks.filter((t) => keyOf(t) && !Number.isNaN(Date.parse(t.created)));
  if (timed.length === 0) return { span: 0, from: 0, tags: [] };
  const times = timed.map((t) => Date.parse(t.created));
  const to = Math.max(...times);
  const from = Math.min(...times, to - 60_000);
  const span = to - from;
  const width = span / BUCKETS;
  const tags = new Map();
  for (const t of timed) {
    const key = keyOf(t);
    let row = tags.get(key);
    if (!row)
      tags.set(
        key,
        (row = {
          tag: key,
          total: 0,
          failed: 0,
          buckets: Array.from({ length: BUCKETS }, () => ({ ok: 0, failed: 0 })),
        }),
      );
    const i = Math.min(BUCKETS - 1, Math.floor((Date.parse(t.created) - from) / (width || 1)));
    const failed = FAILED.has(t.state);
    row.total += 1;
    if (failed) row.failed += 1;
    row.buckets[i][failed ? 'failed' : 'ok'] += 1;
  }
  return { span, from, tags: [...tags.values()].sort((a, b) => b.total - a.total) };
}

function chart(row, span) {
  const peak = Math.max(1, ...row.buckets.map((b) => b.ok + b.failed));
  const bar = WIDTH / BUCKETS;
  const rects = row.buckets.flatMap((b, i) => {
    const okH = (b.ok / peak) * HEIGHT;
    const badH = (b.failed / peak) * HEIGHT;
    return [
      b.ok
        ? svg('rect', {
            class: 'bar-ok',
            x: i * bar + 1,
            y: HEIGHT - okH - badH,
            width: bar - 2,
            height: okH,
          })
        : null,
      b.failed
        ? svg('rect', { class: 'bar-bad', x: i * bar + 1, y: HEIGHT - badH, width: bar - 2, height: badH })
        : null,
    ].filter(Boolean);
  });
  const label = `${row.tag}: ${row.total} tasks over ${duration(span)}, ${row.failed} failed`;
  return svg(
    'svg',
    {
      class: 'rate-chart',
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      width: WIDTH,
      height: HEIGHT,
      role: 'img',
      'aria-label': label,
    },
    svg('line', { class: 'axis', x1: 0, y1: HEIGHT - 0.5, x2: WIDTH, y2: HEIGHT - 0.5 }),
    ...rects,
  );
}

/** The rates panel: a table of tags (or agents) with their rate, error rate and chart. */
export function rateChart(tasks, by = 'tag') {
  const { span, tags } = ratesByTag(tasks, RATE_KEYS[by] ?? RATE_KEYS.tag);
  if (tags.length === 0) return h('p', { class: 'muted' }, 'No tasks to chart yet.');
  const minutes = span / 60_000;
  const rows = tags.map((r) =>
    h(
      'tr',
      { class: r.failed ? 'has-errors' : '' },
      h('td', {}, by === 'agent' ? r.tag : h('span', { class: 'tag' }, r.tag)),
      h('td', { class: 'num' }, String(r.total)),
      h('td', { class: 'num' }, `${(r.total / minutes).toFixed(r.total / minutes < 10 ? 2 : 1)}/min`),
      h(
        'td',
        { class: `num ${r.failed ? 'reason' : ''}` },
        `${Math.round((r.failed / r.total) * 100)}% (${r.failed})`,
      ),
      h('td', {}, chart(r, span)),
    ),
  );
  return h(
    'div',
    { class: 'panel' },
    h(
      'table',
      { 'aria-label': `Rates per ${by}` },
      h(
        'caption',
        { class: 'muted' },
        `Tasks created per ${by} over the last ${duration(span)} (${BUCKETS} slices; failed in red)`,
      ),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          [by === 'agent' ? 'Agent' : 'Tag', 'Tasks', 'Rate', 'Errors', 'Over time'].map((x) =>
            h('th', { scope: 'col' }, x),
          ),
        ),
      ),
      h('tbody', {}, rows),
    ),
  );
}
