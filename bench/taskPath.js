/**
 * The task path against BullMQ (part of `npm run bench`; issue 31's measurement): "send a durable task
 * to a worker and wait for its answer" on four systems, every server process separate, on the same
 * cores, interleaved in rounds:
 *
 *   AMF           `amf up --no-mdns` (coordinator; it spawns nats-server with JetStream) and
 *                 `amf worker --handler echo --no-mdns`; each task a non-streaming
 *                 `POST /v1/chat/completions` for model `amf/echo` from this process;
 *   BullMQ        Debian's redis-server (RDB snapshots, Redis's default), a BullMQ Worker process
 *                 echoing the job's text, a producer process running `queue.add()` +
 *                 `job.waitUntilFinished()` (bench/bullmqAgent.js);
 *   BullMQ + AOF  the same on a second redis-server with `appendonly yes`, `appendfsync everysec`;
 *   JetStream floor  a nats-server with JetStream, a hand-written HTTP edge storing each task in a
 *                 work-queue stream and a worker storing its echo in a result stream
 *                 (bench/jetstreamFloor.js): the least any "durable task behind an HTTP edge" on AMF's
 *                 fabric costs, with none of AMF's identity, policy, history or recovery;
 *   raw NATS      a plain nats-server (no JetStream) and a responder process that echoes each request
 *                 (bench/natsResponder.js); requests from this process: the fabric's own floor.
 *
 * Each round measures every system, in an order rotated each round: the p50 round trip at c=1, then
 * round trips/s at c=64 with the CPU time (utime + stime from /proc/<pid>/stat) every server process
 * spent on them. The client side is not counted for AMF, the floors (this process); for BullMQ the
 * producer is counted, because `queue.add()` and the events it waits on are BullMQ's own work (its
 * closed-loop driver adds a few µs a task). Disk per 1,000 kept tasks: the bytes the JetStream store
 * (AMF, the JetStream floor) and Redis's working dir (after SAVE for RDB; the AOF as written) hold at the end, less what
 * they held after start-up, over every task completed (nothing ages out in a run this short).
 *
 * Writes the table to stdout and as the section "Task path against BullMQ" of docs/performance.md
 * (bench/lib/docSection.js), which every run overwrites.
 *
 * Environment: BENCH_TASKPATH_ROUNDS (8), BENCH_TASKPATH_SECONDS (2; per measurement),
 * BENCH_TASKPATH_WARMUP_SECONDS (0.5; before each measurement), BENCH_TASKPATH_INITIAL_WARMUP_SECONDS
 * (4; every system at c=64 before the first round), BENCH_TASKPATH_OUT (default docs/performance.md; "-" writes none),
 * BENCH_WORKER_CONCURRENCY (16, both workers: `amf worker`'s default), BENCH_CHILD_FLAGS (node flags of
 * the AMF processes; `npm run bench` passes AMF_NODE_FLAGS as `npm start` does), AMF_NATS_SERVER_BIN.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { URL, fileURLToPath } from 'node:url';
import { TextEncoder } from 'node:util';
import { connect } from '@nats-io/transport-node';
import { AMF_NON_DEFAULTS, startAmf } from './lib/amfCli.js';
import { startChild } from './lib/children.js';
import { createFloorStreams } from './jetstreamFloor.js';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';
import { httpPoster, natsRequester, runLoad } from './lib/load.js';
import { envNumber as envNumberOf, requireBuild, ROOT } from './lib/meshProcess.js';
import { cpuMs, machineBusyMs } from './lib/procstat.js';
import { diskBytes, freePort, redisInstalled, startRedis } from './lib/redisServer.js';
import { rotated } from './lib/rounds.js';

requireBuild('bench/taskPath.js');
const envNumber = (key, fallback, min) => envNumberOf('bench/taskPath.js', key, fallback, min);
const ROUNDS = Math.round(envNumber('BENCH_TASKPATH_ROUNDS', 8, 1));
const SECONDS = envNumber('BENCH_TASKPATH_SECONDS', 2, 0.1);
const WARMUP_SECONDS = envNumber('BENCH_TASKPATH_WARMUP_SECONDS', 0.5, 0);
// Before the first round, every system runs this long at c=64: a freshly started AMF is several times
// slower over its first few thousand tasks (JIT, first-use paths), which one round's warm-up does not cover.
const INITIAL_WARMUP_SECONDS = envNumber('BENCH_TASKPATH_INITIAL_WARMUP_SECONDS', 4, 0);
const WORKER_CONCURRENCY = Math.round(envNumber('BENCH_WORKER_CONCURRENCY', 16, 1));
const OUT = process.env.BENCH_TASKPATH_OUT ?? PERFORMANCE_PAGE;
const NODE_FLAGS = (process.env.BENCH_CHILD_FLAGS ?? '').split(/\s+/).filter(Boolean);
const NATS_BIN = process.env.AMF_NATS_SERVER_BIN || 'nats-server';
// Which AMF was measured: BENCH_AMF_REVISION when dist/ was built elsewhere, else this checkout's
// commit, marked when the working tree differs from it (dist/ may hold uncommitted changes then).
const AMF_REVISION = process.env.BENCH_AMF_REVISION ?? checkoutRevision();
const TEXT = 'Hello from the AMF task-path benchmark: please echo this sentence back, word for word.';
const FLOOR_SUBJECT = 'bench.floor';
const AGENT = fileURLToPath(new URL('bullmqAgent.js', import.meta.url));
const RESPONDER = fileURLToPath(new URL('natsResponder.js', import.meta.url));
const FLOOR = fileURLToPath(new URL('jetstreamFloor.js', import.meta.url));
const HIGH = 64;
const SYSTEMS = ['amf', 'bullmq', 'bullmqAof', 'floor', 'nats'];
const LABELS = {
  amf: 'AMF',
  bullmq: 'BullMQ',
  bullmqAof: 'BullMQ + AOF',
  floor: 'JetStream floor',
  nats: 'raw NATS req/reply',
};
// Issue 31's goals, each against BullMQ + AOF measured in the same run.
const GOALS = { cpu: 1.0, throughput: 1.0, p50: 1.5, diskMb: 1.5 };
// Above this many cores kept busy by other processes on average, the report says the run was shared.
const SHARED_MACHINE_CORES = 0.25;
const log = (line) => process.stderr.write(`${line}\n`);

// --- the systems --------------------------------------------------------------------------------------

/**
 * A system under test: `procs` (name, pid) whose CPU is counted, `caller(concurrency)` giving an
 * `{ issue, close }` load client or a `run(concurrency, seconds)`, `keptBytes()` and `stop()`.
 */
/**
 * Chat completions for `amf/echo` to `baseUrl`, one keep-alive client per concurrency:
 * `run(concurrency, seconds)` for the load, `check(label)` for one answer echoed, `close()`.
 */
function chatLoad(baseUrl) {
  const body = JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: TEXT }] });
  const posters = new Map();
  const poster = (concurrency) => {
    if (!posters.has(concurrency))
      posters.set(concurrency, httpPoster(`${baseUrl}/v1/chat/completions`, body, { concurrency }));
    return posters.get(concurrency);
  };
  return {
    run: (concurrency, seconds) =>
      runLoad({ concurrency, durationMs: seconds * 1000, issue: poster(concurrency).issue }),
    check: async (label) => {
      const first = await poster(1).once();
      if (first.status !== 200 || !first.text.includes(TEXT))
        throw new Error(`${label}: HTTP ${first.status} ${first.text.slice(0, 300)}`);
    },
    close: () => {
      for (const p of posters.values()) p.close();
    },
  };
}

async function startAmfSystem() {
  const amf = await startAmf({ nodeFlags: NODE_FLAGS, workerConcurrency: WORKER_CONCURRENCY });
  const load = chatLoad(amf.url);
  await load.check('amf/echo');
  const baseBytes = amf.storeBytes();
  return {
    procs: [
      { name: 'coordinator', pid: amf.coordinatorPid },
      { name: 'worker', pid: amf.workerPid },
      { name: 'nats-server', pid: amf.natsPid },
    ],
    run: load.run,
    keptBytes: () => amf.storeBytes() - baseBytes,
    stop: async () => {
      load.close();
      await amf.stop();
    },
  };
}

async function startBullmqSystem({ aof }) {
  const redis = await startRedis({ aof });
  const stops = [redis.stop];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
  };
  try {
    const worker = await startChild(
      process.execPath,
      [AGENT, 'worker', String(redis.port), String(WORKER_CONCURRENCY)],
      { ready: /"ready":true/ },
    );
    stops.push(worker.stop);
    const producer = await startChild(process.execPath, [AGENT, 'producer', String(redis.port)], {
      ready: /"ready":true/,
      ipc: true,
    });
    stops.push(producer.stop);
    const baseBytes = redis.keptBytes();
    let nextId = 1;
    const run = (concurrency, seconds) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        const onMessage = (msg) => {
          if (msg?.type !== 'result' || msg.id !== id) return;
          producer.child.off('message', onMessage);
          producer.child.off('exit', onExit);
          resolve(msg.result);
        };
        const onExit = (code) => reject(new Error(`the BullMQ producer exited (${code})`));
        producer.child.on('message', onMessage);
        producer.child.once('exit', onExit);
        producer.child.send({ cmd: 'run', id, concurrency, seconds });
      });
    return {
      procs: [
        { name: 'redis', pid: redis.pid },
        { name: 'BullMQ worker', pid: worker.pid },
        { name: 'producer', pid: producer.pid },
      ],
      run,
      keptBytes: () => redis.keptBytes() - baseBytes,
      version: redis.version,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * A nats-server of its own on a free port, JetStream on (its store in a fresh temporary directory)
 * when `jetstream`; resolves with `{ url, pid, storeBytes(), stop() }` once a client connected.
 */
async function startNatsServer({ jetstream }) {
  const port = await freePort();
  const storeDir = jetstream ? mkdtempSync(join(os.tmpdir(), 'amf-bench-floor-')) : undefined;
  const args = ['-a', '127.0.0.1', '-p', String(port), ...(storeDir ? ['-js', '-sd', storeDir] : [])];
  const server = spawn(NATS_BIN, args, { stdio: 'ignore' });
  const killServer = () => {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  };
  process.on('exit', killServer);
  const serverExited = new Promise((resolve) => server.once('exit', resolve));
  const url = `nats://127.0.0.1:${port}`;
  const stops = [
    async () => {
      server.kill('SIGTERM');
      await serverExited;
      process.off('exit', killServer);
      if (storeDir) rmSync(storeDir, { recursive: true, force: true });
    },
  ];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
  };
  try {
    // Connect first (waiting for the server to listen): the processes started next then find it up.
    const nc = await connect({
      servers: url,
      name: 'bench-client',
      waitOnFirstConnect: true,
      timeout: 15_000,
    });
    stops.push(() => nc.close());
    return { nc, url, pid: server.pid, storeBytes: () => (storeDir ? diskBytes(storeDir) : 0), stops, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function startFloorSystem() {
  const server = await startNatsServer({ jetstream: true });
  try {
    await createFloorStreams(server.nc, WORKER_CONCURRENCY);
    const worker = await startChild(
      process.execPath,
      [FLOOR, 'worker', server.url, String(WORKER_CONCURRENCY)],
      {
        ready: /"ready":true/,
      },
    );
    server.stops.push(worker.stop);
    const port = await freePort();
    const edge = await startChild(process.execPath, [FLOOR, 'edge', server.url, String(port)], {
      ready: /"ready":true/,
    });
    server.stops.push(edge.stop);
    const load = chatLoad(`http://127.0.0.1:${port}`);
    server.stops.push(async () => load.close());
    await load.check('JetStream floor');
    const baseBytes = server.storeBytes();
    return {
      procs: [
        { name: 'edge', pid: edge.pid },
        { name: 'worker', pid: worker.pid },
        { name: 'nats-server', pid: server.pid },
      ],
      run: load.run,
      keptBytes: () => server.storeBytes() - baseBytes,
      stop: server.stop,
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

async function startNatsSystem() {
  const server = await startNatsServer({ jetstream: false });
  try {
    const responder = await startChild(process.execPath, [RESPONDER, server.url, FLOOR_SUBJECT], {
      ready: /"ready":true/,
    });
    server.stops.push(responder.stop);
    const payload = new TextEncoder().encode(JSON.stringify({ text: TEXT }));
    const requester = natsRequester(server.nc, FLOOR_SUBJECT, payload);
    return {
      procs: [
        { name: 'nats-server', pid: server.pid },
        { name: 'responder', pid: responder.pid },
      ],
      run: (concurrency, seconds) =>
        runLoad({ concurrency, durationMs: seconds * 1000, issue: requester.issue }),
      keptBytes: undefined,
      stop: server.stop,
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

// --- measurement --------------------------------------------------------------------------------------

/** One measurement: a warm-up, then the timed run with each server process's CPU µs per task. */
async function measure(system, concurrency) {
  if (WARMUP_SECONDS > 0) {
    const warm = await system.run(concurrency, WARMUP_SECONDS);
    system.tasks += warm.ok;
  }
  const before = system.procs.map((p) => cpuMs(p.pid));
  const r = await system.run(concurrency, SECONDS);
  const after = system.procs.map((p) => cpuMs(p.pid));
  system.tasks += r.ok;
  if (r.errors > 0)
    throw new Error(`${r.errors} failed tasks; first: ${r.firstError?.message ?? r.firstError}`);
  if (r.ok === 0) throw new Error('no task completed');
  r.cpuUs = before.map((b, i) =>
    b === undefined || after[i] === undefined ? NaN : ((after[i] - b) * 1000) / r.ok,
  );
  return r;
}

/** CPU ms spent so far by every process of the bench: the systems' processes and this one (the clients). */
function benchCpuMs(systems) {
  const own = process.cpuUsage();
  let total = (own.user + own.system) / 1000;
  for (const s of Object.values(systems)) for (const p of s.procs) total += cpuMs(p.pid) ?? 0;
  return total;
}

/**
 * Cores that processes outside the bench kept busy on average since `start`, or undefined off Linux:
 * the machine's busy time less the bench's own (the load average would count the bench itself).
 */
function otherWorkCores(start, systems) {
  const machine = machineBusyMs();
  if (machine === undefined || start.machine === undefined) return undefined;
  const other = machine - start.machine - (benchCpuMs(systems) - start.ours);
  return Math.max(0, other) / (performance.now() - start.at);
}

/** `abc1234`, `abc1234 + uncommitted changes`, or `unknown` (no git, or not a checkout). */
function checkoutRevision() {
  const root = fileURLToPath(ROOT);
  const head = spawnSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['-C', root, 'status', '--porcelain', '--', 'src'], { encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout?.trim() ? ' + uncommitted changes in src/' : ''}`;
}

const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};
const sum = (xs) => xs.reduce((a, b) => a + b, 0);

async function main() {
  // Every child process and server adds an exit hook that kills it if this process dies first: five
  // systems hold more than Node's default of 10, which is their number, not a leak.
  process.setMaxListeners(32);
  const redisVersion = redisInstalled();
  if (!redisVersion) {
    log(
      "bench/taskPath.js: redis-server/redis-cli not found: install Debian's redis-server (scripts/bench.sh does)",
    );
    process.exit(2);
  }
  const natsVersion = spawnSync(NATS_BIN, ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? 'unknown';
  const systems = {};
  const startedAt = new Date();
  try {
    log(
      'bench/taskPath.js: starting AMF (amf up + amf worker), BullMQ (two redis-servers), the JetStream floor, raw NATS',
    );
    systems.amf = await startAmfSystem();
    systems.bullmq = await startBullmqSystem({ aof: false });
    systems.bullmqAof = await startBullmqSystem({ aof: true });
    systems.floor = await startFloorSystem();
    systems.nats = await startNatsSystem();
    for (const s of Object.values(systems)) s.tasks = 0;
    for (const key of SYSTEMS) {
      if (INITIAL_WARMUP_SECONDS <= 0) break;
      const warm = await systems[key].run(HIGH, INITIAL_WARMUP_SECONDS);
      if (warm.errors > 0) throw new Error(`${LABELS[key]} warm-up: ${warm.errors} failed tasks`);
      systems[key].tasks += warm.ok;
    }
    const rounds = Object.fromEntries(
      SYSTEMS.map((k) => [k, /** @type {{ p50: number, throughput: number, cpuUs: number[] }[]} */ ([])]),
    );
    const roundsStart = { at: performance.now(), machine: machineBusyMs(), ours: benchCpuMs(systems) };
    for (let round = 0; round < ROUNDS; round++) {
      const order = rotated(SYSTEMS, round);
      for (const key of order) {
        const low = await measure(systems[key], 1);
        const high = await measure(systems[key], HIGH);
        rounds[key].push({ p50: low.p50, throughput: high.throughput, cpuUs: high.cpuUs });
      }
      const line = SYSTEMS.map((k) => {
        const r = rounds[k][rounds[k].length - 1]; // this round's, just pushed
        return `${LABELS[k]} ${r.p50.toFixed(2)} ms / ${Math.round(r.throughput)}/s / ${(sum(r.cpuUs) / 1000).toFixed(3)} s`;
      }).join(' · ');
      log(`  round ${round + 1}/${ROUNDS} (${order.map((k) => LABELS[k]).join(', ')}): ${line}`);
    }
    const kept = {};
    for (const key of SYSTEMS) {
      const s = systems[key];
      kept[key] = s.keptBytes ? { bytes: s.keptBytes(), tasks: s.tasks } : undefined;
    }
    const otherCores = otherWorkCores(roundsStart, systems);
    return { systems, rounds, kept, startedAt, redisVersion, natsVersion, otherCores };
  } finally {
    for (const s of Object.values(systems)) await s.stop().catch(() => undefined);
  }
}

// --- the report ---------------------------------------------------------------------------------------

function summarize({ systems, rounds, kept }) {
  const out = {};
  for (const key of SYSTEMS) {
    const rs = rounds[key];
    const perProc = systems[key].procs.map((p, i) => ({
      name: p.name,
      us: median(rs.map((r) => r.cpuUs[i])),
    }));
    out[key] = {
      p50: median(rs.map((r) => r.p50)),
      throughput: median(rs.map((r) => r.throughput)),
      cpuS: median(rs.map((r) => sum(r.cpuUs))) / 1000,
      perProc,
      diskMb: kept[key] ? kept[key].bytes / 1e6 / (kept[key].tasks / 1000) : undefined,
      tasks: kept[key]?.tasks,
    };
  }
  // Ratios per round (both systems measured seconds apart), for the spread.
  const perRound = rounds.amf.map((a, i) => {
    const b = rounds.bullmqAof[i];
    return {
      p50: a.p50 / b.p50,
      throughput: a.throughput / b.throughput,
      cpu: sum(a.cpuUs) / sum(b.cpuUs),
      floorCpu: sum(rounds.floor[i].cpuUs) / sum(b.cpuUs),
    };
  });
  return { out, perRound };
}

const f = (x, digits) =>
  Number.isFinite(x)
    ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : '—';
const range = (xs, digits = 2) => `${f(Math.min(...xs), digits)}–${f(Math.max(...xs), digits)}`;

function report(measured) {
  const { out, perRound } = summarize(measured);
  const a = out.amf;
  const b = out.bullmqAof;
  const ratio = {
    p50: a.p50 / b.p50,
    throughput: a.throughput / b.throughput,
    cpu: a.cpuS / b.cpuS,
    disk: a.diskMb / b.diskMb,
  };
  // What the fabric alone allows: the hand-written floor against BullMQ + AOF, and AMF against it.
  const fl = out.floor;
  const floorRatio = { p50: fl.p50 / b.p50, throughput: fl.throughput / b.throughput, cpu: fl.cpuS / b.cpuS };
  const overFloor = { p50: a.p50 / fl.p50, throughput: a.throughput / fl.throughput, cpu: a.cpuS / fl.cpuS };
  const cells = (fn) => SYSTEMS.map((k) => fn(out[k])).join(' | ');
  const lines = [];
  lines.push(
    `| measure | ${SYSTEMS.map((k) => LABELS[k]).join(' | ')} | AMF / BullMQ + AOF | AMF / JetStream floor |`,
  );
  lines.push(`|---|${SYSTEMS.map(() => '---:').join('|')}|---:|---:|`);
  lines.push(
    `| p50 round trip, c=1 | ${cells((o) => `${f(o.p50, 2)} ms`)} | ${f(ratio.p50, 2)}× | ${f(overFloor.p50, 2)}× |`,
  );
  lines.push(
    `| round trips/s, c=${HIGH} | ${cells((o) => f(o.throughput, 0))} | ${f(ratio.throughput, 2)}× | ${f(overFloor.throughput, 2)}× |`,
  );
  lines.push(
    `| server CPU per 1,000 tasks, c=${HIGH} | ${cells((o) => `${f(o.cpuS, 3)} s`)} | ${f(ratio.cpu, 2)}× | ${f(overFloor.cpu, 2)}× |`,
  );
  lines.push(
    `| disk per 1,000 kept tasks | ${cells((o) => (o.diskMb === undefined ? '—' : `${f(o.diskMb, 2)} MB`))} | ${f(ratio.disk, 1)}× | ${f(a.diskMb / fl.diskMb, 1)}× |`,
  );
  lines.push('');
  lines.push(`Server CPU per task at c=${HIGH}, by process (µs, medians over rounds):`);
  lines.push('');
  lines.push('| system | processes |');
  lines.push('|---|---|');
  for (const key of SYSTEMS)
    lines.push(`| ${LABELS[key]} | ${out[key].perProc.map((p) => `${p.name} ${f(p.us, 0)}`).join(' · ')} |`);
  lines.push('');
  lines.push(
    `AMF / BullMQ + AOF per round (${perRound.length} rounds): p50 ${range(perRound.map((r) => r.p50))}, throughput ${range(perRound.map((r) => r.throughput))}, CPU ${range(perRound.map((r) => r.cpu))}. Tasks kept at the end: ${SYSTEMS.filter(
      (k) => out[k].tasks !== undefined,
    )
      .map((k) => `${LABELS[k]} ${out[k].tasks.toLocaleString('en-US')}`)
      .join(', ')}.`,
  );
  lines.push('');
  const verdict = (ok) => (ok ? 'PASS' : 'FAIL');
  const verdicts = [
    `CPU per task ≤ ${GOALS.cpu.toFixed(1)}× BullMQ + AOF: ${f(ratio.cpu, 2)}× (${verdict(ratio.cpu <= GOALS.cpu)})`,
    `c=${HIGH} throughput ≥ ${GOALS.throughput.toFixed(1)}× BullMQ + AOF: ${f(ratio.throughput, 2)}× (${verdict(ratio.throughput >= GOALS.throughput)})`,
    `c=1 p50 ≤ ${GOALS.p50.toFixed(1)}× BullMQ + AOF: ${f(ratio.p50, 2)}× (${verdict(ratio.p50 <= GOALS.p50)})`,
    `disk per 1,000 kept tasks ≤ ${GOALS.diskMb.toFixed(1)} MB: ${f(a.diskMb, 2)} MB (${verdict(a.diskMb <= GOALS.diskMb)})`,
  ];
  lines.push(...verdicts.map((v) => `- Goal (issue 31): ${v}`));
  lines.push(
    `- The JetStream floor / BullMQ + AOF: CPU ${f(floorRatio.cpu, 2)}×, throughput ${f(floorRatio.throughput, 2)}×, p50 ${f(floorRatio.p50, 2)}× (per round: CPU ${range(perRound.map((r) => r.floorCpu))}): the least any durable task behind an HTTP edge on this fabric costs, against the goals above.`,
  );
  return lines.join('\n');
}

function document(measured, table) {
  const cpus = os.cpus();
  const load = os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  // Every process hop waits for a core when other work runs too, and AMF has more hops than BullMQ:
  // say so next to the numbers. The bench's own processes keep the load average near the core count,
  // so what counts is the CPU other processes took.
  const other = measured.otherCores;
  const shared =
    other !== undefined && other > SHARED_MACHINE_CORES
      ? `\n**Other work shared the machine during this run** (processes outside the bench kept ${other.toFixed(2)} of ${cpus.length} cores busy on average): latency and throughput then measure scheduling as much as the systems, AMF's more than BullMQ's (more processes and hops per task); CPU per task is the steadier figure. Compare on a quiet machine.\n`
      : '';
  const settings = Object.entries(AMF_NON_DEFAULTS)
    .map(([k, v]) => `\`${k}\` ${v}`)
    .join('; ');
  // What each system is and how CPU and disk are counted is the page's hand-written method.
  return `### Task path against BullMQ

Made by \`npm run bench\` (this section: \`node bench/taskPath.js\`, after \`npm run build\`).
${ROUNDS} rounds, the systems in an order rotated each round; per system and round a
c=1 run and a c=${HIGH} run of ${SECONDS} s each after ${WARMUP_SECONDS} s of warm-up (and ${INITIAL_WARMUP_SECONDS} s
at c=${HIGH} for every system before the first round); medians over rounds.
Machine: ${cpus[0]?.model.trim() ?? 'unknown'} × ${cpus.length}, Node ${process.version}; ${measured.natsVersion};
Redis ${measured.redisVersion.replace(/^Redis server v=(\S+).*$/, '$1')} (Debian); BullMQ 6.7.0 with ioredis 5.11.1;
AMF at ${AMF_REVISION};
load average ${load} at the end; processes outside the bench kept ${measured.otherCores === undefined ? 'an unknown share' : `${measured.otherCores.toFixed(2)} cores`} busy on average during the rounds.
Both workers take ${WORKER_CONCURRENCY} tasks at once. AMF settings that differ from the defaults: ${settings}.
Node flags of the AMF processes: \`${NODE_FLAGS.join(' ') || 'none'}\`.
${shared}
${table}
`;
}

const measured = await main();
const table = report(measured);
process.stdout.write(`\n${table}\n`);
if (OUT !== '-') {
  await writeSection(OUT, docSection('task-path-vs-bullmq', 'bench/taskPath.js'), document(measured, table));
  log(`bench/taskPath.js: wrote the "Task path against BullMQ" section of ${OUT}`);
}
