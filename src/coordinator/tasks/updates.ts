/**
 * One task's updates as an AsyncIterable: the task is announced, its updates follow in the order the
 * dispatcher hands them over, and its result is the last item (or the error that ended it is thrown
 * once the items before it were read). The queue between the dispatcher and the reader is bounded: a
 * reader that falls that far behind loses the task (it is abandoned, so cancelled) and is told so,
 * rather than the coordinator holding a stream nobody reads. A reader that stops early (`break`,
 * `return`, a throw in its loop) abandons the task too.
 */
import { AmfError } from '../../errors.js';
import type { TaskResult, TaskUpdate } from './dispatcher.js';

/** What a reader of {@link taskUpdates} gets: the announcement first, the result last. */
export type TaskStreamItem =
  | { kind: 'announced'; taskId: string; traceId: string }
  | TaskUpdate
  | { kind: 'result'; result: TaskResult };

/** The hooks `run` hands to the dispatcher's submit (or follow). */
export interface TaskStreamHooks {
  onAnnounced: (taskId: string, traceId: string) => void;
  onUpdate: (update: TaskUpdate) => void;
}

/** Items held for a reader that does not keep up; past this the task is abandoned. */
const DEFAULT_UPDATE_QUEUE_LIMIT = 4096;

/**
 * Starts the task at once (`run` submits it with the hooks) and returns its items as an iterator;
 * `abandon` ends the task on the reader's behalf (TaskDispatcher.abandon).
 */
export function taskUpdates(
  run: (hooks: TaskStreamHooks) => Promise<TaskResult>,
  abandon: (taskId: string) => void,
  limit = DEFAULT_UPDATE_QUEUE_LIMIT,
): AsyncIterableIterator<TaskStreamItem> {
  const items: TaskStreamItem[] = [];
  let taskId = '';
  /** No more items are taken: the result or an error came, or the reader left. */
  let closed = false;
  /** The reader saw the end (the result, the error, or its own return). */
  let finished = false;
  let failure: { error: unknown } | undefined;
  let waiter:
    { resolve: (r: IteratorResult<TaskStreamItem>) => void; reject: (e: unknown) => void } | undefined;

  const wake = (): void => {
    const w = waiter;
    if (!w) return;
    waiter = undefined;
    const item = items.shift();
    if (item) return w.resolve({ value: item, done: false });
    finished = true;
    if (failure) w.reject(failure.error);
    else w.resolve({ value: undefined, done: true });
  };
  const push = (item: TaskStreamItem): void => {
    if (closed) return;
    if (items.length >= limit) {
      fail(
        new AmfError(
          'OVERLOADED',
          `the requester fell ${limit} updates behind task ${taskId}, which was cancelled`,
          {
            task_id: taskId,
          },
        ),
      );
      abandon(taskId);
      return;
    }
    items.push(item);
    if (item.kind === 'result') closed = true;
    wake();
  };
  const fail = (error: unknown): void => {
    if (closed) return;
    closed = true;
    failure = { error };
    wake();
  };

  run({
    onAnnounced: (id, traceId) => {
      taskId = id;
      push({ kind: 'announced', taskId: id, traceId });
    },
    onUpdate: (update) => push(update),
  }).then(
    (result) => push({ kind: 'result', result }),
    (err: unknown) => fail(err),
  );

  const iterator: AsyncIterableIterator<TaskStreamItem> = {
    next() {
      if (waiter)
        return Promise.reject(new AmfError('INTERNAL', 'task updates are read by one reader at a time'));
      const item = items.shift();
      if (item) return Promise.resolve({ value: item, done: false });
      if (finished || (closed && !failure)) {
        finished = true;
        return Promise.resolve({ value: undefined, done: true });
      }
      if (failure) {
        finished = true;
        return Promise.reject(failure.error);
      }
      return new Promise((resolve, reject) => {
        waiter = { resolve, reject };
      });
    },
    return() {
      // Left before the end: the task is abandoned (cancelled), not left running for nobody.
      if (!closed && taskId) abandon(taskId);
      closed = true;
      finished = true;
      items.length = 0;
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
