// A worker the registry does not hold live (e.g. back from a NATS outage, not re-admitted yet) can
// still pull a task from the work queue. Its claim is refused and it acknowledges that message away;
// the task must then be offered again and answered by an admitted worker, not left to its TTL. The
// new offer names the refused agent (header Amf-Not-For), so that agent's worker passes it on rather
// than winning it again with its free slots and running the handler once more for nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { workConsumerName } from '../../src/events/subjects.js';
import { validateEvent } from '../../src/events/validateEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { WorkQueuePuller, type WorkItem } from '../../src/fabric/workQueue.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'refused-claim';

describe('a claim refused because its agent is not admitted', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
  });
  afterAll(() => mesh?.close());

  it('offers the task again, not to that agent, and an admitted worker answers it', async () => {
    // An admitted agent of the tag that never pulls: the tag is served, so the task is accepted.
    const ghostNc = await mesh.connect('specialist', 'ghost');
    const ghost = new EventBus(ghostNc);
    const ghostRecord: AgentRecord = {
      agent_id: 'spiffe://local/worker/ghost',
      endpoint: 'http://127.0.0.1:1',
      protocols_supported: ['A2A/1.0'],
      capability_tags: [TAG],
      trust_domain: 'local',
      visibility: 'local',
      heartbeat_seconds: 1,
    };
    const ghostSender: EventSender = {
      identity: ghostRecord.agent_id,
      source: 'http://127.0.0.1:1/ghost',
      role: 'specialist',
      trustDomain: 'local',
    };
    const beat = () =>
      ghost.publish(
        createEvent({ type: 'amf.discovery.agent.heartbeat', sender: ghostSender, payload: ghostRecord }),
      );
    beat();
    const beating = setInterval(beat, 500);
    try {
      await mesh.waitFor(
        () => mesh.coordinator.registry.isLive(ghostRecord.agent_id),
        5000,
        'ghost admitted',
      );

      // A stranger (never admitted) pulls the task, claims it and acknowledges the message.
      const strangerNc = await mesh.connect('specialist', 'stranger');
      const stranger = new EventBus(strangerNc);
      const strangerId = 'spiffe://local/worker/stranger';
      let puller: WorkQueuePuller | undefined;
      const pulled = new Promise<WorkItem>((resolve) => {
        puller = new WorkQueuePuller(strangerNc, workConsumerName(TAG), {
          onItem: resolve,
          onSettled: () => puller?.pull(1),
        });
        puller.pull(1);
      });
      const answer = mesh.coordinator.dispatcher.submit({
        tag: TAG,
        task: 'second chance',
        timeoutMs: 20_000,
        ttlSeconds: 15,
        maxRetries: 0,
      });
      const item = await pulled;
      puller?.close();
      const checked = validateEvent(item.body);
      expect(checked.ok).toBe(true);
      const taskId = checked.ok ? checked.value.amftaskid! : '';
      stranger.publish(
        createEvent({
          type: 'amf.task.claim',
          sender: { ...ghostSender, identity: strangerId, source: 'http://127.0.0.1:1/stranger' },
          payload: { task_id: taskId, agent_id: strangerId, required_capability: TAG },
          taskId,
        }),
      );
      await mesh.waitForEvent(
        (e) =>
          e.subject === 'amf.task.cancel' &&
          e.event.amftaskid === taskId &&
          (e.event.data.payload as { agent_id?: string }).agent_id === strangerId,
        10_000,
        'the refusal sent to the stranger',
      );
      item.ack();

      // The task is offered again, and the offer names the refused agent.
      let again: WorkQueuePuller | undefined;
      const reoffered = new Promise<WorkItem>((resolve) => {
        again = new WorkQueuePuller(strangerNc, workConsumerName(TAG), {
          onItem: resolve,
          onSettled: () => again?.pull(1),
        });
        again.pull(1);
      });
      const second = await reoffered;
      again?.close();
      const secondEvent = validateEvent(second.body);
      expect(secondEvent.ok && secondEvent.value.amftaskid).toBe(taskId);
      expect(second.notFor).toContain(strangerId);
      second.nak();

      // An admitted worker appears and takes the task from its new offer, well within the TTL.
      await mesh.startWorker('rescuer', [TAG], echoHandler);
      const result = await answer;
      expect(result.text).toBe('second chance');
      expect(result.agentId).toBe('spiffe://local/worker/rescuer');
      expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    } finally {
      clearInterval(beating);
    }
  });
});
