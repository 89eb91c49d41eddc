// Graceful drain: a worker that is stopped while a task is in flight still delivers that task's answer,
// says goodbye, and claims nothing more — in-process (`close()`) and as a real process on SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegistryChange } from '../../src/registry/agentRegistry.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';

const AMF_BIN = fileURLToPath(new URL('../../bin/amf.js', import.meta.url));
const SLOW_HANDLER = fileURLToPath(new URL('../fixtures/slowHandler.mjs', import.meta.url));

interface ChatReply {
  status: number;
  body: {
    id?: string;
    choices?: Array<{ message: { content: string } }>;
    error?: { code: string; message: string };
  };
}

async function chat(url: string, model: string, text: string): Promise<ChatReply> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: text }] }),
  });
  return { status: res.status, body: (await res.json()) as ChatReply['body'] };
}

const heartbeatOf = (agentId: string, status: string) => (e: ObservedEvent) =>
  e.event.type === 'amf.discovery.agent.heartbeat' &&
  (e.event.data.payload as { agent_id?: string }).agent_id === agentId &&
  (e.event.data.payload as { status?: string }).status === status;

const claimBy = (agentId: string) => (e: ObservedEvent) =>
  e.subject === 'amf.task.claim' && (e.event.data.payload as { agent_id?: string }).agent_id === agentId;

/** A worker's final for `taskId` on its way to the coordinator: sent straight or stored, on its key's subject. */
const handedOver = (taskId: string) => (e: ObservedEvent) =>
  (e.subject.startsWith('amf.internal.final.') || e.subject.startsWith('amf.internal.result.')) &&
  e.subject.endsWith(`.${taskId}`);

/** Records why agents went offline. */
function offlineReasons(mesh: TestMesh, agentId: string): string[] {
  const reasons: string[] = [];
  mesh.coordinator.registry.onChange((c: RegistryChange) => {
    if (c.kind === 'offline' && c.agent.record.agent_id === agentId) reasons.push(c.reason);
  });
  return reasons;
}

describe('graceful drain', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    // A request that nobody claims ends in 504 after 5 s instead of hanging the test.
    mesh = await startTestMesh({ config: { openai: { requestTimeoutSeconds: 5 } } });
  });
  afterAll(() => mesh?.close());

  it('close() lets the in-flight task finish, says goodbye, and the tag then has no live agent', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const gated: WorkerHandler = {
      name: 'gated',
      description: 'answers when the test opens the gate',
      handle: async (ctx) => {
        await gate;
        return `released:${ctx.text}`;
      },
    };
    const running = await mesh.startWorker('gated-1', ['gated'], gated);
    const agentId = running.worker.agentId;
    const reasons = offlineReasons(mesh, agentId);

    const answer = chat(mesh.url, 'amf/gated', 'in flight');
    const claim = await mesh.waitForEvent(claimBy(agentId), 10_000, 'the claim');
    const taskId = claim.event.amftaskid!;
    expect(running.worker.inFlightCount).toBe(1);

    const closing = running.close();
    // The worker announces that it is draining while the task is still held at the gate.
    await mesh.waitForEvent(heartbeatOf(agentId, 'draining'), 10_000, 'the draining heartbeat');
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('claimed');
    release();
    await closing;

    const reply = await answer;
    expect(reply.status).toBe(200);
    expect(reply.body.choices?.[0]?.message.content).toBe('released:in flight');
    const draining = mesh.events.findIndex(heartbeatOf(agentId, 'draining'));
    // The worker hands its result to the coordinator (straight, or stored in the durable results
    // stream when no answer comes) before it says goodbye; the coordinator publishes the task's one
    // canonical final, naming the worker.
    const stored = mesh.events.findIndex(handedOver(taskId));
    const goodbye = mesh.events.findIndex(heartbeatOf(agentId, 'offline'));
    expect(draining).toBeGreaterThanOrEqual(0);
    expect(stored).toBeGreaterThan(draining);
    expect(goodbye).toBeGreaterThan(stored);
    await mesh.waitFor(
      () => mesh.events.some((e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId),
      5000,
      'the canonical final',
    );
    const finals = mesh.events.filter(
      (e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId,
    );
    expect(finals).toHaveLength(1);
    expect(finals[0]!.event.amfagentrole).toBe('coordinator');
    expect((finals[0]!.event.data.payload as { agent_id?: string }).agent_id).toBe(agentId);

    await mesh.waitFor(
      () => mesh.coordinator.registry.get(agentId)?.status === 'offline',
      5000,
      'agent offline',
    );
    expect(reasons).toEqual(['goodbye']);
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('completed');

    const after = await chat(mesh.url, 'amf/gated', 'nobody left');
    expect(after.status).toBe(404);
    expect(after.body.error?.code).toBe('model_not_found');
  });

  it('while the only worker of a tag drains, the tag is not offered and new requests get 404 at once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const gated: WorkerHandler = {
      name: 'gated',
      description: 'answers when the test opens the gate',
      handle: async (ctx) => {
        await gate;
        return `released:${ctx.text}`;
      },
    };
    const running = await mesh.startWorker('gated-2', ['gated-two'], gated);
    const agentId = running.worker.agentId;
    const answer = chat(mesh.url, 'amf/gated-two', 'held');
    await mesh.waitForEvent(claimBy(agentId), 10_000, 'the claim');
    const closing = running.close();
    try {
      await mesh.waitForEvent(heartbeatOf(agentId, 'draining'), 10_000, 'the draining heartbeat');
      // A draining worker has unsubscribed from its tags: nobody would claim a new task.
      const models = await mesh.waitFor(
        async () => {
          const ids = (
            (await (await fetch(`${mesh.url}/v1/models`)).json()) as { data: Array<{ id: string }> }
          ).data.map((m) => m.id);
          return ids.includes('amf/gated-two') ? undefined : ids;
        },
        3000,
        'amf/gated-two to leave /v1/models while its only worker drains',
      );
      expect(models).not.toContain('amf/gated-two');
      const during = await chat(mesh.url, 'amf/gated-two', 'too late');
      expect(during.status, JSON.stringify(during.body)).toBe(404);
      expect(during.body.error?.code).toBe('model_not_found');
    } finally {
      release();
      await closing;
    }
    const reply = await answer;
    expect(reply.body.choices?.[0]?.message.content).toBe('released:held');
  });

  it('a worker process drains on SIGTERM: the in-flight answer arrives and the process exits 0', async () => {
    const agentId = 'spiffe://local/worker/drainer';
    const reasons = offlineReasons(mesh, agentId);
    const env: NodeJS.ProcessEnv = { ...process.env, SLOW_HANDLER_MS: '1000', AMF_LOG_LEVEL: 'warn' };
    for (const key of Object.keys(env)) if (key.endsWith('_PASS') && key.startsWith('AMF_')) delete env[key];
    const child: ChildProcess = spawn(
      process.execPath,
      [
        AMF_BIN,
        'worker',
        '--name',
        'drainer',
        '--tags',
        'slowtag',
        '--handler',
        SLOW_HANDLER,
        '--nats-url',
        mesh.coordinator.natsUrl,
        '--port',
        '0',
        '--data-dir',
        mesh.config.dataDir,
        '--no-mdns',
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await mesh.waitFor(
        () => mesh.coordinator.registry.isLive(agentId),
        15_000,
        `drainer admitted (output: ${output})`,
      );
      const answer = chat(mesh.url, 'amf/slowtag', 'slow work');
      const claim = await mesh.waitForEvent(claimBy(agentId), 10_000, 'the claim by the drainer');
      const taskId = claim.event.amftaskid!;
      expect(child.kill('SIGTERM')).toBe(true);

      const reply = await answer;
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      expect(reply.body.choices?.[0]?.message.content).toBe('done:slow work');
      const code = await Promise.race([
        exited,
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`worker did not exit after SIGTERM; output: ${output}`)),
            15_000,
          ).unref(),
        ),
      ]);
      expect(code, output).toBe(0);
      // The drain really happened while the task was in flight: draining, then the answer, then goodbye.
      const draining = mesh.events.findIndex(heartbeatOf(agentId, 'draining'));
      const stored = mesh.events.findIndex(handedOver(taskId));
      const goodbye = mesh.events.findIndex(heartbeatOf(agentId, 'offline'));
      expect(draining).toBeGreaterThanOrEqual(0);
      expect(stored).toBeGreaterThan(draining);
      expect(goodbye).toBeGreaterThan(stored);
      await mesh.waitFor(
        () => mesh.coordinator.registry.get(agentId)?.status === 'offline',
        5000,
        'drainer offline',
      );
      expect(reasons).toEqual(['goodbye']);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
