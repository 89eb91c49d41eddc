/**
 * A stuck handler is bounded. Worker A's handler ignores its abort signal and never settles on its
 * own; its handler timeout is 2 s. Past it, A's attempt ends (`handler_timeout`), the task goes to
 * worker B (never back to A) and is answered there, with one terminal event. B is admitted first and
 * kept busy meanwhile, so the order does not depend on how fast the machine is. A's only slot stays
 * taken by the stuck handler, so A claims nothing and says so in its heartbeat (`draining`), until
 * the handler ends and A is `active` again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'stuck';

describe('a handler that ignores its abort signal', () => {
  let mesh: TestMesh;
  let unstick: () => void = () => undefined;
  let runs = 0;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 30 } } });
  });
  afterAll(async () => {
    unstick();
    await mesh?.close();
  });

  it('loses its attempt at the timeout; the task is answered by another worker', async () => {
    const stuck = new Promise<void>((resolve) => (unstick = resolve));
    const stubborn: WorkerHandler = {
      name: 'stubborn',
      description: 'hangs, whatever its signal says',
      handle: async () => {
        runs++;
        await stuck;
        return { text: 'too late' };
      },
    };
    // B is admitted first and kept busy with a held task (one slot), so the task goes to A, and B
    // is live for the retry however slowly the machine runs: no race between B's admission and A's
    // handler timeout.
    let release: () => void = () => undefined;
    const gate = { wait: new Promise<void>((resolve) => (release = resolve)) };
    let bRuns = 0;
    const b = await mesh.startWorker(
      'stuck-b',
      [TAG],
      {
        name: 'echo-after-hold',
        description: 'holds its first task until released, then echoes',
        handle: async (ctx) => {
          if (++bRuns === 1) await gate.wait;
          return { text: ctx.text };
        },
      },
      { concurrency: 1 },
    );
    const holding = mesh.coordinator.dispatcher.submit({ tag: TAG, task: 'hold B', timeoutMs: 25_000 });
    await mesh.waitFor(() => bRuns === 1, 10_000, 'worker B holds the first task');
    const a = await mesh.startWorker('stuck-a', [TAG], stubborn, {
      concurrency: 1,
      handlerTimeouts: { defaultSeconds: 2 },
    });
    let taskId = '';
    const answer = mesh.coordinator.dispatcher.submit({
      tag: TAG,
      task: 'finish me',
      timeoutMs: 25_000,
      onAnnounced: (id) => (taskId = id),
    });
    await mesh.waitFor(() => runs === 1, 10_000, 'worker A runs the handler');
    release();
    expect((await holding).text).toBe('hold B');
    const result = await answer;
    expect(result.text).toBe('finish me');
    expect(result.agentId).toBe(b.worker.agentId);
    expect(runs).toBe(1); // never offered to A again
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    // A's one slot is held by the stuck handler: it claims nothing and says so.
    expect(a.worker.stuckCount).toBe(1);
    await mesh.waitFor(
      () => mesh.coordinator.registry.get(a.worker.agentId)?.record.status === 'draining',
      5_000,
      'worker A heartbeats draining',
    );
    expect(mesh.coordinator.registry.servesTag(TAG)).toBe(true); // B does

    unstick();
    await mesh.waitFor(() => a.worker.stuckCount === 0, 5_000, 'the stuck slot comes back');
    await mesh.waitFor(
      () => mesh.coordinator.registry.get(a.worker.agentId)?.record.status === 'active',
      5_000,
      'worker A heartbeats active again',
    );
  }, 60_000);
});
