/**
 * The A2A task store's eviction queue (boundedTaskStore.ts): terminal tasks leave in the order they
 * ended, over many evictions, with tasks saved again in between; a task given up with `adopt` is
 * kept as it is while loads still hand out copies.
 */
import { describe, expect, it } from 'vitest';
import { Task, TaskState } from '@a2a-js/sdk';
import { BoundedTaskStore } from '../../src/protocols/a2a/boundedTaskStore.js';

function task(id: string, state: TaskState): Task {
  return Task.fromJSON({
    id,
    contextId: 'c',
    status: { state: TaskState[state], timestamp: new Date(0).toISOString() },
  });
}

const DONE = TaskState.TASK_STATE_COMPLETED;
const RUNNING = TaskState.TASK_STATE_WORKING;

describe('BoundedTaskStore eviction order', () => {
  it('evicts in the order tasks ended, through thousands of evictions', async () => {
    const store = new BoundedTaskStore(100);
    for (let i = 0; i < 5000; i++) await store.save(task(`t${i}`, DONE));
    expect(store.size).toBe(100);
    expect(store.evicted).toBe(4900);
    expect(await store.load('t4899')).toBeUndefined();
    expect(await store.load('t4900')).toBeDefined();
    expect(await store.load('t4999')).toBeDefined();
  });

  it('a terminal task saved again keeps its place; one that runs again and ends goes to the back', async () => {
    const store = new BoundedTaskStore(3);
    await store.save(task('a', DONE));
    await store.save(task('b', DONE));
    await store.save(task('c', DONE));
    // Saved again while terminal: still the oldest.
    await store.save(task('a', DONE));
    await store.save(task('d', DONE));
    expect(await store.load('a')).toBeUndefined();
    // b runs again, then ends after c and d: c goes next, then d, then b.
    await store.save(task('b', RUNNING));
    await store.save(task('b', DONE));
    await store.save(task('e', DONE));
    expect(await store.load('c')).toBeUndefined();
    await store.save(task('f', DONE));
    expect(await store.load('d')).toBeUndefined();
    await store.save(task('g', DONE));
    expect(await store.load('b')).toBeUndefined();
    expect(await store.load('e')).toBeDefined();
  });

  it('never evicts a task that runs again, however often it ended before', async () => {
    const store = new BoundedTaskStore(2);
    for (let i = 0; i < 3000; i++) {
      await store.save(task('flip', i % 2 === 0 ? DONE : RUNNING));
      await store.save(task(`n${i}`, DONE));
    }
    await store.save(task('flip', RUNNING));
    await store.save(task('last', DONE));
    expect(await store.load('flip')).toBeDefined();
    expect(store.size).toBe(2);
  });
});

describe('BoundedTaskStore.adopt', () => {
  it('keeps the task given up as it is, and hands out copies of it', async () => {
    const store = new BoundedTaskStore(10);
    const given = task('kept', DONE);
    await store.adopt(given);
    const loaded = (await store.load('kept'))!;
    expect(loaded).toEqual(given);
    expect(loaded).not.toBe(given);
    loaded.status!.state = TaskState.TASK_STATE_FAILED;
    expect((await store.load('kept'))!.status?.state).toBe(DONE);
  });
});
