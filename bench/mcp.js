/**
 * MCP benchmark (part of `npm run bench`): `tools/call` of the echo worker's `echo` tool through the
 * coordinator's federated `/mcp` (MCP client → coordinator: session, OPA decision, audit record in
 * JetStream, `mcp_call_unauthenticated` warning, forward over the per-agent SDK client → worker) side
 * by side with the same call made directly to the worker's `/mcp`, in one run, interleaved, at each
 * concurrency. The mesh runs in a child process (bench/meshServer.js); this process is only the load
 * generator: raw Streamable HTTP POSTs (one MCP session per virtual client, initialized first), no SDK
 * on the hot path, so the generator costs the same on both paths.
 *
 * Targets (issue 4): at most 1 ms added p50 at concurrency 1, and at least half the direct throughput.
 *
 * The echo worker runs in a process of its own (BENCH_SEPARATE_WORKER=1 unless set to 0).
 *
 * Each round measures both paths, in an order rotated every round; the report gives medians over
 * rounds, the CPU time per call of every process (load generator, coordinator, worker, nats-server),
 * the RSS of every process after each round, the load average, and every setting of the bench mesh
 * that differs from the defaults. A last phase opens rounds of new MCP sessions that are never
 * ended (the worst client) at the worker and at the coordinator, and records both RSS after each:
 * the session tables are capped and idle sessions expire, so memory must level off.
 *
 * Environment: BENCH_MCP_CONCURRENCY (default "1,32"), BENCH_SECONDS (5), BENCH_WARMUP_SECONDS (1),
 * BENCH_ROUNDS (3; medians over rotated rounds), BENCH_MCP_SESSION_ROUNDS (10),
 * BENCH_MCP_SESSIONS_PER_ROUND (200), BENCH_MCP_OUT (the page whose section "MCP through the
 * coordinator" it overwrites; default docs/performance.md; "-" writes none), BENCH_CHILD_FLAGS (extra
 * node flags for the mesh process, e.g. --cpu-prof).
 */
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

requireBuild('bench/mcp.js');
const envNumber = (key, fallback, min) => envNumberOf('bench/mcp.js', key, fallback, min);
const CONCURRENCIES = envConcurrencies('BENCH_MCP_CONCURRENCY');
const SECONDS = envNumber('BENCH_SECONDS', 5, 0.1);
const WARMUP_SECONDS = envNumber('BENCH_WARMUP_SECONDS', 1);
const ROUNDS = Math.round(envNumber('BENCH_ROUNDS', 3, 1));
const SESSION_ROUNDS = Math.round(envNumber('BENCH_MCP_SESSION_ROUNDS', 10, 0));
const SESSIONS_PER_ROUND = Math.round(envNumber('BENCH_MCP_SESSIONS_PER_ROUND', 200, 1));
const OUT = process.env.BENCH_MCP_OUT ?? PERFORMANCE_PAGE;
const CHILD_FLAGS = (process.env.BENCH_CHILD_FLAGS ?? '').split(/\s+/).filter(Boolean);
const TEXT = 'Hello from the AMF MCP benchmark: please echo this sentence back, word for word.';
const PROTOCOL = '2025-11-25';
const TARGETS = { addedP50Ms: 1.0, throughputRatio: 0.5 };
const log = (line) => process.stderr.write(`${line}\n`);

// --- the mesh process -------------------------------------------------------------------------------

let stopMesh = async () => {};

// --- a minimal Streamable HTTP client (hot path) ----------------------------------------------------

/** POSTs one JSON-RPC message; resolves with status, session id and the body text. */
function post(agent, url, message, sessionId) {
  const body = Buffer.from(JSON.stringify(message));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        agent,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': body.length,
          ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL } : {}),
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            sessionId: res.headers['mcp-session-id'],
            text: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Opens one MCP session at `url` (initialize + initialized) and returns its id. */
async function openSession(agent, url) {
  const init = await post(agent, url, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'amf-bench', version: '1' } },
  });
  if (init.status !== 200 || !init.sessionId)
    throw new Error(`initialize at ${url}: HTTP ${init.status} ${init.text.slice(0, 200)}`);
  const done = await post(
    agent,
    url,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    init.sessionId,
  );
  if (done.status !== 202) throw new Error(`initialized at ${url}: HTTP ${done.status}`);
  return init.sessionId;
}

/**
 * A tools/call client for `tool` at `url` with one session per virtual client: `issue(done)` picks
 * the next free session, sends a call with a fresh id and checks the answer is a result, not an error.
 */
async function toolCaller(url, tool, concurrency) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  const sessions = [];
  for (let i = 0; i < concurrency; i++) sessions.push(await openSession(agent, url));
  const free = [...sessions];
  let nextId = 1;
  const call = (sessionId) =>
    post(
      agent,
      url,
      {
        jsonrpc: '2.0',
        id: nextId++,
        method: 'tools/call',
        params: { name: tool, arguments: { text: TEXT } },
      },
      sessionId,
    );
  const first = await call(sessions[0]);
  if (first.status !== 200 || !first.text.includes(TEXT) || first.text.includes('"isError":true'))
    throw new Error(`tools/call ${tool} at ${url}: HTTP ${first.status} ${first.text.slice(0, 300)}`);
  const issue = (done) => {
    const sessionId = free.pop();
    call(sessionId).then(
      (res) => {
        free.push(sessionId);
        if (res.status !== 200 || res.text.includes('"error"') || res.text.includes('"isError":true'))
          done(new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`));
        else done();
      },
      (err) => {
        free.push(sessionId);
        done(err);
      },
    );
  };
  return { issue, close: () => agent.destroy() };
}

/** Waits until the coordinator lists `name` (the worker is admitted first, its tools listed after). */
async function waitForTool(url, name, timeoutMs = 30_000) {
  const agent = new http.Agent({ keepAlive: true });
  const sessionId = await openSession(agent, url);
  const deadline = Date.now() + timeoutMs;
  try {
    for (let id = 1; ; id++) {
      const res = await post(agent, url, { jsonrpc: '2.0', id, method: 'tools/list' }, sessionId);
      if (res.text.includes(`"${name}"`)) return;
      if (Date.now() > deadline)
        throw new Error(`the coordinator did not list ${name} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    agent.destroy();
  }
}

// --- measurement ------------------------------------------------------------------------------------

/** One measurement: warm-up, then the timed run with the CPU every process spent on it. */
async function measure(caller, concurrency, procs) {
  if (WARMUP_SECONDS > 0)
    await runLoad({ concurrency, durationMs: WARMUP_SECONDS * 1000, issue: caller.issue });
  const before = cpuNow(procs);
  const r = await runLoad({ concurrency, durationMs: SECONDS * 1000, issue: caller.issue });
  r.cpuUsPerCall = cpuPerCall(before, cpuNow(procs), r.ok);
  if (r.errors > 0) throw new Error(`${r.errors} failed calls; first: ${r.firstError?.message}`);
  return r;
}

/**
 * Rounds of `perRound` new sessions at `url`, opened and never ended; RSS of every process after
 * each round, and how many sessions were refused (the table's cap).
 */
async function sessionChurn(url, procs) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const rows = [];
  try {
    for (let round = 0; round < SESSION_ROUNDS; round++) {
      let opened = 0;
      let refused = 0;
      for (let i = 0; i < SESSIONS_PER_ROUND; i += 16) {
        const batch = Array.from({ length: Math.min(16, SESSIONS_PER_ROUND - i) }, () =>
          openSession(agent, url).then(
            () => opened++,
            () => refused++,
          ),
        );
        await Promise.all(batch);
      }
      rows.push({ round: round + 1, opened, refused, rss: rssNow(procs) });
    }
  } finally {
    agent.destroy();
  }
  return rows;
}

/** Once the session table is full, further rounds of new sessions must not grow the process. */
const CHURN_GROWTH_MB = 10;
const CHURN_GROWTH_SHARE = 0.1;

/** Issue 14's "flat across rounds of new sessions": RSS from the first full round to the last. */
function churnFlatVerdict(where, rows, procs) {
  const index = procs.findIndex((p) =>
    where === 'worker' ? p.name === 'worker' : p.name.startsWith('coordinator'),
  );
  const full = rows.findIndex((r) => r.refused > 0);
  if (index < 0 || full < 0 || full === rows.length - 1) return [];
  const before = rows[full].rss[index];
  const after = rows.at(-1).rss[index];
  if (before === undefined || after === undefined) return [];
  const limit = Math.max(CHURN_GROWTH_MB, before * CHURN_GROWTH_SHARE);
  return [
    `${procs[index].name} RSS over rounds ${rows[full].round}–${rows.at(-1).round} of new sessions at the ${where} (table full): ${before.toFixed(0)} → ${after.toFixed(0)} MB (target: flat, at most +${limit.toFixed(0)} MB: ${after - before <= limit ? 'PASS' : 'FAIL'})`,
  ];
}

const ms = formatMs;
const rate = formatRate;

async function main() {
  const mesh = await startMeshProcess({ childFlags: CHILD_FLAGS });
  stopMesh = mesh.stop;
  const info = mesh.info;
  const procs = meshProcesses(info);
  log(`bench/mcp.js: mesh up (coordinator ${info.coordinatorUrl}, worker ${info.workerUrl})`);
  const results = [];
  const rssRounds = [];
  const churn = {};
  try {
    // The federated wire name of the echo worker's tool (`<slug>__echo`), as tools/list shows it.
    const wireName = 'bench-echo__echo';
    await waitForTool(`${info.coordinatorUrl}/mcp`, wireName);
    for (const concurrency of CONCURRENCIES) {
      const callers = {
        direct: await toolCaller(`${info.workerUrl}/mcp`, 'echo', concurrency),
        coordinator: await toolCaller(`${info.coordinatorUrl}/mcp`, wireName, concurrency),
      };
      const rounds = { direct: [], coordinator: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const order = rotated(['direct', 'coordinator'], round);
        for (const path of order) rounds[path].push(await measure(callers[path], concurrency, procs));
        rssRounds.push({ concurrency, round: round + 1, order, rss: rssNow(procs) });
      }
      callers.direct.close();
      callers.coordinator.close();
      for (const path of ['direct', 'coordinator']) {
        const { count, ...rest } = medianRow(path, concurrency, rounds[path]);
        const cpu = medianPerProcess(rounds[path].map((r) => r.cpuUsPerCall));
        const row = { ...rest, calls: count, cpu };
        results.push(row);
        log(
          `  c=${concurrency} ${path.padEnd(11)} p50 ${ms(row.p50)}  p99 ${ms(row.p99)}  ${rate(row.throughput)}  CPU µs/call ${cpu.map((c) => fmt(c, 0)).join(' / ')}`,
        );
      }
    }
    if (SESSION_ROUNDS > 0) {
      churn.worker = await sessionChurn(`${info.workerUrl}/mcp`, procs);
      churn.coordinator = await sessionChurn(`${info.coordinatorUrl}/mcp`, procs);
    }
  } finally {
    await stopMesh();
  }
  return { info, procs, results, rssRounds, churn };
}

function report({ info, procs, results, rssRounds, churn }) {
  const find = (path, c) => results.find((r) => r.path === path && r.concurrency === c);
  const names = procs.map((p) => p.name);
  const lines = [];
  const verdicts = [];
  lines.push(
    `| path | concurrency | p50 | p99 | throughput | calls measured | CPU µs per call: ${names.join(' / ')} |`,
  );
  lines.push('|---|---|---|---|---|---|---|');
  for (const r of results)
    lines.push(
      `| ${r.path === 'direct' ? 'direct to the worker `/mcp`' : 'through the coordinator `/mcp`'} | ${r.concurrency} | ${ms(r.p50)} | ${ms(r.p99)} | ${rate(r.throughput)} | ${r.calls.toLocaleString('en-US')} | ${r.cpu.map((c) => fmt(c, 0)).join(' / ')} |`,
    );
  lines.push('');
  lines.push('| concurrency | added p50 (coordinator − direct) | throughput ratio (coordinator / direct) |');
  lines.push('|---|---|---|');
  for (const c of CONCURRENCIES) {
    const d = find('direct', c);
    const f = find('coordinator', c);
    if (!d || !f) continue;
    const added = f.p50 - d.p50;
    const ratio = f.throughput / d.throughput;
    lines.push(`| ${c} | ${ms(added)} | ${ratio.toFixed(2)} |`);
    if (c === 1)
      verdicts.push(
        `added p50 at concurrency 1: ${ms(added)} (target ≤ ${TARGETS.addedP50Ms} ms: ${added <= TARGETS.addedP50Ms ? 'PASS' : 'FAIL'})`,
      );
    verdicts.push(
      `throughput ratio at concurrency ${c}: ${ratio.toFixed(2)} (target ≥ ${TARGETS.throughputRatio}: ${ratio >= TARGETS.throughputRatio ? 'PASS' : 'FAIL'})`,
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
  // The rounds at the worker ran first, then those at the coordinator: one table, side by side.
  const sides = Object.entries(churn);
  for (const [where, rows] of sides) verdicts.push(...churnFlatVerdict(where, rows, procs));
  if (sides.length > 0) {
    lines.push('');
    lines.push(
      `New MCP sessions (${SESSIONS_PER_ROUND} per round, never ended), first at the worker, then at the coordinator: sessions opened / refused (table full), and RSS (MB) after each round, ${names.join(' / ')}`,
    );
    lines.push('');
    lines.push(
      `| round | ${sides.map(([where]) => `at the ${where}: opened / refused | RSS`).join(' | ')} |`,
    );
    lines.push(`|---|${sides.map(() => '---|---').join('|')}|`);
    const count = Math.max(...sides.map(([, rows]) => rows.length));
    for (let i = 0; i < count; i++) {
      const cells = sides.map(([, rows]) => {
        const r = rows[i];
        return r ? `${r.opened} / ${r.refused} | ${r.rss.map((x) => fmt(x, 0)).join(' / ')}` : '– | –';
      });
      lines.push(`| ${i + 1} | ${cells.join(' | ')} |`);
    }
  }
  return {
    table: lines.join('\n'),
    rss,
    verdicts,
    settings: settingsList(info, nodeFlagsSetting(CHILD_FLAGS)),
  };
}

const measured = await main();
const { table, rss, verdicts, settings } = report(measured);
const load = loadPhrase();
process.stdout.write(
  `\n${table}\n\n${rss}\n\n${verdicts.map((v) => `- ${v}`).join('\n')}\n\nSettings that differ from the defaults:\n${settings}\n\n${load}\n`,
);
if (OUT !== '-') {
  const cpus = os.cpus();
  // Both paths cross processes; on an oversubscribed machine every hop waits for a core, and the
  // coordinator path has twice the hops: say so next to the numbers.
  const busy =
    os.loadavg()[0] > cpus.length
      ? `\n**The machine was oversubscribed during this run** (1-minute load average ${os.loadavg()[0].toFixed(1)} on ${cpus.length} cores): each process hop waits for a core, and the coordinator path has twice as many hops, so the added latency and the ratios above mostly measure scheduling. Compare on a quiet machine.\n`
      : '';
  // What the paths are is the page's hand-written method; the section holds this run's figures.
  const section = `### MCP through the coordinator

Made by \`npm run bench\` (this section: \`node bench/mcp.js\`, after \`npm run build\`); ${SECONDS} s per
measurement after ${WARMUP_SECONDS} s of warm-up, ${ROUNDS} round(s), the order of the paths rotated each round
(medians). Machine: ${cpus[0]?.model.trim() ?? 'unknown'} × ${cpus.length}, Node ${process.version}; ${load} at the end.

Settings of the bench mesh that differ from the defaults:

${settings}

${table}

${verdicts.map((v) => `- ${v}`).join('\n')}
${busy}`;
  await writeSection(OUT, docSection('mcp', 'bench/mcp.js'), section);
  log(`bench/mcp.js: wrote the "MCP through the coordinator" section of ${OUT}`);
}
