// The operator disables an agent (POST /agents/<id>/disable, behind the operator key): it stays
// admitted and connected but gets no new work, while the other worker of its tag takes every task;
// its tools leave the MCP federation; `/agents` shows it `disabled` and a policy warning says who did
// it. Enabled again, both workers take work. The record lives in the shared `amf_disabled_agents`
// bucket: a registry that starts on the same bucket (a restarted or second coordinator) holds it,
// and follows an enable made elsewhere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DisablementStore } from '../../src/coordinator/disablementStore.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import type { TaskContext, WorkerHandler } from '../../src/worker/handlerApi.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'switchable';
const A = 'spiffe://local/worker/switch-a';
const B = 'spiffe://local/worker/switch-b';

/** Two calls running at once: each waits for the other, so both workers must hold a task together. */
class Rendezvous {
  private waiting: Array<() => void> = [];
  arrive(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      if (this.waiting.length >= 2) {
        for (const go of this.waiting) go();
        this.waiting = [];
      }
    });
  }
}

describe('disabling an agent', () => {
  let mesh: TestMesh;
  const calls = new Map<string, number>();
  let rendezvous: Rendezvous | undefined;
  const handler = (name: string): WorkerHandler => ({
    name: 'who',
    description: 'answers with the name of its worker',
    handle: async (_ctx: TaskContext) => {
      calls.set(name, (calls.get(name) ?? 0) + 1);
      await rendezvous?.arrive();
      return name;
    },
  });

  const aLog: string[] = [];
  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('switch-a', [TAG], handler('switch-a'), {
      concurrency: 1,
      log: (_level, message) => aLog.push(message),
    });
    await mesh.startWorker('switch-b', [TAG], handler('switch-b'), { concurrency: 1 });
  }, 60_000);
  afterAll(() => mesh?.close());

  const submit = (text: string) =>
    mesh.coordinator.dispatcher.submit({ tag: TAG, task: text, timeoutMs: 30_000, ttlSeconds: 20 });

  it('needs the operator key', async () => {
    const refused: Array<Record<string, string>> = [{}, { authorization: 'Bearer not-the-key' }];
    for (const headers of refused) {
      const res = await fetch(`${mesh.url}/agents/switch-a/disable`, { method: 'POST', headers });
      expect(res.status).toBe(401);
    }
    expect(mesh.coordinator.registry.isDisabled(A)).toBe(false);
  });

  it('sends every task to the other worker, drops its tools, shows it disabled and records who', async () => {
    const tools = async () =>
      ((await (await mesh.fetch('/tools')).json()) as { tools: Array<{ agent_id: string }> }).tools.map(
        (t) => t.agent_id,
      );
    await mesh.waitFor(
      async () => (await tools()).includes(A) && (await tools()).includes(B),
      15_000,
      'tools',
    );

    const res = await mesh.fetch('/agents/switch-a/disable', { method: 'POST' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { agent_id: string; status: string; changed: boolean };
    expect(body).toMatchObject({ agent_id: A, status: 'disabled', changed: true });

    const agents = (await (await mesh.fetch('/agents')).json()) as {
      agents: Array<{ agent_id: string; status: string; liveness?: string; disabled?: { by: string } }>;
    };
    const a = agents.agents.find((x) => x.agent_id === A);
    expect(a).toMatchObject({ status: 'disabled', liveness: 'live', disabled: { by: 'operator' } });
    expect(agents.agents.find((x) => x.agent_id === B)?.status).toBe('live');
    const notice = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        (e.event.data.payload as { reason?: string; agent_id?: string }).reason === 'agent_disabled' &&
        (e.event.data.payload as { agent_id?: string }).agent_id === A,
      10_000,
      'the agent_disabled notice',
    );
    expect((notice.event.data.payload as { details?: { by?: string } }).details?.by).toBe('operator');
    expect(await tools()).not.toContain(A);
    expect(await tools()).toContain(B);

    // The worker was told (a signed order) and stops asking for work.
    await mesh.waitFor(() => aLog.some((m) => m.startsWith('disabled by the operator')), 10_000, 'A told');
    calls.clear();
    const answers = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => submit(`task ${n}`)));
    expect(answers.map((r) => r.agentId)).toEqual(Array(6).fill(B));
    expect(calls.get('switch-a') ?? 0).toBe(0);
    // Still admitted and connected: only new work is withheld.
    expect(mesh.coordinator.registry.isLive(A)).toBe(true);
  }, 90_000);

  it('is held in the shared bucket: a registry started on it (restart, second coordinator) agrees', async () => {
    const other = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
    const store = new DisablementStore(mesh.coordinator.stores.disabledAgents, other, () => undefined);
    await store.start();
    try {
      expect(other.disablement(A)).toMatchObject({ agent_id: A, by: 'operator' });
      expect(other.isDisabled(B)).toBe(false);
      const res = await mesh.fetch(`/agents/${encodeURIComponent(A)}/enable`, { method: 'POST' });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { changed: boolean }).changed).toBe(true);
      // The enable made through the coordinator reaches the other registry through the bucket.
      await mesh.waitFor(() => !other.isDisabled(A), 10_000, 'the enable seen by the other registry');
    } finally {
      store.close();
    }
  });

  it('once enabled, both workers take work again', async () => {
    expect(mesh.coordinator.registry.isDisabled(A)).toBe(false);
    await mesh.waitFor(() => aLog.some((m) => m.startsWith('enabled by the operator')), 10_000, 'A told');
    await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        (e.event.data.payload as { reason?: string }).reason === 'agent_enabled',
      10_000,
      'the agent_enabled notice',
    );
    calls.clear();
    // Each call waits for a second one to run at the same time: with one slot per worker, two tasks
    // can only end if both workers hold one.
    rendezvous = new Rendezvous();
    const answers = await Promise.all([submit('left'), submit('right')]);
    rendezvous = undefined;
    expect(answers.map((r) => r.agentId).sort()).toEqual([A, B]);
  }, 60_000);

  it('refuses unknown agents and pending-only semantics with clear errors', async () => {
    const res = await mesh.fetch('/agents/nobody-here/disable', { method: 'POST' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/nobody-here/);
  });
});
