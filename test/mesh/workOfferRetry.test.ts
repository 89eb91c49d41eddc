/**
 * An offer the work queue did not take is tried again while its task waits. The refusal is real
 * JetStream: the AMF_WORK stream is set to take no more bytes (discard new) under a running mesh, as
 * a store that cannot take the offer would (full, or a replicated stream electing its leader); a
 * task is accepted, then the stream's limit is put back. The task is offered then, taken by the
 * worker and answered, instead of expiring unoffered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORK_STREAM } from '../../src/fabric/jetstream.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';
import { refuseStreamWrites } from '../helpers/streamRefusal.js';

const payloadOf = (e: ObservedEvent) => e.event.data.payload as Record<string, unknown>;

describe('a task whose first offer fails', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 30 } } });
    await mesh.startWorker('offer-retry', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('is offered again once the work queue is back, and answered', async () => {
    // Warm: the tag's consumer exists and the worker is pulling.
    const warm = await mesh.coordinator.dispatcher.submit({ tag: 'echo', task: 'warm', timeoutMs: 20_000 });
    expect(warm.text).toBe('warm');

    const restore = await refuseStreamWrites(mesh.coordinator.stores.jsm, WORK_STREAM);
    let announced: (taskId: string) => void = () => undefined;
    const taskId = new Promise<string>((resolve) => (announced = resolve));
    const answer = mesh.coordinator.dispatcher.submit({
      tag: 'echo',
      task: 'offered late',
      timeoutMs: 25_000,
      onAnnounced: (id) => announced(id),
    });
    const id = await taskId;
    await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === 'work_queue_unavailable' &&
        payloadOf(e).task_id === id,
      10_000,
      'the failed offer is warned',
    );
    // Still waiting, unoffered, while the stream refuses it.
    expect(mesh.coordinator.lifecycle.get(id)?.state).toBe('announced');

    await restore();
    expect((await answer).text).toBe('offered late');
    expect(mesh.coordinator.lifecycle.get(id)?.state).toBe('completed');
    // One warning for the announcement, not one per retry.
    const warnings = mesh.events.filter(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === 'work_queue_unavailable' &&
        payloadOf(e).task_id === id,
    );
    expect(warnings).toHaveLength(1);
  }, 60_000);
});
