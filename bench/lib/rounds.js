/**
 * Rounds of the protocol benchmarks (bench/mcp.js, bench/a2a.js): the paths measured in a rotated
 * order each round (so no path always runs first, on a cold mesh, or last, on a warm one), CPU time
 * per call of every process taking part, RSS of every process after each round, and the settings
 * the bench mesh runs with that differ from the defaults.
 */
import os from 'node:os';
import { cpuMs, memoryOf } from './procstat.js';

/** The processes of a bench mesh (bench/meshServer.js info line) plus this load generator. */
export function meshProcesses(info) {
  const procs = [{ name: 'load generator', pid: process.pid }];
  procs.push({ name: info.workerPid === info.pid ? 'coordinator + worker' : 'coordinator', pid: info.pid });
  if (info.workerPid && info.workerPid !== info.pid) procs.push({ name: 'worker', pid: info.workerPid });
  if (info.natsPid) procs.push({ name: 'nats-server', pid: info.natsPid });
  return procs;
}

/** The order of `paths` in round `round`: rotated by one each round. */
export function rotated(paths, round) {
  const k = round % paths.length;
  return [...paths.slice(k), ...paths.slice(0, k)];
}

/** CPU ms of each process now (this process from process.cpuUsage, exact; others from /proc). */
export function cpuNow(procs) {
  return procs.map((p) => {
    if (p.pid === process.pid) {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    }
    return cpuMs(p.pid);
  });
}

/** CPU µs per call of each process between two `cpuNow` snapshots. */
export function cpuPerCall(before, after, calls) {
  return before.map((b, i) =>
    b === undefined || after[i] === undefined || calls === 0 ? undefined : ((after[i] - b) * 1000) / calls,
  );
}

/** RSS in MB of each process now. */
export function rssNow(procs) {
  return procs.map((p) => {
    const rss = memoryOf(p.pid)?.rss;
    return rss === undefined ? undefined : rss / 2 ** 20;
  });
}

const median = (xs) => {
  const v = xs.filter((x) => x !== undefined).sort((a, b) => a - b);
  return v.length ? v[Math.floor(v.length / 2)] : undefined;
};

/** Per-process medians over rounds of per-process arrays. */
export function medianPerProcess(rows) {
  if (rows.length === 0) return [];
  return rows[0].map((_, i) => median(rows.map((r) => r[i])));
}

/** `12.3` or `n/a` */
export const fmt = (x, digits = 1) => (x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(digits));

/** The 1-, 5- and 15-minute load averages and the core count, as one phrase. */
export function loadPhrase() {
  const l = os.loadavg();
  return `load average ${l.map((x) => x.toFixed(2)).join(' ')} on ${os.cpus().length} cores`;
}

/**
 * Settings of the bench mesh that differ from the defaults (bench/meshServer.js sets them; it says
 * so in its info line as `nonDefaults`, which wins over this fallback list).
 */
export function nonDefaultSettings(info) {
  return (
    info.nonDefaults ?? {
      'http.rate_limit_per_second': '1000000 (default 1000): one load generator is one client',
      log_level: 'silent (default info)',
    }
  );
}

/** The mesh process's node flags as a setting (none: Node's defaults, nothing to list). */
export function nodeFlagsSetting(flags) {
  if (flags.length === 0) return {};
  return {
    'node flags of the mesh process': `${flags.join(' ')} (BENCH_CHILD_FLAGS; \`npm run bench\` passes AMF_NODE_FLAGS of scripts/lib.sh, as \`npm start\` runs the mesh)`,
  };
}

/** Markdown bullet list of the non-default settings. */
export function settingsList(info, extra = {}) {
  return Object.entries({ ...nonDefaultSettings(info), ...extra })
    .map(([k, v]) => `- \`${k}\`: ${v}`)
    .join('\n');
}

/** How much a process's RSS may grow across the rounds of one concurrency before it is judged to keep memory per call. */
const RSS_GROWTH_MB = 100;
const RSS_GROWTH_SHARE = 0.5;

/**
 * Verdicts on memory kept per call: the RSS of the coordinator and the worker after the first and
 * the last round of the last concurrency (the same load, repeated). It is read without a GC (other
 * processes), and a coordinator without any leak was seen to move by 65 MB between two rounds, so
 * the bound is generous: over the last rounds' tens of thousands of calls it still catches memory
 * kept per call from about 2 KB (the MCP worker's leak of 2026-11-28 kept 5 KB and grew 672 → 1,186
 * MB over these rounds). nats-server is left out: its streams grow by design.
 */
export function rssFlatVerdicts(procs, rssRounds) {
  const last = rssRounds.at(-1);
  if (!last) return [];
  const rows = rssRounds.filter((r) => r.concurrency === last.concurrency);
  const first = rows[0];
  return procs.flatMap((p, i) => {
    if (p.pid === process.pid || p.name === 'nats-server') return [];
    const before = first.rss[i];
    const after = last.rss[i];
    if (before === undefined || after === undefined || rows.length < 2) return [];
    const limit = Math.max(RSS_GROWTH_MB, before * RSS_GROWTH_SHARE);
    const verdict = after - before <= limit ? 'PASS' : 'FAIL';
    return [
      `${p.name} RSS over the ${rows.length} rounds at concurrency ${last.concurrency}: ${before.toFixed(0)} → ${after.toFixed(0)} MB (target: grows by at most ${limit.toFixed(0)} MB, nothing kept per call: ${verdict})`,
    ];
  });
}
