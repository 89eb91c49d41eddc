/**
 * Acknowledged means stored, however long the store refuses. AMF_EVENTS is set to take no more
 * bytes (discard new: what a full disk or a stream without its leader does to a publish) for longer
 * than the two minutes after which the coordinator used to give a task's ending up, silently. Two
 * endings are decided meanwhile: a worker's answer (its requester is answered at once over core
 * NATS) and a TTL expiry. Neither may be lost: once the stream takes messages again, both are in
 * AMF_EVENTS exactly once, KV says how each task ended, and the worker's own stored copy of its
 * result is acknowledged only then.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { createEvent, type AmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { agentResultSubject } from '../../src/fabric/agentUsers.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { EVENTS_STREAM, kvKey, RESULTS_CONSUMER, RESULTS_STREAM } from '../../src/fabric/jetstream.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { AmfError } from '../../src/errors.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { refuseStreamWrites } from '../helpers/streamRefusal.js';

/** Longer than the give-up the coordinator had (120 s) for a task's ending. */
const OUTAGE_MS = 125_000;

/** The terminal events of `taskId` stored in AMF_EVENTS, read back one by one. */
async function storedEndings(mesh: TestMesh, taskId: string): Promise<AmfEvent[]> {
  const jsm = mesh.coordinator.stores.jsm;
  const { state } = await jsm.streams.info(EVENTS_STREAM);
  const found: AmfEvent[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const msg = await jsm.streams.getMessage(EVENTS_STREAM, { seq }).catch(() => null);
    if (!msg) continue;
    const event = msg.json<AmfEvent>();
    const p = event.data.payload as { task_id?: string; terminal?: boolean };
    if (p.task_id === taskId && (event.type === 'amf.result.final' || p.terminal === true)) found.push(event);
  }
  return found;
}

async function readState(mesh: TestMesh, taskId: string): Promise<TaskSnapshot | undefined> {
  const entry = await mesh.coordinator.stores.tasks.get(kvKey(taskId));
  return entry && entry.length > 0 ? entry.json<TaskSnapshot>() : undefined;
}

describe('a task ending decided while the store refuses it for minutes', () => {
  let mesh: TestMesh;
  /** The worker whose stored result is read back (on its key's own subject). */
  let keeper: RunningWorker;
  let stopGhost = () => undefined as void;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 30 } } });
    keeper = await mesh.startWorker('keeps-it', ['echo'], echoHandler);
    // An admitted agent of tag `idle` that never pulls: its tasks expire.
    const nc = await mesh.connect('specialist', 'idle-ghost');
    const bus = new EventBus(nc);
    const record: AgentRecord = {
      agent_id: 'spiffe://local/worker/idle-ghost',
      endpoint: 'http://127.0.0.1:1',
      protocols_supported: ['A2A/1.0'],
      capability_tags: ['idle'],
      trust_domain: 'local',
      visibility: 'local',
      heartbeat_seconds: 1,
    };
    const sender: EventSender = {
      identity: record.agent_id,
      source: 'http://127.0.0.1:1/ghost',
      role: 'specialist',
      trustDomain: 'local',
    };
    const beat = () =>
      bus.publish(createEvent({ type: 'amf.discovery.agent.heartbeat', sender, payload: record }));
    beat();
    const timer = setInterval(beat, 500);
    stopGhost = () => clearInterval(timer);
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(record.agent_id), 5000, 'ghost admitted');
  });
  afterAll(async () => {
    stopGhost();
    await mesh?.close();
  });

  it('is stored once the store takes it again, and nothing is acknowledged before', async () => {
    const warm = await mesh.coordinator.dispatcher.submit({ tag: 'echo', task: 'warm', timeoutMs: 20_000 });
    expect(warm.text).toBe('warm');
    const jsm = mesh.coordinator.stores.jsm;
    const restore = await refuseStreamWrites(jsm, EVENTS_STREAM);
    try {
      let answeredId = '';
      const answer = await mesh.coordinator.dispatcher.submit({
        tag: 'echo',
        task: 'kept through the outage',
        timeoutMs: 20_000,
        onAnnounced: (id) => (answeredId = id),
      });
      expect(answer.text).toBe('kept through the outage');
      let expiredId = '';
      const expired = await mesh.coordinator.dispatcher
        .submit({
          tag: 'idle',
          task: 'nobody takes this',
          timeoutMs: 20_000,
          ttlSeconds: 1,
          maxRetries: 0,
          onAnnounced: (id) => (expiredId = id),
        })
        .catch((err: unknown) => err);
      expect(expired).toBeInstanceOf(AmfError);
      expect((expired as AmfError).code).toBe('TASK_EXPIRED');

      // The worker got no `accepted` (nothing was stored): it stored its result itself.
      await mesh.waitFor(
        () =>
          jsm.streams
            .getMessage(RESULTS_STREAM, {
              last_by_subj: agentResultSubject(keeper.worker.key.publicKey, answeredId),
            })
            .catch(() => undefined),
        15_000,
        'the worker stores its unanswered result',
      );
      // The outage outlasts the old give-up: waiting is the point of this test.
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      expect(await storedEndings(mesh, answeredId)).toHaveLength(0);
      // KV does not say ended while the ending is not on record (an adopter could count on it).
      expect((await readState(mesh, answeredId))?.state).toBe('claimed');
      // The worker's stored copy is not acknowledged while its task's ending is not on record.
      const pending = await jsm.consumers.info(RESULTS_STREAM, RESULTS_CONSUMER);
      expect(pending.num_ack_pending + pending.num_pending).toBeGreaterThan(0);

      await restore();
      for (const [taskId, state] of [
        [answeredId, 'completed'],
        [expiredId, 'expired'],
      ] as const) {
        const ended = await mesh.waitFor(
          async () => ((await readState(mesh, taskId))?.state === state ? true : undefined),
          30_000,
          `KV says ${state} for ${taskId}`,
        );
        expect(ended).toBe(true);
        expect(await storedEndings(mesh, taskId)).toHaveLength(1);
      }
      await mesh.waitFor(
        async () => {
          const info = await jsm.consumers.info(RESULTS_STREAM, RESULTS_CONSUMER);
          return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
        },
        40_000,
        'the stored result acknowledged once its ending is on record',
      );
    } finally {
      await restore();
    }
  }, 240_000);
});
