// A task's updates as an AsyncIterable (coordinator/tasks/updates.ts): items come in the order the
// dispatcher hands them over, the result ends the loop, the task's error is thrown after the items
// before it, and a reader that leaves early or falls too far behind abandons (cancels) the task.
import { describe, expect, it } from 'vitest';
import { AmfError } from '../../src/errors.js';
import type { TaskResult } from '../../src/coordinator/tasks/dispatcher.js';
import {
  taskUpdates,
  type TaskStreamHooks,
  type TaskStreamItem,
} from '../../src/coordinator/tasks/updates.js';

const RESULT: TaskResult = { taskId: 't1', traceId: 'tr1', agentId: 'a1', text: 'done', confidence: 1 };

/** A fake submit: the test drives its hooks and settles its promise. */
function fakeTask() {
  let hooks!: TaskStreamHooks;
  let resolve!: (r: TaskResult) => void;
  let reject!: (e: unknown) => void;
  const abandoned: string[] = [];
  const run = (h: TaskStreamHooks) => {
    hooks = h;
    h.onAnnounced('t1', 'tr1');
    return new Promise<TaskResult>((res, rej) => {
      resolve = res;
      reject = (e) => rej(e);
    });
  };
  const abandon = (taskId: string) => {
    abandoned.push(taskId);
    reject(new AmfError('INVALID_REQUEST', 'request was aborted', { task_id: taskId }));
  };
  return {
    run,
    abandon,
    abandoned,
    hooks: () => hooks,
    resolve: (r: TaskResult) => resolve(r),
    reject: (e: unknown) => reject(e),
  };
}

async function readAll(items: AsyncIterable<TaskStreamItem>): Promise<TaskStreamItem[]> {
  const seen: TaskStreamItem[] = [];
  for await (const item of items) seen.push(item);
  return seen;
}

describe('task updates', () => {
  it('yields the announcement, the updates in order, then the result, and ends', async () => {
    const task = fakeTask();
    const items = taskUpdates(task.run, task.abandon);
    const read = readAll(items);
    task.hooks().onUpdate({ kind: 'claimed', agentId: 'a1' });
    task.hooks().onUpdate({ kind: 'partial', delta: 'do', seq: 0 });
    await Promise.resolve();
    task.hooks().onUpdate({ kind: 'partial', delta: 'ne', seq: 1 });
    task.resolve(RESULT);
    expect(await read).toEqual([
      { kind: 'announced', taskId: 't1', traceId: 'tr1' },
      { kind: 'claimed', agentId: 'a1' },
      { kind: 'partial', delta: 'do', seq: 0 },
      { kind: 'partial', delta: 'ne', seq: 1 },
      { kind: 'result', result: RESULT },
    ]);
    expect(await items.next()).toEqual({ value: undefined, done: true });
    expect(task.abandoned).toEqual([]);
  });

  it('throws the task error after the items that came before it', async () => {
    const task = fakeTask();
    const items = taskUpdates(task.run, task.abandon);
    task.hooks().onUpdate({ kind: 'blocked', reason: 'needs a PIN' });
    task.reject(new AmfError('TASK_FAILED', 'the worker failed', { task_id: 't1' }));
    const seen: TaskStreamItem[] = [];
    await expect(
      (async () => {
        for await (const item of items) seen.push(item);
      })(),
    ).rejects.toMatchObject({ code: 'TASK_FAILED' });
    expect(seen.map((i) => i.kind)).toEqual(['announced', 'blocked']);
    expect(await items.next()).toEqual({ value: undefined, done: true });
  });

  it('a submit refused at once is thrown at the first read', async () => {
    const items = taskUpdates(
      () => Promise.reject(new AmfError('NO_AGENT_FOR_TAG', 'nobody serves x')),
      () => undefined,
    );
    await expect(items.next()).rejects.toMatchObject({ code: 'NO_AGENT_FOR_TAG' });
  });

  it('an early break abandons the task, and nothing after it is read', async () => {
    const task = fakeTask();
    const items = taskUpdates(task.run, task.abandon);
    task.hooks().onUpdate({ kind: 'claimed', agentId: 'a1' });
    for await (const item of items) if (item.kind === 'claimed') break;
    expect(task.abandoned).toEqual(['t1']);
    task.hooks().onUpdate({ kind: 'progress', agentId: 'a1' });
    expect(await items.next()).toEqual({ value: undefined, done: true });
  });

  it('a break after the result came does not abandon the ended task', async () => {
    const task = fakeTask();
    const items = taskUpdates(task.run, task.abandon);
    task.resolve(RESULT);
    await new Promise((r) => setImmediate(r));
    for await (const item of items) if (item.kind === 'announced') break;
    expect(task.abandoned).toEqual([]);
  });

  it('a reader that falls past the bound loses the task with OVERLOADED', async () => {
    const task = fakeTask();
    const items = taskUpdates(task.run, task.abandon, 3);
    for (let seq = 0; seq < 5; seq++) task.hooks().onUpdate({ kind: 'partial', delta: 'x', seq });
    expect(task.abandoned).toEqual(['t1']);
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const item of items) seen.push(item.kind);
      })(),
    ).rejects.toMatchObject({ code: 'OVERLOADED' });
    // The announcement and the first two chunks filled the queue; the rest never entered it.
    expect(seen).toEqual(['announced', 'partial', 'partial']);
  });
});
