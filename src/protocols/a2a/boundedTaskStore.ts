/**
 * The A2A task store (the SDK's TaskStore), bounded: at most `maxTasks` tasks, the oldest terminal
 * ones evicted first. Tasks still running are never evicted; the request handler refuses new tasks
 * while the store is full of running ones (see `hasRoomForNewTask`). One scope for all callers: the
 * coordinator has a single API key, so there is no per-user partition to keep.
 */
import { TaskState, type ListTasksRequest, type ListTasksResponse } from '@a2a-js/sdk';
import type { Task } from '@a2a-js/sdk';
import type { TaskStore } from '@a2a-js/sdk/server';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { isTerminalTaskState } from './messageParts.js';
import { AmfError } from '../../errors.js';

interface PageCursor {
  t: string;
  id: string;
}

function encodeCursor(cursor: PageCursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeCursor(token: string): PageCursor {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Partial<PageCursor>;
    if (typeof value.t === 'string' && typeof value.id === 'string') return { t: value.t, id: value.id };
  } catch {
    // fall through to the error below
  }
  throw new RequestMalformedError('pageToken is not a token this server issued');
}

/** Newest status first, then by id, so pages are stable. */
/**
 * A deep copy of a task, as structuredClone makes it, for the plain data tasks are (objects, arrays,
 * strings, numbers, byte arrays). A task is copied on every load and save, several times per
 * message (issue 14), and a walk over plain data costs a fraction of structuredClone's serialise
 * and deserialise. Anything else (a Date, a Map, a class instance) is left to structuredClone.
 */
export function copyOf<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyOf) as T;
  if (value instanceof Uint8Array) return new Uint8Array(value) as T;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) out[key] = copyOf((value as Record<string, unknown>)[key]);
  return out as T;
}

function byStatusTimeDesc(a: Task, b: Task): number {
  const ta = a.status?.timestamp ?? '';
  const tb = b.status?.timestamp ?? '';
  return ta !== tb ? tb.localeCompare(ta) : b.id.localeCompare(a.id);
}

export class BoundedTaskStore implements TaskStore {
  private readonly tasks = new Map<string, Task>();
  /** Terminal tasks: id → when it ended (a count), which orders eviction. */
  private readonly ended = new Map<string, number>();
  /**
   * Terminal tasks in the order they ended, from `head` on; eviction takes the first whose entry
   * `ended` still holds (a task saved running again, or evicted, leaves its entry behind). A queue,
   * not the first key of `ended`: reaching that after many deletions from a Map's front scans the
   * holes they leave, at every eviction.
   */
  private endedOrder: Array<{ id: string; at: number }> = [];
  private head = 0;
  private endings = 0;
  private evictedCount = 0;

  constructor(readonly maxTasks: number) {
    if (!Number.isInteger(maxTasks) || maxTasks < 1)
      throw new AmfError('CONFIG_INVALID', 'maxTasks must be a positive integer');
  }

  async load(taskId: string): Promise<Task | undefined> {
    const task = this.tasks.get(taskId);
    return task ? copyOf(task) : undefined;
  }

  async save(task: Task): Promise<void> {
    this.keep(copyOf(task));
  }

  /**
   * Saves a task its caller gives up, as it is (no copy): the caller must not change it, nor
   * anything it holds, afterwards. Loads still hand out copies.
   */
  async adopt(task: Task): Promise<void> {
    this.keep(task);
  }

  private keep(task: Task): void {
    const isNew = !this.tasks.has(task.id);
    this.tasks.set(task.id, task);
    if (!isTerminalTaskState(task.status?.state)) this.ended.delete(task.id);
    else if (!this.ended.has(task.id)) {
      const at = this.endings++;
      this.ended.set(task.id, at);
      this.endedOrder.push({ id: task.id, at });
    }
    if (isNew) this.evict();
  }

  /** False when every slot holds a running task (a new one would push the store past its bound). */
  hasRoomForNewTask(): boolean {
    return this.tasks.size < this.maxTasks || this.ended.size > 0;
  }

  get size(): number {
    return this.tasks.size;
  }

  /** Terminal tasks dropped so far to stay within the bound. */
  get evicted(): number {
    return this.evictedCount;
  }

  private evict(): void {
    while (this.tasks.size > this.maxTasks) {
      const oldest = this.oldestEnded();
      if (oldest === undefined) return; // only running tasks: the handler stops admitting new ones
      this.ended.delete(oldest);
      this.tasks.delete(oldest);
      this.evictedCount += 1;
    }
    // Spent entries (before `head`, or left behind) are dropped once they could be half the queue.
    if (this.endedOrder.length > 2 * this.ended.size + 1024) {
      this.endedOrder = this.endedOrder
        .slice(this.head)
        .filter((entry) => this.ended.get(entry.id) === entry.at);
      this.head = 0;
    }
  }

  /** The id of the task that ended first of those still terminal here. */
  private oldestEnded(): string | undefined {
    while (this.head < this.endedOrder.length) {
      const entry = this.endedOrder[this.head]!;
      if (this.ended.get(entry.id) === entry.at) return entry.id;
      this.head += 1;
    }
    return undefined;
  }

  async list(params: ListTasksRequest): Promise<ListTasksResponse> {
    const pageSize = params.pageSize ?? 50;
    let tasks = [...this.tasks.values()];
    if (params.contextId) tasks = tasks.filter((t) => t.contextId === params.contextId);
    if (params.status !== undefined && params.status !== TaskState.TASK_STATE_UNSPECIFIED)
      tasks = tasks.filter((t) => t.status?.state === params.status);
    if (params.statusTimestampAfter) {
      const after = Date.parse(params.statusTimestampAfter);
      tasks = tasks.filter(
        (t) => t.status?.timestamp !== undefined && Date.parse(t.status.timestamp) > after,
      );
    }
    tasks.sort(byStatusTimeDesc);
    const totalSize = tasks.length;
    if (params.pageToken) {
      const cursor = decodeCursor(params.pageToken);
      // Everything strictly after the cursor in the sort order, even if the cursor's task is gone.
      const probe = { id: cursor.id, status: { timestamp: cursor.t } } as Task;
      tasks = tasks.filter((t) => byStatusTimeDesc(probe, t) < 0);
    }
    const page = tasks.slice(0, pageSize).map((t) => {
      const copy = structuredClone(t);
      if (!params.includeArtifacts) copy.artifacts = [];
      return copy;
    });
    const last = page[page.length - 1];
    const nextPageToken =
      last && tasks.length > page.length
        ? encodeCursor({ t: last.status?.timestamp ?? '', id: last.id })
        : '';
    return { tasks: page, nextPageToken, pageSize, totalSize };
  }
}
