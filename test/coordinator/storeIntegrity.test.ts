/**
 * A corrupt store is reported with what was lost. A real nats-server 2.12 (the pinned one) keeps a
 * mesh's JetStream store; bytes of an AMF_EVENTS block file are overwritten, as a bad disk or a torn
 * write would, and the server rebuilds the stream without the messages from there on. Whether the
 * damage is found at the coordinator's next start (the server stopped, the file damaged, both
 * started again) or while it runs (the file damaged under a running server, which is then killed and
 * restarted by the coordinator's supervisor), `/health` and `amf doctor` name the stream, how many
 * messages and bytes were lost and which tasks could be affected, and the coordinator logs it as an
 * error once.
 */
import { readdir, readFile, open, rm, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCoordinatorHttp, type CoordinatorHttp } from '../../src/apps/coordinatorApp.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { checkStore } from '../../src/cli/doctorStore.js';
import { loadConfig } from '../../src/config/config.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import type { StoreLoss } from '../../src/coordinator/storeIntegrity.js';
import type { LogLevel } from '../../src/log.js';
import { clusterNatsBinary } from '../helpers/natsCluster.js';

interface Running {
  coordinator: Coordinator;
  http: CoordinatorHttp;
  worker?: RunningWorker;
  errors: { message: string; fields?: Record<string, unknown> }[];
  close(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];

/** Polls `check` every 250 ms until it gives a value, or throws naming `what` after `ms`. */
async function poll<T>(check: () => Promise<T | undefined | false>, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function startMesh(dataDir: string, binary: string): Promise<Running> {
  const config = await loadConfig({
    env: { HOME: tmpdir() },
    flags: {
      dataDir,
      logLevel: 'silent',
      coordinator: { port: 0 },
      nats: { port: 0, serverBinary: binary },
      heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
      mdns: { enabled: false },
    } as never,
  });
  const errors: Running['errors'] = [];
  const coordinator = await Coordinator.start({
    config,
    log: (level: LogLevel, message, fields) => {
      if (level === 'error') errors.push({ message, ...(fields ? { fields } : {}) });
    },
  });
  const http = await startCoordinatorHttp(coordinator);
  let closing: Promise<void> | undefined;
  const running: Running = {
    coordinator,
    http,
    errors,
    close: () =>
      (closing ??= (async () => {
        await running.worker?.close();
        await http.close();
        await coordinator.close();
      })()),
  };
  cleanups.push(() => running.close());
  return running;
}

async function addWorker(mesh: Running): Promise<void> {
  mesh.worker = await startWorker({
    name: 'integrity-echo',
    tags: ['echo'],
    handler: {
      name: 'echo',
      description: 'echo',
      readOnly: true,
      handle: async (ctx) => `done: ${ctx.text}`,
    },
    natsUrl: mesh.coordinator.natsUrl,
    join: mesh.coordinator.joinCredential,
    coordinatorKey: mesh.coordinator.signingKey.publicKey,
    operatorKey: mesh.http.operatorKey,
    port: 0,
    heartbeatSeconds: 1,
  });
  const id = mesh.worker.worker.agentId;
  await poll(async () => mesh.coordinator.registry.isLive(id), 20_000, 'worker admitted');
}

/** Runs `n` tasks to their end; returns their ids. */
async function runTasks(mesh: Running, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(new URL('/v1/chat/completions', mesh.http.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'amf/echo',
        messages: [{ role: 'user', content: `task ${i} ${'x'.repeat(300)}` }],
      }),
    });
    expect(res.status).toBe(200);
    ids.push(res.headers.get('x-amf-task-id') ?? '');
    await res.text();
  }
  return ids;
}

/** The AMF_EVENTS block files of the spawned server's store, largest first. */
async function eventBlocks(dataDir: string): Promise<string[]> {
  const root = join(dataDir, 'nats', 'jetstream');
  const found: { file: string; size: number }[] = [];
  for (const account of await readdir(root)) {
    const dir = join(root, account, 'streams', 'AMF_EVENTS', 'msgs');
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names.filter((n) => n.endsWith('.blk'))) {
      const file = join(dir, name);
      found.push({ file, size: (await readFile(file)).length });
    }
  }
  return found.sort((a, b) => b.size - a.size).map((f) => f.file);
}

/**
 * Overwrites the length of the record in the middle of the block (nats-server's block format: each
 * record starts with its length, u32 little-endian, the top bit flagging headers): the record no
 * longer adds up, so the server keeps only what comes before it.
 */
async function damage(file: string): Promise<void> {
  const buf = await readFile(file);
  const starts: number[] = [];
  for (let at = 0; at + 4 <= buf.length;) {
    const length = buf.readUInt32LE(at) & 0x7fffffff;
    if (length < 22) break;
    starts.push(at);
    at += length;
  }
  expect(starts.length, 'records in the block').toBeGreaterThan(10);
  const fh = await open(file, 'r+');
  try {
    await fh.write(Buffer.from([0x47, 0x47, 0x47, 0x47]), 0, 4, starts[Math.floor(starts.length / 2)]);
  } finally {
    await fh.close();
  }
}

async function health(
  url: string,
): Promise<{ status: string; nats: { store?: { state: string; detail?: string; losses?: StoreLoss[] } } }> {
  const res = await fetch(new URL('/health', url));
  return (await res.json()) as never;
}

function expectReported(losses: StoreLoss[] | undefined, tasks: string[]): StoreLoss {
  const loss = losses?.find((l) => l.stream === 'AMF_EVENTS');
  expect(loss, JSON.stringify(losses)).toBeDefined();
  expect(loss!.msgs).toBeGreaterThan(0);
  expect(loss!.last_seq - loss!.first_seq + 1).toBe(loss!.msgs);
  expect(loss!.bytes ?? 0).toBeGreaterThan(0);
  // The tasks named are ours, and there are some: the lost events were written while they ran.
  expect(loss!.tasks_total ?? 0).toBeGreaterThan(0);
  for (const id of loss!.tasks ?? []) expect(tasks).toContain(id);
  return loss!;
}

describe('a corrupt store is reported with what was lost', () => {
  it(
    'found at the next start: /health, amf doctor and one error line name the stream, the count and the tasks',
    { timeout: 180_000 },
    async () => {
      const binary = await clusterNatsBinary();
      const dataDir = await mkdtemp(join(tmpdir(), 'amf-integrity-'));
      cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
      const first = await startMesh(dataDir, binary);
      await addWorker(first);
      const tasks = await runTasks(first, 30);
      expect((await health(first.http.url)).nats.store?.state ?? 'ok').toBe('ok');
      // A clean stop: the store is consistent, and the coordinator wrote what it last saw.
      await first.close();
      const [block] = await eventBlocks(dataDir);
      expect(block).toBeDefined();
      await damage(block!);

      const second = await startMesh(dataDir, binary);
      const body = await health(second.http.url);
      expect(body.status).toBe('degraded');
      expect(body.nats.store?.state).toBe('corrupt');
      const loss = expectReported(body.nats.store?.losses, tasks);
      expect(body.nats.store?.detail).toContain(`lost ${loss.msgs} message(s) of AMF_EVENTS`);
      // Logged as an error once, with the same numbers.
      const lines = second.errors.filter(
        (e) => e.message.includes('lost') && e.message.includes('AMF_EVENTS'),
      );
      expect(lines).toHaveLength(1);
      expect(lines[0]!.message).toContain(`${loss.msgs} message(s)`);
      // amf doctor's store check reads the running coordinator's /health.
      const doctor = await checkStore(dataDir, new URL('/health', second.http.url).href);
      expect(doctor.level).toBe('fail');
      expect(doctor.detail).toContain('AMF_EVENTS');
      expect(doctor.detail).toContain(`${loss.msgs} message(s)`);
      expect(doctor.detail).toContain('could be affected');
      // Still reported a while later (the check runs again every few seconds), and still once in the log.
      await second.coordinator.storeIntegrity?.check();
      expect(
        second.errors.filter((e) => e.message.includes('AMF_EVENTS') && e.message.includes('lost')),
      ).toHaveLength(1);
    },
  );

  it(
    'found while running: the block damaged under a running server that is then restarted',
    { timeout: 180_000 },
    async () => {
      const binary = await clusterNatsBinary();
      const dataDir = await mkdtemp(join(tmpdir(), 'amf-integrity-'));
      cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
      const mesh = await startMesh(dataDir, binary);
      await addWorker(mesh);
      const tasks = await runTasks(mesh, 30);
      // The coordinator has looked at the streams since the tasks ended (it does every few seconds).
      await mesh.coordinator.storeIntegrity?.check();
      const [block] = await eventBlocks(dataDir);
      await damage(block!);
      const pid = mesh.coordinator.fabricHealth.server!.pid;
      process.kill(pid, 'SIGKILL');
      // The supervisor starts it again on the same store; the coordinator finds the loss by itself.
      const body = await poll(
        async () => {
          const b = await health(mesh.http.url).catch(() => undefined);
          return b?.nats.store?.losses?.length ? b : undefined;
        },
        60_000,
        'the loss in /health',
      );
      expect(mesh.coordinator.fabricHealth.server?.pid).not.toBe(pid);
      expectReported(body.nats.store?.losses, tasks);
      expect(
        mesh.errors.filter((e) => e.message.includes('lost') && e.message.includes('AMF_EVENTS')),
      ).toHaveLength(1);
    },
  );
});
