/**
 * A graceful stop takes nothing new, kept-alive connections included. A client keeps one connection
 * open (fetch's keep-alive pool); while its first request is in flight the coordinator's edge begins
 * to stop; its next request on that connection must be refused (503 with `Connection: close`, or
 * the connection closed), never accepted as a task that the stop then cuts (`requester_cancelled`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'keepalive';

const slow: WorkerHandler = {
  name: 'slow',
  description: 'answers after 500 ms',
  handle: async (ctx) => {
    await new Promise((resolve) => setTimeout(resolve, 500));
    return { text: ctx.text };
  },
};

function chat(mesh: TestMesh, text: string): Promise<Response> {
  return fetch(new URL('/v1/chat/completions', mesh.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: `amf/${TAG}`, messages: [{ role: 'user', content: text }] }),
  });
}

describe('a graceful stop and kept-alive connections', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('slowpoke', [TAG], slow);
  });
  afterAll(() => mesh?.close());

  it('refuses what arrives once the stop has begun, and announces no task for it', async () => {
    expect((await chat(mesh, 'warm the connection')).status).toBe(200);
    const first = chat(mesh, 'in flight at the stop');
    await mesh.waitForEvent(
      (e) =>
        e.event.type === 'amf.task.announce' && JSON.stringify(e.event).includes('in flight at the stop'),
      5_000,
      'the first request announced',
    );
    // The edge begins to stop (as on SIGTERM) while the first request still runs.
    mesh.http.stopAccepting();
    await first.then((r) => r.text()).catch(() => undefined);
    const second = await chat(mesh, 'after the stop began').catch((err: unknown) => err);
    if (second instanceof Response) {
      expect(second.status).toBe(503);
      expect(second.headers.get('connection')).toBe('close');
      const body = (await second.json()) as { error: { message: string } };
      expect(body.error.message).toContain('shutting down');
    } else expect(second).toBeInstanceOf(Error); // the connection was closed instead
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(
      mesh.events.some(
        (e) =>
          e.event.type === 'amf.task.announce' && JSON.stringify(e.event).includes('after the stop began'),
      ),
    ).toBe(false);
  }, 30_000);
});
