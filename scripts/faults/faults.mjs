/**
 * The faults. Each one builds its own fresh mesh (own data dir, own ports) through `ctx`, drives the
 * load with the fault injected at `p.faultAtMs`, and returns what the audit needs: the client's
 * records, the recovery probe, where the JetStream store is, and notes on what it observed.
 */
import { Buffer } from 'node:buffer';
import { execFile } from 'node:child_process';
import { copyFile, open, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { isTerminal, readEventsLive, readRunLog } from './audit.mjs';
import { clusterBinary, clusterNodeAndCoordinator, clusterPartition } from './cluster.mjs';
import { freePort, fromDist, startCoordinator, startExternalNats, startWorker } from './mesh.mjs';
import { processesMentioning } from './procs.mjs';

const secs = (ms) => `${Math.round(ms / 100) / 10} s`;
const execFileP = promisify(execFile);

/** A mesh whose coordinator spawned its own nats-server. */
async function workerFault(ctx, inject) {
  const mesh = await ctx.spawnedMesh({ workers: 2 });
  const notes = [];
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    () => inject(mesh, notes),
  );
  const probe = await ctx.probe(() => mesh.coordinator.url);
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records);
  return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes };
}

/** External NATS down for `downMs`, then back on the same port with the same store. */
async function natsOutage(ctx, downMs) {
  const mesh = await ctx.externalMesh({ workers: 2 });
  const notes = [];
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    async () => {
      const { port } = mesh.nats;
      ctx.run.signalPid(mesh.nats.pid, 'SIGKILL');
      await mesh.nats.close();
      await delay(downMs);
      mesh.nats = await startExternalNats(ctx.run, {
        dir: mesh.natsDir,
        credentials: mesh.credentials,
        port,
      });
      notes.push(`nats-server SIGKILLed, restarted on port ${port} after ${secs(downMs)}`);
    },
  );
  const probe = await ctx.probe(() => mesh.coordinator.url);
  await ctx.settle(() => mesh.nats.url, mesh.credentials, records);
  return { records, probe, storeDir: mesh.natsDir, credentials: mesh.credentials, notes };
}

export const FAULTS = [
  {
    id: 1,
    name: 'SIGKILL 1 of 2 workers',
    run: (ctx) =>
      workerFault(ctx, async (mesh) => {
        await mesh.workers[0].kill();
      }),
  },
  {
    id: 2,
    name: (p) => `SIGSTOP a worker ${secs(p.stopMs)}, then SIGCONT`,
    run: (ctx) =>
      workerFault(ctx, async (mesh, notes) => {
        mesh.workers[0].signalGroup('SIGSTOP');
        await delay(ctx.p.stopMs);
        mesh.workers[0].signalGroup('SIGCONT');
        notes.push(`worker stopped ${secs(ctx.p.stopMs)}`);
      }),
  },
  {
    id: 3,
    name: (p) => `external NATS down ${secs(p.natsShortMs)}`,
    run: (ctx) => natsOutage(ctx, ctx.p.natsShortMs),
  },
  {
    id: 4,
    name: (p) => `external NATS down ${secs(p.natsLongMs)}`,
    run: (ctx) => natsOutage(ctx, ctx.p.natsLongMs),
  },
  {
    id: 5,
    name: 'SIGKILL the spawned nats-server',
    run: (ctx) =>
      workerFault(ctx, async (mesh, notes) => {
        const conf = join(mesh.dataDir, 'nats', 'nats-server.conf');
        const found = await processesMentioning(conf);
        for (const p of found) ctx.run.signalPid(p.pid, 'SIGKILL');
        notes.push(`killed nats-server pid ${found.map((p) => p.pid).join(',') || '(none found)'}`);
        await delay(3000);
        const again = await processesMentioning(conf);
        notes.push(again.length > 0 ? `a nats-server runs again 3 s later` : 'no nats-server 3 s later');
      }),
  },
  { id: 6, name: 'SIGKILL the coordinator, restart it', run: coordinatorRestart },
  { id: 7, name: 'two coordinators on one NATS, SIGKILL one', run: twoCoordinators },
  { id: 8, name: 'Ctrl-C (SIGINT) on amf up --demo', run: ctrlC },
  {
    id: 9,
    name: '3-node NATS cluster: SIGKILL + restart a node, then SIGKILL 1 of 2 coordinators',
    run: clusterNodeAndCoordinator,
  },
  {
    id: 10,
    name: 'SIGKILL the coordinator and 1 of 2 workers together, restart the coordinator',
    run: (ctx) => coordinatorRestart(ctx, { alsoKillWorker: true }),
  },
  {
    id: 11,
    name: 'SIGKILL the coordinator and the only worker together, restart the coordinator alone',
    // No worker runs the held tasks again: the restarted coordinator (sweeper) fails them once
    // their deadline passes (presence TTL + redelivery wait + 2 × task TTL; docs/reliability.md).
    run: (ctx) =>
      coordinatorRestart(ctx, {
        alsoKillWorker: true,
        workers: 1,
        settleMs: 150_000,
        // The quick drill (CI) waits a shorter deadline: task TTL 10 s instead of 30 s.
        taskTtlSeconds: ctx.p.sleepMs < 1000 ? 10 : undefined,
      }),
  },
  {
    id: 12,
    name: (p) =>
      `partition: coordinator B cut off from the 3-node cluster ${secs(p.partitionMs)}, then healed`,
    run: clusterPartition,
  },
  {
    id: 13,
    name: (p) => `SIGSTOP the spawned nats-server ${secs(p.freezeMs)}, then SIGCONT`,
    run: natsFreeze,
  },
  { id: 14, name: 'SIGKILL 1 of 2 workers mid-stream (stream: true)', run: streamWorkerKill },
  {
    id: 15,
    name: 'a handler that never settles (ignores its abort signal) on 1 of 2 workers',
    run: stuckHandler,
  },
  { id: 16, name: '3 SIGTERM restarts of the coordinator under load', run: sigtermRestarts },
  {
    id: 17,
    name: (p) => `the data disk fills ${secs(p.fullMs)}, then space returns`,
    run: diskFull,
    // A tmpfs of its own is mounted for the mesh's data dir: root only.
    ...(process.getuid?.() === 0 ? {} : { skip: () => 'not run: mounting a tmpfs needs root' }),
  },
  {
    id: 18,
    name: 'a record of an AMF_EVENTS block overwritten while the mesh is stopped, then restarted (nats-server 2.12)',
    run: corruptBlock,
  },
  {
    id: 19,
    name: 'SIGKILL the coordinator and its only worker with ~50 tasks queued, restart the coordinator; the worker returns after the tasks ended',
    run: lateWorker,
  },
  {
    id: 20,
    name: 'a worker that is never admitted (its card unreachable) pulls work on external NATS with the shared user',
    run: unadmittedWorker,
  },
];

/**
 * Fault 19: how long the restarted coordinator may take to end the tasks left queued: the dead
 * coordinator's presence TTL (10 s), a sweep, the work queue's ack wait (30 s) and twice the task TTL
 * (fault 19 runs with a 10 s TTL), with room for a slow sweep on a loaded machine.
 */
export const LATE_WORKER_TTL_SECONDS = 10;
export function lateWorkerDeadlineMs() {
  return 100_000;
}

/** The spawned nats-server of `mesh`, found by its config path. */
async function spawnedNatsPids(mesh) {
  return (await processesMentioning(join(mesh.dataDir, 'nats', 'nats-server.conf'))).map((p) => p.pid);
}

/** What /health says (status and the fabric's problem), for the notes. */
async function healthNote(url) {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(3000) });
    const body = await res.json();
    return `/health ${res.status}${body.nats?.problem ? ` (${body.nats.problem})` : ''}`;
  } catch (err) {
    return `/health unreachable (${err.message})`;
  }
}

/**
 * The fabric frozen: a SIGSTOPped server keeps its connections open, so nothing but a ping notices.
 * Requests meanwhile must be refused naming the fabric (503), not "no such model" (404).
 */
async function natsFreeze(ctx) {
  return workerFault(ctx, async (mesh, notes) => {
    const pids = await spawnedNatsPids(mesh);
    for (const pid of pids) ctx.run.signalPid(pid, 'SIGSTOP');
    await delay(Math.min(5_000, ctx.p.freezeMs / 2));
    notes.push(`during: ${await healthNote(mesh.coordinator.url)}`);
    await delay(ctx.p.freezeMs - Math.min(5_000, ctx.p.freezeMs / 2));
    for (const pid of pids) ctx.run.signalPid(pid, 'SIGCONT');
    notes.push(`nats-server pid ${pids.join(',')} stopped ${secs(ctx.p.freezeMs)}`);
  });
}

/**
 * A streaming answer's worker dies mid-stream: its client gets an error event and the end of the
 * stream, never the retry's chunks spliced after the dead attempt's (the audit's `wrong`).
 */
async function streamWorkerKill(ctx) {
  const mesh = await ctx.spawnedMesh({ workers: 2, workerEnv: () => ({ AMF_DRILL_STREAM: '1' }) });
  const notes = [];
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    async () => {
      await mesh.workers[0].kill();
      notes.push('worker 1 SIGKILLed');
    },
    { stream: true },
  );
  const probe = await ctx.probe(() => mesh.coordinator.url);
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records);
  const cut = records.filter((r) => String(r.reason).startsWith('stream ')).length;
  notes.push(`${cut} stream(s) ended with an error event`);
  return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes };
}

/**
 * From the fault on, worker 1's handler hangs on every task and ignores its abort signal. Its
 * handler timeout (5 s; quick 2 s) ends each attempt and the task goes to worker 2; once all its
 * slots are stuck, worker 1 claims nothing more. Nothing may be lost or expire for it.
 */
async function stuckHandler(ctx) {
  const stuckFile = join(ctx.run.dir('flags'), 'stuck');
  const timeoutSeconds = ctx.p.sleepMs < 1000 ? 2 : 5;
  const mesh = await ctx.spawnedMesh({
    workers: 2,
    yaml: `worker:\n  handler_timeout_seconds: ${timeoutSeconds}\n  concurrency: 4\n`,
    workerEnv: (k) => (k === 1 ? { AMF_DRILL_STUCK_FILE: stuckFile } : {}),
  });
  const notes = [];
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    async () => {
      await writeFile(stuckFile, '');
      notes.push(`worker 1's handler hangs from now on (handler timeout ${timeoutSeconds} s, 4 slots)`);
    },
  );
  notes.push(`worker 1 ${await agentStatus(mesh.coordinator.url, mesh.workers[0].label)}`);
  const probe = await ctx.probe(() => mesh.coordinator.url);
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records);
  return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes };
}

/** The models the coordinator lists after the load (worker 2 still serves the tag). */
async function agentStatus(url, name) {
  try {
    const res = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(3000) });
    const body = await res.json();
    return `(${name}) stuck; models listed after the load: ${body.data?.map((m) => m.id).join(', ') || 'none'}`;
  } catch (err) {
    return `(${name}) stuck; models unknown (${err.message})`;
  }
}

/**
 * SIGTERM the coordinator three times under load, restarting it on the same data dir and ports:
 * once a stop has begun, nothing new is accepted (kept-alive connections included), so no task is
 * announced and then cut (`requester_cancelled`).
 */
async function sigtermRestarts(ctx) {
  const port = await freePort();
  const natsPort = await freePort();
  const mesh = await ctx.spawnedMesh({ workers: 2, port, natsPort });
  const notes = [];
  const url = `http://127.0.0.1:${port}`;
  const records = await ctx.loadWithFault(
    () => url,
    async () => {
      for (let n = 1; n <= 3; n++) {
        const started = Date.now();
        mesh.coordinator.proc.signal('SIGTERM');
        await Promise.race([mesh.coordinator.proc.exited, delay(30_000)]);
        const stopped = Date.now() - started;
        mesh.coordinator = await startCoordinator(ctx.run, {
          dataDir: mesh.dataDir,
          label: `coordinator-${n + 1}`,
          port,
          natsPort,
        });
        notes.push(`stop ${n}: exited after ${secs(stopped)}, restarted`);
        await ctx.waitForModel(url).catch(() => undefined);
        await delay(ctx.p.sleepMs * 2);
      }
    },
  );
  const probe = await ctx.probe(() => url);
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records);
  return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes };
}

/**
 * The data dir's disk (a tmpfs the drill mounts in its own mount namespace) fills up under load,
 * stays full for a while, then space returns. New requests must be refused with 507 while full,
 * nothing accepted may be lost, and the mesh must serve again by itself.
 */
async function diskFull(ctx) {
  const dataDir = ctx.run.dir('disk');
  await execFileP('mount', ['-t', 'tmpfs', '-o', 'size=256m', 'tmpfs', dataDir]);
  ctx.run.onCleanup(() => execFileP('umount', ['-l', dataDir]).catch(() => undefined));
  const mesh = await ctx.spawnedMesh({ workers: 2, dataDir: join(dataDir, 'mesh') });
  const notes = [];
  const filler = join(dataDir, 'filler');
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    async () => {
      await execFileP('dd', ['if=/dev/zero', `of=${filler}`, 'bs=1M']).catch(() => undefined);
      await delay(1_500); // the coordinator looks at the disk every second
      notes.push(`disk filled; ${await healthNote(mesh.coordinator.url)}`);
      await delay(ctx.p.fullMs);
      await rm(filler, { force: true });
      notes.push(`space back after ${secs(ctx.p.fullMs)}`);
    },
  );
  const probe = await ctx.probe(() => mesh.coordinator.url);
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records);
  return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes };
}

/**
 * Kills the coordinator process (as a crash would) and starts it again as a user would. With
 * `alsoKillWorker`, one of the two workers dies with it (as the demo workers of `amf up --demo`,
 * which share its process, do): the tasks it held have no coordinator and no worker left.
 */
async function coordinatorRestart(
  ctx,
  { alsoKillWorker = false, workers = 2, settleMs, taskTtlSeconds } = {},
) {
  const port = await freePort();
  const natsPort = await freePort();
  const mesh = await ctx.spawnedMesh({ workers, port, natsPort, taskTtlSeconds });
  const notes = [];
  const url = `http://127.0.0.1:${port}`;
  const holds = alsoKillWorker
    ? await watchHolds(mesh.coordinator.natsUrl, mesh.credentials, mesh.workers[0].label)
    : undefined;
  const records = await ctx.loadWithFault(
    () => url,
    async () => {
      const conf = join(mesh.dataDir, 'nats', 'nats-server.conf');
      // The case to show: worker 1 holds tasks whose claimed state the coordinator has written.
      const heldMs = Math.min(HELD_AT_LEAST_MS, ctx.p.sleepMs / 2);
      const held = holds ? await holds.heldFor(heldMs, 10_000) : 0;
      mesh.coordinator.proc.signal('SIGKILL');
      if (alsoKillWorker) {
        await mesh.workers[0].kill();
        notes.push(`worker 1 SIGKILLed with it, holding ${held} task(s) claimed ≥ ${heldMs} ms before`);
        await holds.close();
      }
      await mesh.coordinator.proc.exited;
      const orphans = await processesMentioning(conf);
      if (orphans.length > 0)
        notes.push(`its nats-server outlived it (pid ${orphans.map((o) => o.pid).join(',')})`);
      try {
        mesh.coordinator = await startCoordinator(ctx.run, {
          dataDir: mesh.dataDir,
          label: 'coordinator-2',
          port,
          natsPort,
        });
        notes.push('restarted on the same data dir and ports');
      } catch (err) {
        notes.push(`restart failed: ${lastLine(err.message)}`);
      }
    },
  );
  const lastWorkerKilled = alsoKillWorker && workers === 1;
  // With no worker left nothing can answer a probe: first the held tasks must end without one.
  const probe = lastWorkerKilled ? undefined : await ctx.probe(() => url);
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records, settleMs);
  if (!lastWorkerKilled)
    return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes };
  // Then the killed worker comes back (same name and key), and the mesh must serve again.
  await ctx.addWorkers(mesh, 1);
  notes.push('worker 1 started again after the settle');
  return {
    records,
    probe: await ctx.probe(() => url),
    storeDir: mesh.dataDir,
    credentials: mesh.credentials,
    notes,
  };
}

/** Two coordinators share an external NATS; requests alternate; one is SIGKILLed. */
async function twoCoordinators(ctx) {
  const mesh = await ctx.externalMesh({ workers: 2 });
  const second = ctx.run.dir('mesh-b');
  await copyFile(join(mesh.dataDir, 'credentials.json'), join(second, 'credentials.json'));
  const other = await startCoordinator(ctx.run, {
    dataDir: second,
    label: 'coordinator-b',
    natsUrl: mesh.nats.url,
  });
  await ctx.waitForModel(other.url);
  const notes = [];
  let killed = false;
  const records = await ctx.loadWithFault(
    (i) => (i % 2 === 0 ? mesh.coordinator.url : other.url),
    async () => {
      await mesh.coordinator.proc.kill();
      killed = true;
      notes.push('coordinator A SIGKILLed; even requests keep going to A');
    },
  );
  const even = records.filter((r) => r.i % 2 === 0);
  notes.push(`A answered ${even.filter((r) => r.ok).length}/${even.length}; killed=${killed}`);
  const probe = await ctx.probe(() => other.url);
  await ctx.settle(() => mesh.nats.url, mesh.credentials, records);
  return { records, probe, storeDir: mesh.natsDir, credentials: mesh.credentials, notes };
}

/** Ctrl-C on `amf up --demo`: the terminal signals the whole foreground process group. */
async function ctrlC(ctx) {
  const mesh = await ctx.spawnedMesh({ workers: 1, demo: true });
  const notes = [];
  const extra = {};
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    async () => {
      const started = Date.now();
      mesh.coordinator.proc.signalGroup('SIGINT');
      const exited = await Promise.race([mesh.coordinator.proc.exited, delay(30_000)]);
      extra.exitSeconds = exited ? (Date.now() - started) / 1000 : undefined;
      notes.push(exited ? `exited after ${secs(Date.now() - started)}` : 'still running 30 s after SIGINT');
      await delay(500);
      // Left behind: anything still naming the data dir, besides our own worker and, when it did
      // not exit, the coordinator itself (reported above).
      const ours = new Set([...mesh.workers.map((w) => w.pid), mesh.coordinator.proc.pid]);
      const left = (await processesMentioning(mesh.dataDir)).filter((p) => !ours.has(p.pid));
      extra.leftovers = left.length;
      notes.push(
        left.length === 0
          ? 'no other process left behind'
          : `left behind: ${left.map((p) => `${p.pid} ${p.cmdline.slice(0, 60)}`).join('; ')}`,
      );
      await mesh.coordinator.proc.kill();
    },
  );
  for (const w of mesh.workers) await w.kill();
  // Recovery after a deliberate stop: `amf up --demo` again on the same data dir serves at once.
  let probe;
  try {
    const again = await startCoordinator(ctx.run, {
      dataDir: mesh.dataDir,
      label: 'coordinator-2',
      demo: true,
    });
    await ctx.waitForModel(again.url, 'echo');
    probe = await ctx.probe(() => again.url, 'echo');
    await again.proc.kill();
  } catch (err) {
    probe = { recovered: false, seconds: 0, last: { reason: `restart failed: ${lastLine(err.message)}` } };
  }
  return { records, probe, storeDir: mesh.dataDir, credentials: mesh.credentials, notes, extra };
}

function lastLine(text) {
  return String(text).split('\n').filter(Boolean).slice(-1)[0]?.slice(0, 160) ?? '';
}

/**
 * How long worker 1 must have held a task before fault 10 strikes: its claimed state is in KV by
 * then (task state is written every 100 ms), so adoption must get past the dead holder. At most half
 * the handler's sleep, so a held task is still running.
 */
const HELD_AT_LEAST_MS = 500;

/**
 * Follows the claims and finals of the agent named `name` on the mesh's NATS (coordinator's
 * credentials): `heldFor(ms, bound)` waits (at most `bound`) until it holds a task claimed at least
 * `ms` ago, and says how many it holds that long.
 */
async function watchHolds(natsUrl, credentials, name) {
  const { connectAs } = await fromDist('fabric/connect.js');
  const nc = await connectAs(natsUrl, credentials.coordinator, 'drill-holds');
  const claimedAt = new Map();
  const decode = (msg) => {
    try {
      return msg.json();
    } catch {
      return undefined;
    }
  };
  const isOurs = (e) => String(e?.data?.payload?.agent_id ?? '').endsWith(`/${name}`);
  nc.subscribe('amf.task.claim', {
    callback: (_err, msg) => {
      const e = decode(msg);
      if (isOurs(e)) claimedAt.set(e.data.payload.task_id, Date.now());
    },
  });
  nc.subscribe('amf.result.final', {
    callback: (_err, msg) => claimedAt.delete(decode(msg)?.data?.payload?.task_id),
  });
  await nc.flush();
  const heldLong = (ms) => [...claimedAt.values()].filter((t) => Date.now() - t >= ms).length;
  return {
    async heldFor(ms, bound) {
      const until = Date.now() + bound;
      while (heldLong(ms) === 0 && Date.now() < until) await delay(50);
      return heldLong(ms);
    },
    close: () => nc.close().catch(() => undefined),
  };
}

/** The `.blk` files of a stream in a spawned server's store (`<dataDir>/nats/jetstream/<account>/…`). */
async function streamBlocks(dataDir, stream) {
  const root = join(dataDir, 'nats', 'jetstream');
  const found = [];
  for (const account of await readdir(root).catch(() => [])) {
    const dir = join(root, account, 'streams', stream, 'msgs');
    for (const name of await readdir(dir).catch(() => []))
      if (name.endsWith('.blk')) found.push(join(dir, name));
  }
  return found;
}

/**
 * Overwrites the length of the middle record of `file` (nats-server's block format: each record
 * starts with its length, u32 little-endian, the top bit flagging headers), as a torn write or a bad
 * sector would: the server keeps what comes before it and drops the rest. Says which record.
 */
async function damageMiddleRecord(file) {
  const buf = await readFile(file);
  const starts = [];
  for (let at = 0; at + 4 <= buf.length;) {
    const length = buf.readUInt32LE(at) & 0x7fffffff;
    if (length < 22) break;
    starts.push(at);
    at += length;
  }
  const k = Math.floor(starts.length / 2);
  const fh = await open(file, 'r+');
  try {
    await fh.write(Buffer.from([0x47, 0x47, 0x47, 0x47]), 0, 4, starts[k]);
  } finally {
    await fh.close();
  }
  return { record: k + 1, records: starts.length };
}

/** `/health`'s store losses (storeIntegrity.ts), if the coordinator answers. */
async function storeLosses(url) {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(3000) });
    return (await res.json()).nats?.store?.losses ?? [];
  } catch {
    return [];
  }
}

/**
 * Fault 18: the mesh is stopped cleanly mid-load, a record in the middle of AMF_EVENTS' block is
 * overwritten, and the mesh is started again (on the pinned nats-server 2.12, which logs the damage):
 * the events from that record on are gone. The coordinator must say so: `/health` names the stream,
 * the count and the tasks that could be affected. A task left without a terminal event counts as
 * lost unless it is among those named (reported, not silent).
 */
async function corruptBlock(ctx) {
  const port = await freePort();
  const natsPort = await freePort();
  const env = { AMF_NATS_SERVER_BIN: await clusterBinary() };
  const mesh = await ctx.spawnedMesh({ workers: 2, port, natsPort, coordinatorEnv: env });
  const url = `http://127.0.0.1:${port}`;
  const notes = [];
  const records = await ctx.loadWithFault(
    () => url,
    async () => {
      mesh.coordinator.proc.signal('SIGTERM');
      await Promise.race([mesh.coordinator.proc.exited, delay(30_000)]);
      // Its nats-server stops with it; one still running would rewrite the block.
      const conf = join(mesh.dataDir, 'nats', 'nats-server.conf');
      for (let i = 0; i < 100 && (await processesMentioning(conf)).length > 0; i++) await delay(100);
      for (const p of await processesMentioning(conf)) ctx.run.signalPid(p.pid, 'SIGKILL');
      const [block] = await streamBlocks(mesh.dataDir, 'AMF_EVENTS');
      if (!block) throw new Error('no AMF_EVENTS block file found');
      const { record, records: total } = await damageMiddleRecord(block);
      notes.push(`record ${record} of ${total} of AMF_EVENTS' block overwritten`);
      mesh.coordinator = await startCoordinator(ctx.run, {
        dataDir: mesh.dataDir,
        label: 'coordinator-2',
        port,
        natsPort,
        env,
      });
      const losses = await storeLosses(url);
      notes.push(
        losses.length === 0
          ? '/health names no loss'
          : `/health: ${losses.map((l) => `${l.stream} lost ${l.msgs} message(s), ${l.tasks_total ?? '?'} task(s) could be affected`).join('; ')}`,
      );
    },
  );
  const probe = await ctx.probe(() => url);
  // In-flight tasks ended at the clean stop: only the restarted mesh's tasks are left to settle.
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records, 30_000);
  const losses = await storeLosses(url);
  const reportedLost = new Set(losses.flatMap((l) => l.tasks ?? []));
  // Read live: the store is 2.12's, which the drill's own (PATH) nats-server may not read.
  const events = await readEventsLive(await mesh.liveNatsUrl(), mesh.credentials);
  if (events === undefined) throw new Error('could not read AMF_EVENTS after the restart');
  return { records, probe, events, credentials: mesh.credentials, notes, reportedLost };
}

/**
 * Fault 19: one worker with two slots, ~50 requests at once, so most tasks wait in the work queue;
 * the coordinator and the worker are SIGKILLed together and the coordinator restarted alone. It must
 * end every task (coordinator_lost, or expired) and withdraw its work; the worker, started again only
 * after that, must run none of them (its runs are logged: one is `wrong`).
 */
async function lateWorker(ctx) {
  const port = await freePort();
  const natsPort = await freePort();
  const mesh = await ctx.spawnedMesh({
    workers: 1,
    port,
    natsPort,
    taskTtlSeconds: LATE_WORKER_TTL_SECONDS,
    yaml: 'worker:\n  concurrency: 2\n',
  });
  const url = `http://127.0.0.1:${port}`;
  const notes = [];
  const queued = 52;
  const records = await ctx.loadWithFault(
    () => url,
    async () => {
      mesh.coordinator.proc.signal('SIGKILL');
      await mesh.workers[0].kill();
      await mesh.coordinator.proc.exited;
      notes.push(`coordinator and worker SIGKILLed with ${queued} requests sent, 2 slots`);
      mesh.coordinator = await startCoordinator(ctx.run, {
        dataDir: mesh.dataDir,
        label: 'coordinator-2',
        port,
        natsPort,
      });
    },
    { requests: queued, concurrency: queued, faultAtMs: Math.min(ctx.p.faultAtMs, 4_000) },
  );
  await ctx.settle(() => mesh.liveNatsUrl(), mesh.credentials, records, lateWorkerDeadlineMs());
  const lateLog = join(ctx.run.logDir, 'runs-late.log');
  mesh.runLog = lateLog;
  await ctx.addWorkers(mesh, 1);
  notes.push('the worker started again after the tasks ended');
  // Work is taken oldest first: had a queued task not been withdrawn, it would run before the probe.
  const probe = await ctx.probe(() => url);
  const events = await readEventsLive(await mesh.liveNatsUrl(), mesh.credentials);
  if (events === undefined) throw new Error('could not read AMF_EVENTS');
  const ours = new Set(
    events
      .filter((e) => e.type === 'amf.task.announce' && ctx.run.markerRe.test(JSON.stringify(e.payload)))
      .map((e) => e.taskId),
  );
  // Ended without a result (coordinator_lost, expired): must never run afterwards.
  const failed = new Set(
    events
      .filter((e) => isTerminal(e) && e.type !== 'amf.result.final' && ours.has(e.taskId))
      .map((e) => e.taskId),
  );
  const late = await readRunLog(lateLog);
  const wrong = [...late.keys()]
    .filter((id) => failed.has(id))
    .map((taskId) => ({ taskId, why: 'run by the worker that came back after the task was ended' }));
  notes.push(`${failed.size} task(s) ended without a result before the worker came back`);
  notes.push(`${late.size} task(s) run by the returning worker (the probe's included)`);
  return { records, probe, events, credentials: mesh.credentials, notes, wrong };
}

/**
 * Fault 20: on an external NATS, where workers share the legacy specialist user, a third worker
 * whose card cannot be fetched (handler.mjs closes every connection to its edge) is never admitted,
 * yet it heartbeats and pulls work. Its claims must be refused and its offers go elsewhere, never
 * back to it: every handler run is logged, none may be the stray's and no task may run twice.
 */
async function unadmittedWorker(ctx) {
  const runLog = join(ctx.run.logDir, 'runs.log');
  const mesh = await ctx.externalMesh({ workers: 2, runLog });
  const strayLog = join(ctx.run.logDir, 'runs-unadmitted.log');
  const strayStarts = join(ctx.run.logDir, 'starts-unadmitted.log');
  const name = `drill-f${ctx.run.id}-unadmitted`;
  mesh.workers.push(
    await startWorker(ctx.run, {
      name,
      coordinatorUrl: mesh.coordinator.url,
      dataDir: mesh.dataDir,
      sleepMs: ctx.p.sleepMs,
      runLog: strayLog,
      specialistPass: mesh.credentials.specialist.password,
      env: { AMF_DRILL_CARD_UNREACHABLE: '1', AMF_DRILL_START_LOG: strayStarts },
    }),
  );
  const notes = [];
  const records = await ctx.loadWithFault(
    () => mesh.coordinator.url,
    async () => {
      notes.push(`${name} up from the start, its card unreachable`);
    },
  );
  const probe = await ctx.probe(() => mesh.coordinator.url);
  await ctx.settle(() => mesh.nats.url, mesh.credentials, records);
  const runs = await readRunLog(runLog);
  const stray = await readRunLog(strayLog);
  for (const [id, n] of stray) runs.set(id, (runs.get(id) ?? 0) + n);
  const wrong = [...stray.keys()].map((taskId) => ({ taskId, why: 'run by the unadmitted worker' }));
  const started = await readRunLog(strayStarts);
  const coordinatorLog = await readFile(join(ctx.run.logDir, 'coordinator.log'), 'utf8').catch(() => '');
  const unverified = coordinatorLog.split('\n').find((l) => l.includes(name) && l.includes('unverified'));
  notes.push(
    `${name} ${unverified ? `admitted unverified (${/"reason":"([^"]+)"/.exec(unverified)?.[1] ?? '?'}): offered nothing` : 'not listed as unverified'}`,
    `${[...runs.values()].reduce((a, b) => a + b, 0)} handler runs to the end, ${stray.size} by the unadmitted worker (${started.size} started there and aborted when its claim was refused)`,
  );
  return { records, probe, storeDir: mesh.natsDir, credentials: mesh.credentials, notes, runs, wrong };
}
