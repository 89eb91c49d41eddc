/**
 * The shared task state names the worker holding a task. Adoption after a coordinator dies decides
 * by it whose stored result may end the task (coordinator/tasks/orphanResults.ts), so the claimed
 * state must reach KV with its claimant. Real nats-server, KV, EventBus and TaskLifecycle.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KV } from '@nats-io/kv';
import { SharedState, type TaskSnapshot } from '../../src/coordinator/sharedState.js';
import type { TaskLifecycle } from '../../src/coordinator/tasks/lifecycle.js';
import { createEvent, type AnyAmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { ensureFabricStores, kvKey } from '../../src/fabric/jetstream.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { signEvent } from '../../src/identity/eventSignature.js';
import { realAuthenticity, registryWith, testLifecycle } from '../helpers/lifecycleFixture.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const WORKER = 'spiffe://local/worker/holder';
const workerKey = createEphemeralAgentKey();
const coordinator: EventSender = {
  identity: 'spiffe://local/coordinator/test',
  source: 'urn:test:coordinator',
  role: 'coordinator',
  trustDomain: 'local',
};

let nats: TestNats;
let tasks: KV;
let shared: SharedState;
let lifecycle: TaskLifecycle;
let workerBus: EventBus;
let coordinatorBus: EventBus;
const seen: TaskSnapshot[] = [];

beforeAll(async () => {
  nats = await startTestNats();
  const nc = await nats.connect('coordinator', 'claim-state');
  const stores = await ensureFabricStores(nc);
  tasks = stores.tasks;
  coordinatorBus = new EventBus(nc);
  workerBus = new EventBus(await nats.connect('specialist'));
  const registry = registryWith({ [WORKER]: ['echo'] }, { [WORKER]: workerKey });
  const notices = { warn: () => undefined, deny: () => undefined };
  lifecycle = testLifecycle(coordinatorBus, registry, coordinator, notices, {
    authenticate: realAuthenticity(registry, notices),
  });
  shared = new SharedState(
    stores.agents,
    tasks,
    () => undefined,
    50,
    (subject, bytes) => nc.publish(subject, bytes),
  );
  shared.attachLifecycle(lifecycle);
  lifecycle.onChange((task) => seen.push({ state: task.state, claimed_by: task.claimedBy } as TaskSnapshot));
  lifecycle.start();
  await coordinatorBus.flush();
});

afterAll(async () => {
  // As the coordinator does: the lifecycle ends what is in flight, then the state store writes it.
  lifecycle?.close();
  await shared?.close();
  await nats?.close();
});

describe('the claimed state', () => {
  it('reaches the change listeners and KV with the worker that holds the task', async () => {
    const task = lifecycle.announce({ tag: 'echo', task: 'hold it' });
    const claim = signEvent(
      createEvent({
        type: 'amf.task.claim',
        sender: { ...coordinator, identity: WORKER, role: 'specialist' },
        payload: { task_id: task.taskId, agent_id: WORKER, required_capability: 'echo', attempt: 1 },
        taskId: task.taskId,
      }) as AnyAmfEvent,
      workerKey,
    );
    workerBus.publish(claim);
    await workerBus.flush();
    await expect.poll(() => lifecycle.get(task.taskId)?.state, { timeout: 5_000 }).toBe('claimed');
    // Every change listener sees the claimant together with the claimed state, never without it.
    expect(seen.filter((s) => s.state === 'claimed')).toEqual([{ state: 'claimed', claimed_by: WORKER }]);
    await expect
      .poll(async () => (await tasks.get(kvKey(task.taskId)))?.json<TaskSnapshot>(), { timeout: 5_000 })
      .toMatchObject({ task_id: task.taskId, state: 'claimed', claimed_by: WORKER });
  });
});
