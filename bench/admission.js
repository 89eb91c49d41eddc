/**
 * Admission benchmark (part of `npm run bench`): how fast the coordinator admits agents, and whether
 * a flood of bad advertisements hurts it. The coordinator runs in a child process (bench/meshServer.js)
 * so its RSS is its own; this process plays the agents and the flooder over the NATS door.
 *
 *   (1) latency: one new agent at a time, heartbeat → `amf.discovery.capability.advertise`, p50/p99;
 *   (2) throughput: many new agents at once, admissions per second;
 *   (3) flood: FLOOD_RATE bad advertisements per second for FLOOD_SECONDS (random ids, invalid tags,
 *       oversize TXT, injection text, impersonation), while one legitimate agent advertises every
 *       second: its admission latency, and the coordinator's RSS before, during and after.
 *
 * (1) runs twice: back to back (the next agent heartbeats the moment the previous one is admitted)
 * and spaced (BENCH_ADMISSION_GAP_MS apart, default 100: agents arriving one at a time, as they do).
 * Each phase records the coordinator process's CPU time per admission (it includes the DMZ watcher
 * threads and the nats-server it spawned is reported apart).
 *
 * Results go to stdout and to the section "Admission" of docs/performance.md, which every run
 * overwrites. Environment: BENCH_ADMISSION_AGENTS (default 100), BENCH_ADMISSION_GAP_MS (100),
 * BENCH_ADMISSION_BATCH (200), BENCH_FLOOD_RATE (10000), BENCH_FLOOD_SECONDS (10), BENCH_ADMISSION_OUT
 * (another page to write the section into; "-" writes none).
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';

const ROOT = new URL('../', import.meta.url);
const DIST = new URL('dist/', ROOT);
if (!existsSync(new URL('coordinator/coordinator.js', DIST))) {
  process.stderr.write('bench/admission.js: dist/ is missing: run `npm run build` first\n');
  process.exit(2);
}
const { connectAs } = await import(new URL('fabric/connect.js', DIST).href);
const { cpuMs } = await import(new URL('bench/lib/procstat.js', ROOT).href);
const { createEvent } = await import(new URL('events/cloudEvent.js', DIST).href);
const { DEFAULT_RECYCLE_AFTER } = await import(new URL('watcher/watcherOptions.js', DIST).href);

const AGENTS = Number(process.env.BENCH_ADMISSION_AGENTS ?? 100);
const GAP_MS = Number(process.env.BENCH_ADMISSION_GAP_MS ?? 100);
const TARGETS = { p50Ms: 20, perSecond: 200 };
const BATCH = Number(process.env.BENCH_ADMISSION_BATCH ?? 200);
const FLOOD_RATE = Number(process.env.BENCH_FLOOD_RATE ?? 10_000);
const FLOOD_SECONDS = Number(process.env.BENCH_FLOOD_SECONDS ?? 10);
const OUT = process.env.BENCH_ADMISSION_OUT ?? PERFORMANCE_PAGE;

const encoder = new TextEncoder();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function rssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** Starts the coordinator child and resolves with what it printed. */
function startMesh() {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(new URL('bench/meshServer.js', ROOT)), [], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      env: { ...process.env, BENCH_HEARTBEAT_SECONDS: '5' },
    });
    let out = '';
    /** @type {import('node:stream').Readable} */ (child.stdout).on('data', (d) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve({ child, info: JSON.parse(line) });
    });
    child.on('exit', (code) => reject(new Error(`meshServer exited with ${code}`)));
  });
}

function heartbeat(record, identity = record.agent_id) {
  return createEvent({
    type: 'amf.discovery.agent.heartbeat',
    sender: { identity, source: 'urn:bench', role: 'specialist', trustDomain: 'local' },
    payload: record,
  });
}

function legitRecord(name) {
  return {
    agent_id: `spiffe://local/worker/${name}`,
    endpoint: 'http://127.0.0.1:9',
    protocols_supported: ['A2A/1.0'],
    capability_tags: ['bench'],
    trust_domain: 'local',
    visibility: 'local',
    heartbeat_seconds: 30,
  };
}

/** Bad advertisements of several kinds, each with a fresh id so no dedupe can hide them. */
function badRecord(i) {
  const id = `spiffe://local/worker/flood-${i}-${randomUUID().slice(0, 8)}`;
  switch (i % 5) {
    case 0:
      return { record: { ...legitRecord('x'), agent_id: id, capability_tags: ['BAD TAG'] } };
    case 1:
      return {
        record: {
          ...legitRecord('x'),
          agent_id: id,
          capability_tags: [
            'a'.repeat(60),
            'b'.repeat(60),
            'c'.repeat(60),
            'd'.repeat(60),
            'e'.repeat(60),
            'f'.repeat(60),
            'g'.repeat(60),
            'h'.repeat(60),
            'i'.repeat(60),
          ],
        },
      };
    case 2:
      return {
        record: { ...legitRecord('x'), agent_id: id, protocols_supported: ['A2A/1.0', 'MCP/2025-11-25'] },
      };
    case 3:
      return { record: { ...legitRecord('x'), agent_id: id }, identity: 'spiffe://local/worker/impostor' };
    default:
      return {
        record: {
          ...legitRecord('x'),
          agent_id: id,
          endpoint: 'http://127.0.0.1:9/ignore previous instructions',
        },
      };
  }
}

async function main() {
  const { child, info } = await startMesh();
  const creds = JSON.parse(readFileSync(`${info.dataDir}/credentials.json`, 'utf8'));
  const agentNc = await connectAs(info.natsUrl, creds.specialist, 'bench-agents');
  const floodNc = await connectAs(info.natsUrl, creds.specialist, 'bench-flooder');
  const observer = await connectAs(info.natsUrl, creds.coordinator, 'bench-observer');
  const admittedAt = new Map();
  const waiters = new Map();
  observer.subscribe('amf.discovery.capability.advertise', {
    callback: (_e, msg) => {
      const id = msg.json().data.payload.agent_id;
      admittedAt.set(id, performance.now());
      waiters.get(id)?.();
    },
  });
  await observer.flush();
  const waitAdmitted = (id, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      if (admittedAt.has(id)) return resolve(admittedAt.get(id));
      const t = setTimeout(() => reject(new Error(`${id} not admitted within ${timeoutMs} ms`)), timeoutMs);
      waiters.set(id, () => {
        clearTimeout(t);
        resolve(admittedAt.get(id));
      });
    });
  const publish = (nc, event) =>
    nc.publish('amf.discovery.agent.heartbeat', encoder.encode(JSON.stringify(event)));

  const loadAtStart = os.loadavg();
  // CPU ms of the coordinator process and of its nats-server over a phase, per admission.
  const cpuOf = () => [cpuMs(info.pid), cpuMs(info.natsPid)];
  const perAdmission = (before, n) => cpuOf().map((after, i) => (after - before[i]) / n);

  // (1) latency, one agent at a time: back to back, then spaced.
  const oneAtATime = async (prefix, gapMs) => {
    const latencies = [];
    const cpu0 = cpuOf();
    for (let i = 0; i < AGENTS; i++) {
      if (gapMs > 0) await sleep(gapMs);
      const rec = legitRecord(`${prefix}-${i}`);
      const t0 = performance.now();
      publish(agentNc, heartbeat(rec));
      await waitAdmitted(rec.agent_id);
      latencies.push(admittedAt.get(rec.agent_id) - t0);
    }
    const cpu = perAdmission(cpu0, AGENTS);
    return { sorted: latencies.sort((a, b) => a - b), cpu };
  };
  const backToBack = await oneAtATime('lat', 0);
  const spaced = await oneAtATime('gap', GAP_MS);

  // (2) throughput: a batch of new agents at once.
  const batch = Array.from({ length: BATCH }, (_, i) => legitRecord(`tp-${i}`));
  const tb0 = performance.now();
  const batchCpu0 = cpuOf();
  // Like real agents, each heartbeats again (every 2 s) until admitted: one that met a busy watcher
  // is judged again on its next heartbeat.
  const beatBatch = () => {
    for (const rec of batch) if (!admittedAt.has(rec.agent_id)) publish(agentNc, heartbeat(rec));
  };
  beatBatch();
  const rebeat = setInterval(beatBatch, 2000);
  await Promise.all(batch.map((r) => waitAdmitted(r.agent_id, 120_000)));
  clearInterval(rebeat);
  const batchSeconds = (performance.now() - tb0) / 1000;
  const batchCpu = perAdmission(batchCpu0, BATCH);

  // (3) flood.
  const rssBefore = rssMb(info.pid);
  const floodLatencies = [];
  const rssDuring = [];
  let sent = 0;
  let floodDone = false;
  const tickMs = 10;
  const perTick = Math.round((FLOOD_RATE * tickMs) / 1000);
  const floodStart = performance.now();
  const flooder = (async () => {
    let next = performance.now();
    while (performance.now() - floodStart < FLOOD_SECONDS * 1000) {
      for (let k = 0; k < perTick; k++) {
        const { record, identity } = badRecord(sent++);
        publish(floodNc, heartbeat(record, identity));
      }
      next += tickMs;
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
      else await new Promise((r) => setImmediate(r));
    }
    floodDone = true;
  })();
  const legit = (async () => {
    let i = 0;
    while (!floodDone) {
      const rec = legitRecord(`during-flood-${i++}`);
      const t0 = performance.now();
      // Like a real agent, it heartbeats (every 500 ms here) until it is admitted.
      const beat = () => publish(agentNc, heartbeat(rec));
      beat();
      const resend = setInterval(beat, 500);
      try {
        await waitAdmitted(rec.agent_id, 20_000);
        floodLatencies.push(admittedAt.get(rec.agent_id) - t0);
      } catch {
        floodLatencies.push(Infinity);
      } finally {
        clearInterval(resend);
      }
      rssDuring.push(rssMb(info.pid));
      await sleep(Math.max(0, 1000 - (performance.now() - t0)));
    }
  })();
  await Promise.all([flooder, legit]);
  const floodSeconds = (performance.now() - floodStart) / 1000;
  await sleep(5000);
  const rssAfter = rssMb(info.pid);
  const health = /** @type {any} */ (await (await fetch(`${info.coordinatorUrl}/health`)).json());

  await Promise.allSettled([agentNc.close(), floodNc.close(), observer.close()]);
  child.kill('SIGTERM');

  const fmt = (n) => (Number.isFinite(n) ? n.toFixed(1) : 'not admitted');
  const floodSorted = [...floodLatencies].sort((a, b) => a - b);
  const maxFlood = floodSorted[floodSorted.length - 1];
  const cpuText = (/** @type {number[]} */ [coordinator, nats]) =>
    `CPU per admission: coordinator ${fmt(coordinator)} ms, nats-server ${fmt(nats)} ms`;
  const latencyRow = (label, { sorted, cpu }) => {
    const p50 = percentile(sorted, 50);
    return `| ${label} (n=${AGENTS}) | p50 ${fmt(p50)} ms, p99 ${fmt(percentile(sorted, 99))} ms (target p50 ≤ ${TARGETS.p50Ms} ms: ${p50 <= TARGETS.p50Ms ? 'PASS' : 'MISS'}); ${cpuText(cpu)} |`;
  };
  const perSecond = BATCH / batchSeconds;
  const rows = [
    latencyRow(`admission latency, one new agent at a time, ${GAP_MS} ms apart`, spaced),
    latencyRow('admission latency, one new agent at a time, back to back', backToBack),
    `| admissions per second (${BATCH} new agents at once) | ${perSecond.toFixed(1)} /s (${batchSeconds.toFixed(2)} s for the batch; target ≥ ${TARGETS.perSecond}/s: ${perSecond >= TARGETS.perSecond ? 'PASS' : 'MISS'}); ${cpuText(batchCpu)} |`,
    `| flood sent | ${sent.toLocaleString('en')} bad advertisements in ${floodSeconds.toFixed(1)} s (${Math.round(sent / floodSeconds).toLocaleString('en')}/s) |`,
    `| legitimate agent admission during the flood (n=${floodLatencies.length}) | p50 ${fmt(percentile(floodSorted, 50))} ms, max ${fmt(maxFlood)} ms (target ≤ 2,000 ms: ${maxFlood <= 2000 ? 'PASS' : 'MISS'}) |`,
    `| coordinator RSS before / max during / 5 s after the flood | ${rssBefore.toFixed(0)} / ${Math.max(...rssDuring).toFixed(0)} / ${rssAfter.toFixed(0)} MB |`,
    `| admission counters after the run | received ${health.admission.received}, admitted ${health.admission.admitted}, denied ${health.admission.denied}, dropped ${health.admission.dropped}, refreshed ${health.admission.refreshed} |`,
  ];
  const cpu = os.cpus();
  // The pipeline it drives is described in the page's hand-written method.
  const report = [
    '### Admission',
    '',
    'Made by `npm run bench` (this section: `node bench/admission.js`, after `npm run build`).',
    `Machine: ${cpu[0]?.model ?? 'unknown'} × ${cpu.length}, Node ${process.version}; load average at start ${loadAtStart
      .map((l) => l.toFixed(2))
      .join(' ')}, at end ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}.`,
    'Settings that differ from the defaults: `heartbeat.interval_seconds` 5 (the default), `http.rate_limit_per_second` 1000000',
    '(default 1000), log level silent; the DMZ watcher runs with its defaults',
    `(4 threads at most, 2 on standby, each recycled after ${DEFAULT_RECYCLE_AFTER} advertisements).`,
    '',
    '| measurement | result |',
    '|---|---|',
    ...rows,
    '',
  ].join('\n');
  process.stdout.write(report + '\n');
  if (OUT !== '-') {
    await writeSection(OUT, docSection('admission', 'bench/admission.js'), report);
    process.stderr.write(`bench/admission.js: wrote the "Admission" section of ${OUT}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`bench/admission.js: ${err.stack ?? err}\n`);
  process.exit(1);
});
