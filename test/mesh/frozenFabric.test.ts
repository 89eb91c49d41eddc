/**
 * A frozen fabric is named. The mesh's nats-server is SIGSTOPped: it keeps its TCP connections open,
 * so the client notices nothing for minutes, while no heartbeat arrives and the worker soon looks
 * offline. `/health` must say the fabric does not answer (503), and a client must get 503 naming the
 * fabric, not 404 model_not_found. After SIGCONT the mesh answers again by itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'frozen';

async function health(mesh: TestMesh): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(new URL('/health', mesh.url));
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function chat(mesh: TestMesh, text: string): Promise<Response> {
  return fetch(new URL('/v1/chat/completions', mesh.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: `amf/${TAG}`, messages: [{ role: 'user', content: text }] }),
    signal: AbortSignal.timeout(30_000),
  });
}

describe('a frozen nats-server (SIGSTOP)', () => {
  let mesh: TestMesh;
  let pid = 0;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('thawed', [TAG], echoHandler);
    pid = mesh.coordinator.fabricHealth.server?.pid ?? 0;
  });
  afterAll(async () => {
    if (pid) process.kill(pid, 'SIGCONT');
    await mesh?.close();
  });

  it('is named by /health and in the refusal, and the mesh recovers after SIGCONT', async () => {
    expect(pid).toBeGreaterThan(0);
    expect((await chat(mesh, 'before')).status).toBe(200);
    process.kill(pid, 'SIGSTOP');
    try {
      const frozen = await mesh.waitFor(
        async () => {
          const h = await health(mesh);
          return h.status === 503 ? h : undefined;
        },
        10_000,
        '/health says degraded',
      );
      const nats = frozen.body.nats as Record<string, unknown>;
      expect(nats.responsive).toBe(false);
      expect(String(nats.problem)).toMatch(/not answered|frozen/);
      // No heartbeat gets through: the worker looks offline after three missed ones.
      await mesh.waitFor(() => !mesh.coordinator.registry.servesTag(TAG), 15_000, 'the worker looks offline');
      const refused = await chat(mesh, 'during');
      expect(refused.status).toBe(503);
      const body = (await refused.json()) as { error: { code: string; message: string } };
      expect(body.error.code).not.toBe('model_not_found');
      expect(body.error.message).toContain('NATS');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await mesh.waitFor(async () => (await health(mesh)).status === 200, 20_000, '/health ok again');
    const after = await mesh.waitFor(
      async () => {
        const res = await chat(mesh, 'after');
        return res.status === 200 ? res : undefined;
      },
      30_000,
      'a request answered after SIGCONT',
    );
    expect(after.status).toBe(200);
  }, 90_000);
});
