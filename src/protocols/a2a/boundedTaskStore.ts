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
  /** Ids of terminal tasks in the order they ended: eviction takes from the front. */
  private readonly ended = new Set<string>();
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
    if (isTerminalTaskState(task.status?.state)) this.ended.add(task.id);
    else this.ended.delete(task.id);
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
      const oldest = this.ended.values().next().value;
      if (oldest === undefined) return; // only running tasks: the handler stops admitting new ones
      this.ended.delete(oldest);
      this.tasks.delete(oldest);
      this.evictedCount += 1;
    }
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
