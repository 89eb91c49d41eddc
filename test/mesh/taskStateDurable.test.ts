/**
 * A task's first and terminal states reach the shared KV bucket even when the bucket refused them
 * for a while (a replicated bucket electing its leader drops a plain write): both are acknowledged
 * and retried, and a late retry of the first state never overwrites the ending. The refusal is real
 * JetStream: the bucket's stream is set to take no more bytes (discard new) under a running mesh.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvKey } from '../../src/fabric/jetstream.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { refuseStreamWrites } from '../helpers/streamRefusal.js';

const TASKS_STREAM = 'KV_amf_tasks';

describe('the shared state of a task while its bucket refuses writes', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 30 } } });
    await mesh.startWorker('state-durable', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('gets its first and terminal states stored once the bucket takes writes again', async () => {
    const warm = await mesh.coordinator.dispatcher.submit({ tag: 'echo', task: 'warm', timeoutMs: 20_000 });
    expect(warm.text).toBe('warm');
    const restore = await refuseStreamWrites(mesh.coordinator.stores.jsm, TASKS_STREAM);
    try {
      let announced: (taskId: string) => void = () => undefined;
      const taskIdOf = new Promise<string>((resolve) => (announced = resolve));
      const answer = await mesh.coordinator.dispatcher.submit({
        tag: 'echo',
        task: 'state refused',
        timeoutMs: 20_000,
        onAnnounced: (id) => announced(id),
      });
      const taskId = await taskIdOf;
      expect(answer.text).toBe('state refused');
      const read = async (): Promise<TaskSnapshot | undefined> => {
        const entry = await mesh.coordinator.stores.tasks.get(kvKey(taskId));
        return entry && entry.length > 0 ? entry.json<TaskSnapshot>() : undefined;
      };
      // Long enough for every write of the task to have been tried (later states are coalesced
      // into writes every 100 ms): nothing of it is stored while the bucket refuses.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await read()).toBeUndefined();
      await restore();
      const ended = await mesh.waitFor(
        async () => {
          const snap = await read();
          return snap?.state === 'completed' ? snap : undefined;
        },
        20_000,
        'the ending is stored once the bucket takes it',
      );
      expect(ended.coordinator).toBe(mesh.coordinator.instanceId);
      // Both retries have run their course (back-off up to 5 s): the first state, retried late,
      // did not overwrite the ending.
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      expect((await read())?.state).toBe('completed');
    } finally {
      await restore();
    }
  });
});
