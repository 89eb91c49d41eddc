/**
 * A coordinator cut off from the mesh and back (issue 28, "cluster heal without a double run"), on a
 * real 3-node JetStream cluster: coordinator B reaches its node only through a TCP proxy that the
 * test cuts for 12 s (its connection drops and every redial is closed, as for a host cut off from
 * the LAN), coordinator A and the workers stay on the other nodes. Requests alternate between A and
 * B throughout. Every handler run is counted by task id.
 *
 * - Every accepted task ends in exactly one terminal event, is run at most once, and its client is
 *   answered with its own result (or with the failure the record holds); none is lost.
 * - Once B is reconnected it answers: no "model not found" for want of agents it gave up while cut off.
 * - A task whose client gave up while B was cut off is cancelled for good: its work-queue offer is
 *   withdrawn once B is back, and no worker runs it afterwards.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { startCoordinator, type RunningCoordinator } from '../../src/apps/coordinatorApp.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { loadConfig, type ConfigOverrides } from '../../src/config/config.js';
import { connectAs } from '../../src/fabric/connect.js';
import { loadOrCreateCredentials, type NatsCredentials } from '../../src/fabric/credentials.js';
import { EVENTS_STREAM, WORK_STREAM } from '../../src/fabric/jetstream.js';
import { workConsumerName } from '../../src/events/subjects.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startCuttableProxy, type CuttableProxy } from '../../scripts/lib/cuttableProxy.mjs';
import { startTestCluster, type TestCluster } from '../helpers/natsCluster.js';

const TAG = 'heal';
const CANCEL_TAG = 'heal-cancel';
const CLAIM_TAG = 'heal-claim';
const HANDLER_MS = 1_000;
const CUT_AT_MS = 3_000;
const CUT_MS = 12_000;
const LOAD_MS = 26_000;
const LANES = 6;
/** Heartbeats every 2 s, offline after 3 missed: a window of up to 2 s after the heal before one arrives. */
const HEARTBEAT_SECONDS = 2;
/** After B is back: one request to B every PROBE_EVERY_MS for PROBE_MS (the window the tester saw 404s in). */
const PROBE_MS = 4_000;
const PROBE_EVERY_MS = 200;

async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(100);
  }
}

interface Answer {
  via: 'A' | 'B';
  text: string;
  startedAt: number;
  status: number;
  content?: string | undefined;
  taskId?: string | undefined;
  error?: string;
}

async function ask(url: string, via: 'A' | 'B', text: string, signal?: AbortSignal): Promise<Answer> {
  const answer: Answer = { via, text, startedAt: Date.now(), status: 0 };
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: `amf/${TAG}`, messages: [{ role: 'user', content: text }] }),
      signal: signal ?? AbortSignal.timeout(60_000),
    });
    answer.status = res.status;
    answer.taskId = res.headers.get('x-amf-task-id') ?? undefined;
    const body = (await res.json()) as { choices?: { message?: { content?: string } }[]; error?: unknown };
    answer.content = body.choices?.[0]?.message?.content;
    if (res.status !== 200) answer.error = JSON.stringify(body.error).slice(0, 200);
  } catch (err) {
    answer.error = String(err);
  }
  return answer;
}

/**
 * Every event of AMF_EVENTS, in stream order. Tried again for a while: on a cluster that has just
 * been through a cut, the ordered consumer's first request may find no responder.
 */
async function readEvents(nc: NatsConnection, jsm: JetStreamManager): Promise<Record<string, unknown>[]> {
  for (let tries = 1; ; tries++) {
    try {
      return await readEventsOnce(nc, jsm);
    } catch (err) {
      if (tries >= 20) throw err;
      await delay(500);
    }
  }
}

async function readEventsOnce(nc: NatsConnection, jsm: JetStreamManager): Promise<Record<string, unknown>[]> {
  const total = (await jsm.streams.info(EVENTS_STREAM)).state.messages;
  const consumer = await jetstream(nc).consumers.get(EVENTS_STREAM);
  const events: Record<string, unknown>[] = [];
  while (events.length < total) {
    const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
    let got = 0;
    for await (const m of batch) {
      got++;
      events.push(m.json<Record<string, unknown>>());
      if (m.info.pending === 0) break;
    }
    if (got === 0) break;
  }
  return events;
}

interface Ledger {
  /** task id → the request text of its announcement. */
  announced: Map<string, string>;
  /** task id → its terminal events (final, or a coordinator notice with terminal: true). */
  terminals: Map<string, { type: string; reason?: string }[]>;
}

function ledgerOf(events: Record<string, unknown>[]): Ledger {
  const announced = new Map<string, string>();
  const terminals = new Map<string, { type: string; reason?: string }[]>();
  for (const e of events) {
    const payload = ((e.data as { payload?: Record<string, unknown> } | undefined)?.payload ?? {}) as {
      task_id?: string;
      task?: string;
      terminal?: boolean;
      reason?: string;
    };
    const type = String(e.type);
    const taskId = payload.task_id ?? (e.amftaskid as string | undefined);
    if (!taskId) continue;
    if (type === 'amf.task.announce' && typeof payload.task === 'string') announced.set(taskId, payload.task);
    const terminal =
      type === 'amf.result.final' ||
      ((type === 'amf.policy.deny' || type === 'amf.policy.warning') && payload.terminal === true);
    if (terminal)
      terminals.set(taskId, [
        ...(terminals.get(taskId) ?? []),
        { type, ...(payload.reason ? { reason: payload.reason } : {}) },
      ]);
  }
  return { announced, terminals };
}

describe('a coordinator cut off from the cluster and back', () => {
  let dataDir: string;
  let credentials: NatsCredentials;
  let cluster: TestCluster;
  let proxy: CuttableProxy;
  let a: RunningCoordinator;
  let b: RunningCoordinator;
  const workers: RunningWorker[] = [];
  let claimant: RunningWorker;
  let admin: NatsConnection;
  let jsm: JetStreamManager;
  /** Handler runs to the end, by task id; handler starts, by task text (the cancellation case). */
  const runs = new Map<string, number>();
  const started = new Set<string>();
  let releaseGate: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (releaseGate = resolve));
  let releaseClaimGate: () => void = () => undefined;
  const claimGate = new Promise<void>((resolve) => (releaseClaimGate = resolve));

  const counting: WorkerHandler = {
    name: 'counting',
    description: 'sleeps, counts its run, echoes',
    handle: async (ctx) => {
      started.add(ctx.text);
      await delay(HANDLER_MS, undefined, { signal: ctx.signal });
      runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
      return { text: `done: ${ctx.text}` };
    },
  };
  const gated: WorkerHandler = {
    name: 'gated',
    description: 'waits for the gate',
    handle: async (ctx) => {
      started.add(ctx.text);
      await gate;
      return { text: `done: ${ctx.text}` };
    },
  };

  const claimGated: WorkerHandler = {
    name: 'claim-gated',
    description: 'waits for its gate, counts its run',
    handle: async (ctx) => {
      await claimGate;
      runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
      return { text: `done: ${ctx.text}` };
    },
  };

  const coordinatorOn = async (natsUrl: string): Promise<RunningCoordinator> => {
    const config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port: 0 },
        nats: { url: natsUrl, replicas: 3 },
        heartbeat: { intervalSeconds: HEARTBEAT_SECONDS, offlineAfterMissed: 3 },
        // Longer than the cut: a task's TTL or watchdog running out is not what is tested here.
        tasks: { ttlSeconds: 30, maxRetries: 1, retryDelaySeconds: 0.2 },
        mdns: { enabled: false },
      } as ConfigOverrides,
    });
    return startCoordinator({ config, log: () => undefined });
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'amf-partition-'));
    credentials = await loadOrCreateCredentials(dataDir, {});
    cluster = await startTestCluster(credentials, 3, { noAdvertise: true });
    const [n1, n2, n3] = cluster.plan.nodes.map((n) => `nats://127.0.0.1:${n.clientPort}`);
    proxy = await startCuttableProxy(cluster.plan.nodes[2]?.clientPort as number);
    admin = await connectAs(`${n1},${n2}`, credentials.coordinator, 'partition-test-admin');
    jsm = await jetstreamManager(admin);
    a = await coordinatorOn(`${n1},${n2}`);
    b = await coordinatorOn(`nats://127.0.0.1:${proxy.port}`);
    expect(n3).toBeDefined();
    for (const [i, url] of [n1, n2].entries())
      workers.push(
        await startWorker({
          name: `heal-${i + 1}`,
          tags: [TAG],
          handler: counting,
          natsUrl: url as string,
          credential: credentials.specialist,
          port: 0,
          heartbeatSeconds: HEARTBEAT_SECONDS,
          concurrency: 2,
        }),
      );
    workers.push(
      await startWorker({
        name: 'heal-gated',
        tags: [CANCEL_TAG],
        handler: gated,
        natsUrl: `${n1},${n2}`,
        credential: credentials.specialist,
        port: 0,
        heartbeatSeconds: HEARTBEAT_SECONDS,
        concurrency: 1,
      }),
    );
    // Heartbeats far apart: a coordinator that gives it up stays wrong until the shared state is read.
    claimant = await startWorker({
      name: 'heal-claim',
      tags: [CLAIM_TAG],
      handler: claimGated,
      natsUrl: `${n1},${n2}`,
      credential: credentials.specialist,
      port: 0,
      heartbeatSeconds: 60,
      concurrency: 1,
    });
    workers.push(claimant);
    await waitFor(
      () => [a, b].every((c) => workers.every((w) => c.coordinator.registry.isLive(w.worker.agentId))),
      30_000,
      'both coordinators to admit every worker',
    );
  }, 120_000);

  afterAll(async () => {
    releaseGate();
    releaseClaimGate();
    proxy?.heal();
    await Promise.allSettled(workers.map((w) => w.close(2000)));
    await Promise.allSettled([a, b].map((c) => c?.close()));
    await admin?.close().catch(() => undefined);
    await proxy?.close();
    await cluster?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  }, 60_000);

  it(
    'answers every accepted task once, runs none twice, loses none, and serves as soon as B is back',
    { timeout: 180_000 },
    async () => {
      const answers: Answer[] = [];
      const loadStart = Date.now();
      let healedAt = 0;
      let backAt = 0;
      let n = 0;
      const cut = (async () => {
        await delay(CUT_AT_MS);
        proxy.cut();
        await delay(CUT_MS);
        proxy.heal();
        healedAt = Date.now();
        await waitFor(() => b.coordinator.natsConnected, 20_000, 'B to reconnect');
        backAt = Date.now();
        // Requests to B right after it is back, not held up behind the lanes' waiting requests.
        const probes: Promise<void>[] = [];
        for (let t = 0; t < PROBE_MS; t += PROBE_EVERY_MS) {
          const i = n++;
          probes.push(ask(b.url, 'B', `heal-${i} please`).then((x) => void answers.push(x)));
          await delay(PROBE_EVERY_MS);
        }
        await Promise.all(probes);
      })();
      const lane = async (lane: number): Promise<void> => {
        while (Date.now() - loadStart < LOAD_MS) {
          const i = n++;
          const [url, via] = lane % 2 === 0 ? [a.url, 'A' as const] : [b.url, 'B' as const];
          const answer = await ask(url, via, `heal-${i} please`);
          answers.push(answer);
          if (answer.status !== 200) await delay(100);
        }
      };
      await Promise.all([cut, ...Array.from({ length: LANES }, (_, k) => lane(k))]);

      // Every accepted task has reached its ending (or the deadline passed: reported as lost below).
      let ledger = ledgerOf(await readEvents(admin, jsm));
      const accepted = (l: Ledger) =>
        answers.map((x) => [...l.announced].find(([, text]) => text === x.text)?.[0]).filter(Boolean);
      await waitFor(
        async () => {
          ledger = ledgerOf(await readEvents(admin, jsm));
          return accepted(ledger).every((id) => (ledger.terminals.get(id as string)?.length ?? 0) > 0);
        },
        60_000,
        'every accepted task to end',
      ).catch(() => undefined);

      const taskOf = (x: Answer) =>
        x.taskId ?? [...ledger.announced].find(([, text]) => text === x.text)?.[0];
      const lost: string[] = [];
      const double: string[] = [];
      const ranTwice: string[] = [];
      const wrong: string[] = [];
      for (const x of answers) {
        const id = taskOf(x);
        if (x.status === 200 && x.content !== `done: ${x.text}`)
          wrong.push(`${x.text}: answered ${JSON.stringify(x.content)}`);
        if (id === undefined) continue; // refused before it was announced (404 while cut off)
        const ends = ledger.terminals.get(id) ?? [];
        if (ends.length === 0) lost.push(`${x.text} (${id}, client: ${x.status} ${x.error ?? ''})`);
        if (ends.length > 1) double.push(`${x.text}: ${JSON.stringify(ends)}`);
        if ((runs.get(id) ?? 0) > 1) ranTwice.push(`${x.text} (${id}) ran ${runs.get(id)} times`);
        // The client's answer is the record's: a result answered 200, a failure not.
        const completed = ends[0]?.type === 'amf.result.final';
        if (ends.length > 0 && x.status !== 0 && completed !== (x.status === 200))
          wrong.push(`${x.text}: client ${x.status}, record ${JSON.stringify(ends[0])}`);
      }
      // B back on the mesh answers at once: nothing refused for agents it gave up while cut off.
      const refusedOnceBack = answers.filter(
        (x) => x.via === 'B' && x.startedAt >= backAt && x.status === 404,
      );
      const summary = {
        requests: answers.length,
        answered: answers.filter((x) => x.status === 200).length,
        accepted: accepted(ledger).length,
        viaB: answers.filter((x) => x.via === 'B').length,
        reconnectedAfterHealMs: backAt - healedAt,
      };
      console.info(`partition heal: ${JSON.stringify(summary)}`);
      expect({
        lost,
        double,
        ranTwice,
        wrong,
        refusedOnceBack: refusedOnceBack.map((x) => `${x.text} ${x.error ?? ''}`),
      }).toEqual({ lost: [], double: [], ranTwice: [], wrong: [], refusedOnceBack: [] });
      // The cut bit: B accepted tasks before and after it, and refused while cut off.
      expect(answers.some((x) => x.via === 'B' && x.status === 200 && x.startedAt >= backAt)).toBe(true);
    },
  );

  it(
    'cancels a task whose client gave up while B was cut off: no worker runs it after the heal',
    { timeout: 120_000 },
    async () => {
      const consumer = workConsumerName(CANCEL_TAG);
      const ask2 = (url: string, text: string, signal?: AbortSignal) =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: `amf/${CANCEL_TAG}`, messages: [{ role: 'user', content: text }] }),
          signal: signal ?? AbortSignal.timeout(60_000),
        });
      // The gated worker's one slot is taken through A; B's task waits in the work queue.
      const first = ask2(a.url, 'occupies the slot');
      await waitFor(() => started.has('occupies the slot'), 20_000, 'the gated worker to start');
      const giveUp = new AbortController();
      const second = ask2(b.url, 'given up', giveUp.signal).catch((err: unknown) => err);
      await waitFor(
        async () => (await jsm.consumers.info(WORK_STREAM, consumer)).num_pending >= 1,
        20_000,
        "B's task to wait in the work queue",
      );
      proxy.cut();
      await delay(1_000);
      giveUp.abort(); // the client gives up while its coordinator cannot reach the mesh
      await second;
      await delay(4_000);
      proxy.heal();
      await waitFor(() => b.coordinator.natsConnected, 20_000, 'B to reconnect');
      // Withdrawn once B is back (before the worker has a free slot again).
      await waitFor(
        async () => (await jsm.consumers.info(WORK_STREAM, consumer)).num_pending === 0,
        20_000,
        "the given-up task's offer to be withdrawn",
      );
      releaseGate();
      expect((await first).status).toBe(200);
      // Time for the worker to pull whatever is left for it.
      await delay(3_000);
      expect(started.has('given up')).toBe(false);
      const ledger = ledgerOf(await readEvents(admin, jsm));
      const id = [...ledger.announced].find(([, text]) => text === 'given up')?.[0];
      expect(id).toBeDefined();
      expect(ledger.terminals.get(id as string)?.map((t) => t.reason)).toEqual(['requester_cancelled']);
    },
  );

  it(
    'takes the claim of a worker it gave up for silence when the shared registry still holds it live',
    { timeout: 120_000 },
    async () => {
      const agentId = claimant.worker.agentId;
      const ask3 = (url: string, text: string) =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: `amf/${CLAIM_TAG}`, messages: [{ role: 'user', content: text }] }),
          signal: AbortSignal.timeout(60_000),
        });
      // B must not be the sweeper: the holder's own sweep decides for the mesh (and writes it).
      await waitFor(() => a.coordinator.sweeperLease.isHolder, 30_000, 'A to hold the sweeper lease');
      const first = ask3(a.url, 'claim: occupies the slot');
      await waitFor(
        async () => (await jsm.consumers.info(WORK_STREAM, workConsumerName(CLAIM_TAG))).num_ack_pending >= 1,
        20_000,
        'the worker to take the first task',
      );
      const second = ask3(b.url, 'claim: offered by B');
      await waitFor(
        async () => (await jsm.consumers.info(WORK_STREAM, workConsumerName(CLAIM_TAG))).num_pending >= 1,
        20_000,
        "B's task to wait in the work queue",
      );
      // What B's sweep does when it hears no heartbeat (cut off, or the heartbeats are late).
      b.coordinator.registry.markOffline(agentId, 'heartbeat_missed');
      expect(b.coordinator.registry.isLive(agentId)).toBe(false);
      releaseClaimGate();
      const [r1, r2] = await Promise.all([first, second]);
      expect(r1.status).toBe(200);
      const body = (await r2.json()) as { choices?: { message?: { content?: string } }[] };
      expect({ status: r2.status, content: body.choices?.[0]?.message?.content }).toEqual({
        status: 200,
        content: 'done: claim: offered by B',
      });
      expect(b.coordinator.registry.isLive(agentId)).toBe(true);
      const taskId = r2.headers.get('x-amf-task-id') as string;
      expect(runs.get(taskId)).toBe(1);
      const refused = (await readEvents(admin, jsm)).filter(
        (e) =>
          e.type === 'amf.policy.warning' &&
          (e.data as { payload?: { task_id?: string; reason?: string } }).payload?.task_id === taskId,
      );
      expect(refused.map((e) => (e.data as { payload: { reason: string } }).payload.reason)).toEqual([]);
    },
  );
});
