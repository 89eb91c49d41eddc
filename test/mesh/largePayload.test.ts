/**
 * Chat content that fits the HTTP body cap never becomes a NATS "max_payload exceeded" 500 or a
 * phantom task: the spawned nats-server is sized from the body caps (900 KB of content goes through
 * an echo worker end to end), and against an external NATS with a smaller max_payload a task that
 * would not fit is refused with 413 before anything is recorded.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinatorHttp, type CoordinatorHttp } from '../../src/apps/coordinatorApp.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { loadConfig } from '../../src/config/config.js';
import { largestTaskEventBytes } from '../../src/config/payloadLimits.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { loadOrCreateCredentials } from '../../src/fabric/credentials.js';
import { kvKey } from '../../src/fabric/jetstream.js';
import { startNatsServer, type NatsServerHandle } from '../../src/fabric/natsServer/supervisor.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

function chat(url: string, content: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content }] }),
  });
}

interface ChatReply {
  choices: { message: { content: string } }[];
}

describe('a spawned nats-server sized from the HTTP caps', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('echo-large', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('carries the largest announcement the HTTP caps admit', () => {
    expect(mesh.coordinator.bus.maxPayloadBytes).toBeGreaterThanOrEqual(largestTaskEventBytes(mesh.config));
  });

  it('answers 900 KB of chat content end to end through an echo worker', async () => {
    const content = 'abcdefghi\n'.repeat(90_000);
    const res = await chat(mesh.url, content);
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatReply;
    expect(body.choices[0]!.message.content).toBe(content);
    const taskId = res.headers.get('x-amf-task-id')!;
    const task = (await (await mesh.fetch(`/tasks/${taskId}`)).json()) as { state: string };
    expect(task.state).toBe('completed');
  });
});

describe('an external NATS with a smaller max_payload', () => {
  const MAX_PAYLOAD = 64 * 1024;
  let dataDir: string;
  let nats: NatsServerHandle;
  let coordinator: Coordinator;
  let http: CoordinatorHttp;
  let worker: RunningWorker;
  const warnings: string[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'amf-small-payload-'));
    // The coordinator reads the same credentials file the server's users were rendered from.
    const credentials = await loadOrCreateCredentials(dataDir, {});
    nats = await startNatsServer({
      dataDir: join(dataDir, 'external'),
      credentials,
      maxPayloadBytes: MAX_PAYLOAD,
    });
    const config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port: 0 },
        nats: { url: nats.url },
        mdns: { enabled: false },
        heartbeat: { intervalSeconds: 1 },
      },
    });
    coordinator = await Coordinator.start({
      config,
      log: (level, message) => {
        if (level === 'warn') warnings.push(message);
      },
    });
    http = await startCoordinatorHttp(coordinator);
    worker = await startWorker({
      name: 'echo-small',
      tags: ['echo'],
      handler: echoHandler,
      natsUrl: coordinator.natsUrl,
      credential: coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
    });
    const deadline = Date.now() + 10_000;
    while (!coordinator.registry.isLive(worker.worker.agentId)) {
      if (Date.now() > deadline) throw new Error('the echo worker was not admitted');
      await new Promise((r) => setTimeout(r, 20));
    }
  });
  afterAll(async () => {
    await worker?.close(1000);
    await http?.close();
    await coordinator?.close();
    await nats?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  /** No task is tracked (the shared task state is checked once a later task was written). */
  async function expectNoTasks(): Promise<void> {
    expect(coordinator.lifecycle.activeCount).toBe(0);
    const health = (await (await fetch(`${http.url}/health`)).json()) as { tasks: { active: number } };
    expect(health.tasks.active).toBe(0);
  }

  it('warns at start that the HTTP caps admit more than this NATS carries', () => {
    expect(warnings.some((w) => w.includes('max_payload'))).toBe(true);
  });

  it('refuses a 100 KB chat request with 413 naming both limits, and records no task', async () => {
    const res = await chat(http.url, 'x'.repeat(100_000));
    expect(res.status).toBe(413);
    const body = (await res.json()) as { error: { message: string; type: string } };
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toContain(`max_payload of ${MAX_PAYLOAD} bytes`);
    expect(body.error.message).toContain(
      `HTTP bodies may be up to ${coordinator.config.openai.maxBodyBytes} bytes`,
    );
    await expectNoTasks();
  });

  // Announcing through /publish takes the operator's API key (docs/security.md); an anonymous caller is
  // refused before any size question, and no task is recorded either way.
  it('refuses an anonymous announcement on POST /publish and records no task', async () => {
    const taskId = randomUUID();
    const res = await fetch(`${http.url}/publish`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id: randomUUID(),
        source: 'urn:amf:test:publisher',
        type: 'amf.task.announce',
        time: new Date().toISOString(),
        datacontenttype: 'application/json',
        amfagentrole: 'specialist',
        amfvisibility: 'local',
        amfconfidence: '0.9',
        amfttl: 60,
        amfschemaversion: '1.1.0',
        data: {
          payload: {
            task_id: taskId,
            task: 'y'.repeat(100_000),
            required_capability: 'echo',
            reply_subject: `amf.internal.reply.${taskId}`,
          },
          auth_context: { identity: 'spiffe://local/test/publisher', trust_domain: 'local' },
        },
      }),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN');
    expect(
      (
        await fetch(`${http.url}/tasks/${taskId}`, {
          headers: { authorization: `Bearer ${http.operatorKey}` },
        })
      ).status,
    ).toBe(404);
    await expectNoTasks();
  });

  it('still runs a task that fits, and the shared task state holds only that one', async () => {
    const res = await chat(http.url, 'small enough');
    expect(res.status).toBe(200);
    expect(((await res.json()) as ChatReply).choices[0]!.message.content).toBe('small enough');
    const key = kvKey(res.headers.get('x-amf-task-id')!);
    // Task state writes are coalesced in order: once this task's is stored, a refused one's would be too.
    const keys: string[] = [];
    const deadline = Date.now() + 10_000;
    while (!keys.includes(key)) {
      if (Date.now() > deadline) throw new Error('the task state was never written');
      await new Promise((r) => setTimeout(r, 20));
      keys.length = 0;
      for await (const k of await coordinator.stores.tasks.keys()) keys.push(k);
    }
    expect(keys).toEqual([key]);
  });
});
