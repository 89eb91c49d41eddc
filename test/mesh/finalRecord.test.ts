/**
 * A worker's final is acknowledged only once its task's ending is on record. The refusal is real
 * JetStream: AMF_EVENTS is set to take no more bytes (discard new) under a running mesh, as a stream
 * electing its leader after a node died would refuse. The requester is answered at once (core
 * NATS), but the worker hears nothing and keeps its result (it stores it after its wait), and the
 * task's terminal state is not written to KV: a coordinator that died now would leave the result to
 * be adopted, not acknowledged with no record of it. Once the stream takes messages again the task
 * has exactly one terminal event in AMF_EVENTS, although its final reached the coordinator twice
 * (direct, then stored), and KV says completed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { agentResultSubject } from '../../src/fabric/agentUsers.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { EVENTS_STREAM, kvKey, RESULTS_CONSUMER, RESULTS_STREAM } from '../../src/fabric/jetstream.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { refuseStreamWrites } from '../helpers/streamRefusal.js';

/** Every stored event of AMF_EVENTS on `subject` for `taskId`, read back from the stream one by one. */
async function storedEvents(mesh: TestMesh, subject: string, taskId: string): Promise<AmfEvent[]> {
  const jsm = mesh.coordinator.stores.jsm;
  const { state } = await jsm.streams.info(EVENTS_STREAM);
  const found: AmfEvent[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const msg = await jsm.streams.getMessage(EVENTS_STREAM, { seq }).catch(() => null);
    if (!msg || msg.subject !== subject) continue;
    const event = msg.json<AmfEvent>();
    if ((event.data.payload as { task_id?: string }).task_id === taskId) found.push(event);
  }
  return found;
}

async function readState(mesh: TestMesh, taskId: string): Promise<TaskSnapshot | undefined> {
  const entry = await mesh.coordinator.stores.tasks.get(kvKey(taskId));
  return entry && entry.length > 0 ? entry.json<TaskSnapshot>() : undefined;
}

describe('the record of a task ending', () => {
  let mesh: TestMesh;
  /** The worker whose stored result is read back (on its key's own subject). */
  let keeper: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 30 } } });
    keeper = await mesh.startWorker('record-first', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('comes before the worker is answered and before KV says the task ended', async () => {
    const warm = await mesh.coordinator.dispatcher.submit({ tag: 'echo', task: 'warm', timeoutMs: 20_000 });
    expect(warm.text).toBe('warm');

    const jsm = mesh.coordinator.stores.jsm;
    const restore = await refuseStreamWrites(jsm, EVENTS_STREAM);
    try {
      let announced: (taskId: string) => void = () => undefined;
      const taskIdOf = new Promise<string>((resolve) => (announced = resolve));
      const answer = await mesh.coordinator.dispatcher.submit({
        tag: 'echo',
        task: 'recorded late',
        timeoutMs: 20_000,
        onAnnounced: (id) => announced(id),
      });
      const taskId = await taskIdOf;
      // The requester has its answer while the record is still refused.
      expect(answer.text).toBe('recorded late');
      expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('completed');

      // The worker got no decision, so it stored its result itself (after its 3 s wait).
      const stored = await mesh.waitFor(
        () =>
          jsm.streams
            .getMessage(RESULTS_STREAM, {
              last_by_subj: agentResultSubject(keeper.worker.key.publicKey, taskId),
            })
            .then((m) => m?.json<AmfEvent>())
            .catch(() => undefined),
        15_000,
        'the worker stores its unanswered final',
      );
      expect((stored.data.payload as { status?: string }).status).toBe('completed');
      // KV has not been told the task ended: its ending is not on record yet.
      const open = await readState(mesh, taskId);
      expect(open?.state).toBe('claimed');

      await restore();
      const ended = await mesh.waitFor(
        async () => {
          const snap = await readState(mesh, taskId);
          return snap?.state === 'completed' ? snap : undefined;
        },
        20_000,
        'KV says completed once the ending is on record',
      );
      expect(ended.claimed_by).toContain('record-first');
      // One terminal event in the stream, though the final came in twice (direct and stored).
      const finals = await storedEvents(mesh, 'amf.result.final', taskId);
      expect(finals).toHaveLength(1);
      // The stored copy is acknowledged once the record exists: nothing is left pending.
      await mesh.waitFor(
        async () => {
          const info = await jsm.consumers.info(RESULTS_STREAM, RESULTS_CONSUMER);
          return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
        },
        40_000,
        'the stored result is acknowledged',
      );
    } finally {
      await restore();
    }
  });
});
