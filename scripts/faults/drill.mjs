/**
 * The drill: runs each fault against real processes, in its own temp dir, within a time budget, and
 * turns what the client saw and what AMF_EVENTS holds into one row per fault. Used by run.mjs (the
 * `npm run faults` command) and by test/faults/quickDrill.test.ts.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { auditRecords, readEventsLive, readEventsOffline } from './audit.mjs';
import { FAULTS, lateWorkerDeadlineMs } from './faults.mjs';
import {
  TAG,
  meshCredentials,
  startCoordinator,
  startExternalNats,
  startWorker,
  waitForModel,
} from './mesh.mjs';
import { probeRecovery, runLoad } from './load.mjs';
import { killAllGroups, killMentioningSync, ownPath, signalPid, waitGone } from './procs.mjs';

/** The issue's numbers, and the small ones CI runs. */
export const FULL = {
  requests: 200,
  concurrency: 8,
  // A 1 s handler keeps 8 tasks in flight when a fault strikes at 8 s, and the 200 requests take
  // about 25 s, so the twenty faults fit 10 minutes at three at a time.
  sleepMs: 1000,
  faultAtMs: 8_000,
  stopMs: 65_000,
  natsShortMs: 5_000,
  natsLongMs: 40_000,
  // Fault 13: how long the spawned nats-server is frozen (SIGSTOP); fault 17: how long the disk is full.
  freezeMs: 30_000,
  fullMs: 20_000,
  // Fault 12: how long coordinator B is cut off (the tester's 30 s in issue 28).
  partitionMs: 30_000,
  timeoutMs: 120_000,
  probeBoundMs: 30_000,
  // Longest a task may legitimately stay open after a fault: TTL 30 s, lost-worker detection
  // (3 missed 5 s heartbeats) and one re-announcement fit in it.
  settleMs: 65_000,
};
export const QUICK = {
  ...FULL,
  requests: 40,
  concurrency: 4,
  sleepMs: 500,
  faultAtMs: 3_000,
  stopMs: 20_000,
  natsLongMs: 15_000,
  partitionMs: 10_000,
  freezeMs: 10_000,
  fullMs: 8_000,
};
/** Everything must fit in 10 minutes; a fault that would not is reported as not run. */
export const BUDGET_MS = 9.5 * 60_000;

/** Rough upper bound of one fault's duration, used to decide whether it still fits the budget. */
function estimateMs(p, id) {
  const load = (p.requests * p.sleepMs) / p.concurrency;
  // Fault 11 waits out an orphaned task's deadline (about two minutes).
  const fault =
    {
      2: p.stopMs,
      3: p.natsShortMs,
      4: p.natsLongMs,
      9: 2 * p.natsShortMs,
      11: 130_000,
      12: p.partitionMs,
      13: p.freezeMs,
      16: 3 * (10_000 + 2 * p.sleepMs),
      17: p.fullMs,
      // 18: a clean stop, the damage and a restart; 19: the held tasks' deadline, then a late worker.
      18: 20_000,
      19: lateWorkerDeadlineMs() + 40_000,
    }[id] ?? 0;
  // Faults 9 and 12 also start a 3-node cluster and a second coordinator.
  const setup = id === 9 || id === 12 ? 30_000 : 15_000;
  return setup + Math.max(load, p.faultAtMs + fault) + 10_000;
}

/** The per-fault context: its processes, its dirs, and the steps every fault shares. */
function makeRun(root, id, mdns, log) {
  const dir = join(root, `fault-${id}`);
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const procs = [];
  const pids = [];
  const cleanups = [];
  return {
    mdns,
    /** Runs `fn` once the fault is over and audited (e.g. unmounting what it mounted). */
    onCleanup: (fn) => cleanups.push(fn),
    async cleanup() {
      for (const fn of cleanups.splice(0)) await fn();
    },
    logDir,
    dir: (name) => {
      const d = join(dir, name);
      mkdirSync(d, { recursive: true, mode: 0o700 });
      return d;
    },
    track: (proc) => procs.push(proc),
    trackPid: (pid) => pids.push(pid),
    signalPid,
    appendLog: (name, line) => appendFileSync(join(logDir, `${name}.log`), line + '\n'),
    log,
    /**
     * SIGKILL everything this fault started: process groups first, then lone pids, then any process
     * still naming this fault's dir (a coordinator's nats-server runs in a group of its own and
     * outlives a SIGKILLed coordinator). What survives 5 s is killed again and reported.
     */
    async killAll() {
      for (const p of procs) p.signalGroup('SIGKILL');
      for (const pid of pids) signalPid(pid, 'SIGKILL');
      killMentioningSync(dir);
      await Promise.all(procs.map((p) => Promise.race([p.exited, delay(5000)])));
      const left = await waitGone(dir);
      if (left.length > 0) {
        killMentioningSync(dir);
        log(`  still running 5 s after SIGKILL: ${left.map((p) => p.pid).join(', ')}`);
      }
    },
  };
}

function makeCtx(run, p) {
  const ctx = {
    run,
    p,
    waitForModel: (url, tag = TAG) => waitForModel(url, tag, 30_000),
    addWorkers: (mesh, n) => addWorkers(mesh, n),
    async spawnedMesh({
      workers,
      demo = false,
      port = 0,
      natsPort = 0,
      handler,
      taskTtlSeconds,
      yaml = '',
      workerEnv,
      dataDir: givenDir,
      runLog,
      coordinatorEnv,
    }) {
      const dataDir = givenDir ?? run.dir('mesh');
      const config = `${taskTtlSeconds !== undefined ? `tasks:\n  ttl_seconds: ${taskTtlSeconds}\n` : ''}${yaml}`;
      if (config) await writeFile(join(dataDir, 'amf.yaml'), config, { mode: 0o600 });
      const coordinator = await startCoordinator(run, {
        dataDir,
        demo,
        port,
        natsPort,
        ...(coordinatorEnv ? { env: coordinatorEnv } : {}),
      });
      const mesh = {
        dataDir,
        coordinator,
        workers: [],
        credentials: await meshCredentials(dataDir),
        ...(workerEnv ? { workerEnv } : {}),
        ...(runLog ? { runLog } : {}),
      };
      await addWorkers(mesh, workers, handler);
      // The NATS URL is asked anew: a supervised nats-server may come back on another port.
      mesh.liveNatsUrl = async () => (await natsUrlOf(mesh.coordinator.url)) ?? mesh.coordinator.natsUrl;
      return mesh;
    },
    async externalMesh({ workers, runLog }) {
      const dataDir = run.dir('mesh');
      const natsDir = run.dir('nats-ext');
      const credentials = await meshCredentials(dataDir);
      const nats = await startExternalNats(run, { dir: natsDir, credentials });
      const coordinator = await startCoordinator(run, { dataDir, natsUrl: nats.url });
      const mesh = {
        dataDir,
        natsDir,
        nats,
        coordinator,
        workers: [],
        credentials,
        ...(runLog ? { runLog } : {}),
      };
      await addWorkers(mesh, workers);
      return mesh;
    },
    /** Runs the load and, at faultAt, the fault; resolves when both are over. */
    async loadWithFault(
      target,
      inject,
      { stream = false, requests = p.requests, concurrency = p.concurrency, faultAtMs = p.faultAtMs } = {},
    ) {
      const started = Date.now();
      const load = runLoad({
        stream,
        target,
        tag: TAG,
        requests,
        concurrency,
        timeoutMs: p.timeoutMs,
        marker: (i) => `drill-${run.marker}-${i}`,
      });
      const fault = delay(faultAtMs).then(async () => {
        run.faultAt = Date.now();
        run.log(`  fault injected at ${((run.faultAt - started) / 1000).toFixed(1)} s`);
        await inject();
      });
      const [records] = await Promise.all([load, fault]);
      return records;
    },
    probe: (url, tag = TAG) =>
      probeRecovery({ url, tag, boundMs: p.probeBoundMs, text: `probe-${run.marker} after the fault` }),
    /**
     * Gives accepted tasks until `faultAt + settleMs` to reach their terminal event, watching the
     * live stream so a healthy mesh is not kept waiting. The verdict is the offline audit after.
     */
    async settle(natsUrl, credentials, records, settleMs = p.settleMs) {
      const deadline = (run.faultAt ?? Date.now()) + settleMs;
      for (;;) {
        const url = await natsUrl();
        const events = url ? await readEventsLive(url, credentials) : undefined;
        if (events && auditRecords(records, events, run.markerRe).lost.length === 0) return;
        if (Date.now() >= deadline) return;
        await delay(2000);
      }
    },
  };
  async function addWorkers(mesh, n, handler) {
    // One after the other: two `amf worker` starting at once on one data dir raced (one exited 1).
    for (let k = 1; k <= n; k++) {
      mesh.workers.push(
        await startWorker(run, {
          // Unique per fault: two lanes' meshes must never share an agent id.
          name: `drill-f${run.id}-w${k}`,
          coordinatorUrl: mesh.coordinator.url,
          dataDir: mesh.dataDir,
          sleepMs: p.sleepMs,
          handler,
          ...(mesh.runLog ? { runLog: mesh.runLog } : {}),
          ...(mesh.workerEnv ? { env: mesh.workerEnv(k) } : {}),
          // On an external NATS (fault 4) no user can be granted per agent: workers connect as the
          // legacy specialist user and still sign every event (docs/security.md, "Joining").
          ...(mesh.nats && !mesh.joinThroughCallout
            ? { specialistPass: mesh.credentials.specialist.password }
            : {}),
        }),
      );
    }
    await ctx.waitForModel(mesh.coordinator.url);
  }
  return ctx;
}

/** `x-amf.nats_url` of the coordinator's agent card, if it answers. */
async function natsUrlOf(url) {
  try {
    const res = await fetch(`${url}/.well-known/agent-card.json`, { signal: AbortSignal.timeout(2000) });
    return (await res.json())['x-amf']?.nats_url;
  } catch {
    return undefined;
  }
}

/** Client-visible errors grouped by reason, most frequent first: `12× network ECONNRESET; ...`. */
function groupReasons(records) {
  const counts = new Map();
  for (const r of records) if (!r.ok) counts.set(r.reason, (counts.get(r.reason) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([reason, n]) => ({ reason, n }));
}

function faultName(fault, p) {
  return typeof fault.name === 'function' ? fault.name(p) : fault.name;
}

/** Runs one fault and audits it; any failure of the drill itself becomes the row's error. */
async function runFault(fault, p, root, mdns, log) {
  const name = faultName(fault, p);
  const row = { id: fault.id, name, ran: false };
  if (fault.skip) return { ...row, note: fault.skip() };
  const run = makeRun(root, fault.id, mdns, log);
  run.id = fault.id;
  run.marker = `${Date.now().toString(36)}f${fault.id}`;
  run.markerRe = new RegExp(`drill-${run.marker}-\\d+`);
  const started = Date.now();
  const hardLimit = estimateMs(p, fault.id) + p.timeoutMs + p.settleMs;
  let outcome;
  const limit = new AbortController();
  try {
    outcome = await Promise.race([
      fault.run(makeCtx(run, p)),
      delay(hardLimit, undefined, { signal: limit.signal }).then(() => {
        throw new Error(`fault did not finish within ${Math.round(hardLimit / 1000)} s`);
      }),
    ]);
  } catch (err) {
    await run.killAll();
    // The first line says what failed; the process's last output line (if any) says why.
    const lines = String(err.message).split('\n').filter(Boolean);
    const why = lines.length > 1 ? ` (last output: ${lines.at(-1).slice(0, 200)})` : '';
    await run.cleanup();
    return { ...row, ran: true, error: lines[0] + why, logs: run.logDir };
  } finally {
    limit.abort();
  }
  await run.killAll();
  // A fault on a NATS cluster reads the events live before the kill (a clustered store is not
  // readable by one standalone server); the others read the dead mesh's store.
  const events = outcome.events ?? (await readEventsOffline(outcome.storeDir, outcome.credentials, run));
  const audit = auditRecords(outcome.records, events, run.markerRe, outcome.runs);
  // A fault that destroys stored events (18) excuses the tasks the coordinator named as affected:
  // what it must not do is lose one silently.
  const reported = audit.lost.filter((l) => outcome.reportedLost?.has(l.taskId));
  const lost = audit.lost.filter((l) => !outcome.reportedLost?.has(l.taskId));
  const wrong = [...audit.wrong, ...(outcome.wrong ?? [])];
  if (outcome.reportedLost)
    (outcome.notes ??= []).push(
      `${reported.length} task(s) without a terminal event, each named by the coordinator as affected`,
    );
  await run.killAll();
  await run.cleanup();
  return {
    ...row,
    ran: true,
    seconds: Math.round((Date.now() - started) / 1000),
    requests: outcome.records.length,
    answered: outcome.records.filter((r) => r.ok).length,
    errors: groupReasons(outcome.records),
    accepted: audit.accepted,
    lost: lost.length,
    double: audit.double.length,
    wrong: wrong.length,
    // Counted only where the workers log their runs (fault 12); elsewhere a lost worker's task is
    // run again by design (docs/reliability.md, "Retries").
    ranTwice: outcome.runs ? audit.ranTwice.length : undefined,
    lostSample: lost.slice(0, 3),
    wrongSample: wrong.slice(0, 3),
    ranTwiceSample: audit.ranTwice.slice(0, 3),
    terminals: audit.terminalKinds,
    recovered: outcome.probe.recovered,
    recoverySeconds: outcome.probe.seconds,
    recoveryFailure: outcome.probe.recovered ? undefined : outcome.probe.last?.reason,
    notes: outcome.notes,
    extra: outcome.extra,
    logs: run.logDir,
  };
}

/** True when the row breaks the promise: CI fails on it. Rows not run are not failures. */
export function rowFails(row) {
  if (!row.ran) return false;
  return (
    row.error !== undefined ||
    row.lost > 0 ||
    row.double > 0 ||
    row.wrong > 0 ||
    (row.ranTwice ?? 0) > 0 ||
    row.recovered !== true
  );
}

/**
 * Runs the faults `only` (ids; default all) with the full or quick numbers and returns the rows.
 * `faults` replaces the fault list (tests use it to make a case fail on purpose); `lanes` faults run
 * at once, each on its own mesh, dirs and ports.
 * Every process is SIGKILLed and the temp dir removed before it returns, whatever happened,
 * unless `keep` (then the dir with each process's log is left for reading).
 */
export async function runDrill({
  quick = false,
  only,
  faults = FAULTS,
  lanes = 1,
  params = {},
  mdns = true,
  keep = false,
  log = () => {},
} = {}) {
  const p = { ...(quick ? QUICK : FULL), ...params };
  const root = await mkdtemp(join(tmpdir(), 'amf-drill-'));
  ownPath(root);
  const started = Date.now();
  const rows = [];
  // Longest first, so that with several lanes the long faults (11, 19) do not start last.
  const queue = faults
    .filter((f) => !only || only.includes(f.id))
    .sort((a, b) => estimateMs(p, b.id) - estimateMs(p, a.id));
  // Each lane runs one fault at a time; a fault's mesh mostly waits on its handler's sleep, so three
  // lanes fit all twenty faults into the 10-minute bound on 2 cores.
  const lane = async () => {
    for (let fault = queue.shift(); fault; fault = queue.shift()) {
      const left = BUDGET_MS - (Date.now() - started);
      if (!fault.skip && estimateMs(p, fault.id) > left) {
        rows.push({
          id: fault.id,
          name: faultName(fault, p),
          ran: false,
          note: 'not run: 10-minute budget used up',
        });
        continue;
      }
      log(`fault ${fault.id}: starting`);
      // mDNS is one multicast domain for the whole namespace: with two meshes at once, each
      // coordinator would discover the other's workers, so lanes > 1 join through NATS only.
      const row = await runFault(fault, p, root, mdns && lanes === 1, (line) => log(`[${fault.id}] ${line}`));
      log(`fault ${fault.id}: ${row.ran ? (rowFails(row) ? 'FAIL' : 'ok') : row.note}`);
      rows.push(row);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, lanes) }, lane));
  } finally {
    killAllGroups();
    // A failed fault keeps every process's log (its row names the directory); a clean run leaves nothing.
    if (!keep && !rows.some(rowFails)) await rm(root, { recursive: true, force: true });
  }
  rows.sort((a, b) => a.id - b.id);
  return {
    rows,
    params: p,
    lanes,
    mdns: mdns && lanes === 1,
    root,
    seconds: Math.round((Date.now() - started) / 1000),
  };
}
