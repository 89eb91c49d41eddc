// An agent the operator disabled that takes a work offer anyway (it ignores the order to stop pulling
// and the offer's Amf-Not-For naming it): its claim is refused (claim_from_disabled_agent, a cancel
// naming it), the task is offered again, still not for it, and an enabled worker answers it.
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { workConsumerName } from '../../src/events/subjects.js';
import { validateEvent } from '../../src/events/validateEvent.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { SigningBus } from '../helpers/signingBus.js';
import { WorkQueuePuller, type WorkItem } from '../../src/fabric/workQueue.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'disabled-claim';

/** The next work item of TAG pulled by `nc`'s own puller (Amf-Not-For is not honoured here). */
function pullOne(nc: NatsConnection): Promise<WorkItem> {
  let puller: WorkQueuePuller | undefined;
  return new Promise<WorkItem>((resolve) => {
    puller = new WorkQueuePuller(nc, workConsumerName(TAG), {
      onItem: (item) => {
        puller?.close();
        resolve(item);
      },
      onSettled: () => puller?.pull(1),
    });
    puller.pull(1);
  });
}

describe('a claim from a disabled agent', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
  });
  afterAll(() => mesh?.close());

  it('is refused, and the task goes to another worker', async () => {
    const nc = await mesh.connect('specialist', 'rogue');
    // It signs as an agent does: its events are believed as its own.
    const bus = new SigningBus(nc, createEphemeralAgentKey());
    const rogue: AgentRecord = {
      agent_id: 'spiffe://local/worker/rogue',
      endpoint: 'http://127.0.0.1:1',
      protocols_supported: ['A2A/1.0'],
      capability_tags: [TAG],
      trust_domain: 'local',
      visibility: 'local',
      heartbeat_seconds: 1,
      nkey: bus.key.publicKey,
    };
    const sender: EventSender = {
      identity: rogue.agent_id,
      source: 'http://127.0.0.1:1/rogue',
      role: 'specialist',
      trustDomain: 'local',
    };
    const beat = () =>
      bus.publish(createEvent({ type: 'amf.discovery.agent.heartbeat', sender, payload: rogue }));
    beat();
    const beating = setInterval(beat, 500);
    try {
      await mesh.waitFor(() => mesh.coordinator.registry.isLive(rogue.agent_id), 5000, 'rogue admitted');
      // The only agent of the tag disabled: nobody serves it, a new task is refused at intake.
      expect((await mesh.fetch('/agents/rogue/disable', { method: 'POST' })).status).toBe(200);
      const submit = () =>
        mesh.coordinator.dispatcher.submit({
          tag: TAG,
          task: 'not for the rogue',
          timeoutMs: 30_000,
          ttlSeconds: 20,
          maxRetries: 0,
        });
      await expect(submit()).rejects.toThrow(new RegExp(TAG));
      expect((await mesh.fetch('/agents/rogue/enable', { method: 'POST' })).status).toBe(200);

      // Enabled, it takes the offer; disabled before its claim arrives, the claim is refused.
      const pulled = pullOne(nc);
      const served = submit();
      const item = await pulled;
      const checked = validateEvent(item.body);
      const taskId = checked.ok ? checked.value.amftaskid! : '';
      expect(taskId).not.toBe('');
      expect((await mesh.fetch('/agents/rogue/disable', { method: 'POST' })).status).toBe(200);
      bus.publish(
        createEvent({
          type: 'amf.task.claim',
          sender,
          payload: { task_id: taskId, agent_id: rogue.agent_id, required_capability: TAG },
          taskId,
        }),
      );
      const refusal = await mesh.waitForEvent(
        (e) =>
          e.subject === 'amf.policy.warning' &&
          (e.event.data.payload as { reason?: string }).reason === 'claim_from_disabled_agent' &&
          e.event.amftaskid === taskId,
        10_000,
        'the claim_from_disabled_agent warning',
      );
      expect((refusal.event.data.payload as { agent_id?: string }).agent_id).toBe(rogue.agent_id);
      await mesh.waitForEvent(
        (e) =>
          e.subject === 'amf.task.cancel' &&
          e.event.amftaskid === taskId &&
          (e.event.data.payload as { agent_id?: string }).agent_id === rogue.agent_id,
        10_000,
        'the cancel sent to the rogue',
      );
      item.ack();
      // Offered again, naming the disabled agent as not for it.
      const again = await pullOne(nc);
      const againEvent = validateEvent(again.body);
      expect(againEvent.ok && againEvent.value.amftaskid).toBe(taskId);
      expect(again.notFor).toContain(rogue.agent_id);
      again.nak();
      // A worker that is not disabled takes it.
      await mesh.startWorker('fair', [TAG], echoHandler);
      const result = await served;
      expect(result.agentId).toBe('spiffe://local/worker/fair');
      expect(result.text).toBe('not for the rogue');
      expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    } finally {
      clearInterval(beating);
    }
  }, 60_000);
});
