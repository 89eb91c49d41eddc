/**
 * A task failed by the sweeper (`coordinator_lost`) leaves the work queue. Tasks are announced while
 * no worker pulls (an admitted agent of the tag that never pulls), so their offers wait in AMF_WORK;
 * then the sweep of a coordinator that "stopped" (its presence names the mesh's coordinator) fails
 * them at their deadline. Their offers must be gone from the stream, and a worker that comes later
 * must not run them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { kvKey, WORK_STREAM } from '../../src/fabric/jetstream.js';
import { OrphanSweep } from '../../src/coordinator/orphanSweep.js';
import { PolicyNotices } from '../../src/registry/policyNotices.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const TAG = 'swept';

describe('the sweep of a stopped coordinator’s queued tasks', () => {
  let mesh: TestMesh;
  let stopGhost = () => undefined as void;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 60 } } });
    const nc = await mesh.connect('specialist', 'swept-ghost');
    const bus = new EventBus(nc);
    const record: AgentRecord = {
      agent_id: 'spiffe://local/worker/swept-ghost',
      endpoint: 'http://127.0.0.1:1',
      protocols_supported: ['A2A/1.0'],
      capability_tags: [TAG],
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

  it('withdraws their offers, so nobody runs them later', async () => {
    const { coordinator } = mesh;
    const taskIds: string[] = [];
    const waiting = Array.from({ length: 3 }, (_, i) =>
      coordinator.dispatcher
        .submit({
          tag: TAG,
          task: `queued ${i}`,
          timeoutMs: 60_000,
          onAnnounced: (id) => taskIds.push(id),
        })
        .catch(() => undefined),
    );
    void waiting;
    // KV names each task's offer (its stream sequence) once the stream took it.
    const seqs = await mesh.waitFor(
      async () => {
        const snaps = await Promise.all(
          taskIds.map(async (id) => (await coordinator.stores.tasks.get(kvKey(id)))?.json<TaskSnapshot>()),
        );
        const found = snaps.map((s) => s?.work_seq);
        return taskIds.length === 3 && found.every((s) => typeof s === 'number')
          ? (found as number[])
          : undefined;
      },
      10_000,
      'the offers named in KV',
    );
    for (const seq of seqs)
      expect((await coordinator.stores.jsm.streams.getMessage(WORK_STREAM, { seq }))?.seq).toBe(seq);

    // The sweep as the next sweeper runs it, told that this coordinator stopped; time is injected.
    let clock = 0;
    const sweep = new OrphanSweep({
      tasks: coordinator.stores.tasks,
      presence: { stopped: async () => [coordinator.instanceId], forget: async () => undefined },
      notices: new PolicyNotices(coordinator.bus, coordinator.sender),
      agents: coordinator.registry,
      isHolder: () => true,
      log: () => undefined,
      defaultTtlSeconds: 60,
      now: () => clock,
      withdrawWork: (seq) =>
        coordinator.stores.jsm.streams.deleteMessage(WORK_STREAM, seq, false).then(() => undefined),
    });
    await sweep.tick(); // reads the open tasks
    clock = 10 * 60_000; // past every deadline
    await sweep.tick();
    await sweep.close();
    for (const id of taskIds)
      expect((await coordinator.stores.tasks.get(kvKey(id)))?.json<TaskSnapshot>().outcome?.reason).toBe(
        'coordinator_lost',
      );
    for (const seq of seqs)
      expect(
        await coordinator.stores.jsm.streams.getMessage(WORK_STREAM, { seq }).catch(() => null),
      ).toBeNull();

    // A worker that comes now finds nothing of them to run.
    const ran: string[] = [];
    const counting: WorkerHandler = {
      name: 'counting',
      description: 'records what it runs',
      handle: async (ctx) => {
        ran.push(ctx.text);
        return { text: ctx.text };
      },
    };
    await mesh.startWorker('late', [TAG], counting);
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // time for a pull to bring anything
    expect(ran).toEqual([]);
  }, 60_000);
});
