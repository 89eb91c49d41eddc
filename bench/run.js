/**
 * `npm run bench` (= node --expose-gc bench/run.js): the mesh measured side by side with its floor, in
 * one run, on one machine.
 *
 *   (a) NATS floor   raw NATS request/reply (nc.request → responder → reply), coordinator role, the
 *                    mesh's own nats-server, payload the size of an echo task's announcement;
 *   (b) direct HTTP  POST /tasks/send straight to the echo worker;
 *   (c) mesh         POST /v1/chat/completions, model amf/echo: coordinator → NATS → worker → NATS →
 *                    coordinator;
 *   (d) memory       BENCH_TASKS completions through the mesh at concurrency 64, with the coordinator
 *                    process's heap and RSS after a forced GC before, during and after.
 *
 * The mesh (nats-server, coordinator, echo worker, floor responder) runs in a child process
 * (bench/meshServer.js) so its memory and CPU are its own; this process is only the load generator.
 * Results go to stdout and to the section "Mesh against direct and the NATS floor" of
 * docs/performance.md, which every run overwrites (the rest of the page is left as it is).
 *
 * Environment:
 *   BENCH_CONCURRENCY   comma-separated concurrencies (default "1,64")
 *   BENCH_SECONDS       seconds per measurement (default 5), after BENCH_WARMUP_SECONDS (default 1)
 *   BENCH_ROUNDS        measure every path this many times, interleaved, and report medians (default 3:
 *                       a shared host's speed drifts within minutes; mesh − direct and mesh / direct are
 *                       also taken per round and their median judged)
 *   BENCH_TASKS         completions in the memory run (default 100000; 0 skips it)
 *   BENCH_MEMORY_CONCURRENCY  concurrency of the memory run (default 64)
 *   BENCH_PATHS         which of bare,nats,direct,mesh to measure (default all four; bare = calibration)
 *   BENCH_OUT           page to write the section into (default docs/performance.md; "-" writes none)
 *   BENCH_CHILD_FLAGS   extra node flags for the mesh process, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
 *                       (`npm run bench` puts scripts/lib.sh's AMF_NODE_FLAGS first, as `npm start` runs the mesh)
 *   BENCH_SEPARATE_WORKER=1  run the echo worker in a process of its own (see bench/meshServer.js)
 *   BENCH_JSON          also write the raw results as JSON to this file
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import nodePath from 'node:path';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { httpGet, httpPoster, natsRequester, runLoad } from './lib/load.js';
import { alive, cpuMs, machineBusyMs, memoryOf, syscallsOf } from './lib/procstat.js';
import { docSection, writeSection } from './lib/docSection.js';
import { fmt, mb, mergeRounds, pairedRounds, pctOf, renderReport } from './lib/runReport.js';
import {
  CHILD_FLAGS,
  CONCURRENCIES,
  MEMORY_CONCURRENCY,
  OUT,
  PATHS,
  ROUNDS,
  SECONDS,
  TASKS,
  WARMUP_SECONDS,
  fail,
} from './lib/runSettings.js';

const ROOT = new URL('../', import.meta.url);

// The settings are environment variables (this file's header); arguments are only asked for help.
const args = process.argv.slice(2);
if (args.length > 0) {
  const header = readFileSync(new URL(import.meta.url), 'utf8').match(/^\/\*\*([\s\S]*?)\*\//)?.[1] ?? '';
  const help = header.replace(/^ \* ?/gm, '').trim();
  const asked = args.every((a) => a === '--help' || a === '-h');
  (asked ? process.stdout : process.stderr).write(
    `${asked ? '' : `bench/run.js takes no arguments (got ${args.join(' ')}); its settings are environment variables:\n\n`}${help}\n`,
  );
  process.exit(asked ? 0 : 2);
}
const DIST = new URL('dist/', ROOT);
const TEXT = 'Hello from the AMF benchmark: please echo this sentence back, word for word.';

// --- the build must exist -----------------------------------------------------------------------------

if (!existsSync(new URL('coordinator/coordinator.js', DIST))) {
  fail('dist/ is missing or incomplete: run `npm run build` first, then `npm run bench`');
}

/** Newest mtime under a directory (for the "dist is older than src" warning). */
function newestMtime(dir, ext) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${entry.name}`;
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p, ext));
    else if (entry.name.endsWith(ext)) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}
const srcDir = fileURLToPath(new URL('src', ROOT));
if (existsSync(srcDir) && newestMtime(srcDir, '.ts') > newestMtime(fileURLToPath(DIST), '.js')) {
  process.stderr.write(
    'bench: warning: src/ has changes newer than dist/; run `npm run build` to measure them\n',
  );
}

const { connectAs } = await import(new URL('fabric/connect.js', DIST).href);
const { loadOrCreateCredentials } = await import(new URL('fabric/credentials.js', DIST).href);
// The mesh child inherits this environment, so it signs and checks with the same Ed25519.
const { ed25519 } = await import(new URL('identity/ed25519.js', DIST).href);
const { createEvent } = await import(new URL('events/cloudEvent.js', DIST).href);

// --- the mesh process ---------------------------------------------------------------------------------

const log = (line) => process.stderr.write(`${line}\n`);
let child;
let info;

/** Last-resort cleanup (synchronous, also on exit): nothing this run started may outlive it. */
function killEverything() {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pid of [info?.natsPid, info?.workerPid !== info?.pid ? info?.workerPid : undefined]) {
    if (!pid || !alive(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  // The mesh removes its temp dir when it stops gracefully; after a SIGKILL it cannot.
  const dir = info?.dataDir;
  if (
    dir &&
    nodePath.dirname(dir) === os.tmpdir() &&
    nodePath.basename(dir).startsWith('amf-bench-') &&
    existsSync(dir)
  ) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
}
process.on('exit', killEverything);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    log(`bench: ${signal}, stopping the mesh`);
    // A second signal, or 10 s, ends it the hard way.
    const hard = () => {
      killEverything();
      process.exit(130);
    };
    process.once(signal, hard);
    setTimeout(hard, 10_000).unref();
    // hard() exits the process, so a rejected stop never goes unhandled.
    void stopMesh().finally(hard);
  });
}
// A closed pipe (`npm run bench | head`) must not crash the run and leave the mesh behind.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

async function startMesh() {
  const script = fileURLToPath(new URL('bench/meshServer.js', ROOT));
  child = spawn(process.execPath, ['--expose-gc', ...CHILD_FLAGS, script], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  const first = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the mesh did not start within 30 s')), 30_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the mesh process exited during start-up (${signal ?? `exit code ${code}`})`));
    });
  });
  lines.on('line', (line) => log(`[mesh] ${line}`));
  return JSON.parse(first);
}

let memoryRequestId = 0;
/** Asks the mesh process for process.memoryUsage() after a full GC. */
function childMemory() {
  const id = ++memoryRequestId;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('the mesh process did not answer a memory request')),
      30_000,
    );
    const onMessage = (msg) => {
      if (msg?.type !== 'memory' || msg.id !== id) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      const proc = memoryOf(child.pid);
      resolve({
        ...msg,
        vmRss: proc?.rss,
        vmPeak: proc?.peak,
        rssAnon: proc?.anon,
        rssFile: proc?.file,
        nats: memoryOf(info.natsPid),
      });
    };
    child.on('message', onMessage);
    child.send({ cmd: 'memory', gc: true, id });
  });
}

/** Stops the mesh gracefully (it closes worker, coordinator and nats-server), SIGKILL after 15 s. */
async function stopMesh() {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
  const deadline = Date.now() + 5000;
  while (info?.natsPid && alive(info.natsPid) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  killEverything();
}

/** Parses the Prometheus text of the coordinator's /metrics for the process memory gauges. */
async function scrapeMemoryMetrics() {
  try {
    // /metrics is an operator route: the key the coordinator generated into its data dir.
    const key = readFileSync(nodePath.join(info.dataDir, 'operator.key'), 'utf8').trim();
    const { status, text } = await httpGet(`${info.coordinatorUrl}/metrics`, {
      authorization: `Bearer ${key}`,
    });
    if (status !== 200) return undefined;
    const values = {};
    for (const line of text.split('\n')) {
      const m =
        /^(amf_process_\S*(?:resident_memory_bytes|heap_size_used_bytes|heap_size_total_bytes))(?:\{[^}]*\})?\s+(\S+)/.exec(
          line,
        );
      if (m) values[m[1]] = Number(m[2]);
    }
    return values;
  } catch {
    return undefined;
  }
}

// --- measurements -------------------------------------------------------------------------------------

const separateWorker = () => info.workerPid && info.workerPid !== info.pid;

function cpuSnapshot() {
  const u = process.cpuUsage();
  return {
    at: performance.now(),
    gen: (u.user + u.system) / 1000,
    mesh: cpuMs(info.pid),
    worker: separateWorker() ? cpuMs(info.workerPid) : undefined,
    nats: cpuMs(info.natsPid),
    machine: machineBusyMs(),
    meshSyscalls: syscallsOf(info.pid),
  };
}

/**
 * Where the CPU went during a measurement: µs per completed request for each process, the mesh
 * process's utilisation of one core, and what other processes on the machine used meanwhile (noise).
 */
function cpuAccount(before, after, ok) {
  const delta = (k) => (before[k] === undefined || after[k] === undefined ? undefined : after[k] - before[k]);
  const per = (k, scale = 1000) => {
    const d = delta(k);
    return d === undefined || ok === 0 ? undefined : (d * scale) / ok;
  };
  const wallMs = after.at - before.at;
  const ours = ['gen', 'mesh', 'worker', 'nats'].reduce((sum, k) => sum + (delta(k) ?? 0), 0);
  const meshCpu = delta('mesh');
  const machineCpu = delta('machine');
  return {
    gen: per('gen'),
    mesh: per('mesh'),
    worker: per('worker'),
    nats: per('nats'),
    meshSyscalls: per('meshSyscalls', 1),
    meshUtilisation: meshCpu === undefined ? undefined : meshCpu / wallMs,
    otherLoad:
      machineCpu === undefined ? undefined : Math.max(0, machineCpu - ours) / (wallMs * os.cpus().length),
  };
}

async function measure(name, concurrency, target) {
  if (WARMUP_SECONDS > 0)
    await runLoad({ concurrency, durationMs: WARMUP_SECONDS * 1000, issue: target.issue });
  const before = cpuSnapshot();
  const result = await runLoad({ concurrency, durationMs: SECONDS * 1000, issue: target.issue });
  result.cpu = cpuAccount(before, cpuSnapshot(), result.ok);
  result.path = name;
  log(
    `  ${name.padEnd(6)} c=${String(concurrency).padStart(3)}  p50 ${fmt(result.p50, 3)} ms  p99 ${fmt(result.p99, 3)} ms  ` +
      `${fmt(result.throughput, 0)} req/s  errors ${result.errors}  other load ${pctOf(result.cpu.otherLoad)}` +
      (result.firstError ? `  (first: ${result.firstError.message})` : ''),
  );
  return result;
}

/** An announcement like the one the coordinator publishes for the benchmark's chat request. */
function echoTaskPayload() {
  const taskId = crypto.randomUUID();
  const event = createEvent({
    type: 'amf.task.announce',
    sender: {
      identity: `spiffe://local/coordinator/${crypto.randomUUID()}`,
      source: info.coordinatorUrl,
      role: 'coordinator',
      trustDomain: 'local',
    },
    payload: {
      task_id: taskId,
      task: TEXT,
      required_capability: 'echo',
      max_retries: 2,
      retry_delay_seconds: 1,
      attempt: 1,
      reply_subject: `amf.internal.reply.${taskId}`,
      messages: [{ role: 'user', content: TEXT }],
    },
    taskId,
    ttlSeconds: 30,
  });
  return new TextEncoder().encode(JSON.stringify(event));
}

async function main() {
  const startedAt = new Date();
  log(`bench: starting the mesh (nats-server, coordinator, echo worker) in a child process`);
  info = await startMesh();
  log(
    `bench: mesh pid ${info.pid}, coordinator ${info.coordinatorUrl}, worker ${info.workerUrl}, nats ${info.natsUrl}`,
  );
  const credentials = await loadOrCreateCredentials(info.dataDir, {});
  const nc = await connectAs(info.natsUrl, credentials.coordinator, 'bench-floor-requester');
  const floorPayload = echoTaskPayload();
  const chatBody = JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: TEXT }] });
  const directBody = JSON.stringify({ text: TEXT });
  // A worker's /tasks/send takes the operator key (or the coordinator's bearer): the one the
  // coordinator generated into its data dir, which the worker was given.
  const directHeaders = {
    authorization: `Bearer ${readFileSync(nodePath.join(info.dataDir, 'operator.key'), 'utf8').trim()}`,
  };
  const memoryAtStart = await childMemory();

  // Correctness first: a fast wrong answer is not a result.
  {
    const probe = httpPoster(`${info.workerUrl}/tasks/send`, directBody, {
      concurrency: 1,
      headers: directHeaders,
    });
    const r = await probe.once();
    probe.close();
    if (r.status !== 200 || JSON.parse(r.text).result?.text !== TEXT)
      throw new Error(`direct probe failed: ${r.status} ${r.text}`);
    const meshProbe = httpPoster(`${info.coordinatorUrl}/v1/chat/completions`, chatBody, { concurrency: 1 });
    const m = await meshProbe.once();
    meshProbe.close();
    if (m.status !== 200 || JSON.parse(m.text).choices?.[0]?.message?.content !== TEXT)
      throw new Error(`mesh probe failed: ${m.status} ${m.text}`);
    const reply = await nc.request(info.floorSubject, floorPayload, { timeout: 5000 });
    if (reply.data.length !== floorPayload.length) throw new Error('NATS floor probe: wrong reply size');
  }

  const rounds = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const results = [];
    for (const c of CONCURRENCIES) {
      log(
        `bench: ${ROUNDS > 1 ? `round ${round}/${ROUNDS}, ` : ''}concurrency ${c}, ${WARMUP_SECONDS} s warm-up + ${SECONDS} s per path`,
      );
      if (PATHS.includes('bare')) {
        const t = httpPoster(info.bareUrl, directBody, { concurrency: c });
        results.push(await measure('bare', c, t));
        t.close();
      }
      if (PATHS.includes('nats'))
        results.push(await measure('nats', c, natsRequester(nc, info.floorSubject, floorPayload)));
      if (PATHS.includes('direct')) {
        const t = httpPoster(`${info.workerUrl}/tasks/send`, directBody, {
          concurrency: c,
          headers: directHeaders,
        });
        results.push(await measure('direct', c, t));
        t.close();
      }
      if (PATHS.includes('mesh')) {
        const t = httpPoster(`${info.coordinatorUrl}/v1/chat/completions`, chatBody, { concurrency: c });
        results.push(await measure('mesh', c, t));
        t.close();
      }
    }
    rounds.push(results);
  }
  const results = mergeRounds(rounds);
  const paired = pairedRounds(rounds);

  let memory;
  if (TASKS > 0) {
    log(
      `bench: memory: ${TASKS.toLocaleString('en-US')} completions through the mesh at concurrency ${MEMORY_CONCURRENCY}`,
    );
    const t = httpPoster(`${info.coordinatorUrl}/v1/chat/completions`, chatBody, {
      concurrency: MEMORY_CONCURRENCY,
    });
    const checkpoints = [];
    const before = await childMemory();
    const metricsBefore = await scrapeMemoryMetrics();
    checkpoints.push({ done: 0, ...before });
    let done = 0;
    let errors = 0;
    let firstError;
    let elapsedMs = 0;
    const slices = 4;
    for (let i = 0; i < slices; i++) {
      const n = Math.round((TASKS * (i + 1)) / slices) - done;
      const r = await runLoad({ concurrency: MEMORY_CONCURRENCY, total: n, issue: t.issue });
      done += n;
      errors += r.errors;
      firstError ??= r.firstError;
      elapsedMs += r.elapsedMs;
      const m = await childMemory();
      checkpoints.push({ done, ...m });
      log(
        `  ${done.toLocaleString('en-US').padStart(9)} tasks  rss ${mb(m.vmRss ?? m.memory.rss)} MB  heap used ${mb(m.memory.heapUsed)} MB  ` +
          `${fmt((r.ok / r.elapsedMs) * 1000, 0)} req/s  active ${m.active}`,
      );
    }
    t.close();
    const metricsAfter = await scrapeMemoryMetrics();
    memory = {
      start: memoryAtStart,
      checkpoints,
      errors,
      firstError,
      elapsedMs,
      metricsBefore,
      metricsAfter,
    };
  }

  await nc.close();
  await stopMesh();
  log('bench: mesh stopped');

  const report = renderReport({
    results,
    paired,
    memory,
    info,
    ed25519Backend: ed25519.backend,
  });
  process.stdout.write(report.table + '\n');
  if (OUT !== '-') {
    await writeSection(OUT, docSection('mesh-vs-floor', 'bench/run.js'), report.document);
    log(`bench: wrote the "Mesh against direct and the NATS floor" section of ${OUT}`);
  }
  if (process.env.BENCH_JSON) {
    const raw = {
      startedAt,
      machine: { cpus: os.cpus().length, node: process.version },
      results,
      paired,
      memory,
    };
    writeFileSync(
      process.env.BENCH_JSON,
      JSON.stringify(raw, (_k, v) => (v instanceof Error ? v.message : v), 2),
    );
  }
  const errors = results.reduce((n, r) => n + r.errors, 0) + (memory?.errors ?? 0);
  if (errors > 0) {
    log(`bench: ${errors} requests failed; the numbers above are not trustworthy`);
    process.exitCode = 1;
  }
}

try {
  await main();
} catch (err) {
  log(`bench: failed: ${/** @type {any} */ (err)?.stack ?? err}`);
  await stopMesh().catch(() => undefined);
  process.exitCode = 1;
}
