// State lives in NATS: a second coordinator on the same fabric sees the agents the first admitted and
// the task state it wrote to KV; goodbyes take agents offline and their tags off /v1/models.
import { Kvm, type KV } from '@nats-io/kv';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import type { RegistryChange } from '../../src/registry/agentRegistry.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { AGENTS_BUCKET, kvKey, TASKS_BUCKET } from '../../src/fabric/jetstream.js';
import { startCoordinatorHttp, type CoordinatorHttp } from '../../src/apps/coordinatorApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

interface AgentView {
  agent_id: string;
  status: string;
  capability_tags: string[];
  display_name?: string;
}

/** The operator key of the mesh (both coordinators share the data dir, so they share the key). */
let operatorKey = '';

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${operatorKey}` } });
  expect(res.status, url).toBe(200);
  return (await res.json()) as T;
}

async function agentsAt(url: string): Promise<AgentView[]> {
  return (await getJson<{ agents: AgentView[] }>(`${url}/agents`)).agents;
}

async function modelIds(url: string): Promise<string[]> {
  return (await getJson<{ data: Array<{ id: string }> }>(`${url}/v1/models`)).data.map((m) => m.id);
}

async function chat(url: string, model: string, text: string): Promise<{ id: string; content: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: text }] }),
  });
  const body = (await res.json()) as { id: string; choices: Array<{ message: { content: string } }> };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return { id: body.id, content: body.choices[0]?.message.content ?? '' };
}

describe('two coordinators on one NATS share the mesh', () => {
  let mesh: TestMesh;
  let echo: RunningWorker;
  let second: Coordinator | undefined;
  let secondHttp: CoordinatorHttp | undefined;
  let tasks: KV;

  beforeAll(async () => {
    mesh = await startTestMesh();
    operatorKey = mesh.operatorKey;
    echo = await mesh.startWorker('echo-1', ['echo'], echoHandler);
    const nc = await mesh.connect('coordinator', 'test-kv-reader');
    const kvm = new Kvm(nc);
    tasks = await kvm.open(TASKS_BUCKET);
    // The first coordinator's registry write has landed before the second one starts, so the second
    // knows the agent from the shared store at start-up.
    const agents = await kvm.open(AGENTS_BUCKET);
    await mesh.waitFor(
      async () => (await agents.get(kvKey(echo.worker.agentId)))?.length,
      5000,
      'agent in KV',
    );
    // Same data dir: the second coordinator reads the credentials.json the first one generated.
    const config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir: mesh.config.dataDir,
        logLevel: 'silent',
        coordinator: { port: 0 },
        nats: { url: mesh.coordinator.natsUrl },
        heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
      },
    });
    second = await Coordinator.start({ config });
    secondHttp = await startCoordinatorHttp(second);
  });

  afterAll(async () => {
    // The second coordinator first: the mesh's close() stops the nats-server and removes the data dir.
    await secondHttp?.close();
    await second?.close();
    await mesh?.close();
  });

  it('the second coordinator did not start a nats-server of its own, and took the operator key of the data dir', () => {
    expect(secondHttp!.operatorKey).toBe(mesh.operatorKey);
    expect(second!.natsUrl).toBe(mesh.coordinator.natsUrl);
    expect(second!.instanceId).not.toBe(mesh.coordinator.instanceId);
  });

  it("lists the first coordinator's agent as live on its /agents and serves its tag", async () => {
    const agents = await agentsAt(secondHttp!.url);
    const agent = agents.find((a) => a.agent_id === echo.worker.agentId);
    expect(agent, JSON.stringify(agents)).toBeDefined();
    expect(agent!.status).toBe('live');
    expect(agent!.capability_tags).toEqual(['echo']);
    expect(await modelIds(secondHttp!.url)).toContain('amf/echo');
  });

  it('dispatches through the second coordinator to the shared worker', async () => {
    const answer = await chat(secondHttp!.url, 'amf/echo', 'via the second coordinator');
    expect(answer.content).toBe('via the second coordinator');
  });

  it('writes task state to the amf_tasks KV bucket, readable by anyone with the coordinator role', async () => {
    const { id, content } = await chat(mesh.url, 'amf/echo', 'state in kv');
    expect(content).toBe('state in kv');
    const taskId = id.replace(/^chatcmpl-/, '');
    const snap = await mesh.waitFor(
      async () => {
        const entry = await tasks.get(kvKey(taskId));
        if (!entry || entry.length === 0) return undefined;
        const s = entry.json<TaskSnapshot>();
        return s.state === 'completed' ? s : undefined;
      },
      5000,
      'a completed task snapshot in KV',
    );
    expect(snap).toMatchObject({
      task_id: taskId,
      tag: 'echo',
      state: 'completed',
      claimed_by: echo.worker.agentId,
    });
    expect(typeof snap.ended_at).toBe('string');
    // The second coordinator followed the same task on the fabric.
    await mesh.waitFor(
      () => second!.lifecycle.get(taskId)?.state === 'completed',
      5000,
      'second coordinator saw completion',
    );
    const viaSecond = await getJson<TaskSnapshot>(`${secondHttp!.url}/tasks/${taskId}`);
    expect(viaSecond.state).toBe('completed');
  });

  it('marks a closed worker offline (goodbye) on both coordinators and drops its tag from /v1/models', async () => {
    const leaver = await mesh.startWorker('leaver-1', ['leaving'], echoHandler);
    const agentId = leaver.worker.agentId;
    await mesh.waitFor(
      () => second!.registry.isLive(agentId),
      10_000,
      'second coordinator admits the leaver',
    );
    expect(await modelIds(mesh.url)).toContain('amf/leaving');
    expect(await modelIds(secondHttp!.url)).toContain('amf/leaving');
    const reasons: string[] = [];
    const stop = mesh.coordinator.registry.onChange((c: RegistryChange) => {
      if (c.kind === 'offline' && c.agent.record.agent_id === agentId) reasons.push(c.reason);
    });
    try {
      await leaver.close();
      for (const url of [mesh.url, secondHttp!.url]) {
        const gone = await mesh.waitFor(
          async () => (await agentsAt(url)).find((a) => a.agent_id === agentId && a.status === 'offline'),
          5000,
          `leaver offline at ${url}`,
        );
        expect(gone.capability_tags).toEqual(['leaving']);
        expect(await modelIds(url)).not.toContain('amf/leaving');
        expect(await modelIds(url)).toContain('amf/echo');
      }
      // It went offline because it said goodbye, not because its heartbeats stopped.
      expect(reasons).toEqual(['goodbye']);
      expect(
        mesh.events.some(
          (e) =>
            e.event.type === 'amf.discovery.agent.heartbeat' &&
            (e.event.data.payload as { agent_id?: string; status?: string }).agent_id === agentId &&
            (e.event.data.payload as { status?: string }).status === 'offline',
        ),
      ).toBe(true);
    } finally {
      stop();
    }
  });

  it('an offline agent forgotten on one coordinator is forgotten on the other too', async () => {
    const agentId = 'spiffe://local/worker/leaver-1';
    await mesh.waitFor(() => second!.registry.get(agentId)?.status === 'offline', 5000, 'leaver offline');
    const res = await mesh.fetch(`/agents/${encodeURIComponent(agentId)}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(mesh.coordinator.registry.get(agentId)).toBeUndefined();
    await mesh.waitFor(
      async () => !(await agentsAt(secondHttp!.url)).some((a) => a.agent_id === agentId),
      5000,
      'leaver forgotten by the second coordinator',
    );
    expect(second!.registry.get(agentId)).toBeUndefined();
    // A live agent is not dropped by a delete it would survive (its heartbeats bring it back).
    expect(second!.registry.isLive(echo.worker.agentId)).toBe(true);
  });
});
