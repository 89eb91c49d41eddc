/**
 * The report of `npm run bench` (bench/run.js): the rounds merged into medians, mesh against direct
 * paired within each round, and its section of docs/performance.md with its tables and targets.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import {
  CHILD_FLAGS,
  CONCURRENCIES,
  MEMORY_CONCURRENCY,
  PATHS,
  ROUNDS,
  SECONDS,
  TARGETS,
  TASKS,
  WARMUP_SECONDS,
} from './runSettings.js';

export function fmt(n, digits) {
  if (n === undefined || n === null || Number.isNaN(n)) return 'n/a';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export const pctOf = (x) => (x === undefined ? 'n/a' : `${fmt(x * 100, 0)} %`);
export const mb = (bytes) => (bytes === undefined ? 'n/a' : fmt(bytes / (1024 * 1024), 1));

function natsServerVersion() {
  const r = spawnSync(process.env.AMF_NATS_SERVER_BIN || 'nats-server', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim().replace(/^nats-server:\s*/, '') : 'unknown';
}

/**
 * With BENCH_ROUNDS > 1 every figure is the median over the rounds (each round measures every path
 * once, so a burst of outside load disturbs one round of each path rather than one path entirely).
 */
export function mergeRounds(rounds) {
  if (rounds.length === 1) return rounds[0];
  return rounds[0].map((first, i) => {
    const all = rounds.map((r) => r[i]);
    const pick = (f) => median(all.map(f));
    return {
      ...first,
      ok: all.reduce((n, r) => n + r.ok, 0),
      errors: all.reduce((n, r) => n + r.errors, 0),
      firstError: all.find((r) => r.firstError)?.firstError,
      p50: pick((r) => r.p50),
      p90: pick((r) => r.p90),
      p99: pick((r) => r.p99),
      max: Math.max(...all.map((r) => r.max)),
      throughput: pick((r) => r.throughput),
      roundThroughputs: all.map((r) => r.throughput),
      cpu: Object.fromEntries(Object.keys(first.cpu).map((k) => [k, pick((r) => r.cpu[k])])),
    };
  });
}

/** The median of the defined numbers in `values` (the lower middle one of an even count). */
function median(values) {
  const v = values.filter((x) => x !== undefined && !Number.isNaN(x)).sort((a, b) => a - b);
  return v.length ? v[Math.floor((v.length - 1) / 2)] : undefined;
}

/**
 * Mesh against direct within each round, per concurrency: the p50 difference and the throughput
 * ratio of two measurements taken a few seconds apart, so a slow spell of the host that hits one
 * round hits both sides of its comparison. The targets are judged on the median of these.
 */
export function pairedRounds(rounds) {
  const paired = new Map();
  for (const c of CONCURRENCIES) {
    const perRound = rounds
      .map((results) => {
        const mesh = results.find((r) => r.path === 'mesh' && r.concurrency === c);
        const direct = results.find((r) => r.path === 'direct' && r.concurrency === c);
        return mesh && direct
          ? { p50Delta: mesh.p50 - direct.p50, throughputRatio: mesh.throughput / direct.throughput }
          : undefined;
      })
      .filter(Boolean);
    if (perRound.length === 0) continue;
    paired.set(c, {
      perRound,
      p50Delta: median(perRound.map((r) => r.p50Delta)),
      throughputRatio: median(perRound.map((r) => r.throughputRatio)),
    });
  }
  return paired;
}

/**
 * The section and its summary table, from the merged results, the paired rounds, the memory run and
 * what the mesh process said about itself (`info`), and which Ed25519 it signs with (the mesh child
 * inherits the environment, so it is the one this process loaded).
 */
export function renderReport({ results, paired, memory, info, ed25519Backend }) {
  const separateWorker = () => info.workerPid && info.workerPid !== info.pid;
  const find = (path, c) => results.find((r) => r.path === path && r.concurrency === c);
  const cpus = os.cpus();
  const cpuModel = cpus[0]?.model?.trim() ?? 'unknown CPU';
  const label = {
    bare: '(0) calibration: bare node:http server',
    nats: '(a) NATS request/reply floor',
    direct: '(b) direct HTTP to the worker',
    mesh: '(c) mesh: /v1/chat/completions',
  };
  const ordered = (f) =>
    CONCURRENCIES.flatMap((c) => PATHS.map((path) => find(path, c)).filter(Boolean)).map(f);

  const latencyTable = [
    '| path | concurrency | p50 (ms) | p99 (ms) | throughput (req/s) | errors |',
    '|---|---:|---:|---:|---:|---:|',
    ...ordered(
      (r) =>
        `| ${label[r.path]} | ${r.concurrency} | ${fmt(r.p50, 3)} | ${fmt(r.p99, 3)} | ${fmt(r.throughput, 0)} | ${r.errors} |`,
    ),
  ].join('\n');

  const withWorker = results.some((r) => r.cpu.worker !== undefined);
  const cpuTable = [
    `| path | concurrency | load generator | mesh process${withWorker ? ' | worker process' : ''} | nats-server | mesh process syscalls/req | mesh process CPU (of one core) | other processes (% of machine) |`,
    `|---|---:|---:|---:|${withWorker ? '---:|' : ''}---:|---:|---:|---:|`,
    ...ordered(
      (r) =>
        `| ${label[r.path]} | ${r.concurrency} | ${fmt(r.cpu.gen, 0)} | ${fmt(r.cpu.mesh, 0)} | ${withWorker ? `${fmt(r.cpu.worker, 0)} | ` : ''}${fmt(r.cpu.nats, 0)} | ` +
        `${fmt(r.cpu.meshSyscalls, 1)} | ${pctOf(r.cpu.meshUtilisation)} | ${pctOf(r.cpu.otherLoad)} |`,
    ),
  ].join('\n');

  // Ratios and targets.
  const verdict = (ok) => (ok === undefined ? 'not measured' : ok ? '**PASS**' : '**MISS**');
  const ratioRows = [];
  const targetRows = [];
  ratioRows.push(`| ratio | ${CONCURRENCIES.map((c) => `c=${c}`).join(' | ')} |`);
  ratioRows.push(`|---|${CONCURRENCIES.map(() => '---:').join('|')}|`);
  const row = (title, f, digits) =>
    ratioRows.push(
      `| ${title} | ${CONCURRENCIES.map((c) => {
        const mesh = find('mesh', c);
        const v = mesh ? f(mesh, find('direct', c), find('nats', c), find('bare', c)) : undefined;
        return fmt(v, digits);
      }).join(' | ')} |`,
    );
  row('mesh p50 − direct p50 (ms)', (m, d) => (d ? m.p50 - d.p50 : undefined), 3);
  if (ROUNDS > 1) {
    const pairedRow = (title, key, digits) =>
      ratioRows.push(
        `| ${title} | ${CONCURRENCIES.map((c) => {
          const p = paired.get(c);
          return p
            ? `**${fmt(p[key], digits)}** (${p.perRound.map((r) => fmt(r[key], digits)).join(', ')})`
            : 'n/a';
        }).join(' | ')} |`,
      );
    pairedRow('mesh p50 − direct p50 within each round, median (rounds) (ms)', 'p50Delta', 3);
    pairedRow('mesh / direct throughput within each round, median (rounds)', 'throughputRatio', 2);
  }
  row('mesh p50 − NATS floor p50 (ms)', (m, _d, n) => (n ? m.p50 - n.p50 : undefined), 3);
  row('mesh p99 / direct p99', (m, d) => (d ? m.p99 / d.p99 : undefined), 2);
  row('mesh / direct throughput', (m, d) => (d ? m.throughput / d.throughput : undefined), 2);
  row('mesh / NATS floor throughput', (m, _d, n) => (n ? m.throughput / n.throughput : undefined), 2);
  row(
    'mesh / bare node:http throughput (calibration)',
    (m, _d, _n, b) => (b ? m.throughput / b.throughput : undefined),
    2,
  );

  const m1 = find('mesh', 1);
  const d1 = find('direct', 1);
  // Judged within rounds when there are several (pairedRounds), else on the one round.
  const overhead = paired.get(1)?.p50Delta ?? (m1 && d1 ? m1.p50 - d1.p50 : undefined);
  targetRows.push('| target | measured | result |');
  targetRows.push('|---|---:|---|');
  targetRows.push(
    `| mesh p50 − direct p50 at concurrency 1 ≤ ${fmt(TARGETS.overheadMs, 1)} ms${ROUNDS > 1 ? ' (median of the rounds)' : ''} | ${overhead === undefined ? 'n/a' : `${fmt(overhead, 3)} ms`} | ${verdict(overhead === undefined ? undefined : overhead <= TARGETS.overheadMs)} |`,
  );
  const m64 = find('mesh', 64);
  targetRows.push(
    `| mesh throughput at concurrency 64 ≥ ${fmt(TARGETS.meshThroughput, 0)} req/s${ROUNDS > 1 ? ' (median of the rounds)' : ''} | ${m64 ? `${fmt(m64.throughput, 0)} req/s${m64.roundThroughputs ? ` (rounds: ${m64.roundThroughputs.map((t) => fmt(t, 0)).join(', ')})` : ''}` : 'n/a'} | ${verdict(m64 ? m64.throughput >= TARGETS.meshThroughput : undefined)} |`,
  );

  let memoryText = '';
  if (memory) {
    const last = memory.checkpoints[memory.checkpoints.length - 1];
    const firstSlice = memory.checkpoints[1];
    const rssOf = (cp) => cp.vmRss ?? cp.memory.rss;
    const rssAfter = rssOf(last);
    // Strict reading of "under 150 MB": the largest post-GC RSS at any checkpoint of the memory run.
    const during = memory.checkpoints
      .slice(1)
      .map(rssOf)
      .filter((v) => v !== undefined);
    const rssMax = during.length ? Math.max(...during) : undefined;
    // "Flat": after the first slice (allocator and JIT warm), the heap after GC no longer grows.
    const heapGrowth = firstSlice ? last.memory.heapUsed - firstSlice.memory.heapUsed : undefined;
    const flatLimit = firstSlice ? Math.max(5 * 1024 * 1024, firstSlice.memory.heapUsed * 0.1) : undefined;
    targetRows.push(
      `| coordinator process RSS (after GC; ${separateWorker() ? 'the coordinator alone, echo worker in its own process' : 'echo worker in the same process, as `amf up --demo`; BENCH_SEPARATE_WORKER=1 measures the coordinator alone'}) < ${mb(TARGETS.rssBytes)} MB at every checkpoint up to ${TASKS.toLocaleString('en-US')} tasks | ${mb(rssAfter)} MB at the end, ${mb(rssMax)} MB at most | ${verdict(rssMax === undefined ? undefined : rssMax < TARGETS.rssBytes)} |`,
    );
    targetRows.push(
      `| heap after GC flat from ${firstSlice ? firstSlice.done.toLocaleString('en-US') : '?'} to ${last.done.toLocaleString('en-US')} tasks (growth ≤ max(5 MB, 10 %)) | ${heapGrowth === undefined ? 'n/a' : `${heapGrowth >= 0 ? '+' : ''}${mb(heapGrowth)} MB`} | ${verdict(heapGrowth === undefined || flatLimit === undefined ? undefined : heapGrowth <= flatLimit)} |`,
    );
    const mem = [];
    mem.push(
      '| point | tasks done | RSS (MB) | of which anonymous (MB) | of which mapped files (MB) | RSS right after the GC, before the trim (MB) | heap used (MB) | heap total (MB) | external (MB) | tasks active | nats-server RSS (MB) |',
    );
    mem.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    const memRow = (title, cp, done) =>
      mem.push(
        `| ${title} | ${done} | ${mb(rssOf(cp))} | ${mb(cp.rssAnon)} | ${mb(cp.rssFile)} | ${mb(cp.rssRightAfterGc)} | ${mb(cp.memory.heapUsed)} | ${mb(cp.memory.heapTotal)} | ${mb(cp.memory.external)} | ${cp.active} | ${mb(cp.nats?.rss)} |`,
      );
    memRow('mesh started, before any load', memory.start, '–');
    memory.checkpoints.forEach((cp, i) =>
      memRow(
        i === 0
          ? 'after the latency runs (before)'
          : i === memory.checkpoints.length - 1
            ? 'after (end)'
            : 'during',
        cp,
        cp.done.toLocaleString('en-US'),
      ),
    );
    const rate = (TASKS / memory.elapsedMs) * 1000;
    const metricsLine = (label, values) =>
      values && Object.keys(values).length
        ? `${label}: ${Object.entries(values)
            .map(([k, v]) => `\`${k}\` ${mb(v)} MB`)
            .join(', ')}`
        : `${label}: not available`;
    memoryText = [
      `#### (d) Memory of the coordinator process over ${TASKS.toLocaleString('en-US')} completions`,
      '',
      `Concurrency ${MEMORY_CONCURRENCY}; ${fmt(rate, 0)} req/s over the whole run; ${memory.errors} errors` +
        (memory.firstError ? ` (first: ${memory.firstError.message})` : '') +
        `. Every row is taken 100 ms after a forced full GC in the mesh process (\`global.gc()\`, started with \`--expose-gc\`), so what the process does after a full GC is done (${info.memoryTrimming ?? 'memory trimming not reported'}; the column "right after the GC" is read at once, before it); ` +
        `RSS is VmRSS from /proc/<pid>/status, split into anonymous memory (V8 heap, malloc) and mapped files (mostly the node binary itself, ~42 MB, shared with every other node process). ` +
        `Peak RSS (VmHWM) during the run, before GC: ${mb(last.vmPeak)} MB. ` +
        `The mesh process holds the coordinator, its HTTP edge, ${separateWorker() ? 'the floor responder and the calibration server (the echo worker runs in its own process)' : 'the echo worker, the floor responder and the calibration server'}; ` +
        `nats-server is a separate process and is shown apart.`,
      '',
      mem.join('\n'),
      '',
      `Cross-check from the coordinator's \`GET /metrics\` (prom-client default metrics, prefix \`amf_process_\`, not after GC): ` +
        `${metricsLine('before', memory.metricsBefore)}; ${metricsLine('after', memory.metricsAfter)}.`,
    ].join('\n');
  }

  const machine = `${cpuModel} × ${cpus.length} (os.cpus()), ${mb(os.totalmem())} MB RAM, ${os.type()} ${os.release()} ${os.arch()}, Node ${process.version}, nats-server ${natsServerVersion()}`;
  const placement = separateWorker()
    ? 'echo worker in its own process (BENCH_SEPARATE_WORKER=1)'
    : "echo worker in the coordinator's process (as `amf up --demo`)";
  const settings = `concurrency ${CONCURRENCIES.join(', ')}; ${WARMUP_SECONDS} s warm-up then ${SECONDS} s per measurement${ROUNDS > 1 ? `, ${ROUNDS} interleaved rounds, medians reported` : ''}; memory run ${TASKS > 0 ? `${TASKS.toLocaleString('en-US')} tasks at concurrency ${MEMORY_CONCURRENCY}` : 'skipped'}; ${placement}; Ed25519 ${ed25519Backend}${process.env.AMF_ED25519 ? ` (AMF_ED25519=${process.env.AMF_ED25519})` : ''}; ${info.memoryTrimming ?? 'memory trimming not reported'}${process.env.AMF_MALLOC_TRIM ? ` (AMF_MALLOC_TRIM=${process.env.AMF_MALLOC_TRIM})` : ''}; load average at start ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;

  const loads = results.map((r) => r.cpu.otherLoad).filter((x) => x !== undefined);
  const maxOther = loads.length ? Math.max(...loads) : undefined;
  const noise =
    maxOther !== undefined && maxOther > 0.15
      ? `**Warning: other processes used up to ${pctOf(maxOther)} of the machine during the measurements (see the last column of the CPU table): absolute numbers are depressed and noisy; rerun on a quiet machine (or with BENCH_ROUNDS=3) before comparing runs.**`
      : `Other processes used at most ${pctOf(maxOther)} of the machine during the measurements.`;
  const table = [
    `Machine: ${machine}.`,
    `Settings: ${settings}.`,
    `Node flags of the mesh process: ${CHILD_FLAGS.length ? CHILD_FLAGS.map((f) => `\`${f}\``).join(' ') : 'none'}.`,
    '',
    noise,
    '',
    '#### Latency and throughput',
    '',
    latencyTable,
    '',
    '#### Where the CPU goes (µs of CPU time per completed request, by process)',
    '',
    cpuTable,
    '',
    '#### Ratios',
    '',
    ratioRows.join('\n'),
    '',
    '#### Targets',
    '',
    targetRows.join('\n'),
    '',
    memoryText,
  ].join('\n');

  // The section of docs/performance.md; the method it follows is the page's hand-written part.
  const document = [
    '### Mesh against direct and the NATS floor',
    '',
    'Made by `npm run bench` (this section: `node --expose-gc bench/run.js`, after `npm run build`).',
    table,
  ].join('\n');
  return { table, document };
}
