import { SigningBus } from '../helpers/signingBus.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { eventsFor, settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { takeOffer } from '../helpers/takeOffer.js';

const reasonOf = (e: { event: { data?: { payload?: object } } }) =>
  (e.event.data?.payload as { reason?: string } | undefined)?.reason;

/** Makes a fake specialist that is admitted (heartbeats) but serves nothing: tasks for its tag go unclaimed. */
async function admitGhost(
  mesh: TestMesh,
  name: string,
  tags: string[],
): Promise<{ bus: EventBus; sender: EventSender; stop: () => void }> {
  const nc = await mesh.connect('specialist', name);
  // A ghost signs as an agent does: its events are then believed as its own.
  const bus = new SigningBus(nc, createEphemeralAgentKey());
  const agentId = `spiffe://local/worker/${name}`;
  const sender: EventSender = {
    identity: agentId,
    source: `http://127.0.0.1:1/${name}`,
    role: 'specialist',
    trustDomain: 'local',
  };
  const record: AgentRecord = {
    agent_id: agentId,
    endpoint: 'http://127.0.0.1:1',
    protocols_supported: ['A2A/1.0'],
    capability_tags: tags,
    trust_domain: 'local',
    visibility: 'local',
    heartbeat_seconds: 1,
    nkey: bus.key.publicKey,
  };
  const beat = () =>
    bus.publish(createEvent({ type: 'amf.discovery.agent.heartbeat', sender, payload: record }));
  beat();
  const timer = setInterval(beat, 500);
  await mesh.waitFor(() => mesh.coordinator.registry.isLive(agentId), 5000, `${name} admitted`);
  return { bus, sender, stop: () => clearInterval(timer) };
}

describe('task lifecycle', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh({
      config: { tasks: { ttlSeconds: 1, maxRetries: 1, retryDelaySeconds: 0, watchdogGraceFactor: 2 } },
    });
  });
  afterAll(() => mesh?.close());

  it('expires an unclaimed task after its TTL, retries it, and a worker that appears meanwhile completes it', async () => {
    const ghost = await admitGhost(mesh, 'ghost-late', ['late']);
    // The retry waits long enough for the new worker to join its queue group.
    const result = mesh.coordinator.dispatcher.submit({
      tag: 'late',
      task: 'retry me',
      timeoutMs: 15_000,
      maxRetries: 1,
      ttlSeconds: 1,
      retryDelaySeconds: 3,
    });
    const expiry = await mesh.waitForEvent(
      (e) => e.subject === 'amf.policy.warning' && reasonOf(e) === 'task_ttl_expired',
    );
    expect((expiry.event.data.payload as { retrying?: boolean }).retrying).toBe(true);
    const taskId = expiry.event.amftaskid!;
    await mesh.startWorker('late-worker', ['late'], echoHandler);
    const answer = await result;
    expect(answer.text).toBe('retry me');
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    // Each attempt is announced once on the core subject and offered on the work queue (more than
    // once when a worker pulled it before its admission and its claim was refused). The worker pulls
    // only once admitted; admitted before the retry is due, it may take the first attempt's offer.
    const announces = eventsFor(mesh, taskId, 'amf.task.announce').filter((a) =>
      a.subject.startsWith('amf.task.announce.'),
    );
    const attempts = announces.map((a) => (a.event.data.payload as { attempt: number }).attempt);
    expect(attempts).toEqual(attempts.length === 1 ? [1] : [1, 2]);
    const offered = eventsFor(mesh, taskId, 'amf.task.announce')
      .filter((a) => a.subject === 'amf.work.late')
      .map((a) => (a.event.data.payload as { attempt: number }).attempt);
    expect([...new Set(offered)]).toEqual(attempts);
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    ghost.stop();
  });

  it('expires a task for good when retries run out and tells the reply subject', async () => {
    const ghost = await admitGhost(mesh, 'ghost-never', ['never']);
    const err = await mesh.coordinator.dispatcher
      .submit({ tag: 'never', task: 'nobody takes this', timeoutMs: 10_000, maxRetries: 1, ttlSeconds: 1 })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'TASK_EXPIRED' });
    const taskId = (err as { details: { task_id: string } }).details.task_id;
    const expiries = () =>
      eventsFor(mesh, taskId).filter(
        (e) => e.subject === 'amf.policy.warning' && reasonOf(e) === 'task_ttl_expired',
      );
    await mesh.waitFor(() => expiries().length === 2, 5000, 'two expiry warnings');
    await mesh.waitForEvent(
      (e) => e.subject === `amf.internal.reply.${taskId}` && reasonOf(e) === 'task_ttl_expired',
    );
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('expired');
    ghost.stop();
  });

  it('fails at once when no live agent serves the tag', async () => {
    await expect(
      mesh.coordinator.dispatcher.submit({ tag: 'unserved', task: 'x', timeoutMs: 5000 }),
    ).rejects.toMatchObject({
      code: 'NO_AGENT_FOR_TAG',
    });
  });

  it('re-announces the task of a worker killed mid-task and another worker completes it', async () => {
    const handlerPath = fileURLToPath(new URL('../fixtures/stallOnceHandler.mjs', import.meta.url));
    const child = spawn(
      process.execPath,
      [
        fileURLToPath(new URL('../../bin/amf.js', import.meta.url)),
        'worker',
        '--name',
        'doomed',
        '--tags',
        'fragile',
        '--handler',
        handlerPath,
        '--nats-url',
        mesh.coordinator.natsUrl,
        '--data-dir',
        mesh.config.dataDir,
        '--port',
        '0',
        '--no-mdns',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, AMF_LOG_LEVEL: 'silent' } },
    );
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await mesh.waitFor(
        () => mesh.coordinator.registry.isLive('spiffe://local/worker/doomed'),
        15_000,
        'doomed worker admitted',
      );
      const result = mesh.coordinator.dispatcher.submit({
        tag: 'fragile',
        task: 'survive',
        timeoutMs: 100_000,
        // A loaded machine may take a while to claim (the worker process dials its own NATS user after
        // admission), and the rescuer a while to be admitted: attempts of 5 s each, enough of them to
        // outlast both (the watchdog that notices the killed worker runs ttl × grace = 10 s).
        maxRetries: 12,
        ttlSeconds: 5,
      });
      // Read below; until then a rejection must not count as unhandled.
      result.catch(() => undefined);
      const claim = await mesh.waitForEvent(
        (e) =>
          e.subject === 'amf.task.claim' &&
          (e.event.data.payload as { agent_id?: string }).agent_id === 'spiffe://local/worker/doomed',
        // Admitted is not yet pulling: the worker still dials its own NATS user (seconds under load).
        60_000,
        'the claim of the doomed worker',
      );
      const taskId = claim.event.amftaskid!;
      child.kill('SIGKILL');
      await exited;
      // A healthy worker for the same tag takes over once the coordinator notices the silence.
      await mesh.startWorker('rescuer', ['fragile'], echoHandler);
      const answer = await result;
      expect(answer.text).toBe('survive');
      expect(answer.agentId).toBe('spiffe://local/worker/rescuer');
      const lost = await mesh.waitForEvent(
        (e) =>
          e.event.amftaskid === taskId && ['worker_offline', 'worker_silent'].includes(reasonOf(e) ?? ''),
        5000,
        'lost-worker warning',
      );
      expect((lost.event.data.payload as { retrying?: boolean }).retrying).toBe(true);
      expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    } finally {
      child.kill('SIGKILL');
    }
  }, 150_000);

  it('drops an announcement whose reply subject is not amf.internal.reply.<task_id>', async () => {
    await mesh.startWorker('spoof-target', ['spoofable'], echoHandler);
    const nc = await mesh.connect('coordinator', 'rogue-announcer');
    const bus = new EventBus(nc);
    const taskId = randomUUID();
    const stolen = `amf.internal.reply.${randomUUID()}`;
    const seenOnStolen: string[] = [];
    nc.subscribe(stolen, {
      callback: (_e, m) => {
        seenOnStolen.push(m.subject);
      },
    });
    const announce = createEvent({
      type: 'amf.task.announce',
      sender: {
        identity: 'spiffe://local/rogue',
        source: 'urn:rogue',
        role: 'coordinator',
        trustDomain: 'local',
      },
      payload: { task_id: taskId, task: 'leak me', required_capability: 'spoofable', reply_subject: stolen },
      taskId,
    });
    bus.publish(announce, 'amf.task.announce.spoofable');
    const warning = await mesh.waitForEvent(
      (e) => e.subject === 'amf.policy.warning' && reasonOf(e) === 'reply_subject_invalid',
    );
    expect((warning.event.data.payload as { task_id?: string }).task_id).toBe(taskId);
    // The worker must not answer on the stolen subject; a sentinel on that connection proves delivery order.
    const sentinel = `amf.internal.reply.${randomUUID()}`;
    const sentinelSeen = new Promise<void>((resolve) =>
      nc.subscribe(sentinel, { callback: () => resolve() }),
    );
    await nc.flush();
    const workerNc = await mesh.connect('specialist', 'sentinel-sender');
    workerNc.publish(sentinel, '{}');
    await sentinelSeen;
    expect(seenOnStolen).toEqual([]);
    expect(mesh.coordinator.lifecycle.get(taskId)).toBeUndefined();
  });

  it('ignores results on the reply subject from agents that did not claim the task', async () => {
    const stall: WorkerHandler = {
      name: 'stall',
      description: 'never answers',
      handle: (ctx) =>
        new Promise((_r, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')))),
    };
    await mesh.startWorker('honest-staller', ['hijackable'], stall);
    const rogue = new EventBus(await mesh.connect('specialist', 'rogue-answerer'));
    const rogueSender: EventSender = {
      identity: 'spiffe://local/worker/rogue',
      source: 'urn:rogue',
      role: 'specialist',
      trustDomain: 'local',
    };
    const pending = mesh.coordinator.dispatcher
      .submit({ tag: 'hijackable', task: 'secret', timeoutMs: 1500 })
      .catch((e: unknown) => e);
    const claim = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.task.claim' &&
        (e.event.data.payload as { agent_id?: string }).agent_id === 'spiffe://local/worker/honest-staller',
    );
    const taskId = claim.event.amftaskid!;
    const reply = `amf.internal.reply.${taskId}`;
    rogue.publish(
      createEvent({
        type: 'amf.result.final',
        sender: rogueSender,
        payload: {
          task_id: taskId,
          agent_id: rogueSender.identity,
          status: 'completed',
          result: { text: 'forged' },
        },
        taskId,
      }),
      reply,
    );
    rogue.publish(
      createEvent({
        type: 'amf.policy.deny',
        sender: rogueSender,
        payload: {
          reason: 'forged',
          message: 'forged failure',
          task_id: taskId,
          terminal: true,
          state: 'failed',
        },
        taskId,
      }),
      reply,
    );
    const outcome = await pending;
    expect(outcome).toMatchObject({ code: 'TIMEOUT' });
  });

  it('refuses a delegation cycle and the tasks of the chain end failed', async () => {
    // Agent A delegates "a" work to "b"; agent B delegates it back to "a": A appears twice on the third hop.
    const bouncer = (target: string): WorkerHandler => ({
      name: `bounce-to-${target}`,
      description: 'delegates everything',
      handle: async (ctx) => `via ${target}: ${await ctx.delegate(target, ctx.text, { timeoutMs: 10_000 })}`,
    });
    await mesh.startWorker('agent-a', ['ping'], bouncer('pong'), { concurrency: 4 });
    await mesh.startWorker('agent-b', ['pong'], bouncer('ping'), { concurrency: 4 });
    const err = await mesh.coordinator.dispatcher
      .submit({ tag: 'ping', task: 'loop', timeoutMs: 15_000 })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'TASK_FAILED' });
    const cycle = await mesh.waitForEvent(
      (e) => e.subject === 'amf.policy.deny' && reasonOf(e) === 'delegation_cycle',
    );
    expect((cycle.event.data.payload as { message: string }).message).toContain(
      'spiffe://local/worker/agent-a',
    );
    const rootId = (err as { details: { task_id: string } }).details.task_id;
    expect(await settledTerminalEvents(mesh, rootId)).toHaveLength(1);
    // The child tasks carry the chain root-first.
    const childAnnounces = mesh.events.filter(
      (e) =>
        e.event.type === 'amf.task.announce' &&
        e.event.amftraceid === cycle.event.amftraceid &&
        e.event.amftaskid !== rootId,
    );
    const chains = childAnnounces.map(
      (a) => (a.event.data.payload as { delegation_chain?: string[] }).delegation_chain,
    );
    expect(chains).toContainEqual(['spiffe://local/worker/agent-a']);
    expect(chains).toContainEqual(['spiffe://local/worker/agent-a', 'spiffe://local/worker/agent-b']);
  });

  it('warns about duplicate claims, refuses claims from unadmitted agents and rejects invalid transitions', async () => {
    const ghostA = await admitGhost(mesh, 'claimer-a', ['contested']);
    const ghostB = await admitGhost(mesh, 'claimer-b', ['contested']);
    const stranger = await mesh.connect('specialist', 'stranger');
    const strangerBus = new EventBus(stranger);
    const pending = mesh.coordinator.dispatcher.submit({
      tag: 'contested',
      task: 'mine',
      timeoutMs: 10_000,
      maxRetries: 0,
      ttlSeconds: 5,
    });
    const announce = await mesh.waitForEvent((e) => e.subject === 'amf.task.announce.contested');
    const taskId = announce.event.amftaskid!;
    const claim = (bus: EventBus, sender: EventSender, offer?: string) =>
      bus.publish(
        createEvent({
          type: 'amf.task.claim',
          sender,
          payload: { task_id: taskId, agent_id: sender.identity, ...(offer ? { offer } : {}) },
          taskId,
        }),
      );
    // A result before any claim stands in for a claim: without the offer of the announcement it is
    // refused as one.
    ghostA.bus.publish(
      createEvent({
        type: 'amf.result.final',
        sender: ghostA.sender,
        payload: {
          task_id: taskId,
          agent_id: ghostA.sender.identity,
          status: 'completed',
          result: { text: 'too early' },
        },
        taskId,
      }),
    );
    await mesh.waitForEvent((e) => reasonOf(e) === 'claim_without_offer' && e.event.amftaskid === taskId);
    const strangerSender: EventSender = {
      identity: 'spiffe://local/worker/stranger',
      source: 'urn:x',
      role: 'specialist',
      trustDomain: 'local',
    };
    claim(strangerBus, strangerSender);
    await mesh.waitForEvent(
      (e) => reasonOf(e) === 'claim_from_unadmitted_agent' && e.event.amftaskid === taskId,
    );
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('announced');
    // An admitted agent of the tag that did not take the offer cannot claim the task either.
    claim(ghostB.bus, ghostB.sender);
    await mesh.waitForEvent(
      (e) =>
        reasonOf(e) === 'claim_without_offer' &&
        e.event.amftaskid === taskId &&
        (e.event.data.payload as { agent_id?: string }).agent_id === ghostB.sender.identity,
    );
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('announced');
    const taken = await takeOffer(ghostA.bus.nc, 'contested');
    expect(taken.taskId).toBe(taskId);
    claim(ghostA.bus, ghostA.sender, taken.offer);
    await mesh.waitFor(() => mesh.coordinator.lifecycle.get(taskId)?.state === 'claimed');
    claim(ghostB.bus, ghostB.sender);
    await mesh.waitForEvent((e) => reasonOf(e) === 'duplicate_claim' && e.event.amftaskid === taskId);
    expect(mesh.coordinator.lifecycle.get(taskId)?.claimedBy).toBe(ghostA.sender.identity);
    ghostA.bus.publish(
      createEvent({
        type: 'amf.result.final',
        sender: ghostA.sender,
        payload: {
          task_id: taskId,
          agent_id: ghostA.sender.identity,
          status: 'completed',
          result: { text: 'done by A' },
        },
        taskId,
      }),
      'amf.result.final',
      `amf.internal.reply.${taskId}`,
    );
    expect((await pending).text).toBe('done by A');
    // The early result is on the wire but was rejected; only A's result ended the task.
    const finals = (await settledTerminalEvents(mesh, taskId)).map(
      (e) => (e.event.data.payload as { result?: { text: string } }).result?.text,
    );
    expect(finals).toEqual(['too early', 'done by A']);
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('completed');
    taken.item.ack();
    ghostA.stop();
    ghostB.stop();
  });
});

describe('delegation depth (configured in the OPA data document)', () => {
  let mesh: TestMesh;
  let policyDir: string;
  beforeAll(async () => {
    // A copy of policies/ whose data document allows a chain of one delegation: the coordinator
    // compiles it with the opa binary at start (--policy DIR), the path a user takes to change it.
    policyDir = await mkdtemp(join(tmpdir(), 'amf-policy-'));
    const sources = fileURLToPath(new URL('../../policies/', import.meta.url));
    await cp(sources, policyDir, { recursive: true });
    const data = JSON.parse(await readFile(join(policyDir, 'data.json'), 'utf8')) as {
      policy: { max_delegation_depth: number };
    };
    data.policy.max_delegation_depth = 1;
    await writeFile(join(policyDir, 'data.json'), JSON.stringify(data));
    mesh = await startTestMesh({ config: { policy: { path: policyDir } } });
  });
  afterAll(async () => {
    await mesh?.close();
    await rm(policyDir, { recursive: true, force: true });
  });

  it('refuses a delegation beyond the depth limit', async () => {
    const delegateTo = (target: string): WorkerHandler => ({
      name: `to-${target}`,
      description: 'delegates',
      handle: async (ctx) => ctx.delegate(target, ctx.text, { timeoutMs: 10_000 }),
    });
    await mesh.startWorker('level-0', ['l0'], delegateTo('l1'));
    await mesh.startWorker('level-1', ['l1'], delegateTo('l2'));
    await mesh.startWorker('level-2', ['l2'], echoHandler);
    const err = await mesh.coordinator.dispatcher
      .submit({ tag: 'l0', task: 'deep', timeoutMs: 10_000 })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'TASK_FAILED' });
    const deny = await mesh.waitForEvent((e) => reasonOf(e) === 'delegation_depth_exceeded');
    expect((deny.event.data.payload as { message: string }).message).toMatch(/limit 1/);
  });
});
