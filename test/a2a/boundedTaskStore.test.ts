/**
 * The A2A task store's bound: oldest terminal tasks go first, running tasks are never evicted, and a
 * full store of running tasks refuses new ones (through the coordinator, over A2A).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Task, TaskState } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { BoundedTaskStore, copyOf } from '../../src/protocols/a2a/boundedTaskStore.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { holdingHandler, textMessage } from './a2aTestKit.js';

function task(id: string, state: TaskState, timestamp = new Date().toISOString()): Task {
  return Task.fromJSON({ id, contextId: 'c', status: { state: TaskState[state], timestamp } });
}

describe('BoundedTaskStore', () => {
  it('copies a task on save and load as structuredClone would (bytes, nesting, no shared objects)', async () => {
    const full = Task.fromJSON({
      id: 't-copy',
      contextId: 'c',
      status: { state: 'TASK_STATE_COMPLETED', timestamp: new Date(0).toISOString() },
      artifacts: [
        {
          artifactId: 'a',
          parts: [
            { text: 'hello', metadata: { nested: { list: [1, 'two', null, { deep: true }] } } },
            { raw: 'AAEC/w==' },
          ],
        },
      ],
      history: [{ messageId: 'm', role: 'ROLE_USER', parts: [{ data: { k: [1, 2] } }] }],
      metadata: { when: 'now' },
    });
    const withExotic = { ...full, metadata: { ...full.metadata, at: new Date(5), set: new Map([['k', 1]]) } };
    expect(copyOf(full)).toEqual(structuredClone(full));
    expect(copyOf(withExotic)).toEqual(structuredClone(withExotic));
    const store = new BoundedTaskStore(2);
    await store.save(full);
    const loaded = (await store.load('t-copy'))!;
    expect(loaded).toEqual(structuredClone(full));
    const raw = loaded.artifacts[0]!.parts[1]!.content;
    expect(raw?.$case === 'raw' && raw.value instanceof Uint8Array && [...raw.value]).toEqual([0, 1, 2, 255]);
    // Changing what was saved or what was loaded does not change what is stored.
    full.artifacts[0]!.parts[0]!.metadata!.nested = 'changed';
    loaded.history.push(loaded.history[0]!);
    if (raw?.$case === 'raw') raw.value[0] = 9;
    const again = (await store.load('t-copy'))!;
    expect(again.history).toHaveLength(1);
    expect(again.artifacts[0]!.parts[0]!.metadata!.nested).toEqual({
      list: [1, 'two', null, { deep: true }],
    });
    const rawAgain = again.artifacts[0]!.parts[1]!.content;
    expect(rawAgain?.$case === 'raw' && rawAgain.value[0]).toBe(0);
  });

  it('evicts the oldest terminal task first and never a running one', async () => {
    const store = new BoundedTaskStore(3);
    await store.save(task('run-1', TaskState.TASK_STATE_WORKING));
    await store.save(task('done-1', TaskState.TASK_STATE_COMPLETED));
    await store.save(task('done-2', TaskState.TASK_STATE_FAILED));
    await store.save(task('new-1', TaskState.TASK_STATE_SUBMITTED));
    expect(await store.load('done-1')).toBeUndefined();
    expect(await store.load('run-1')).toBeDefined();
    expect(await store.load('done-2')).toBeDefined();
    expect(store.size).toBe(3);
    expect(store.evicted).toBe(1);
    // A task that ends joins the eviction queue behind the ones that ended before it.
    await store.save(task('run-1', TaskState.TASK_STATE_COMPLETED));
    await store.save(task('new-2', TaskState.TASK_STATE_SUBMITTED));
    expect(await store.load('done-2')).toBeUndefined();
    expect(await store.load('run-1')).toBeDefined();
  });

  it('is full when every slot holds a running task', async () => {
    const store = new BoundedTaskStore(2);
    await store.save(task('a', TaskState.TASK_STATE_WORKING));
    expect(store.hasRoomForNewTask()).toBe(true);
    await store.save(task('b', TaskState.TASK_STATE_SUBMITTED));
    expect(store.hasRoomForNewTask()).toBe(false);
    await store.save(task('a', TaskState.TASK_STATE_CANCELED));
    expect(store.hasRoomForNewTask()).toBe(true);
  });

  it('returns copies, so callers cannot change stored tasks', async () => {
    const store = new BoundedTaskStore(2);
    await store.save(task('a', TaskState.TASK_STATE_WORKING));
    const loaded = (await store.load('a'))!;
    loaded.status!.state = TaskState.TASK_STATE_FAILED;
    expect((await store.load('a'))!.status?.state).toBe(TaskState.TASK_STATE_WORKING);
  });

  it('refuses a page token it did not issue', async () => {
    const store = new BoundedTaskStore(2);
    await expect(
      store.list({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageToken: 'garbage',
        pageSize: 10,
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      }),
    ).rejects.toThrow(/pageToken/);
  });
});

describe('the coordinator task store bound (a2a.task_store_size = 2)', () => {
  let mesh: TestMesh;
  let client: Client;
  const hold = holdingHandler();

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { a2a: { taskStoreSize: 2 } } });
    await mesh.startWorker('echo-store', ['echo'], echoHandler);
    await mesh.startWorker('hold-store', ['hold'], hold.handler, { concurrency: 4 });
    client = await new ClientFactory().createFromUrl(mesh.url);
  }, 60_000);

  afterAll(async () => {
    await mesh?.close();
  });

  it('forgets the oldest finished task, and refuses new tasks while two are running', async () => {
    const first = (await client.sendMessage(textMessage('first', { metadata: { tag: 'echo' } }))) as Task;
    const second = (await client.sendMessage(textMessage('second', { metadata: { tag: 'echo' } }))) as Task;
    const third = (await client.sendMessage(textMessage('third', { metadata: { tag: 'echo' } }))) as Task;
    await expect(client.getTask({ tenant: '', id: first.id })).rejects.toThrow(/not found/i);
    expect((await client.getTask({ tenant: '', id: second.id })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect((await client.getTask({ tenant: '', id: third.id })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    const a = (await client.sendMessage(
      textMessage('a', { metadata: { tag: 'hold' }, returnImmediately: true }),
    )) as Task;
    const b = (await client.sendMessage(
      textMessage('b', { metadata: { tag: 'hold' }, returnImmediately: true }),
    )) as Task;
    await expect(client.sendMessage(textMessage('c', { metadata: { tag: 'echo' } }))).rejects.toThrow(
      /task store holds 2 running tasks/,
    );
    hold.release('ok');
    for (const t of [a, b])
      await mesh.waitFor(
        async () =>
          (await client.getTask({ tenant: '', id: t.id })).status?.state === TaskState.TASK_STATE_COMPLETED,
      );
    const after = (await client.sendMessage(
      textMessage('room again', { metadata: { tag: 'echo' } }),
    )) as Task;
    expect(after.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });
});
