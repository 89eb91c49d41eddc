/**
 * The drill's report: one markdown row per fault, with the columns the issue asks for, and the
 * numbers behind a failure (lost task ids, terminal kinds, notes) underneath so a red row can be
 * diagnosed without rerunning it.
 */
import { rowFails } from './drill.mjs';

const HEADER =
  '| # | fault | requests | answered | client-visible errors | lost | double | wrong | recovered | notes |\n' +
  '|---|---|---|---|---|---|---|---|---|---|';

function cell(text) {
  return String(text).replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function errorsCell(errors) {
  return errors.length === 0 ? '0' : errors.map((e) => `${e.n}× ${e.reason}`).join('; ');
}

function recoveredCell(row) {
  if (row.recovered) return `yes (${row.recoverySeconds.toFixed(1)} s)`;
  return `no (${row.recoveryFailure ?? 'no answer'})`;
}

/** Tasks with two terminal events; where runs are counted (fault 12), also tasks run twice. */
function doubleCell(row) {
  return row.ranTwice === undefined ? String(row.double) : `${row.double} (ran twice: ${row.ranTwice})`;
}

/** One table row; rows not run, or broken by a drill error, say so instead of inventing numbers. */
export function formatRow(row) {
  if (!row.ran) return `| ${row.id} | ${cell(row.name)} | – | – | – | – | – | – | – | ${cell(row.note)} |`;
  if (row.error !== undefined)
    return `| ${row.id} | ${cell(row.name)} | – | – | – | – | – | – | – | drill error: ${cell(row.error)} |`;
  const notes = [...(row.notes ?? []), `accepted ${row.accepted}`, `${row.seconds} s`].join('; ');
  return (
    `| ${row.id} | ${cell(row.name)} | ${row.requests} | ${row.answered} | ${cell(errorsCell(row.errors))} ` +
    `| ${row.lost} | ${doubleCell(row)} | ${row.wrong} | ${cell(recoveredCell(row))} | ${cell(notes)} |`
  );
}

/** The whole report: parameters, table, and details of failing rows. */
export function formatReport({ rows, params, lanes = 1, mdns, seconds }, { quick, commit }) {
  const p = params;
  const lines = [
    `Fault drill${quick ? ' (--quick)' : ''}${commit ? ` on ${commit}` : ''}: ${p.requests} requests, ` +
      `concurrency ${p.concurrency}, handler ${p.sleepMs / 1000} s, fault at ${p.faultAtMs / 1000} s; ` +
      `${lanes > 1 ? `${lanes} faults at a time, each on its own mesh; ` : ''}` +
      `mDNS ${mdns ? 'on' : 'off (workers join through NATS)'}; ${seconds} s in total.`,
    '',
    HEADER,
    ...rows.map(formatRow),
  ];
  const failing = rows.filter(rowFails);
  if (failing.length > 0) {
    lines.push('', `Failing rows: ${failing.map((r) => r.id).join(', ')}.`);
    for (const r of failing) {
      if (r.error !== undefined) continue;
      const sample = r.lostSample.map((l) => `${l.taskId} (client: ${l.reason})`).join(', ');
      const wrong = (r.wrongSample ?? []).map((w) => `${w.taskId ?? w.marker} (${w.why})`).join(', ');
      const twice = (r.ranTwiceSample ?? []).map((t) => `${t.taskId} (${t.runs} runs)`).join(', ');
      lines.push(
        `- ${r.id}: terminal events seen ${JSON.stringify(r.terminals)}` +
          (sample ? `; lost e.g. ${sample}` : '') +
          (wrong ? `; wrong e.g. ${wrong}` : '') +
          (twice ? `; ran twice e.g. ${twice}` : ''),
      );
    }
  }
  return lines.join('\n') + '\n';
}
