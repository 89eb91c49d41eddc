/**
 * Workers' output about tasks the coordinator does not follow (a worker's direct tasks) is dropped
 * before validation and the signature check; output about the coordinator's own tasks is still
 * checked, and a forgery about them still refused. Real nats-server and EventBus: the drop happens
 * in the bus subscription, which an in-memory fabric would not exercise.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskLifecycle, TaskNotices } from '../../src/coordinator/tasks/lifecycle.js';
import { isOutputOfUntrackedTask, outputTaskId } from '../../src/coordinator/tasks/untrackedOutput.js';
import { createEvent, type AnyAmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { PolicyPayload } from '../../src/events/payloads.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { registryWith, testLifecycle } from '../helpers/lifecycleFixture.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const WORKER = 'spiffe://local/worker/echo';
const coordinator: EventSender = {
  identity: 'spiffe://local/coordinator/test',
  source: 'urn:test:coordinator',
  role: 'coordinator',
  trustDomain: 'local',
};
const worker: EventSender = {
  identity: WORKER,
  source: 'urn:test:worker',
  role: 'specialist',
  trustDomain: 'local',
};

function claimOf(taskId: string, agentId = WORKER): AnyAmfEvent {
  return createEvent({
    type: 'amf.task.claim',
    sender: { ...worker, identity: agentId },
    payload: { task_id: taskId, agent_id: agentId, required_capability: 'echo', attempt: 1 },
    taskId,
  }) as AnyAmfEvent;
}

function finalOf(taskId: string): AnyAmfEvent {
  return createEvent({
    type: 'amf.result.final',
    sender: worker,
    payload: { task_id: taskId, agent_id: WORKER, status: 'completed', result: { text: 'hi' } },
    taskId,
  }) as AnyAmfEvent;
}

describe('outputTaskId / isOutputOfUntrackedTask', () => {
  it('reads the task of claims, finals and delegations, and nothing of other events or junk', () => {
    expect(outputTaskId(claimOf('t-1'))).toBe('t-1');
    expect(outputTaskId(finalOf('t-2'))).toBe('t-2');
    expect(
      outputTaskId({ type: 'amf.task.delegate', data: { payload: { parent_task_id: 'p', task_id: 'c' } } }),
    ).toBe('p');
    expect(outputTaskId({ type: 'amf.task.announce', data: { payload: { task_id: 't' } } })).toBeUndefined();
    expect(outputTaskId({ type: 'amf.task.claim', data: { payload: { task_id: 7 } } })).toBeUndefined();
    expect(outputTaskId({ type: 'amf.task.claim', data: null })).toBeUndefined();
    expect(outputTaskId('amf.task.claim')).toBeUndefined();
    expect(outputTaskId(null)).toBeUndefined();
    expect(isOutputOfUntrackedTask(claimOf('t-1'), () => false)).toBe(true);
    expect(isOutputOfUntrackedTask(claimOf('t-1'), (id) => id === 't-1')).toBe(false);
    // Malformed output goes on to validation, which reports it.
    expect(isOutputOfUntrackedTask({ type: 'amf.task.claim' }, () => false)).toBe(false);
  });
});

describe('the lifecycle skips output about tasks it does not follow (real NATS)', () => {
  let nats: TestNats;
  let coordinatorBus: EventBus;
  let workerBus: EventBus;
  let lifecycle: TaskLifecycle;
  const checked: { type: string; taskId: unknown }[] = [];
  const warnings: PolicyPayload[] = [];
  let refuse = false;

  beforeAll(async () => {
    nats = await startTestNats();
    coordinatorBus = new EventBus(await nats.connect('coordinator'));
    workerBus = new EventBus(await nats.connect('specialist'));
    const notices: TaskNotices = { warn: (p) => warnings.push(p), deny: (p) => warnings.push(p) };
    lifecycle = testLifecycle(coordinatorBus, registryWith({ [WORKER]: ['echo'] }), coordinator, notices, {
      // Stands in for the signature check: records what reached it, refuses when told to.
      authenticate: (event) => {
        checked.push({ type: event.type, taskId: (event.data.payload as { task_id?: unknown }).task_id });
        return !refuse;
      },
    });
    lifecycle.start();
    await coordinatorBus.flush();
  });

  afterAll(async () => {
    lifecycle?.close();
    await nats?.close();
  });

  /** Publishes as the worker and waits until the coordinator's connection has seen it. */
  async function send(event: AnyAmfEvent): Promise<void> {
    workerBus.publish(event);
    await workerBus.flush();
    await coordinatorBus.flush();
  }

  it('a direct task’s claim and final are not checked; its own task’s are, and a refused claim changes nothing', async () => {
    const direct = randomUUID();
    await send(claimOf(direct));
    await send(finalOf(direct));
    expect(checked).toEqual([]);
    expect(lifecycle.get(direct)).toBeUndefined();

    const own = lifecycle.announce({ tag: 'echo', task: 'hi' });
    refuse = true;
    await send(claimOf(own.taskId));
    expect(checked).toEqual([{ type: 'amf.task.claim', taskId: own.taskId }]);
    expect(lifecycle.get(own.taskId)?.claimedBy).toBeUndefined();

    refuse = false;
    await send(claimOf(own.taskId));
    expect(lifecycle.get(own.taskId)?.claimedBy).toBe(WORKER);
    await send(finalOf(own.taskId));
    expect(checked.map((c) => c.type)).toEqual(['amf.task.claim', 'amf.task.claim', 'amf.result.final']);
    expect(lifecycle.get(own.taskId)?.state).toBe('completed');

    // An ended task is still followed: a late claim is checked (and then refused as late).
    await send(claimOf(own.taskId));
    expect(checked).toHaveLength(4);
    expect(warnings.filter((w) => w.reason === 'invalid_event')).toEqual([]);
  });
});
