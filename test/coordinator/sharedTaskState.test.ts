// The shared task-state store: a task's first state is written at once (with its announcement, so a
// coordinator killed right after announcing leaves a task another can adopt), later changes are
// coalesced into periodic writes. Real nats-server and KV.
import { randomUUID } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SharedState, type TaskSnapshot } from '../../src/coordinator/sharedState.js';
import type { TaskRecord } from '../../src/coordinator/tasks/record.js';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { ensureFabricStores, kvKey } from '../../src/fabric/jetstream.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

let nats: TestNats;
let nc: NatsConnection;
let tasks: KV;
let agents: KV;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await nats.connect('coordinator', 'shared-state');
  ({ tasks, agents } = await ensureFabricStores(nc));
});

afterAll(async () => {
  await nats?.close();
});

/** A SharedState writing through the test connection, and the lifecycle change listener it registered. */
function sharedState(flushMs: number, onError: (err: unknown) => void = () => undefined) {
  const shared = new SharedState(
    agents,
    tasks,
    (_what, err) => onError(err),
    flushMs,
    (subject, bytes) => nc.publish(subject, bytes),
  );
  let changed: (task: TaskRecord) => void = () => undefined;
  shared.attachLifecycle({ onChange: (listener) => ((changed = listener), () => undefined) });
  return { shared, changed: (task: TaskRecord) => changed(task) };
}

describe('SharedState task writes', () => {
  it('writes a task’s first state at once and coalesces the changes after it', async () => {
    const errors: unknown[] = [];
    const { shared, changed } = sharedState(300, (err) => errors.push(err));
    const task = taskRecord(true);
    const stored = async () => (await tasks.get(kvKey(task.taskId)))?.json<TaskSnapshot>();

    changed(task);
    await nc.flush();
    expect(await stored()).toMatchObject({ task_id: task.taskId, state: 'announced', tag: 'echo' });

    task.state = 'claimed';
    task.claimedBy = 'spiffe://local/worker/w';
    changed(task);
    await nc.flush();
    // Not yet: the change waits for the next periodic write.
    expect((await stored())?.state).toBe('announced');
    await expect.poll(async () => (await stored())?.state, { timeout: 5_000 }).toBe('claimed');
    expect(errors).toEqual([]);
    await shared.close();
  });

  it('leaves other coordinators’ tasks to them', async () => {
    const { shared, changed } = sharedState(50);
    const task = taskRecord(false);
    changed(task);
    await nc.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await tasks.get(kvKey(task.taskId))).toBeNull();
    await shared.close();
  });
});

/** The fields of a task record the state store reads (a new, announced task). */
function taskRecord(owned: boolean): TaskRecord {
  const taskId = randomUUID();
  const fields = {
    taskId,
    tag: 'echo',
    state: 'announced',
    traceId: taskId,
    attempt: 1,
    createdAt: Date.now(),
    owned,
  };
  return fields as TaskRecord;
}
