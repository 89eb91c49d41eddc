/**
 * A coordinator that follows another coordinator's task (as foreign) when that coordinator dies
 * together with the task's worker: the redelivered work item's result, on its last delivery, goes
 * to adoption (one ending through the shared KV state), and the follower's own copy of the task ends
 * with it although the final names another worker than the claimant it saw. Real nats-server, KV,
 * EventBus and TaskLifecycle.
 */
import { randomUUID } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adoptOrphanResult } from '../../src/coordinator/tasks/orphanResults.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import type { TaskLifecycle } from '../../src/coordinator/tasks/lifecycle.js';
import { createEvent, type AnyAmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { announceSubject } from '../../src/events/subjects.js';
import type { PolicyPayload } from '../../src/events/payloads.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { ensureFabricStores, kvKey } from '../../src/fabric/jetstream.js';
import type { AgentRegistry } from '../../src/registry/agentRegistry.js';
import { createEphemeralAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import { signEvent } from '../../src/identity/eventSignature.js';
import {
  openTaskSnapshot,
  realAuthenticity,
  registryWith,
  testLifecycle,
} from '../helpers/lifecycleFixture.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const HOLDER = 'spiffe://local/worker/holder';
const OTHER = 'spiffe://local/worker/other';
const keys: Record<string, AgentKey> = {
  [HOLDER]: createEphemeralAgentKey(),
  [OTHER]: createEphemeralAgentKey(),
};
const coordinatorOf = (name: string): EventSender => ({
  identity: `spiffe://local/coordinator/${name}`,
  source: `urn:test:${name}`,
  role: 'coordinator',
  trustDomain: 'local',
});
const dead = coordinatorOf('dead');
const follower = coordinatorOf('follower');
const adopter = coordinatorOf('adopter');

let nats: TestNats;
let tasks: KV;
let registry: AgentRegistry;
let lifecycle: TaskLifecycle;
let bus: EventBus;
const warnings: PolicyPayload[] = [];

beforeAll(async () => {
  nats = await startTestNats();
  const nc = await nats.connect('coordinator', 'follower');
  tasks = (await ensureFabricStores(nc)).tasks;
  bus = new EventBus(nc);
  registry = registryWith({ [HOLDER]: ['echo'], [OTHER]: ['echo'] }, keys);
  const notices = {
    warn: (p: PolicyPayload) => warnings.push(p),
    deny: (p: PolicyPayload) => warnings.push(p),
  };
  lifecycle = testLifecycle(bus, registry, follower, notices, {
    authenticate: realAuthenticity(registry, notices),
    sharedTaskState: async (taskId) => (await tasks.get(kvKey(taskId)))?.json<TaskSnapshot>(),
  });
  lifecycle.start();
  await bus.flush();
});

afterAll(async () => {
  lifecycle?.close();
  await nats?.close();
});

/** Publishes as the dead coordinator or a worker, and waits until the follower has seen it. */
async function send(event: AnyAmfEvent, subject?: string): Promise<void> {
  bus.publish(event, ...(subject ? [subject] : []));
  await bus.flush();
}

/** The dead coordinator announces a new `echo` task; the follower tracks it as foreign. */
async function announceForeign(): Promise<string> {
  const taskId = randomUUID();
  const announce = createEvent({
    type: 'amf.task.announce',
    sender: dead,
    payload: { task_id: taskId, required_capability: 'echo', task: 'hi', attempt: 1, max_retries: 0 },
    taskId,
    ttlSeconds: 30,
  }) as AnyAmfEvent;
  await send(announce, announceSubject('echo'));
  await expect.poll(() => lifecycle.get(taskId)?.state).toBe('announced');
  return taskId;
}

/** The holder claims it, as the follower sees. */
async function claimByHolder(taskId: string): Promise<void> {
  await send(
    signEvent(
      createEvent({
        type: 'amf.task.claim',
        sender: { ...dead, identity: HOLDER, role: 'specialist' },
        payload: { task_id: taskId, agent_id: HOLDER, required_capability: 'echo', attempt: 1 },
        taskId,
      }) as AnyAmfEvent,
      keys[HOLDER]!,
    ),
  );
  await expect.poll(() => lifecycle.get(taskId)?.claimedBy).toBe(HOLDER);
}

/** The dead coordinator's last written state of the task. */
async function sharedState(taskId: string, claimedBy?: string): Promise<void> {
  await tasks.put(kvKey(taskId), JSON.stringify(openTaskSnapshot(taskId, claimedBy)));
}

/** A completed final from `agentId`, signed with its key. */
function finalFrom(taskId: string, agentId: string, text: string) {
  return signEvent(
    createEvent({
      type: 'amf.result.final',
      sender: { ...dead, identity: agentId, role: 'specialist' },
      payload: { task_id: taskId, agent_id: agentId, status: 'completed', result: { text } },
      taskId,
    }),
    keys[agentId]!,
  );
}

const adoptionAs = (sender: EventSender) => ({
  tasks,
  bus,
  sender,
  log: () => undefined,
  agents: registry,
});

describe('another coordinator’s task, its coordinator and holder dead', () => {
  it('is handed to adoption on the last delivery, and the follower’s copy ends with the adopted result', async () => {
    const taskId = await announceForeign();
    await claimByHolder(taskId);
    await sharedState(taskId, HOLDER);
    const result = finalFrom(taskId, OTHER, 'redelivered');
    // Before its last delivery the result is left to the task's own coordinator; then to adoption.
    expect(lifecycle.acceptResult(result, { path: 'stored', lastDelivery: false })).toBe('not_owner');
    expect(lifecycle.acceptResult(result, { path: 'stored', lastDelivery: true })).toBe('unknown');

    registry.markOffline(HOLDER, 'test: killed with its coordinator');
    try {
      // A third coordinator adopts it (the follower would too; see the next test).
      expect(await adoptOrphanResult(result, adoptionAs(adopter))).toBe('adopted');
      // The canonical final names OTHER; the follower checks the shared state and ends its copy.
      await expect.poll(() => lifecycle.get(taskId)?.state, { timeout: 5_000 }).toBe('completed');
      expect(lifecycle.get(taskId)?.claimedBy).toBe(OTHER);
      expect(warnings.filter((w) => w.task_id === taskId && w.reason === 'invalid_transition')).toEqual([]);
    } finally {
      registry.restore({ ...registry.get(HOLDER)!, status: 'live', lastSeen: Date.now() + 1 });
    }
  });

  it('when the follower adopts it itself, its copy ends with the result it adopted', async () => {
    const taskId = await announceForeign();
    await sharedState(taskId);
    const result = finalFrom(taskId, OTHER, 'adopted here');
    expect(await adoptOrphanResult(result, adoptionAs(follower))).toBe('adopted');
    // Its own canonical final does not come back to it (finals in its own name are skipped).
    await bus.flush();
    expect(lifecycle.get(taskId)?.state).toBe('announced');
    lifecycle.endAdoptedCopy(result);
    expect(lifecycle.get(taskId)).toMatchObject({ state: 'completed', claimedBy: OTHER });
  });

  it('still ignores another worker’s final when the shared state does not name it', async () => {
    const taskId = await announceForeign();
    await claimByHolder(taskId);
    await send(finalFrom(taskId, OTHER, 'not mine') as AnyAmfEvent);
    await expect
      .poll(() => warnings.some((w) => w.task_id === taskId && w.reason === 'invalid_transition'))
      .toBe(true);
    expect(lifecycle.get(taskId)?.state).toBe('claimed');
  });
});
