/**
 * MCP with the client people use (part of `npm run bench`; issue 31): the official SDK's
 * `Client` + `StreamableHTTPClientTransport` calling the echo worker's `echo` tool at c=1, straight at
 * the worker's `/mcp` and through the coordinator's federated `/mcp`, beside the worker's own `/a2a`
 * answering the same echo and the bench's raw MCP client (bench/mcp.js's) at the worker. Both SDK
 * lines are measured: `@modelcontextprotocol/sdk` (1.x, what most clients ship) and
 * `@modelcontextprotocol/client` (2.x).
 *
 * The mesh is bench/meshServer.js (the worker in a process of its own). Each path keeps one client
 * (one MCP session) for the whole run, as an IDE or agent does; the paths are measured in an order
 * rotated every round, medians over rounds. Besides p50 and p99 the report gives the CPU µs per call
 * of this process (the client: for an SDK path, the SDK's own work), of the coordinator and of the
 * worker, and how many `abort` listeners the 1.x transport's signal holds at the end (it hands one
 * long-lived AbortSignal to every fetch; undici adds a listener per fetch and drops it only when the
 * request is garbage-collected).
 *
 * Environment: BENCH_MCP_SDK_ROUNDS (3), BENCH_MCP_SDK_SECONDS (3), BENCH_MCP_SDK_WARMUP_SECONDS (0.5),
 * BENCH_MCP_SDK_OUT (the page whose section "MCP with the official SDK client" it overwrites; "-"
 * writes none), else BENCH_OUT as for bench/run.js, else docs/performance.md; BENCH_CHILD_FLAGS.
 */
import { randomUUID } from 'node:crypto';
import { Buffer } from 'node:buffer';
import { getEventListeners } from 'node:events';
import http from 'node:http';
import os from 'node:os';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';
import { formatMs, runLoad } from './lib/load.js';
import { envNumber as envNumberOf, requireBuild, startMeshProcess } from './lib/meshProcess.js';
import { cpuNow, fmt, loadPhrase, meshProcesses, rotated } from './lib/rounds.js';

requireBuild('bench/mcpSdk.js');
const envNumber = (key, fallback, min) => envNumberOf('bench/mcpSdk.js', key, fallback, min);
const ROUNDS = Math.round(envNumber('BENCH_MCP_SDK_ROUNDS', 3, 1));
const SECONDS = envNumber('BENCH_MCP_SDK_SECONDS', 3, 0.1);
const WARMUP_SECONDS = envNumber('BENCH_MCP_SDK_WARMUP_SECONDS', 0.5, 0);
const OUT = process.env.BENCH_MCP_SDK_OUT ?? process.env.BENCH_OUT ?? PERFORMANCE_PAGE;
const CHILD_FLAGS = (process.env.BENCH_CHILD_FLAGS ?? '').split(/\s+/).filter(Boolean);
const TEXT = 'Hello from the AMF MCP SDK benchmark: please echo this sentence back, word for word.';
const PROTOCOL = '2025-11-25';
const WIRE_NAME = 'bench-echo__echo';
const log = (line) => process.stderr.write(`${line}\n`);

// MaxListenersExceededWarning is what the 1.x transport's listener build-up looks like from outside:
// count them (Node still prints each).
let listenerWarnings = 0;
process.on('warning', (w) => {
  if (w.name === 'MaxListenersExceededWarning') listenerWarnings++;
});

// --- callers: `call()` makes one echo and checks the answer --------------------------------------------

/** An SDK client (1.x or 2.x) with one session at `url`, waiting until `tool` is listed. */
async function sdkCaller(Client, Transport, url, tool) {
  const client = new Client({ name: 'amf-bench-sdk', version: '1' });
  const transport = new Transport(new URL(url));
  await client.connect(transport);
  const deadline = Date.now() + 30_000;
  while (!(await client.listTools()).tools.some((t) => t.name === tool)) {
    if (Date.now() > deadline) throw new Error(`${url} did not list ${tool} within 30 s`);
    await sleep(100);
  }
  const call = async () => {
    const r = await client.callTool({ name: tool, arguments: { text: TEXT } });
    if (r.isError || !JSON.stringify(r.content).includes(TEXT))
      throw new Error(`tools/call ${tool}: ${JSON.stringify(r).slice(0, 200)}`);
  };
  // The 1.x transport's private AbortController: read for the report only.
  const signal = transport._abortController?.signal;
  return {
    call,
    abortListeners: () => (signal ? getEventListeners(signal, 'abort').length : undefined),
    close: () => client.close(),
  };
}

/** POSTs one JSON body; resolves with status, headers and text. */
function post(agent, url, message, headers) {
  const body = Buffer.from(JSON.stringify(message));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': body.length, ...headers },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** bench/mcp.js's client: node:http, one session, no SDK; the floor for an MCP call at the worker. */
async function rawMcpCaller(url, tool) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  const accept = { accept: 'application/json, text/event-stream' };
  const init = await post(
    agent,
    url,
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: PROTOCOL,
        capabilities: {},
        clientInfo: { name: 'amf-bench', version: '1' },
      },
    },
    accept,
  );
  const session = init.headers['mcp-session-id'];
  if (init.status !== 200 || !session) throw new Error(`initialize at ${url}: HTTP ${init.status}`);
  const headers = { ...accept, 'mcp-session-id': session, 'mcp-protocol-version': PROTOCOL };
  await post(agent, url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  let id = 1;
  const call = async () => {
    const r = await post(
      agent,
      url,
      { jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name: tool, arguments: { text: TEXT } } },
      headers,
    );
    if (r.status !== 200 || !r.text.includes(TEXT) || r.text.includes('"isError":true'))
      throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`);
  };
  return { call, close: () => agent.destroy() };
}

/** A2A `SendMessage` to the worker's own `/a2a` (bench/a2a.js's client): the same echo, no MCP. */
async function a2aCaller(url) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  let id = 1;
  const call = async () => {
    const r = await post(
      agent,
      url,
      {
        jsonrpc: '2.0',
        id: id++,
        method: 'SendMessage',
        params: {
          message: {
            messageId: randomUUID(),
            role: 'ROLE_USER',
            parts: [{ text: TEXT }],
            metadata: { tag: 'echo' },
          },
        },
      },
      { 'a2a-version': '1.0' },
    );
    if (r.status !== 200 || !r.text.includes('TASK_STATE_COMPLETED') || !r.text.includes(TEXT))
      throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`);
  };
  return { call, close: () => agent.destroy() };
}

// --- measurement --------------------------------------------------------------------------------------

const PATHS = [
  'sdkDirect',
  'sdkCoordinator',
  'clientV2Direct',
  'clientV2Coordinator',
  'rawDirect',
  'rawCoordinator',
  'a2aDirect',
];
const LABELS = {
  sdkDirect: 'MCP SDK 1.x client → worker `/mcp`',
  sdkCoordinator: 'MCP SDK 1.x client → coordinator `/mcp`',
  clientV2Direct: 'MCP client 2.x → worker `/mcp`',
  clientV2Coordinator: 'MCP client 2.x → coordinator `/mcp`',
  rawDirect: 'raw MCP (node:http, bench/mcp.js) → worker `/mcp`',
  rawCoordinator: 'raw MCP (node:http, bench/mcp.js) → coordinator `/mcp`',
  a2aDirect: 'raw A2A `SendMessage` → worker `/a2a`',
};

/** c=1 for SECONDS after a warm-up, with the CPU µs per call of every process. */
async function measure(caller, procs) {
  const issue = (done) => caller.call().then(() => done(), done);
  if (WARMUP_SECONDS > 0) await runLoad({ concurrency: 1, durationMs: WARMUP_SECONDS * 1000, issue });
  const before = cpuNow(procs);
  const r = await runLoad({ concurrency: 1, durationMs: SECONDS * 1000, issue });
  const after = cpuNow(procs);
  if (r.errors > 0) throw new Error(`${r.errors} failed calls; first: ${r.firstError?.message}`);
  r.cpuUs = before.map((b, i) =>
    b === undefined || after[i] === undefined ? undefined : ((after[i] - b) * 1000) / r.ok,
  );
  return r;
}

const median = (xs) => {
  const v = xs.filter((x) => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  return v.length ? v[Math.floor(v.length / 2)] : undefined;
};

async function main() {
  const mesh = await startMeshProcess({ childFlags: CHILD_FLAGS });
  const info = mesh.info;
  const procs = meshProcesses(info);
  log(`bench/mcpSdk.js: mesh up (coordinator ${info.coordinatorUrl}, worker ${info.workerUrl})`);
  const callers = {};
  try {
    callers.sdkDirect = await sdkCaller(ClientV1, TransportV1, `${info.workerUrl}/mcp`, 'echo');
    callers.sdkCoordinator = await sdkCaller(ClientV1, TransportV1, `${info.coordinatorUrl}/mcp`, WIRE_NAME);
    callers.clientV2Direct = await sdkCaller(ClientV2, TransportV2, `${info.workerUrl}/mcp`, 'echo');
    callers.clientV2Coordinator = await sdkCaller(
      ClientV2,
      TransportV2,
      `${info.coordinatorUrl}/mcp`,
      WIRE_NAME,
    );
    callers.rawDirect = await rawMcpCaller(`${info.workerUrl}/mcp`, 'echo');
    callers.rawCoordinator = await rawMcpCaller(`${info.coordinatorUrl}/mcp`, WIRE_NAME);
    callers.a2aDirect = await a2aCaller(`${info.workerUrl}/a2a`);
    const rounds = Object.fromEntries(PATHS.map((p) => [p, /** @type {any[]} */ ([])]));
    for (let round = 0; round < ROUNDS; round++)
      for (const path of rotated(PATHS, round)) rounds[path].push(await measure(callers[path], procs));
    const results = PATHS.map((path) => ({
      path,
      p50: median(rounds[path].map((r) => r.p50)),
      p99: median(rounds[path].map((r) => r.p99)),
      calls: rounds[path].reduce((n, r) => n + r.ok, 0),
      cpu: procs.map((_, i) => median(rounds[path].map((r) => r.cpuUs[i]))),
    }));
    const listeners = {
      sdkDirect: callers.sdkDirect.abortListeners(),
      sdkCoordinator: callers.sdkCoordinator.abortListeners(),
    };
    return { info, procs, results, listeners };
  } finally {
    for (const c of Object.values(callers)) await Promise.resolve(c.close()).catch(() => undefined);
    await mesh.stop();
  }
}

function report({ procs, results, listeners }) {
  const find = (path) => results.find((r) => r.path === path);
  const names = procs.map((p) => (p.pid === process.pid ? 'client (this process)' : p.name));
  const lines = [];
  lines.push(`| path (c=1) | p50 | p99 | calls measured | CPU µs per call: ${names.join(' / ')} |`);
  lines.push('|---|---:|---:|---:|---|');
  for (const r of results)
    lines.push(
      `| ${LABELS[r.path]} | ${formatMs(r.p50)} | ${formatMs(r.p99)} | ${r.calls.toLocaleString('en-US')} | ${r.cpu.map((c) => fmt(c, 0)).join(' / ')} |`,
    );
  lines.push('');
  const a2a = find('a2aDirect');
  const verdicts = [];
  for (const [line, direct, coordinator] of [
    ['SDK 1.x', find('sdkDirect'), find('sdkCoordinator')],
    ['client 2.x', find('clientV2Direct'), find('clientV2Coordinator')],
  ]) {
    const added = coordinator.p50 - direct.p50;
    const ratio = direct.p50 / a2a.p50;
    verdicts.push(
      `${line}: added p50 through the coordinator ${formatMs(added)} (target ≤ 1.00 ms: ${added <= 1 ? 'PASS' : 'FAIL'})`,
      `${line}: p50 at the worker / the worker's own \`/a2a\` ${ratio.toFixed(2)}× (target ≤ 2×: ${ratio <= 2 ? 'PASS' : 'FAIL'})`,
    );
  }
  const raw = find('rawDirect');
  const sdk = find('sdkDirect');
  const clientIndex = procs.findIndex((p) => p.pid === process.pid);
  verdicts.push(
    `the SDK 1.x client's own CPU per call at the worker: ${fmt(sdk.cpu[clientIndex], 0)} µs, against ${fmt(raw.cpu[clientIndex], 0)} µs for the raw client (same server, same answers)`,
    `\`abort\` listeners on the SDK 1.x transport's signal at the end: ${listeners.sdkDirect ?? 'n/a'} (worker session), ${listeners.sdkCoordinator ?? 'n/a'} (coordinator session); MaxListenersExceededWarning printed ${listenerWarnings} times`,
  );
  lines.push(verdicts.map((v) => `- ${v}`).join('\n'));
  return lines.join('\n');
}

const measured = await main();
const table = report(measured);
const load = loadPhrase();
process.stdout.write(`\n${table}\n\n${load}\n`);
if (OUT !== '-') {
  const cpus = os.cpus();
  // What the paths are is the page's hand-written method; the section holds this run's figures.
  const section = `### MCP with the official SDK client

Made by \`npm run bench\` (this section: \`node bench/mcpSdk.js\`, after \`npm run build\`); c=1,
${SECONDS} s per measurement after ${WARMUP_SECONDS} s of warm-up, ${ROUNDS} round(s), the order of the paths
rotated each round (medians). Machine: ${cpus[0]?.model.trim() ?? 'unknown'} × ${cpus.length}, Node ${process.version};
${load} at the end.

${table}
`;
  await writeSection(OUT, docSection('mcp-sdk', 'bench/mcpSdk.js'), section);
  log(`bench/mcpSdk.js: wrote the "MCP with the official SDK client" section of ${OUT}`);
}
