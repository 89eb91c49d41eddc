/**
 * A2A benchmark (part of `npm run bench`): the same A2A 1.0 JSON-RPC `SendMessage` (blocking, text
 * part) sent through the coordinator's `/a2a` (A2A server → task announced on NATS → echo worker
 * claims it → result back → completed Task) and directly to the echo worker's `/a2a` (the worker's
 * own A2A server runs its handler), in one run, interleaved, at each concurrency. The mesh runs in a
 * child process (bench/meshServer.js, the worker in a process of its own); this process is only the
 * load generator: raw HTTP POSTs with the `A2A-Version: 1.0` header, no SDK on the hot path, so the
 * generator costs the same on both paths. Every answer is checked to be a completed task carrying
 * the text.
 *
 * Each round measures every path, in an order rotated every round; the report gives medians over
 * rounds, the CPU time per message of every process (load generator, coordinator, worker,
 * nats-server), the RSS of every process after each round, the load average, and every setting of
 * the bench mesh that differs from the defaults.
 *
 * Environment: BENCH_A2A_CONCURRENCY (default "1,64"), BENCH_SECONDS (5), BENCH_WARMUP_SECONDS (1),
 * BENCH_ROUNDS (3; medians over rotated rounds), BENCH_A2A_OUT (the page whose section "A2A through
 * the coordinator" it overwrites; default docs/performance.md; "-" writes none),
 * BENCH_SEPARATE_WORKER (default 1), BENCH_CHILD_FLAGS (extra node flags for the mesh process, e.g.
 * --cpu-prof).
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';
import { formatMs, formatRate, medianRow, runLoad } from './lib/load.js';
import {
  cpuNow,
  cpuPerCall,
  fmt,
  loadPhrase,
  medianPerProcess,
  meshProcesses,
  rssFlatVerdicts,
  nodeFlagsSetting,
  rotated,
  rssNow,
  settingsList,
} from './lib/rounds.js';
import {
  envConcurrencies,
  envNumber as envNumberOf,
  requireBuild,
  startMeshProcess,
} from './lib/meshProcess.js';

requireBuild('bench/a2a.js');
const envNumber = (key, fallback, min) => envNumberOf('bench/a2a.js', key, fallback, min);
// c=1 and c=64: issue 31 judges A2A through the coordinator at both against the OpenAI mesh path.
const CONCURRENCIES = envConcurrencies('BENCH_A2A_CONCURRENCY', '1,64');
const SECONDS = envNumber('BENCH_SECONDS', 5, 0.1);
const WARMUP_SECONDS = envNumber('BENCH_WARMUP_SECONDS', 1);
const ROUNDS = Math.round(envNumber('BENCH_ROUNDS', 3, 1));
const OUT = process.env.BENCH_A2A_OUT ?? PERFORMANCE_PAGE;
const CHILD_FLAGS = (process.env.BENCH_CHILD_FLAGS ?? '').split(/\s+/).filter(Boolean);
const TEXT = 'Hello from the AMF A2A benchmark: please echo this sentence back, word for word.';
const log = (line) => process.stderr.write(`${line}\n`);

// --- the mesh process -------------------------------------------------------------------------------

let stopMesh = async () => {};

// --- a minimal A2A JSON-RPC client (hot path) -------------------------------------------------------

/**
 * POSTs one JSON-RPC request; resolves with the status and the body text.
 * @param {import('node:http').Agent} agent
 * @param {string} url
 * @param {unknown} message
 * @param {Record<string, string>} [headers]
 * @returns {Promise<{ status: number | undefined, text: string }>}
 */
function post(agent, url, message, headers = { 'a2a-version': '1.0' }) {
  const body = Buffer.from(JSON.stringify(message));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers, 'content-length': body.length },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** True when a SendMessage answer is a completed task whose artifact carries the text. */
function completed(res) {
  return (
    res.status === 200 &&
    res.text.includes('TASK_STATE_COMPLETED') &&
    res.text.includes(TEXT) &&
    !res.text.includes('"error"')
  );
}

/** A SendMessage caller for `url`: `issue(done)` sends one message with a fresh id and checks it. */
async function sender(url, concurrency) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  let nextId = 1;
  const send = () =>
    post(agent, url, {
      jsonrpc: '2.0',
      id: nextId++,
      method: 'SendMessage',
      params: {
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ text: TEXT }],
          // The coordinator routes by this tag; the worker serves `echo` anyway.
          metadata: { tag: 'echo' },
        },
      },
    });
  const first = await send();
  if (!completed(first))
    throw new Error(`SendMessage at ${url}: HTTP ${first.status} ${first.text.slice(0, 300)}`);
  const issue = (done) => {
    send().then(
      (res) => (completed(res) ? done() : done(new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`))),
      (err) => done(err),
    );
  };
  return { issue, close: () => agent.destroy() };
}

/**
 * The same text as a non-streaming `/v1/chat/completions` for model `amf/echo` on the same mesh: the
 * mesh path without A2A, so the table shows what the A2A server itself adds on top of the mesh.
 */
async function chatSender(url, concurrency) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  const body = { model: 'amf/echo', messages: [{ role: 'user', content: TEXT }] };
  const ok = (res) => res.status === 200 && res.text.includes(TEXT);
  const first = await post(agent, url, body, {});
  if (!ok(first))
    throw new Error(`chat completion at ${url}: HTTP ${first.status} ${first.text.slice(0, 300)}`);
  const issue = (done) => {
    post(agent, url, body, {}).then(
      (res) => (ok(res) ? done() : done(new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`))),
      (err) => done(err),
    );
  };
  return { issue, close: () => agent.destroy() };
}

// --- measurement ------------------------------------------------------------------------------------

/** One measurement: warm-up, then the timed run with the CPU every process spent on it. */
async function measure(caller, concurrency, procs) {
  if (WARMUP_SECONDS > 0)
    await runLoad({ concurrency, durationMs: WARMUP_SECONDS * 1000, issue: caller.issue });
  const before = cpuNow(procs);
  const r = await runLoad({ concurrency, durationMs: SECONDS * 1000, issue: caller.issue });
  r.cpuUsPerCall = cpuPerCall(before, cpuNow(procs), r.ok);
  if (r.errors > 0) throw new Error(`${r.errors} failed messages; first: ${r.firstError?.message}`);
  return r;
}

const ms = formatMs;
const rate = formatRate;

const PATHS = ['direct', 'coordinator', 'openai'];

async function main() {
  const mesh = await startMeshProcess({ childFlags: CHILD_FLAGS });
  stopMesh = mesh.stop;
  const info = mesh.info;
  const procs = meshProcesses(info);
  log(`bench/a2a.js: mesh up (coordinator ${info.coordinatorUrl}, worker ${info.workerUrl})`);
  const results = [];
  const rssRounds = [];
  try {
    for (const concurrency of CONCURRENCIES) {
      const callers = {
        direct: await sender(`${info.workerUrl}/a2a`, concurrency),
        coordinator: await sender(`${info.coordinatorUrl}/a2a`, concurrency),
        openai: await chatSender(`${info.coordinatorUrl}/v1/chat/completions`, concurrency),
      };
      const rounds = { direct: [], coordinator: [], openai: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const order = rotated(PATHS, round);
        for (const path of order) rounds[path].push(await measure(callers[path], concurrency, procs));
        rssRounds.push({ concurrency, round: round + 1, order, rss: rssNow(procs) });
      }
      for (const caller of Object.values(callers)) caller.close();
      for (const path of PATHS) {
        const { count, ...rest } = medianRow(path, concurrency, rounds[path]);
        const cpu = medianPerProcess(rounds[path].map((r) => r.cpuUsPerCall));
        const row = { ...rest, messages: count, cpu };
        results.push(row);
        log(
          `  c=${concurrency} ${path.padEnd(11)} p50 ${ms(row.p50)}  p99 ${ms(row.p99)}  ${rate(row.throughput)}  CPU µs/message ${cpu.map((c) => fmt(c, 0)).join(' / ')}`,
        );
      }
    }
  } finally {
    await stopMesh();
  }
  return { info, procs, results, rssRounds };
}

const PATH_LABELS = {
  direct: 'A2A direct to the worker `/a2a`',
  coordinator: 'A2A through the coordinator `/a2a` (mesh)',
  openai: 'context: `/v1/chat/completions` through the mesh (no A2A)',
};

function report({ procs, results, rssRounds }) {
  const find = (path, c) => results.find((r) => r.path === path && r.concurrency === c);
  const names = procs.map((p) => p.name);
  const lines = [];
  lines.push(
    `| path | concurrency | p50 | p99 | throughput | messages measured | CPU µs per message: ${names.join(' / ')} |`,
  );
  lines.push('|---|---|---|---|---|---|---|');
  for (const r of results)
    lines.push(
      `| ${PATH_LABELS[r.path]} | ${r.concurrency} | ${ms(r.p50)} | ${ms(r.p99)} | ${rate(r.throughput)} | ${r.messages.toLocaleString('en-US')} | ${r.cpu.map((c) => fmt(c, 0)).join(' / ')} |`,
    );
  lines.push('');
  lines.push(
    '| concurrency | added p50 (coordinator − direct) | p50 ratio | p99 ratio | throughput ratio (coordinator / direct) | throughput ratio (A2A coordinator / OpenAI mesh) |',
  );
  lines.push('|---|---|---|---|---|---|');
  const verdicts = [];
  for (const c of CONCURRENCIES) {
    const d = find('direct', c);
    const f = find('coordinator', c);
    const o = find('openai', c);
    if (!d || !f) continue;
    const ratio = f.throughput / d.throughput;
    lines.push(
      `| ${c} | ${ms(f.p50 - d.p50)} | ${(f.p50 / d.p50).toFixed(2)} | ${(f.p99 / d.p99).toFixed(2)} | ${ratio.toFixed(2)} | ${o ? (f.throughput / o.throughput).toFixed(2) : '–'} |`,
    );
    // Issue 31: the coordinator's A2A is judged against the OpenAI mesh path (the same durable task),
    // and its added latency at c=1 against the worker's own /a2a.
    if (o) {
      const meshRatio = f.throughput / o.throughput;
      verdicts.push(
        `A2A through the coordinator / OpenAI mesh path, throughput at concurrency ${c}: ${meshRatio.toFixed(2)} (target ≥ 0.9: ${meshRatio >= 0.9 ? 'PASS' : 'FAIL'})`,
      );
    }
    if (c === 1) {
      const added = f.p50 - d.p50;
      verdicts.push(
        `added p50 over the worker's own /a2a at concurrency 1: ${ms(added)} (target ≤ 1.00 ms: ${added <= 1 ? 'PASS' : 'FAIL'})`,
      );
    }
    verdicts.push(
      `throughput ratio coordinator / worker's own /a2a at concurrency ${c}: ${ratio.toFixed(2)}`,
    );
  }
  // Every round's RSS goes to stdout only; the page keeps the verdict on it.
  const rss = [
    `RSS (MB) after each round: ${names.join(' / ')}`,
    '',
    '| concurrency | round | order | RSS |',
    '|---|---|---|---|',
    ...rssRounds.map(
      (r) =>
        `| ${r.concurrency} | ${r.round} | ${r.order.join(', ')} | ${r.rss.map((x) => fmt(x, 0)).join(' / ')} |`,
    ),
  ].join('\n');
  verdicts.push(...rssFlatVerdicts(procs, rssRounds));
  lines.push('');
  lines.push(verdicts.map((v) => `- ${v}`).join('\n'));
  return { table: lines.join('\n'), rss };
}

const measured = await main();
const { table, rss } = report(measured);
const settings = settingsList(measured.info, nodeFlagsSetting(CHILD_FLAGS));
const load = loadPhrase();
process.stdout.write(
  `\n${table}\n\n${rss}\n\nSettings that differ from the defaults:\n${settings}\n\n${load}\n`,
);
if (OUT !== '-') {
  const cpus = os.cpus();
  // What the paths are is the page's hand-written method; the section holds this run's figures.
  const section = `### A2A through the coordinator

Made by \`npm run bench\` (this section: \`node bench/a2a.js\`, after \`npm run build\`); ${SECONDS} s per
measurement after ${WARMUP_SECONDS} s of warm-up, ${ROUNDS} round(s), the order of the paths rotated each round
(medians). Machine: ${cpus[0]?.model.trim() ?? 'unknown'} × ${cpus.length}, Node ${process.version}; ${load} at the end.

Settings of the bench mesh that differ from the defaults:

${settings}

${table}
`;
  await writeSection(OUT, docSection('a2a', 'bench/a2a.js'), section);
  log(`bench/a2a.js: wrote the "A2A through the coordinator" section of ${OUT}`);
}
